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
#include "pg_sched.h"

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
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
counters_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(SchedCounters)));
}

static void
counters_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	counters = ShmemInitStruct("pg_sched dispatch counters", sizeof(SchedCounters), &found);
	if (!found)
	{
		pg_atomic_init_u64(&counters->calls, 0);
		pg_atomic_init_u64(&counters->placements, 0);
		pg_atomic_init_u64(&counters->conflicts, 0);
		pg_atomic_init_u64(&counters->held_passed, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
sched_counters_preload(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = counters_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = counters_startup;
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

/* sched._dispatch_counters() → (calls, placements, conflicts, held_passed) since the
 * server started, NULLs without preloading. */
PG_FUNCTION_INFO_V1(sched_dispatch_counters);

Datum
sched_dispatch_counters(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_sched: _dispatch_counters must return a record");
	if (counters == NULL)
		nulls[0] = nulls[1] = nulls[2] = nulls[3] = true;
	else
	{
		values[0] = Int64GetDatum((int64) pg_atomic_read_u64(&counters->calls));
		values[1] = Int64GetDatum((int64) pg_atomic_read_u64(&counters->placements));
		values[2] = Int64GetDatum((int64) pg_atomic_read_u64(&counters->conflicts));
		values[3] = Int64GetDatum((int64) pg_atomic_read_u64(&counters->held_passed));
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
