/*
 * module.c — the library's entry point: _PG_init defines the settings, installs the
 * planner hook of the kept statements (spi_util.c) and, when
 * pg_sched is in shared_preload_libraries, requests its shared memory (shmem.c) and
 * registers the maintenance background workers (maintenance.c).  Nothing calls into
 * this file.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "maintenance.h"
#include "settings.h"
#include "shmem.h"
#include "spi_util.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	sched_define_settings();
	sched_spi_install_planner_hook();
	if (process_shared_preload_libraries_in_progress)
	{
		sched_shmem_preload();
		sched_register_maintenance_workers();
	}
}
