/*
 * maintenance.c — the background workers that keep leases and claims honest without any
 * client: when pg_sched is in shared_preload_libraries, one worker per database named in
 * sched.databases calls sched.reap_expired(now()) every sched.maintenance_interval.
 *
 * Guarantees: each tick is one transaction (a failure rolls the tick back, the worker
 * exits and the postmaster restarts it after 10 s); a database without the extension is
 * skipped quietly; the workers start only once recovery has finished, so a hot standby
 * never writes.  Without preloading, calling sched.reap_expired() from any client (for
 * example from cron) does the same work.
 */
#include "pg_sched.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

PGDLLEXPORT void sched_maintenance_main(Datum arg);

/* Registers one maintenance worker per database of sched.databases (postmaster only). */
void
sched_register_maintenance_workers(void)
{
	char	   *list;
	List	   *names;
	ListCell   *lc;

	if (sched_databases == NULL || sched_databases[0] == '\0')
		return;
	list = pstrdup(sched_databases);
	if (!SplitIdentifierString(list, ',', &names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid list syntax in parameter \"sched.databases\"")));
	foreach(lc, names)
	{
		const char *db = (const char *) lfirst(lc);
		BackgroundWorker worker;

		if (strlen(db) >= BGW_EXTRALEN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("database name \"%s\" in \"sched.databases\" is too long", db)));
		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 10;
		snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_sched");
		snprintf(worker.bgw_function_name, BGW_MAXLEN, "sched_maintenance_main");
		snprintf(worker.bgw_name, BGW_MAXLEN, "pg_sched maintenance %s", db);
		snprintf(worker.bgw_type, BGW_MAXLEN, "pg_sched maintenance");
		strlcpy(worker.bgw_extra, db, BGW_EXTRALEN);
		RegisterBackgroundWorker(&worker);
	}
}

/* One tick: reap expired leases and claims, if the extension is installed here. */
static void
maintenance_tick(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "SELECT sched.reap_expired(now())");
	if (OidIsValid(get_extension_oid("pg_sched", true)))
	{
		int			rc;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "pg_sched: SPI_connect failed");
		rc = SPI_execute("SELECT sched.reap_expired(pg_catalog.now())", false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "pg_sched: reap_expired returned %s", SPI_result_code_string(rc));
		SPI_finish();
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

void
sched_maintenance_main(Datum arg)
{
	char		db[BGW_EXTRALEN];

	strlcpy(db, MyBgworkerEntry->bgw_extra, BGW_EXTRALEN);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(db, NULL, 0);
	elog(LOG, "pg_sched maintenance worker started for database \"%s\"", db);

	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 (long) sched_maintenance_interval_s * 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		maintenance_tick();
	}
}
