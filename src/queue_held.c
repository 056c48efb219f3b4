/*
 * queue_held.c — the requests other running transactions hold locked from the queue, so
 * that a queue fetch passes over them without trying their row locks.
 *
 * Every consumer of the queue starts at its head, and the requests at the head are the
 * ones concurrent consumers have just locked (FOR UPDATE SKIP LOCKED) and are placing.
 * Without this, a fetch tried each of them in turn: an exclusive lock of its heap page
 * and three calls into the lock manager per request, for every one of up to 100
 * requests per concurrent dispatch_next(100), before it met a free one.
 *
 * Guarantee: a request is left out of a fetch only if, when the fetch began, it was
 * locked by another transaction that was still running: what SKIP LOCKED would have done
 * had it reached the row at that moment.  It is only a filter ahead of the row lock;
 * what is not published (a full slot, no shared memory) is tried as before.
 *
 *   - A backend publishes a request after the fetch that locked it returned it (so a
 *     published request is locked), with the nesting level of the subtransaction that
 *     holds the lock.
 *   - A subtransaction that aborts releases its row locks: its callback withdraws what
 *     it and its children published.  One that commits hands its entries to its parent.
 *   - The transaction's callback empties the slot when it ends.  Readers also ignore a
 *     slot whose top-level transaction is no longer running: it may have ended a moment
 *     before its callback ran.
 *   - A subtransaction's abort is recorded a moment before its callback withdraws its
 *     entries; a reader in that moment leaves out a request that has just become free,
 *     before the aborting session has returned from its ROLLBACK TO SAVEPOINT.
 *
 * Shared memory (only when preloaded): one slot per backend (indexed by BackendId),
 * written only by its backend under the slot's spinlock (held for one append, one
 * truncation or one copy): the database, the top-level transaction and up to HELD_MAX
 * request ids, in the order published.  The nesting level of each entry is kept by its
 * own backend, outside shared memory: levels never decrease along the slot (a
 * subtransaction's entries are appended after its parent's; a commit relabels the
 * trailing ones), so an abort at level L truncates the slot at the first entry of level
 * L or deeper.
 *
 * A fetch (queue.c) calls sched_queue_held_collect() before its statement: that copies
 * the other slots of this database into a backend-local hash set, which the statement's
 * filter sched._request_held_elsewhere(request_id) reads.  The set is in force only until
 * sched_queue_held_release(), or the end of the (sub)transaction; outside it the filter
 * passes every row.
 */
#include "postgres.h"

#include "queue_held.h"
#include "backend_slots.h"
#include "xact_end.h"

#include "access/transam.h"
#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/backendid.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"

#define HELD_MAX 256

typedef struct HeldSlot
{
	slock_t		mutex;
	Oid			dbid;
	TransactionId xid;			/* top-level transaction of the entries */
	int			n;				/* entries used; 0: nothing held */
	int64		ids[HELD_MAX];
} HeldSlot;

static HeldSlot *slots = NULL;	/* [0 .. MaxBackends], by BackendId */
static int	nslots = 0;

/* this backend's entries: how many, and the nesting level of each */
static int	mine_n = 0;
static int	mine_level[HELD_MAX];

/* the set a fetch reads (open addressing, 0 marks a free cell: request ids are > 0) */
static int64 *set_cells = NULL;
static int	set_size = 0;		/* a power of two */
static bool set_active = false;
static int64 set_hits = 0;		/* rows the filter left out while the set was in force */
static int64 passed_total = 0;	/* the same, over this backend's life */

PG_FUNCTION_INFO_V1(sched_request_held_elsewhere);

Size
sched_queue_held_shmem_size(void)
{
	return sched_backend_slots_size(sizeof(HeldSlot));
}

void
sched_queue_held_shmem_attach(void *ptr, bool found)
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

static bool
have_slot(void)
{
	return sched_backend_has_slot(slots, nslots);
}

/* keeps this backend's first n entries */
static void
truncate_mine(int n)
{
	HeldSlot   *s = &slots[MyBackendId];

	SpinLockAcquire(&s->mutex);
	s->n = n;
	SpinLockRelease(&s->mutex);
	mine_n = n;
}

static void
queue_held_xact_end(XactEvent event, void *arg)
{
	if (!sched_xact_event_ends(event))
		return;
	set_active = false;
	if (mine_n > 0 && have_slot())
		truncate_mine(0);
}

static void
queue_held_subxact_end(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();	/* the one ending */
	int			i;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			set_active = false;
			for (i = 0; i < mine_n && mine_level[i] < level; i++)
				;
			if (i < mine_n && have_slot())
				truncate_mine(i);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			for (i = mine_n - 1; i >= 0 && mine_level[i] >= level; i--)
				mine_level[i] = level - 1;
			break;
		default:
			break;
	}
}

void
sched_queue_held_preload(void)
{
	RegisterXactCallback(queue_held_xact_end, NULL);
	RegisterSubXactCallback(queue_held_subxact_end, NULL);
}

void
sched_queue_held_publish(int64 request_id)
{
	HeldSlot   *s;

	if (!have_slot() || mine_n >= HELD_MAX)
		return;					/* not published: a fetch tries its lock, as before */
	s = &slots[MyBackendId];
	SpinLockAcquire(&s->mutex);
	if (s->n == 0)
	{
		s->dbid = MyDatabaseId;
		s->xid = GetTopTransactionIdIfAny();	/* the row lock assigned it */
	}
	s->ids[s->n++] = request_id;
	SpinLockRelease(&s->mutex);
	mine_level[mine_n++] = GetCurrentTransactionNestLevel();
}

/* the home cell of a request id (Fibonacci hashing: ids are dense) */
static inline uint32
set_home(int64 id)
{
	return (uint32) (((uint64) id * UINT64CONST(0x9E3779B97F4A7C15)) >> 32) & (set_size - 1);
}

static void
set_insert(int64 id)
{
	uint32		h = set_home(id);

	while (set_cells[h] != 0 && set_cells[h] != id)
		h = (h + 1) & (set_size - 1);
	if (set_cells[h] == 0)
		set_cells[h] = id;
}

void
sched_queue_held_collect(void)
{
	int64	   *ids = NULL;
	int			nids = 0;
	int			b,
				i;

	set_active = false;
	set_hits = 0;
	if (slots == NULL)
		return;
	for (b = 1; b < nslots; b++)
	{
		HeldSlot   *s = &slots[b];
		Oid			dbid;
		TransactionId xid;
		int			n;

		if (b == MyBackendId || s->n == 0)	/* unlocked peek: an empty slot is skipped */
			continue;
		if (ids == NULL)
			ids = palloc(sizeof(int64) * HELD_MAX * (nslots - 1));
		SpinLockAcquire(&s->mutex);
		n = s->n;
		dbid = s->dbid;
		xid = s->xid;
		memcpy(ids + nids, s->ids, sizeof(int64) * n);
		SpinLockRelease(&s->mutex);
		if (n > 0 && dbid == MyDatabaseId && TransactionIdIsValid(xid) &&
			TransactionIdIsInProgress(xid))
			nids += n;
	}
	if (nids == 0)
	{
		if (ids != NULL)
			pfree(ids);
		return;
	}
	if (set_size < 2 * nids)
	{
		int			size = Max(set_size, 1024);

		while (size < 2 * nids)
			size *= 2;
		if (set_cells != NULL)
			pfree(set_cells);
		set_cells = MemoryContextAlloc(TopMemoryContext, sizeof(int64) * size);
		set_size = size;
	}
	memset(set_cells, 0, sizeof(int64) * set_size);
	for (i = 0; i < nids; i++)
		set_insert(ids[i]);
	pfree(ids);
	set_active = true;
}

void
sched_queue_held_release(void)
{
	set_active = false;
	passed_total += set_hits;
	set_hits = 0;
}

/*
 * sched._request_held_elsewhere(request_id) → whether the fetch in progress leaves the
 * request out: another running transaction held it locked when the fetch began.  False
 * outside a fetch.
 */
bool
sched_queue_held_elsewhere(int64 id)
{
	uint32		h;

	if (!set_active || id == 0)
		return false;
	h = set_home(id);
	while (set_cells[h] != 0)
	{
		if (set_cells[h] == id)
		{
			set_hits++;
			return true;
		}
		h = (h + 1) & (set_size - 1);
	}
	return false;
}

Datum
sched_request_held_elsewhere(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sched_queue_held_elsewhere(PG_GETARG_INT64(0)));
}

void
sched_queue_held_stats(int *published, int64 *passed_over)
{
	*published = mine_n;
	*passed_over = passed_total;
}
