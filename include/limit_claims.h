/*
 * limit_claims.h — what running transactions have reserved under concurrency limits and
 * tenant quotas and not yet committed, shared so that a limit check need not hold the
 * key's or tenant's lock until its transaction ends (limit_claims.c).
 */
#ifndef PG_SCHED_LIMIT_CLAIMS_H
#define PG_SCHED_LIMIT_CLAIMS_H

#include "utils/snapshot.h"

/* the dimensions of a claim: live attempts, cpu_millis, memory_mb, gpus (a key's: the
 * first alone) */
#define SCHED_LIMIT_DIMENSIONS 4

/* The shared slots (shmem.c allocates them, when preloading), and the transaction
 * callback that empties this backend's slot (registered when preloading). */
extern Size sched_limit_claims_shmem_size(void);
extern void sched_limit_claims_shmem_attach(void *ptr, bool found);
extern void sched_limit_claims_preload(void);

/* Whether the slots are there (pg_sched preloaded) and this backend has one. */
extern bool sched_limit_claims_available(void);

/* The lock under which a scope's claims are read, checked and published: an LWLock, held
 * for no statement and no wait (queue_limits.c counts before it takes it). */
extern void sched_limit_claims_lock(uint16 space, uint64 scope);
extern void sched_limit_claims_unlock(uint16 space, uint64 scope);

/* How many transactions with claims have ended so far (with a barrier on each side):
 * unchanged between a count and the copy of the claims, the count may come first. */
extern uint64 sched_limit_claims_ended(void);

/* What other transactions have claimed of one scope (a key or a tenant), copied under
 * the scope's lock after the caller counted (see limit_claims.c, "The count before the
 * lock", for when the count must be made again). */
typedef struct SchedClaimOthers
{
	int			n;
	TransactionId *xids;
	int64	  (*amounts)[SCHED_LIMIT_DIMENSIONS];
} SchedClaimOthers;

/* Copies, into others (palloc'd), the claims on scope (`space`: the lock space of keys or
 * tenants; `scope`: its hash) of every other backend's transaction in this database.
 * The caller holds the scope's lock. */
extern void sched_limit_claims_others(uint16 space, uint64 scope, SchedClaimOthers *others);

/* Adds to used what the copied claims hold that `snapshot` does not show: those of
 * transactions it sees as running (a transaction that committed before it is counted
 * in the table already). */
extern void sched_limit_claims_unseen(const SchedClaimOthers *others, Snapshot snapshot,
									  int64 used[SCHED_LIMIT_DIMENSIONS]);

/* Publishes a claim of this transaction on the scope (kept until it ends).  False, with
 * nothing published, when the slot has no room for another scope.  The caller holds the
 * scope's lock. */
extern bool sched_limit_claims_add(uint16 space, uint64 scope, const int64 asks[SCHED_LIMIT_DIMENSIONS]);

/* Withdraws a claim whose reservation did not happen (no lock needed: a claim only
 * lowers what others may take). */
extern void sched_limit_claims_withdraw(uint16 space, uint64 scope,
										const int64 asks[SCHED_LIMIT_DIMENSIONS]);

#endif							/* PG_SCHED_LIMIT_CLAIMS_H */
