/*
 * inflight.c — reservations in flight: what concurrent dispatchers have reserved and not
 * yet committed, so that a dispatcher ranks as if they had (the "assumed" placements of
 * Kubernetes' scheduler cache).
 *
 * Without it every concurrent dispatcher ranks the committed fleet alike and tries the
 * same best pair first: the pair its neighbour has just locked, then the next one, and so
 * on (a conflict each).  With it, a node on which other running transactions have
 * reserved k attempts scores 10,000 x k lower (the running-attempts term of SPEC section
 * 4), which is what it will score once they commit, so dispatchers spread over the
 * fleet.  A node some running transaction is reserving on has its rows locked until that
 * transaction ends, so it is also tried only after every node that is not (a dispatch
 * passes over held pairs anyway; this saves it the probe and the conflict, and is
 * counted apart, as held_passed).  It only orders the candidates a dispatch tries: admission is never affected,
 * the score a reservation records is computed on the locked row, and select_candidate /
 * rank_candidates (pure functions of the snapshot) never see it.
 *
 * A dispatcher publishes a pair as soon as it chooses it, before it locks and re-checks
 * it (and withdraws it if that fails), so that the others see it as early as possible.
 *
 * Shared memory (only when preloaded): one slot per backend (indexed by BackendId),
 * written only by its backend under the slot's spinlock: the database, the top-level
 * transaction, and up to INFLIGHT_MAX (node_id hash, attempts) pairs.  A transaction
 * callback empties the slot when the transaction ends; readers also ignore slots whose
 * transaction is no longer running (it may have committed a moment before its callback
 * ran, and the mirror already shows its writes).  Node ids are kept as 32-bit hashes: a
 * collision only misorders candidates.
 */
#include "postgres.h"

#include "inflight.h"
#include "backend_slots.h"
#include "xact_end.h"
#include "placement.h"

#include "access/transam.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/backendid.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"

#define INFLIGHT_MAX 128

typedef struct InflightSlot
{
	slock_t		mutex;
	Oid			dbid;
	TransactionId xid;
	int			n;				/* pairs used; 0: nothing in flight */
	uint32		hash[INFLIGHT_MAX];
	uint16		attempts[INFLIGHT_MAX];
} InflightSlot;

static InflightSlot *slots = NULL;	/* [0 .. MaxBackends], by BackendId */
static int	nslots = 0;
static bool mine_used = false;		/* this backend's slot holds something */

Size
sched_inflight_shmem_size(void)
{
	return sched_backend_slots_size(sizeof(InflightSlot));
}

void
sched_inflight_shmem_attach(void *ptr, bool found)
{
	int			i;

	slots = ptr;
	nslots = sched_backend_slots_count();
	if (!found)
	{
		for (i = 0; i < nslots; i++)
		{
			SpinLockInit(&slots[i].mutex);
			slots[i].n = 0;
		}
	}
}

static void
inflight_xact_end(XactEvent event, void *arg)
{
	InflightSlot *s;

	if (!mine_used || slots == NULL || !sched_xact_event_ends(event))
		return;
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	s->n = 0;
	SpinLockRelease(&s->mutex);
	mine_used = false;
}

void
sched_inflight_preload(void)
{
	RegisterXactCallback(inflight_xact_end, NULL);
}

void
sched_inflight_add(uint32 node_hash)
{
	InflightSlot *s;
	int			i;

	if (!sched_backend_has_slot(slots, nslots))
		return;
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	if (s->n == 0)
		s->dbid = MyDatabaseId;
	if (s->n == 0 || !TransactionIdIsValid(s->xid))
		s->xid = GetTopTransactionIdIfAny();	/* dispatch holds row locks: assigned */
	for (i = 0; i < s->n && s->hash[i] != node_hash; i++)
		;
	if (i < s->n)
		s->attempts[i]++;
	else if (s->n < INFLIGHT_MAX)
	{
		s->hash[s->n] = node_hash;
		s->attempts[s->n] = 1;
		s->n++;
	}
	SpinLockRelease(&s->mutex);
	mine_used = true;
}

void
sched_inflight_remove(uint32 node_hash)
{
	InflightSlot *s;
	int			i;

	if (!sched_backend_has_slot(slots, nslots) || !mine_used)
		return;
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	for (i = 0; i < s->n && s->hash[i] != node_hash; i++)
		;
	if (i < s->n && --s->attempts[i] == 0)
	{
		s->hash[i] = s->hash[s->n - 1];
		s->attempts[i] = s->attempts[s->n - 1];
		s->n--;
	}
	SpinLockRelease(&s->mutex);
}

/*
 * The other running transactions' reservations in flight in this database, as one open
 * addressing table of node hashes (a power of two of slots, at least twice the pairs, so
 * probes stay short): every pair of every slot.  (It held 128 pairs once: with 8
 * sessions, the 100 pairs of a call committing and those of the call beside it did not
 * fit, and each call probed 50-100 pairs it was not told were held: bench/NOTES.md,
 * twenty-ninth sitting.)  Backend-local, grown as needed, rebuilt at every projection.
 */
typedef struct InflightTable
{
	int			allocated;		/* slots allocated */
	int			size;			/* slots used by this projection: a power of two */
	uint32	   *hash;
	int32	   *attempts;		/* 0: the slot is empty */
	int			gathered_size;	/* pairs read from the slots, before the table */
	uint32	   *gathered_hash;
	uint16	   *gathered_attempts;
} InflightTable;

static InflightTable table;

/* p (NULL, or allocated here before) with room for n elements of elem_size bytes. */
static void *
grown(void *p, Size elem_size, int n)
{
	return p == NULL ? MemoryContextAlloc(TopMemoryContext, elem_size * n)
		: repalloc(p, elem_size * n);
}

/* The pairs in flight of the other running transactions of this database, into
 * table.gathered_*; their number. */
static int
gather_pairs(void)
{
	int			pairs = 0;
	int			b;

	for (b = 1; b < nslots; b++)
	{
		InflightSlot *s = &slots[b];
		InflightSlot copy;

		if (b == MyBackendId || s->n == 0)	/* unlocked peek: only an ordering hint */
			continue;
		SpinLockAcquire(&s->mutex);
		copy.n = s->n;
		copy.dbid = s->dbid;
		copy.xid = s->xid;
		memcpy(copy.hash, s->hash, sizeof(uint32) * copy.n);
		memcpy(copy.attempts, s->attempts, sizeof(uint16) * copy.n);
		SpinLockRelease(&s->mutex);
		if (copy.n == 0 || copy.dbid != MyDatabaseId || !TransactionIdIsValid(copy.xid) ||
			!TransactionIdIsInProgress(copy.xid))
			continue;
		if (pairs + copy.n > table.gathered_size)
		{
			int			size = Max(pairs + copy.n, Max(256, table.gathered_size * 2));

			table.gathered_hash = grown(table.gathered_hash, sizeof(uint32), size);
			table.gathered_attempts = grown(table.gathered_attempts, sizeof(uint16), size);
			table.gathered_size = size;
		}
		memcpy(table.gathered_hash + pairs, copy.hash, sizeof(uint32) * copy.n);
		memcpy(table.gathered_attempts + pairs, copy.attempts, sizeof(uint16) * copy.n);
		pairs += copy.n;
	}
	return pairs;
}

/* The slot of node hash nh in the table: its own, or the empty one where it would go. */
static inline int
table_slot(uint32 nh)
{
	int			mask = table.size - 1;
	int			h = (int) (nh & (uint32) mask);

	while (table.attempts[h] != 0 && table.hash[h] != nh)
		h = (h + 1) & mask;
	return h;
}

/*
 * Lowers the scores of ranked (n admitted candidates of fleet) by what other running
 * transactions have reserved on their nodes.  Returns how many candidates it changed.
 */
int
sched_inflight_project(SchedRanked *ranked, int n, const SchedFleet *fleet)
{
	int			pairs;
	int			size = 256;
	int			changed = 0;
	int			i;

	if (slots == NULL || n == 0)
		return 0;
	pairs = gather_pairs();
	if (pairs == 0)
		return 0;
	while (size < 2 * pairs)
		size *= 2;
	if (size > table.allocated)
	{
		table.hash = grown(table.hash, sizeof(uint32), size);
		table.attempts = grown(table.attempts, sizeof(int32), size);
		table.allocated = size;
	}
	table.size = size;
	memset(table.attempts, 0, sizeof(int32) * size);
	for (i = 0; i < pairs; i++)
	{
		int			h = table_slot(table.gathered_hash[i]);

		table.hash[h] = table.gathered_hash[i];
		table.attempts[h] += table.gathered_attempts[i];
	}
	for (i = 0; i < n; i++)
	{
		int			h = table_slot(fleet->rows[ranked[i].index].node_hash);

		if (table.attempts[h] == 0)
			continue;
		sched_score_add_running(&ranked[i], table.attempts[h]);
		ranked[i].held = true;
		changed++;
	}
	return changed;
}
