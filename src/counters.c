/*
 * counters.c — cluster-wide dispatch counters in shared memory (only when pg_sched is in
 * shared_preload_libraries): placements made, conflicts met (candidates skipped because
 * another transaction held them, or refused by the re-check under lock), and better
 * candidates not tried because concurrent dispatches were reserving them, so that
 * the conflict fraction of concurrent dispatchers can be measured exactly
 * (sched._dispatch_counters(); bench workload 5), and the same by outcome, UNSCHEDULABLE
 * by why the request waits (the public view sched.dispatch_stats, for monitoring).
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

/* the rows of sched.dispatch_stats: each outcome, and UNSCHEDULABLE by why it waits */
static const struct
{
	const char *outcome;
	SchedWait	waits;
	const char *reason;
}			kinds[] = {
	{"DISPATCHED", SCHED_WAIT_NONE, NULL},
	{"EXISTING", SCHED_WAIT_NONE, NULL},
	{"UNSCHEDULABLE", SCHED_WAIT_CAPACITY, "waits_for_capacity"},
	{"UNSCHEDULABLE", SCHED_WAIT_STATIC, "fits_nowhere"},
	{"UNSCHEDULABLE", SCHED_WAIT_CONTENTION, "contention"},
	{"UNSCHEDULABLE", SCHED_WAIT_CONCURRENCY, "concurrency_limit"},
	{"UNSCHEDULABLE", SCHED_WAIT_RATE, "rate_limited"},
	{"UNSCHEDULABLE", SCHED_WAIT_QUOTA, "tenant_quota_exceeded"},
	{"UNSCHEDULABLE", SCHED_WAIT_GANG, "gang_incomplete"},
	{"UNSCHEDULABLE", SCHED_WAIT_PREEMPTION, "preempting"},
	{"EXECUTION_CLOSED", SCHED_WAIT_NONE, NULL},
	{"CANCELLED", SCHED_WAIT_NONE, NULL},
	{"NOT_CLAIMED", SCHED_WAIT_NONE, NULL},
};

#define NKINDS lengthof(kinds)

typedef struct SchedKindCounters
{
	pg_atomic_uint64 calls;
	pg_atomic_uint64 conflicts;
	pg_atomic_uint64 held_passed;
} SchedKindCounters;

typedef struct SchedCounters
{
	pg_atomic_uint64 calls;			/* requests a dispatch call took up */
	pg_atomic_uint64 placements;	/* of which DISPATCHED */
	pg_atomic_uint64 conflicts;		/* candidates skipped or refused, over all calls */
	pg_atomic_uint64 held_passed;	/* better candidates not tried: being reserved by
									 * concurrent dispatches (inflight.c) */
	SchedKindCounters by_kind[NKINDS];	/* the same, by outcome (kinds[]) */
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
		for (int i = 0; i < NKINDS; i++)
		{
			pg_atomic_init_u64(&counters->by_kind[i].calls, 0);
			pg_atomic_init_u64(&counters->by_kind[i].conflicts, 0);
			pg_atomic_init_u64(&counters->by_kind[i].held_passed, 0);
		}
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
	for (int i = 0; i < NKINDS; i++)
	{
		SchedKindCounters *k = &counters->by_kind[i];

		if (res->outcome == NULL || strcmp(res->outcome, kinds[i].outcome) != 0 ||
			(kinds[i].waits != SCHED_WAIT_NONE && kinds[i].waits != res->waits))
			continue;
		pg_atomic_fetch_add_u64(&k->calls, 1);
		if (res->conflicts > 0)
			pg_atomic_fetch_add_u64(&k->conflicts, (uint64) res->conflicts);
		if (res->held_passed > 0)
			pg_atomic_fetch_add_u64(&k->held_passed, (uint64) res->held_passed);
		break;
	}
}

int
sched_counters_kinds(void)
{
	return counters == NULL ? 0 : NKINDS;
}

void
sched_counters_read_kind(int i, const char **outcome, const char **reason, int64 *calls,
						 int64 *conflicts, int64 *held_passed)
{
	Assert(counters != NULL && i >= 0 && i < NKINDS);
	*outcome = kinds[i].outcome;
	*reason = kinds[i].reason;
	*calls = (int64) pg_atomic_read_u64(&counters->by_kind[i].calls);
	*conflicts = (int64) pg_atomic_read_u64(&counters->by_kind[i].conflicts);
	*held_passed = (int64) pg_atomic_read_u64(&counters->by_kind[i].held_passed);
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
