/*
 * row_write.c — rows of the tables of schema sched inserted and updated without a
 * statement: what an INSERT of one row, or an UPDATE of one row found by key, does, in
 * C, for the rows every placement writes (reservation_rows.c).
 *
 * Why: a statement starts an executor for its plan at every run; for the six writes of
 * a placement that start (plan nodes, projections, the CHECK constraints, request's
 * generated column and its trigger's WHEN clause parsed from their stored trees again)
 * cost more than the writes themselves (bench/NOTES.md, "nineteenth sitting").
 *
 * What a write here does, as the statement did:
 *  - the table is opened with RowExclusiveLock, and kept locked to the transaction's end;
 *  - an update finds its row by a unique key with the snapshot a statement would take
 *    when the writer opened (this transaction's earlier writes made visible; one
 *    snapshot and one command id for a whole write) and locks its newest version as
 *    UPDATE does (FOR NO KEY UPDATE, waiting for a transaction that holds it; under
 *    REPEATABLE READ a row changed since the snapshot fails with 40001), then changes
 *    that version's columns;
 *  - NOT NULL and the table's CHECK constraint (its one C function, row_checks.c) are
 *    enforced with the errors a statement gives;
 *  - the heap is written by heap_insert / heap_update (WAL, statistics, TOAST as for a
 *    statement), and every index gets its entry (partial ones by their predicates,
 *    unique ones checked: 23505), except after an update that stayed on its page with
 *    no indexed column changed (HOT);
 *  - what the table's own triggers do is done here or by the caller: the fleet mirrors'
 *    change log for node and worker (sched_fleet_row_updated, once the new version is
 *    written, while the row is still locked), the tenants' sums for attempts (the
 *    caller: sched_tenant_live_add).
 *
 * Guard: a table is written this way only when it is exactly as pg_sched made it: an
 * ordinary table without rules or row security, with exactly pg_sched's triggers, its
 * one CHECK constraint (or none), no stored generated column but the one named, and,
 * for inserts, no column but those the caller fills (a column added later would get its
 * default from a statement).  Otherwise sched_row_writer_open says no, and the caller
 * writes with its statement, which fires what was added.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "fleet_mirror.h"
#include "row_write.h"
#include "spi_util.h"

static bool
name_listed(const char *name, const char *const *list)
{
	for (; list != NULL && *list != NULL; list++)
		if (strcmp(name, *list) == 0)
			return true;
	return false;
}

static int
list_length_of(const char *const *list)
{
	int			n = 0;

	for (; list != NULL && *list != NULL; list++)
		n++;
	return n;
}

/* Whether w->rel is as shape says pg_sched made it (the guard, above); fills
 * w->insert_attnums. */
static bool
table_as_made(SchedRowWriter *w)
{
	const SchedTableShape *shape = w->shape;
	Relation	rel = w->rel;
	TupleDesc	desc = RelationGetDescr(rel);
	TriggerDesc *trig = rel->trigdesc;
	int			ntriggers = trig == NULL ? 0 : trig->numtriggers;
	int			nchecks = desc->constr == NULL ? 0 : desc->constr->num_check;
	int			i;

	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relhasrules ||
		rel->rd_rel->relrowsecurity)
		return false;
	if (ntriggers != list_length_of(shape->triggers))
		return false;
	for (i = 0; i < ntriggers; i++)
		if (!name_listed(trig->triggers[i].tgname, shape->triggers))
			return false;
	if (shape->check == NULL ? nchecks != 0
		: nchecks != 1 || strcmp(desc->constr->check[0].ccname, shape->check_name) != 0)
		return false;

	w->ninsert = list_length_of(shape->insert_columns);
	if (w->ninsert > SCHED_ROW_COLUMNS_MAX)
		elog(ERROR, "pg_sched: too many columns to insert into sched.%s", shape->table);
	for (i = 0; i < w->ninsert; i++)
		w->insert_attnums[i] = InvalidAttrNumber;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		int			k;

		if (att->attisdropped)
			continue;
		if (att->attgenerated != '\0' &&
			(shape->generated == NULL || strcmp(NameStr(att->attname), shape->generated) != 0))
			return false;
		if (shape->insert_columns == NULL)
			continue;
		for (k = 0; k < w->ninsert; k++)
			if (strcmp(NameStr(att->attname), shape->insert_columns[k]) == 0)
				break;
		if (k == w->ninsert)
			return false;		/* a column the insert would not fill */
		w->insert_attnums[k] = att->attnum;
	}
	for (i = 0; i < w->ninsert; i++)
		if (w->insert_attnums[i] == InvalidAttrNumber)
			return false;		/* a column the insert fills is gone */
	return true;
}

bool
sched_row_writer_open(SchedRowWriter *w, const SchedTableShape *shape, EState *estate)
{
	Oid			relid = get_relname_relid(shape->table, get_namespace_oid("sched", false));

	if (!OidIsValid(relid))
		elog(ERROR, "pg_sched: sched.%s is missing", shape->table);
	memset(w, 0, sizeof(*w));
	w->shape = shape;
	w->estate = estate;
	w->rel = table_open(relid, RowExclusiveLock);
	if (!table_as_made(w))
	{
		table_close(w->rel, NoLock);
		w->rel = NULL;
		return false;
	}
	/*
	 * One snapshot for the writer's reads, taken after the caller's writes were made
	 * visible, and no command boundary until the caller's last write: every row this
	 * write changes then carries one command id, and the rows it updates that this
	 * transaction wrote before share one combo command id per earlier command (a
	 * boundary per row read made one per row, kept to the transaction's end).  A write
	 * reads no row it wrote itself.
	 */
	CommandCounterIncrement();
	w->snapshot = RegisterSnapshot(GetTransactionSnapshot());
	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, w->rel, 0, NULL, 0);
	ExecOpenIndices(w->rri, false);
	w->slot = MakeSingleTupleTableSlot(RelationGetDescr(w->rel), &TTSOpsHeapTuple);
	w->read_slot = table_slot_create(w->rel, NULL);
	return true;
}

void
sched_row_writer_close(SchedRowWriter *w)
{
	if (w->rel == NULL)
		return;
	ExecDropSingleTupleTableSlot(w->slot);
	ExecDropSingleTupleTableSlot(w->read_slot);
	UnregisterSnapshot(w->snapshot);
	ExecCloseIndices(w->rri);
	/* the lock stays to the transaction's end, as a statement's */
	table_close(w->rel, NoLock);
	w->rel = NULL;
}

Relation
sched_row_writer_index(SchedRowWriter *w, const char *name)
{
	int			i;

	for (i = 0; i < w->rri->ri_NumIndices; i++)
		if (strcmp(RelationGetRelationName(w->rri->ri_IndexRelationDescs[i]), name) == 0)
			return w->rri->ri_IndexRelationDescs[i];
	elog(ERROR, "pg_sched: sched.%s has no index %s", w->shape->table, name);
	return NULL;				/* keep compiler quiet */
}

HeapTuple
sched_row_lock(SchedRowWriter *w, const char *index, ScanKeyData *keys, int nkeys)
{
	HeapTuple	tup = NULL;

	if (sched_lock_row_by_key(w->rel, sched_row_writer_index(w, index), w->read_slot, keys, nkeys,
							  LockTupleNoKeyExclusive, true, w->snapshot, NULL) == SCHED_ROW_LOCKED)
	{
		tup = ExecCopySlotHeapTuple(w->read_slot);
		tup->t_self = w->read_slot->tts_tid;
		tup->t_tableOid = RelationGetRelid(w->rel);
	}
	ExecClearTuple(w->read_slot);
	return tup;
}

HeapTuple
sched_row_lock_held(SchedRowWriter *w, ItemPointer held, const char *index, ScanKeyData *keys,
					int nkeys)
{
	HeapTuple	tup = sched_row_version_held(w->rel, held);

	if (tup != NULL)
	{
		if (sched_tuple_has_keys(w->rel, sched_row_writer_index(w, index), tup, keys, nkeys))
			return tup;
		heap_freetuple(tup);
	}
	return sched_row_lock(w, index, keys, nkeys);
}

/* The table's NOT NULL constraints, then its CHECK constraint, on tup (ExecConstraints'
 * order and errors). */
static void
check_row(SchedRowWriter *w, HeapTuple tup)
{
	TupleDesc	desc = RelationGetDescr(w->rel);
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attnotnull && !att->attisdropped && heap_attisnull(tup, i + 1, desc))
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
							NameStr(att->attname), RelationGetRelationName(w->rel)),
					 errtablecol(w->rel, att->attnum)));
	}
	if (w->shape->check != NULL)
		(void) DirectFunctionCall1(w->shape->check, heap_copy_tuple_as_datum(tup, desc));
}

static void
add_index_entries(SchedRowWriter *w, HeapTuple tup)
{
	if (w->rri->ri_NumIndices == 0)
		return;
	ExecStoreHeapTuple(tup, w->slot, false);
	(void) ExecInsertIndexTuples(w->rri, w->slot, w->estate, false, false, NULL, NIL);
	ExecClearTuple(w->slot);
	ResetPerTupleExprContext(w->estate);
}

HeapTuple
sched_row_update(SchedRowWriter *w, HeapTuple oldtup, const char *const *names,
				 const Datum *values, const bool *nulls, int n)
{
	int			attnums[SCHED_ROW_COLUMNS_MAX];
	HeapTuple	newtup;
	int			i;

	Assert(n <= SCHED_ROW_COLUMNS_MAX);
	for (i = 0; i < n; i++)
		attnums[i] = sched_column_of(w->rel, names[i]);
	newtup = heap_modify_tuple_by_cols(oldtup, RelationGetDescr(w->rel), n, attnums,
									   (Datum *) values, (bool *) nulls);
	newtup->t_tableOid = RelationGetRelid(w->rel);
	check_row(w, newtup);
	simple_heap_update(w->rel, &oldtup->t_self, newtup);
	if (!HeapTupleIsHeapOnly(newtup))
		add_index_entries(w, newtup);
	/* the change log's entry, with the version written (newtup->t_self) */
	if (w->shape->fleet_changes)
		sched_fleet_row_updated(w->rel, oldtup, newtup);
	return newtup;
}

void
sched_row_insert(SchedRowWriter *w, const Datum *values, const bool *nulls)
{
	TupleDesc	desc = RelationGetDescr(w->rel);
	Datum	   *v = palloc(sizeof(Datum) * desc->natts);
	bool	   *isnull = palloc(sizeof(bool) * desc->natts);
	HeapTuple	tup;
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		v[i] = (Datum) 0;
		isnull[i] = true;
	}
	for (i = 0; i < w->ninsert; i++)
	{
		v[w->insert_attnums[i] - 1] = values[i];
		isnull[w->insert_attnums[i] - 1] = nulls[i];
	}
	tup = heap_form_tuple(desc, v, isnull);
	tup->t_tableOid = RelationGetRelid(w->rel);
	check_row(w, tup);
	simple_heap_insert(w->rel, tup);
	add_index_entries(w, tup);
	heap_freetuple(tup);
	pfree(v);
	pfree(isnull);
}

bool
sched_row_exists(SchedRowWriter *w, const char *index, ScanKeyData *keys, int nkeys)
{
	IndexScanDesc scan;
	bool		found;

	scan = index_beginscan(w->rel, sched_row_writer_index(w, index), w->snapshot, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, w->read_slot);
	index_endscan(scan);
	ExecClearTuple(w->read_slot);
	return found;
}
