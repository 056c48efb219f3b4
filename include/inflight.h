/*
 * inflight.h — reservations in flight, shared so that concurrent dispatchers rank alike (inflight.c).
 */
#ifndef PG_SCHED_INFLIGHT_H
#define PG_SCHED_INFLIGHT_H

#include "fleet.h"

/* The shared slots (shmem.c allocates them, when preloading), and the transaction
 * callback that empties this backend's slot (registered when preloading). */
extern Size sched_inflight_shmem_size(void);
extern void sched_inflight_shmem_attach(void *ptr, bool found);
extern void sched_inflight_preload(void);

/* Records a reservation this transaction is making on the node (until it ends), and
 * withdraws one that did not happen. */
extern void sched_inflight_add(uint32 node_hash);
extern void sched_inflight_remove(uint32 node_hash);

/* Lowers the scores of admitted candidates by the attempts other running transactions
 * are reserving on their nodes, and marks those candidates held, so that ranking puts
 * them after all others (their rows are locked until those transactions end).  Returns
 * how many it changed. */
extern int	sched_inflight_project(SchedRanked *ranked, int n, const SchedFleet *fleet);

#endif							/* PG_SCHED_INFLIGHT_H */
