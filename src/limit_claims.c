/*
 * limit_claims.c — what running transactions have reserved under concurrency limits and
 * tenant quotas and not yet committed (docs/design/limits.md, "Limits without a lock to
 * the commit").
 *
 * Without it a limit check holds the key's or tenant's lock until its transaction ends
 * (the next checker must see what it reserved in the table), so the dispatchers of one
 * tenant, or of one key, run one transaction at a time.  With it, a check holds the lock
 * only while it counts and publishes its claim here:
 *
 *   1. take the scope's lock (sched_limit_claims_lock: an LWLock of this module's, which
 *      two scopes may share);
 *   2. copy the other transactions' claims on the scope (sched_limit_claims_others);
 *   3. take the latest snapshot S and count, with S, what the scope's live attempts hold
 *      (a key's through attempt_live_key_idx, a tenant's in sched.tenant_live), plus
 *      this transaction's reservations not yet written;
 *   4. add the copied claims of the transactions S sees as running
 *      (sched_limit_claims_unseen): their reservations are not in what S counted;
 *   5. when the request fits, publish its claim (sched_limit_claims_add); release the lock.
 *
 * Why it is exact.  Checkers of a scope run steps 1-5 one after another (the lock).  Take
 * any transaction X whose check passed before ours: it published its claim before it
 * released the lock, and empties its slot only when it ends, after its commit is visible
 * to new snapshots (the commit callback runs after the transaction left the proc array).
 * If X's claim is gone at step 2, X had committed (and S, taken later, counts its rows) or
 * aborted (nothing to count).  If it is there: either S sees X committed (its rows are in
 * the count, and step 4 leaves the claim out) or S sees X running (its rows are not, and
 * step 4 adds the claim).  An aborted X still in its slot is counted: the safe side.
 * So no reservation is counted twice or missed, and the sum a check compares with the
 * limit is at least what would hold were every running transaction to commit.
 *
 * The count before the lock.  Steps 3 and 2 may run the other way round, so that the
 * lock is held only while the claims are copied and the request's own is published:
 * read how many transactions with claims have ended (sched_limit_claims_ended), count
 * with S, take the lock, copy the claims, and read the number again.  Unchanged, no
 * transaction with a claim ended between the first reading and the copy, so a claim
 * missing from the copy is of a transaction that ended (committed, visible: its end is
 * counted after its commit is visible) before the first reading, hence before S, which
 * counts it.  Changed, the caller counts again, under the lock, with a new snapshot (the
 * order above).
 *
 * A claim stays until its transaction ends, also when what it claimed for was not placed
 * (withdrawn then: sched_limit_claims_withdraw) or was rolled back with a subtransaction
 * (a gang: kept until the end, the safe side).  A transaction that claimed cannot be
 * prepared (PREPARE TRANSACTION: its claim would go while its rows are not yet visible).
 * A rate limit's window is not claimed: a key with one is checked under its lock held to
 * the commit (queue_limits.c).
 *
 * Shared memory (only when preloaded; without it the locks are held to the commit):
 * one slot per backend (indexed by BackendId), written only by its backend under the
 * slot's spinlock: the database, the top-level transaction, and up to LIMIT_CLAIMS_MAX
 * (lock space, scope hash, amounts) entries, found through an open-addressing table of
 * twice as many buckets (a check looks one scope up in each other slot in use, whatever
 * the number of keys those transactions placed).  About 46 kB per slot.  Keys and
 * tenants are 64-bit hashes, as their locks are: a collision counts two scopes' claims
 * together, the safe side.  A transaction that would claim on more scopes than a slot
 * holds gets BUSY for the rest (queue_limits.c: passed over, "dispatched under too many
 * limits"), placed by a later transaction.
 */
#include "postgres.h"

#include "limit_claims.h"
#include "backend_slots.h"
#include "xact_end.h"

#include "access/transam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/backendid.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/snapmgr.h"

#define LIMIT_CLAIMS_MAX 1024
#define LIMIT_CLAIMS_BUCKETS 2048	/* a power of two, twice the entries */

typedef struct LimitClaimSlot
{
	slock_t		mutex;
	Oid			dbid;
	TransactionId xid;
	int			n;				/* entries used; 0: no claim */
	/* the entries by (space, scope): entry index + 1 (0: empty), probed linearly from
	 * bucket_of(); entries are never removed before the slot empties */
	uint16		bucket[LIMIT_CLAIMS_BUCKETS];
	uint16		space[LIMIT_CLAIMS_MAX];	/* the lock space: a key's or a tenant's */
	uint64		scope[LIMIT_CLAIMS_MAX];	/* the key's or tenant's hash */
	int64		amounts[LIMIT_CLAIMS_MAX][SCHED_LIMIT_DIMENSIONS];
} LimitClaimSlot;

/* before the slots: how many transactions with claims have ended (see "The count before
 * the lock" above) */
#define LIMIT_CLAIM_LOCKS 64

typedef struct LimitClaimsHeader
{
	pg_atomic_uint64 ended;
	int			tranche;
	LWLock		locks[LIMIT_CLAIM_LOCKS];	/* a scope's: locks[scope % LIMIT_CLAIM_LOCKS] */
} LimitClaimsHeader;

static LimitClaimsHeader *header = NULL;
static LimitClaimSlot *slots = NULL;	/* [0 .. MaxBackends], by BackendId */
static int	nslots = 0;
static bool mine_used = false;	/* this backend's slot holds a claim */

Size
sched_limit_claims_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(LimitClaimsHeader)),
					sched_backend_slots_size(sizeof(LimitClaimSlot)));
}

void
sched_limit_claims_shmem_attach(void *ptr, bool found)
{
	int			i;

	header = ptr;
	slots = (LimitClaimSlot *) ((char *) ptr + MAXALIGN(sizeof(LimitClaimsHeader)));
	nslots = sched_backend_slots_count();
	if (!found)
	{
		pg_atomic_init_u64(&header->ended, 0);
		header->tranche = LWLockNewTrancheId();
		for (i = 0; i < LIMIT_CLAIM_LOCKS; i++)
			LWLockInitialize(&header->locks[i], header->tranche);
		for (i = 0; i < nslots; i++)
		{
			SpinLockInit(&slots[i].mutex);
			slots[i].n = 0;
			memset(slots[i].bucket, 0, sizeof(slots[i].bucket));
		}
	}
}

static void
empty_mine(void)
{
	LimitClaimSlot *s = &slots[MyBackendId];

	/* counted before the slot empties, and after the commit is visible (a full barrier) */
	(void) pg_atomic_fetch_add_u64(&header->ended, 1);
	SpinLockAcquire(&s->mutex);
	s->n = 0;
	memset(s->bucket, 0, sizeof(s->bucket));
	SpinLockRelease(&s->mutex);
	mine_used = false;
}

static void
limit_claims_xact_end(XactEvent event, void *arg)
{
	if (!mine_used || slots == NULL)
		return;
	if (event == XACT_EVENT_PRE_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that dispatched under a concurrency limit or a tenant quota"),
				 errdetail("pg_sched counts its reservation for other dispatchers only until the transaction ends.")));
	if (sched_xact_event_ends(event))
		empty_mine();
}

void
sched_limit_claims_preload(void)
{
	RegisterXactCallback(limit_claims_xact_end, NULL);
}

uint64
sched_limit_claims_ended(void)
{
	uint64		n;

	pg_memory_barrier();		/* read after what the caller read before (the claims) */
	n = pg_atomic_read_u64(&header->ended);
	pg_memory_barrier();		/* and before what it reads next (the snapshot) */
	return n;
}

/* The lock of a scope (two scopes may share one: they then check one after the other). */
static LWLock *
scope_lock(uint16 space, uint64 scope)
{
	return &header->locks[(scope ^ space) % LIMIT_CLAIM_LOCKS];
}

void
sched_limit_claims_lock(uint16 space, uint64 scope)
{
	static bool named = false;

	if (!named)
	{
		LWLockRegisterTranche(header->tranche, "pg_sched_limit_claims");
		named = true;
	}
	LWLockAcquire(scope_lock(space, scope), LW_EXCLUSIVE);
}

void
sched_limit_claims_unlock(uint16 space, uint64 scope)
{
	LWLockRelease(scope_lock(space, scope));
}

bool
sched_limit_claims_available(void)
{
	return sched_backend_has_slot(slots, nslots);
}

static inline uint32
bucket_of(uint16 space, uint64 scope)
{
	return (uint32) ((scope ^ (scope >> 32) ^ space) & (LIMIT_CLAIMS_BUCKETS - 1));
}

/* The entry of (space, scope) in slot s, or -1; its bucket into *free_bucket when none
 * (the caller holds the slot's spinlock). */
static int
entry_of(const LimitClaimSlot *s, uint16 space, uint64 scope, uint32 *free_bucket)
{
	uint32		h = bucket_of(space, scope);

	for (;;)
	{
		int			i = (int) s->bucket[h] - 1;

		if (i < 0)
		{
			if (free_bucket != NULL)
				*free_bucket = h;
			return -1;
		}
		if (s->scope[i] == scope && s->space[i] == space)
			return i;
		h = (h + 1) & (LIMIT_CLAIMS_BUCKETS - 1);
	}
}

void
sched_limit_claims_others(uint16 space, uint64 scope, SchedClaimOthers *others)
{
	int			b,
				i;

	others->n = 0;
	others->xids = NULL;
	others->amounts = NULL;
	if (!sched_limit_claims_available())
		return;
	for (b = 1; b < nslots; b++)
	{
		LimitClaimSlot *s = &slots[b];

		/* (an unlocked peek: a claim published under the scope's lock before this
		 * caller took it is visible here, the lock's release and acquisition order it) */
		if (b == MyBackendId || s->n == 0)
			continue;
		if (others->xids == NULL)
		{
			/* at most one entry per scope and backend */
			others->xids = palloc(sizeof(TransactionId) * nslots);
			others->amounts = palloc(sizeof(others->amounts[0]) * nslots);
		}
		SpinLockAcquire(&s->mutex);
		if (s->n > 0 && s->dbid == MyDatabaseId && (i = entry_of(s, space, scope, NULL)) >= 0)
		{
			others->xids[others->n] = s->xid;
			memcpy(others->amounts[others->n], s->amounts[i], sizeof(others->amounts[0]));
			others->n++;
		}
		SpinLockRelease(&s->mutex);
	}
}

void
sched_limit_claims_unseen(const SchedClaimOthers *others, Snapshot snapshot,
						  int64 used[SCHED_LIMIT_DIMENSIONS])
{
	int			i,
				d;

	for (i = 0; i < others->n; i++)
	{
		if (!TransactionIdIsValid(others->xids[i]) || !XidInMVCCSnapshot(others->xids[i], snapshot))
			continue;			/* committed before the snapshot (counted) or aborted */
		for (d = 0; d < SCHED_LIMIT_DIMENSIONS; d++)
			used[d] += others->amounts[i][d];
	}
}

bool
sched_limit_claims_add(uint16 space, uint64 scope, const int64 asks[SCHED_LIMIT_DIMENSIONS])
{
	LimitClaimSlot *s;
	TransactionId xid = GetTopTransactionId();	/* others tell its end by it */
	int			i,
				d;
	uint32		free_bucket;

	if (!sched_limit_claims_available())
		return false;
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	if (s->n == 0)
	{
		s->dbid = MyDatabaseId;
		s->xid = xid;
	}
	i = entry_of(s, space, scope, &free_bucket);
	if (i < 0)
	{
		if (s->n == LIMIT_CLAIMS_MAX)
		{
			SpinLockRelease(&s->mutex);
			return false;
		}
		i = s->n++;
		s->space[i] = space;
		s->scope[i] = scope;
		memset(s->amounts[i], 0, sizeof(s->amounts[i]));
		s->bucket[free_bucket] = (uint16) (i + 1);
	}
	for (d = 0; d < SCHED_LIMIT_DIMENSIONS; d++)
		s->amounts[i][d] += asks[d];
	SpinLockRelease(&s->mutex);
	mine_used = true;
	return true;
}

void
sched_limit_claims_withdraw(uint16 space, uint64 scope, const int64 asks[SCHED_LIMIT_DIMENSIONS])
{
	LimitClaimSlot *s;
	int			i,
				d;

	if (!mine_used || !sched_limit_claims_available())
		return;
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	i = s->n > 0 ? entry_of(s, space, scope, NULL) : -1;
	if (i >= 0)
		for (d = 0; d < SCHED_LIMIT_DIMENSIONS; d++)
			s->amounts[i][d] = Max(s->amounts[i][d] - asks[d], 0);
	SpinLockRelease(&s->mutex);
}
