/*
 * queue_fetch.c — dispatch_next's batches of the queue, read and locked in C: what the
 * statement
 *     SELECT ... FROM sched.request r
 *      WHERE <ready at `at`> AND <in the range, after the keyset position>
 *        AND <capability> AND <shape, concurrency key, tenant not left out>
 *        AND NOT sched._request_held_elsewhere(r.request_id)
 *      ORDER BY <the index's order> LIMIT n FOR UPDATE OF r SKIP LOCKED
 * did (queue.c's STARVING_BATCH and TENANT_BATCH with their filters), without the
 * executor's start of its plan at every call (two statements, 147 k instructions of a
 * dispatch_next(1) of 1.06 M: bench/NOTES.md, "nineteenth sitting").
 *
 * The walk: the range of the index (request_age_idx for the starving requests,
 * request_queue_idx for a tenant's), in its order, with the snapshot a statement would
 * take now (this transaction's writes made visible); each row the snapshot sees is
 * checked against the filters, then locked (FOR UPDATE: LockTupleExclusive), skipping
 * a row another transaction holds, as LockRows does under SKIP LOCKED: under READ
 * COMMITTED the newest version is locked and, when it is not the version read, the
 * filters are checked again on it (the EvalPlanQual recheck) and the row is passed over
 * (still locked, as after a failed recheck) when it no longer qualifies; a row deleted
 * meanwhile is passed over.  Under REPEATABLE READ and SERIALIZABLE a row changed since
 * the transaction's snapshot fails with 40001, as the statement would.  A row this
 * transaction changed after the snapshot (TM_SelfModified) is passed over.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "queue_fetch.h"
#include "queue_held.h"
#include "spi_util.h"

/* The columns of sched.request a fetch reads (attribute numbers). */
typedef struct RequestColumns
{
	AttrNumber	request_id;
	AttrNumber	tenant;
	AttrNumber	sort_key;
	AttrNumber	queued_at;
	AttrNumber	step_id;
	AttrNumber	attempt_number;
	AttrNumber	shape;
	AttrNumber	concurrency_key;
	AttrNumber	state;
	AttrNumber	available_at;
	AttrNumber	claimed_until;
	AttrNumber	capability;
} RequestColumns;

static void
request_columns(Relation rel, RequestColumns *c)
{
	c->request_id = sched_column_of(rel, "request_id");
	c->tenant = sched_column_of(rel, "tenant");
	c->sort_key = sched_column_of(rel, "sort_key");
	c->queued_at = sched_column_of(rel, "queued_at");
	c->step_id = sched_column_of(rel, "step_id");
	c->attempt_number = sched_column_of(rel, "attempt_number");
	c->shape = sched_column_of(rel, "shape");
	c->concurrency_key = sched_column_of(rel, "concurrency_key");
	c->state = sched_column_of(rel, "state");
	c->available_at = sched_column_of(rel, "available_at");
	c->claimed_until = sched_column_of(rel, "claimed_until");
	c->capability = sched_column_of(rel, "capability");
}

/* text value d equals s (bytes) */
static bool
text_is(Datum d, const char *s)
{
	text	   *t = DatumGetTextPP(d);
	size_t		len = VARSIZE_ANY_EXHDR(t);

	return strlen(s) == len && memcmp(VARDATA_ANY(t), s, len) == 0;
}

static bool
text_in_list(Datum d, char **list, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (text_is(d, list[i]))
			return true;
	return false;
}

/* A timestamptz column's value into *out; false when it is NULL (every comparison with
 * it is then false, as in SQL). */
static bool
ts_column(TupleTableSlot *slot, AttrNumber att, TimestampTz *out)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, att, &isnull);

	if (isnull)
		return false;
	*out = DatumGetTimestampTz(d);
	return true;
}

/* Whether the row in slot is what the statement's WHERE clause lets through. */
static bool
qualifies(const SchedQueueFetch *f, const RequestColumns *c, TupleTableSlot *slot)
{
	bool		isnull;
	Datum		d;
	TimestampTz ts;
	TimestampTz queued_at;
	int64		request_id;
	int			i;

	/* READY(at): state PENDING, or CLAIMED with its claim expired; available */
	d = slot_getattr(slot, c->state, &isnull);
	if (isnull)
		return false;
	if (!text_is(d, "PENDING"))
	{
		if (!text_is(d, "CLAIMED") || !ts_column(slot, c->claimed_until, &ts) || ts > f->at)
			return false;
	}
	if (!ts_column(slot, c->available_at, &ts) || ts > f->at)
		return false;
	if (f->capability != NULL)
	{
		d = slot_getattr(slot, c->capability, &isnull);
		if (isnull || !text_is(d, f->capability))
			return false;
	}
	/* the range and the keyset position */
	if (!ts_column(slot, c->queued_at, &queued_at))
		return false;
	d = slot_getattr(slot, c->request_id, &isnull);
	if (isnull)
		return false;
	request_id = DatumGetInt64(d);
	d = slot_getattr(slot, c->tenant, &isnull);
	if (isnull)
		return false;
	if (f->starving)
	{
		if (queued_at >= f->starving_cutoff)
			return false;
		if (f->tenant != NULL && !text_is(d, f->tenant))
			return false;
		if (queued_at < f->queued_at ||
			(queued_at == f->queued_at && request_id <= f->request_id))
			return false;
	}
	else
	{
		double		sort_key;

		Datum		k;

		if (!text_is(d, f->tenant) || queued_at < f->starving_cutoff)
			return false;
		k = slot_getattr(slot, c->sort_key, &isnull);
		if (isnull)
			return false;
		sort_key = DatumGetFloat8(k);
		if (float8_lt(sort_key, f->sort_key) ||
			(float8_eq(sort_key, f->sort_key) &&
			 (queued_at < f->queued_at ||
			  (queued_at == f->queued_at && request_id <= f->request_id))))
			return false;
	}
	/* the tenants a limit holds back (d: the tenant) */
	if (text_in_list(d, f->excluded_tenants, f->nexcluded_tenants))
		return false;
	/* r.shape <> ALL (excluded): a NULL shape passes only an empty list */
	d = slot_getattr(slot, c->shape, &isnull);
	if (isnull ? f->nexcluded_shapes > 0 : false)
		return false;
	for (i = 0; !isnull && i < f->nexcluded_shapes; i++)
		if (DatumGetInt64(d) == f->excluded_shapes[i])
			return false;
	/* concurrency_key IS NULL OR concurrency_key <> ALL (excluded keys) */
	d = slot_getattr(slot, c->concurrency_key, &isnull);
	if (!isnull && text_in_list(d, f->excluded_keys, f->nexcluded_keys))
		return false;
	return true;
}

static char *
text_or_null(TupleTableSlot *slot, AttrNumber att)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, att, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

static void
row_of(TupleTableSlot *slot, const RequestColumns *c, SchedQueueRow *row)
{
	bool		isnull;
	Datum		d;

	row->request_id = DatumGetInt64(slot_getattr(slot, c->request_id, &isnull));
	row->tenant = text_or_null(slot, c->tenant);
	d = slot_getattr(slot, c->sort_key, &isnull);
	row->sort_key = isnull ? 0 : DatumGetFloat8(d);
	row->queued_at = DatumGetTimestampTz(slot_getattr(slot, c->queued_at, &isnull));
	row->key.step_id = *DatumGetUUIDP(slot_getattr(slot, c->step_id, &isnull));
	row->key.attempt_number = DatumGetInt32(slot_getattr(slot, c->attempt_number, &isnull));
	d = slot_getattr(slot, c->shape, &isnull);
	row->shape = isnull ? 0 : DatumGetInt64(d);
	row->concurrency_key = text_or_null(slot, c->concurrency_key);
	row->tid = slot->tts_tid;
}

int
sched_queue_fetch(const SchedQueueFetch *f, SchedQueueRow *rows, bool *stopped)
{
	Oid			nsp = get_namespace_oid("sched", false);
	Oid			relid = get_relname_relid("request", nsp);
	Oid			indexid = get_relname_relid(f->starving ? "request_age_idx" : "request_queue_idx",
											nsp);
	Relation	rel;
	Relation	index;
	RequestColumns c;
	ScanKeyData keys[2];
	Snapshot	snapshot;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	TupleTableSlot *locked;
	MemoryContext cxt;
	MemoryContext caller;
	int			n = 0;

	if (!OidIsValid(relid) || !OidIsValid(indexid))
		elog(ERROR, "pg_sched: sched.request or its queue index is missing");
	rel = table_open(relid, RowShareLock);	/* FOR UPDATE's */
	index = index_open(indexid, AccessShareLock);
	request_columns(rel, &c);
	if (f->starving)
	{
		/* queued_at >= the position's, < the cutoff */
		ScanKeyInit(&keys[0], 1, BTGreaterEqualStrategyNumber, F_TIMESTAMPTZ_GE,
					TimestampTzGetDatum(f->queued_at));
		ScanKeyInit(&keys[1], 1, BTLessStrategyNumber, F_TIMESTAMPTZ_LT,
					TimestampTzGetDatum(f->starving_cutoff));
	}
	else
	{
		/* the tenant's range, sort_key >= the position's */
		ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(f->tenant));
		keys[0].sk_collation = index->rd_indcollation[0];
		ScanKeyInit(&keys[1], 2, BTGreaterEqualStrategyNumber, F_FLOAT8GE,
					Float8GetDatum(f->sort_key));
	}
	slot = table_slot_create(rel, NULL);
	locked = table_slot_create(rel, NULL);
	/* what the walk allocates goes with it; the rows' strings are the caller's */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_sched queue fetch",
								ALLOCSET_SMALL_SIZES);
	caller = MemoryContextSwitchTo(cxt);

	*stopped = false;
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	scan = index_beginscan(rel, index, snapshot, 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	while (n < f->limit && index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		ItemPointerData tid = slot->tts_tid;
		bool		newer;
		bool		isnull;

		if (!qualifies(f, &c, slot) ||
			sched_queue_held_elsewhere(DatumGetInt64(slot_getattr(slot, c.request_id, &isnull))))
			continue;
		if (f->before_lock != NULL)
		{
			bool		go_on;
			Datum		d = slot_getattr(slot, c.shape, &isnull);

			MemoryContextSwitchTo(caller);
			go_on = f->before_lock(f->before_lock_arg, rel, slot,
								   isnull ? 0 : DatumGetInt64(d));
			MemoryContextSwitchTo(cxt);
			if (!go_on)
			{
				*stopped = true;
				break;
			}
		}
		if (!sched_lock_skip_locked(rel, &tid, snapshot, locked, &newer))
			continue;
		/* a newer version than the one read: the recheck */
		if (newer && !qualifies(f, &c, locked))
			continue;
		MemoryContextSwitchTo(caller);
		row_of(locked, &c, &rows[n++]);
		MemoryContextSwitchTo(cxt);
	}
	index_endscan(scan);
	UnregisterSnapshot(snapshot);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	ExecDropSingleTupleTableSlot(slot);
	ExecDropSingleTupleTableSlot(locked);
	index_close(index, AccessShareLock);
	/* the lock on the table stays to the transaction's end, as a statement's */
	table_close(rel, NoLock);
	return n;
}
