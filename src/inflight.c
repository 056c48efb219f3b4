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
#include "grow_array.h"
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
typedef struct InflightPair
{
	uint32		hash;			/* node_id hash */
	int32		attempts;		/* 0: an empty entry of the table */
} InflightPair;

typedef struct InflightTable
{
	int			size;			/* entries used by this projection: a power of two */
	int			allocated;
	InflightPair *entries;
	int			gathered_allocated; /* the pairs read from the backends' slots */
	InflightPair *gathered;
} InflightTable;

static InflightTable table;

/* The pairs in flight of the other running transactions of this database, into
 * table.gathered; their number. */
static int
gather_pairs(void)
{
	int			pairs = 0;
	int			b;
	int			i;

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
		sched_grow_array(TopMemoryContext, (void **) &table.gathered, &table.gathered_allocated,
						 pairs + copy.n, sizeof(InflightPair), 256);
		for (i = 0; i < copy.n; i++)
		{
			table.gathered[pairs].hash = copy.hash[i];
			table.gathered[pairs++].attempts = copy.attempts[i];
		}
	}
	return pairs;
}

/* The entry of node hash nh in the table: its own, or the empty one where it would go. */
static inline InflightPair *
table_entry(uint32 nh)
{
	int			mask = table.size - 1;
	int			h = (int) (nh & (uint32) mask);

	while (table.entries[h].attempts != 0 && table.entries[h].hash != nh)
		h = (h + 1) & mask;
	return &table.entries[h];
}

/*
 * Lowers the scores of ranked (n admitted candidates of fleet) by what other running
 * transactions have reserved on their nodes.  Returns how many candidates it changed.
 */
int
sched_inflight_project(SchedRanked *ranked, int n, const SchedFleet *fleet)
{
	int			pairs;
	int			changed = 0;
	int			i;

	if (slots == NULL || n == 0)
		return 0;
	pairs = gather_pairs();
	if (pairs == 0)
		return 0;
	for (table.size = 256; table.size < 2 * pairs; table.size *= 2)
		;
	sched_grow_array(TopMemoryContext, (void **) &table.entries, &table.allocated, table.size,
					 sizeof(InflightPair), 256);
	memset(table.entries, 0, sizeof(InflightPair) * table.size);
	for (i = 0; i < pairs; i++)
	{
		InflightPair *t = table_entry(table.gathered[i].hash);

		t->hash = table.gathered[i].hash;
		t->attempts += table.gathered[i].attempts;
	}
	for (i = 0; i < n; i++)
	{
		InflightPair *t = table_entry(fleet->rows[ranked[i].index].node_hash);

		if (t->attempts == 0)
			continue;
		sched_score_add_running(&ranked[i], t->attempts);
		ranked[i].held = true;
		changed++;
	}
	return changed;
}
