/*
 * queue_bound.h — where each tenant's queue begins, past the dead entries at the head of
 * request_queue_idx (queue_bound.c).
 */
#ifndef PG_SCHED_QUEUE_BOUND_H
#define PG_SCHED_QUEUE_BOUND_H

#include "datatype/timestamp.h"

/* a position in a tenant's range of request_queue_idx */
typedef struct SchedQueueKey
{
	double		sort_key;
	TimestampTz queued_at;
	int64		request_id;
} SchedQueueKey;

/* The shared slots (shmem.c allocates them, when preloading). */
extern Size sched_queue_bound_shmem_size(void);
extern void sched_queue_bound_shmem_attach(void *ptr, bool found);

/* Sets *bound to the tenant's bound, moved first past the entries that have died since
 * when this transaction may move it; false when the tenant has none (or this fetch may
 * not use one: a snapshot of the transaction).  No entry before it is seen by a
 * READ COMMITTED snapshot taken after the call. */
extern bool sched_queue_bound(const char *tenant, SchedQueueKey *bound);

/* This backend's scans that stored a bound, and fetches that started at one. */
extern void sched_queue_bound_stats(int64 *found, int64 *used);

#endif							/* PG_SCHED_QUEUE_BOUND_H */
