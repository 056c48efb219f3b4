/*
 * backend_slots.h — the per-backend slots of shared memory (inflight.c, wakeup.c,
 * queue_held.c, limit_claims.c): an array with one slot per BackendId, 1 .. MaxBackends
 * (slot 0 unused), which only its backend writes.  BackendIds are unique among the
 * backends running at any moment, so a slot belongs to one session at a time.
 */
#ifndef PG_SCHED_BACKEND_SLOTS_H
#define PG_SCHED_BACKEND_SLOTS_H

#include "miscadmin.h"
#include "storage/backendid.h"
#include "storage/shmem.h"

/* How many slots the array holds (slot 0 included, unused). */
static inline int
sched_backend_slots_count(void)
{
	return MaxBackends + 1;
}

/* The array's size in bytes, for slots of slot_size bytes. */
static inline Size
sched_backend_slots_size(Size slot_size)
{
	return mul_size(slot_size, sched_backend_slots_count());
}

/* Whether this backend has a slot in an array of nslots (slots NULL: pg_sched was not
 * preloaded, there is none); its slot is the one at MyBackendId. */
static inline bool
sched_backend_has_slot(const void *slots, int nslots)
{
	return slots != NULL && MyBackendId > 0 && MyBackendId < nslots;
}

#endif							/* PG_SCHED_BACKEND_SLOTS_H */
