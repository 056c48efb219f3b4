/*
 * counters.h — cluster-wide dispatch counters in shared memory (counters.c).
 */
#ifndef PG_SCHED_COUNTERS_H
#define PG_SCHED_COUNTERS_H

#include "reservation.h"

/* The shared counters (shmem.c allocates them, when preloading). */
extern Size sched_counters_shmem_size(void);
extern void sched_counters_shmem_attach(void *ptr, bool found);

/* The counters since the server started; false without preloading. */
extern bool sched_counters_read(int64 *calls, int64 *placements, int64 *conflicts,
								int64 *held_passed);

/* The rows of sched.dispatch_stats (0 without preloading), and row i: the outcome, the
 * reason (UNSCHEDULABLE only, else NULL), and the counters of the calls that had it. */
extern int	sched_counters_kinds(void);
extern void sched_counters_read_kind(int i, const char **outcome, const char **reason,
									 int64 *calls, int64 *conflicts, int64 *held_passed);

/* Adds a finished dispatch call's outcome and conflicts to the shared counters. */
extern void sched_counters_add(const SchedDispatchResult *res);

#endif							/* PG_SCHED_COUNTERS_H */
