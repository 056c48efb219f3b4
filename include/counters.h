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

/* Adds a finished dispatch call's outcome and conflicts to the shared counters. */
extern void sched_counters_add(const SchedDispatchResult *res);

#endif							/* PG_SCHED_COUNTERS_H */
