/*
 * counters.c — cluster-wide dispatch counters in shared memory (only when pg_sched is in
 * shared_preload_libraries): placements made, conflicts met (candidates skipped because
 * another transaction held them, or refused by the re-check under lock), and better
 * candidates not tried because concurrent dispatches were reserving them, so that
 * the conflict fraction of concurrent dispatchers can be measured exactly
 * (sched._dispatch_counters(); bench workload 5).
 *
 * Counted when a dispatch call returns, whether or not its transaction later commits;
 * plain atomic adds, no lock.
 */
#include "postgres.h"

#include "counters.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

typedef struct SchedCounters
{
	pg_atomic_uint64 calls;			/* requests a dispatch call took up */
	pg_atomic_uint64 placements;	/* of which DISPATCHED */
	pg_atomic_uint64 conflicts;		/* candidates skipped or refused, over all calls */
	pg_atomic_uint64 held_passed;	/* better candidates not tried: being reserved by
									 * concurrent dispatches (inflight.c) */
} SchedCounters;

static SchedCounters *counters = NULL;

Size
sched_counters_shmem_size(void)
{
	return MAXALIGN(sizeof(SchedCounters));
}

void
sched_counters_shmem_attach(void *ptr, bool found)
{
	counters = ptr;
	if (!found)
	{
		pg_atomic_init_u64(&counters->calls, 0);
		pg_atomic_init_u64(&counters->placements, 0);
		pg_atomic_init_u64(&counters->conflicts, 0);
		pg_atomic_init_u64(&counters->held_passed, 0);
	}
}

void
sched_counters_add(const SchedDispatchResult *res)
{
	if (counters == NULL)
		return;
	pg_atomic_fetch_add_u64(&counters->calls, 1);
	if (res->outcome != NULL && strcmp(res->outcome, "DISPATCHED") == 0)
		pg_atomic_fetch_add_u64(&counters->placements, 1);
	if (res->conflicts > 0)
		pg_atomic_fetch_add_u64(&counters->conflicts, (uint64) res->conflicts);
	if (res->held_passed > 0)
		pg_atomic_fetch_add_u64(&counters->held_passed, (uint64) res->held_passed);
}

bool
sched_counters_read(int64 *calls, int64 *placements, int64 *conflicts, int64 *held_passed)
{
	if (counters == NULL)
		return false;
	*calls = (int64) pg_atomic_read_u64(&counters->calls);
	*placements = (int64) pg_atomic_read_u64(&counters->placements);
	*conflicts = (int64) pg_atomic_read_u64(&counters->conflicts);
	*held_passed = (int64) pg_atomic_read_u64(&counters->held_passed);
	return true;
}
