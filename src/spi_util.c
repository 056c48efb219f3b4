/*
 * spi_util.c — statements prepared once per backend and kept (SPI_keepplan), and checked
 * execution: any SPI result other than the expected one is an internal error.
 */
#include "postgres.h"

#include "spi_util.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"

SPIPlanPtr
sched_spi_plan(SchedStatement *stmt)
{
	if (stmt->plan == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare_cursor(stmt->sql, stmt->nargs, stmt->argtypes,
											  stmt->custom_plan ? CURSOR_OPT_CUSTOM_PLAN :
											  stmt->generic_plan ? CURSOR_OPT_GENERIC_PLAN : 0);

		if (plan == NULL)
			elog(ERROR, "pg_sched: SPI_prepare failed (%s) for: %s",
				 SPI_result_code_string(SPI_result), stmt->sql);
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "pg_sched: SPI_keepplan failed");
		stmt->plan = plan;
	}
	return stmt->plan;
}

/*
 * The settings every statement of pg_sched is planned with, inside a GUC nest level the
 * caller ends with AtEOXact_GUC(true, level) (or the abort of the (sub)transaction on
 * error).  They matter to the planner only (jit is decided when the plan is made), so
 * they are set only while a plan is made for a statement run here (sched_planner), not
 * at every run of a kept plan: a nest level costs a walk of every setting when it
 * closes (AtEOXact_GUC), and most runs plan nothing.
 *   - jit off: the statements are short, or scans of the fleet whose cost estimate
 *     passes jit_above_cost at a few thousand nodes, and compiling them cost more than
 *     running them (hundreds of ms for sched.pending at 10,000 nodes);
 *   - enable_seqscan off for the statements that reach their rows by key (keyed), so
 *     that a plan made while a table was small, and kept, still reaches one row through
 *     its index once the table has grown;
 *   - enable_sort and enable_bitmapscan off too for the statements that walk an index
 *     in order (ordered): a generic plan, which cannot know how many rows its filters
 *     keep, may otherwise expect one row, and fetch and sort the whole tenant.
 */
static int
enter_statement_settings(const SchedStatement *stmt)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (stmt->keyed || stmt->ordered)
		(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (stmt->ordered)
	{
		(void) set_config_option("enable_sort", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		(void) set_config_option("enable_bitmapscan", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	return nestlevel;
}

/* the kept statement being run by this backend (innermost), or NULL */
static const SchedStatement *running_statement = NULL;
static planner_hook_type prev_planner_hook = NULL;

/*
 * planner_hook: a plan made while a kept statement runs (its own, when the plan cache
 * makes or remakes it, and those of statements its execution plans in turn) is made with
 * that statement's settings, as if they had been set for the whole run.
 */
static PlannedStmt *
sched_planner(Query *parse, const char *query_string, int cursorOptions,
			  ParamListInfo boundParams)
{
	PlannedStmt *result;
	int			nestlevel = -1;

	if (running_statement != NULL)
		nestlevel = enter_statement_settings(running_statement);
	if (prev_planner_hook)
		result = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	else
		result = standard_planner(parse, query_string, cursorOptions, boundParams);
	if (nestlevel >= 0)
		AtEOXact_GUC(true, nestlevel);
	return result;
}

void
sched_spi_install_planner_hook(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = sched_planner;
}

/*
 * A function with a proconfig opens a GUC nest level at every call, and PostgreSQL 15
 * closes it by walking every setting (AtEOXact_GUC): 2-3 us, more than the work of a
 * call of sched.pending_explanation that finds its shape explained already, once per row
 * of the view sched.pending.  That function has no proconfig: it pins the path itself,
 * here, before it runs any SQL (a shape explained for the first time), so that no name a
 * caller's path could shadow is ever resolved with it; the rest of its calls resolve no
 * name.
 */
int
sched_pin_search_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * Runs a kept statement with `snapshot` (InvalidSnapshot: the usual one, as
 * SPI_execute_plan does); fails loudly unless SPI returns `expected`.
 */
static void
execute(SchedStatement *stmt, Datum *values, const char *nulls, Snapshot snapshot,
		bool read_only, long count, int expected)
{
	int			rc = 0;
	const SchedStatement *outer = running_statement;
	MemoryContext caller = CurrentMemoryContext;

	(void) sched_spi_plan(stmt);
	/* callers copy what they keep out of the previous result: free it, so long loops
	 * (dispatch_next) run in flat memory */
	if (SPI_tuptable != NULL)
	{
		SPI_freetuptable(SPI_tuptable);
		SPI_tuptable = NULL;
	}
	running_statement = stmt;
	PG_TRY();
	{
		rc = SPI_execute_snapshot(stmt->plan, values, nulls, snapshot, InvalidSnapshot,
								  read_only, true, count);
	}
	PG_FINALLY();
	{
		running_statement = outer;
	}
	PG_END_TRY();
	/* SPI returns in its procedure context, which lives until SPI_finish: a loop that
	 * allocates per iteration in a context it resets would leak into it */
	MemoryContextSwitchTo(caller);
	if (rc != expected)
		elog(ERROR, "pg_sched: SPI returned %s, expected %s, for: %s",
			 SPI_result_code_string(rc), SPI_result_code_string(expected), stmt->sql);
}

void
sched_spi_exec_into(SchedStatement *stmt, Datum *values, const char *nulls, bool read_only,
					DestReceiver *dest)
{
	const SchedStatement *outer = running_statement;
	MemoryContext caller = CurrentMemoryContext;
	ParamListInfo params = makeParamList(stmt->nargs);
	SPIExecuteOptions options;
	int			rc;
	int			i;

	for (i = 0; i < stmt->nargs; i++)
	{
		params->params[i].value = values[i];
		params->params[i].isnull = nulls != NULL && nulls[i] == 'n';
		params->params[i].pflags = PARAM_FLAG_CONST;
		params->params[i].ptype = stmt->argtypes[i];
	}
	memset(&options, 0, sizeof(options));
	options.params = params;
	options.read_only = read_only;
	options.dest = dest;
	(void) sched_spi_plan(stmt);
	running_statement = stmt;
	PG_TRY();
	{
		rc = SPI_execute_plan_extended(stmt->plan, &options);
	}
	PG_FINALLY();
	{
		running_statement = outer;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller);
	if (rc < 0)
		elog(ERROR, "pg_sched: SPI returned %s for: %s", SPI_result_code_string(rc), stmt->sql);
}

Portal
sched_spi_cursor_open(SchedStatement *stmt, Datum *values, const char *nulls, bool read_only)
{
	const SchedStatement *outer = running_statement;
	Portal		portal = NULL;

	(void) sched_spi_plan(stmt);
	running_statement = stmt;
	PG_TRY();
	{
		portal = SPI_cursor_open(NULL, stmt->plan, values, nulls, read_only);
	}
	PG_FINALLY();
	{
		running_statement = outer;
	}
	PG_END_TRY();
	if (portal == NULL)
		elog(ERROR, "pg_sched: could not open a cursor (%s) for: %s",
			 SPI_result_code_string(SPI_result), stmt->sql);
	return portal;
}

void
sched_spi_exec(SchedStatement *stmt, Datum *values, const char *nulls,
			   bool read_only, long count, int expected)
{
	execute(stmt, values, nulls, InvalidSnapshot, read_only, count, expected);
}

void
sched_spi_exec_latest(SchedStatement *stmt, Datum *values, const char *nulls, int expected)
{
	/* what every transaction committed so far sees, whatever the isolation level (as the
	 * referential-integrity checks do), and this transaction's own earlier commands */
	execute(stmt, values, nulls, GetLatestSnapshot(), true, 0, expected);
}

bool
sched_schema_is_0_2(void)
{
	Oid			nsp = get_namespace_oid("sched", true);
	Oid			rel = OidIsValid(nsp) ? get_relname_relid("request", nsp) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, "concurrency_key") != InvalidAttrNumber;
}

Datum
sched_spi_get(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

char *
sched_spi_text(int row, int col)
{
	bool		isnull;
	Datum		d = sched_spi_get(row, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

int64
sched_spi_int64(int row, int col)
{
	bool		isnull;
	Datum		d = sched_spi_get(row, col, &isnull);

	return isnull ? 0 : sched_datum_int64(d, SPI_gettypeid(SPI_tuptable->tupdesc, col), col);
}

int64
sched_datum_int64(Datum d, Oid typ, int col)
{
	switch (typ)
	{
		case INT8OID:
			return DatumGetInt64(d);
		case INT4OID:
			return DatumGetInt32(d);
		case INT2OID:
			return DatumGetInt16(d);
		default:
			elog(ERROR, "pg_sched: column %d has type %u, expected an integer", col, typ);
	}
	return 0;					/* keep compiler quiet */
}

char *
sched_uuid_out(const pg_uuid_t *u)
{
	static const char hex[] = "0123456789abcdef";
	char	   *s = palloc(2 * UUID_LEN + 5);
	char	   *p = s;
	int			i;

	for (i = 0; i < UUID_LEN; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u->data[i] >> 4];
		*p++ = hex[u->data[i] & 0x0F];
	}
	*p = '\0';
	return s;
}

#define RANDOM_POOL_BYTES 4096

void
sched_uuid_random(pg_uuid_t *out)
{
	static uint8 pool[RANDOM_POOL_BYTES];
	static int	left = 0;		/* unused bytes at the end of pool */
	uint8	   *next;

	if (left < UUID_LEN)
	{
		if (!pg_strong_random(pool, sizeof(pool)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random values")));
		left = sizeof(pool);
	}
	next = pool + sizeof(pool) - left;
	memcpy(out->data, next, UUID_LEN);
	memset(next, 0, UUID_LEN);	/* handed out once */
	left -= UUID_LEN;
	/* version 4, variant RFC 4122 (gen_random_uuid's bits) */
	out->data[6] = (out->data[6] & 0x0f) | 0x40;
	out->data[8] = (out->data[8] & 0x3f) | 0x80;
}

Datum
sched_array_of(Datum *elems, int n, Oid type)
{
	int16		len;
	bool		byval;
	char		align;

	get_typlenbyvalalign(type, &len, &byval, &align);
	return PointerGetDatum(construct_array(elems, Max(n, 0), type, len, byval, align));
}

bool
sched_in_subxact(bool (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool keep = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		keep = fn(arg);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(e);
	}
	PG_END_TRY();
	if (keep)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return keep;
}

/*
 * The column of `rel` named `name` (1-based), or an internal error.  The last answer for
 * each (table, name pointer) is remembered in a small direct-mapped cache and used after
 * checking that the table's column at that number still has that name and is not
 * dropped, so a cached answer is never wrong (a table altered, a name pointer reused
 * for another name: the check fails and the columns are searched again).
 */
#define COLUMN_CACHE_SIZE 256

static struct
{
	Oid			relid;
	const char *name;
	AttrNumber	attnum;
}			column_cache[COLUMN_CACHE_SIZE];

AttrNumber
sched_column_of(Relation rel, const char *name)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Oid			relid = RelationGetRelid(rel);
	uint32		h = (uint32) (((uint64) (uintptr_t) name * UINT64CONST(0x9E3779B97F4A7C15) + relid) >> 40)
		% COLUMN_CACHE_SIZE;
	int			i;

	if (column_cache[h].relid == relid && column_cache[h].name == name &&
		column_cache[h].attnum > 0 && column_cache[h].attnum <= desc->natts)
	{
		Form_pg_attribute att = TupleDescAttr(desc, column_cache[h].attnum - 1);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return column_cache[h].attnum;
	}
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
		{
			column_cache[h].relid = relid;
			column_cache[h].name = name;
			column_cache[h].attnum = att->attnum;
			return att->attnum;
		}
	}
	elog(ERROR, "pg_sched: sched.%s has no column %s", RelationGetRelationName(rel), name);
	return InvalidAttrNumber;	/* keep compiler quiet */
}

void
sched_slot_copy_columns(TupleTableSlot *slot, Relation rel, const char *const *names, int n,
						Datum *values, bool *nulls)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		AttrNumber	att = sched_column_of(rel, names[i]);
		Form_pg_attribute a = TupleDescAttr(RelationGetDescr(rel), att - 1);

		values[i] = slot_getattr(slot, att, &nulls[i]);
		if (nulls[i])
			continue;
		values[i] = a->attlen == -1 ? PointerGetDatum(PG_DETOAST_DATUM_COPY(values[i]))
			: datumCopy(values[i], a->attbyval, a->attlen);
	}
}

/* The text column `name` of the row in `slot` (of `rel`), palloc'd; NULL when NULL. */
char *
sched_slot_text(TupleTableSlot *slot, Relation rel, const char *name)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, sched_column_of(rel, name), &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/* The column `name` of the row in `slot` (of `rel`), which is never NULL (an internal
 * error if it is). */
Datum
sched_slot_value(TupleTableSlot *slot, Relation rel, const char *name)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, sched_column_of(rel, name), &isnull);

	if (isnull)
		elog(ERROR, "pg_sched: sched.%s.%s is NULL", RelationGetRelationName(rel), name);
	return d;
}

static void
index_scan_open(SchedIndexScan *s, const char *table, const char *index, Snapshot snapshot,
				ScanKeyData *keys, int nkeys, LOCKMODE lockmode)
{
	Oid			nsp = get_namespace_oid("sched", false);
	Oid			relid = get_relname_relid(table, nsp);
	Oid			indexid = get_relname_relid(index, nsp);

	if (!OidIsValid(relid) || !OidIsValid(indexid))
		elog(ERROR, "pg_sched: sched.%s or its index %s is missing", table, index);
	s->lockmode = lockmode;
	s->own_snapshot = NULL;
	s->rel = table_open(relid, lockmode);
	s->index = index_open(indexid, AccessShareLock);
	s->slot = table_slot_create(s->rel, NULL);
	s->scan = NULL;
	if (snapshot == InvalidSnapshot)
		return;					/* (sched_index_lock_row: its scan is its own) */
	s->scan = index_beginscan(s->rel, s->index, snapshot, nkeys, 0);
	index_rescan(s->scan, keys, nkeys, NULL, 0);
}

void
sched_index_scan_begin(SchedIndexScan *s, const char *table, const char *index,
					   Snapshot snapshot, ScanKeyData *keys, int nkeys)
{
	index_scan_open(s, table, index, snapshot, keys, nkeys, AccessShareLock);
}

void
sched_index_reader_open(SchedIndexScan *s, const char *table, const char *index)
{
	index_scan_open(s, table, index, InvalidSnapshot, NULL, 0, AccessShareLock);
}

/* The first row of keys in index, as snapshot sees it, into slot. */
static bool
index_get_first(Relation rel, Relation index, Snapshot snapshot, ScanKeyData *keys, int nkeys,
				TupleTableSlot *slot)
{
	IndexScanDesc scan = index_beginscan(rel, index, snapshot, nkeys, 0);
	bool		found;

	index_rescan(scan, keys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

bool
sched_index_reader_get(SchedIndexScan *s, Snapshot snapshot, ScanKeyData *keys, int nkeys)
{
	return index_get_first(s->rel, s->index, snapshot, keys, nkeys, s->slot);
}

SchedRowLockResult
sched_lock_row_by_key(Relation rel, Relation index, TupleTableSlot *slot, ScanKeyData *keys,
					  int nkeys, LockTupleMode mode, bool wait, Snapshot given, Snapshot *kept)
{
	Snapshot	snapshot = given;
	ItemPointerData tid;
	TM_FailureData tmfd;
	TM_Result	result;
	bool		found;

	if (given == InvalidSnapshot)
	{
		CommandCounterIncrement();
		snapshot = RegisterSnapshot(GetTransactionSnapshot());
	}
	else
		kept = NULL;			/* the caller's, not to be released here */
	found = index_get_first(rel, index, snapshot, keys, nkeys, slot);
	if (kept != NULL)
		*kept = snapshot;
	if (!found)
	{
		if (kept == NULL && given == InvalidSnapshot)
			UnregisterSnapshot(snapshot);
		return SCHED_ROW_GONE;
	}
	tid = slot->tts_tid;
	/* as ExecLockRows: the newest version under READ COMMITTED, none other after */
	result = table_tuple_lock(rel, &tid, snapshot, slot, GetCurrentCommandId(true),
							  mode, wait ? LockWaitBlock : LockWaitSkip,
							  IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							  &tmfd);
	if (kept == NULL && given == InvalidSnapshot)
		UnregisterSnapshot(snapshot);
	switch (result)
	{
		case TM_Ok:
			return SCHED_ROW_LOCKED;
		case TM_WouldBlock:
			return SCHED_ROW_BUSY;
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent delete")));
			return SCHED_ROW_GONE;
		case TM_Updated:
			/* (only without TUPLE_LOCK_FLAG_FIND_LAST_VERSION) */
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
			break;
		case TM_SelfModified:
			/* changed by this transaction after the snapshot: not after the increment */
			elog(ERROR, "pg_sched: sched.%s row changed by this command",
				 RelationGetRelationName(rel));
			break;
		default:
			elog(ERROR, "pg_sched: unexpected result %d locking a row of sched.%s",
				 (int) result, RelationGetRelationName(rel));
	}
	return SCHED_ROW_GONE;		/* keep compiler quiet */
}

bool
sched_lock_skip_locked(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot *slot,
					   bool *newer)
{
	TM_FailureData tmfd;
	TM_Result	result;

	result = table_tuple_lock(rel, tid, snapshot, slot, GetCurrentCommandId(true),
							  LockTupleExclusive, LockWaitSkip,
							  IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							  &tmfd);
	switch (result)
	{
		case TM_Ok:
			*newer = tmfd.traversed;
			return true;
		case TM_WouldBlock:
		case TM_SelfModified:
			return false;
		case TM_Deleted:
		case TM_Updated:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
			return false;
		case TM_Invisible:
			elog(ERROR, "attempted to lock invisible tuple");
			break;
		default:
			elog(ERROR, "pg_sched: unexpected result %d locking a row of sched.%s",
				 (int) result, RelationGetRelationName(rel));
	}
	return false;				/* keep compiler quiet */
}

HeapTuple
sched_row_version_held(Relation rel, ItemPointer tid)
{
	HeapTupleData tuple;
	HeapTuple	copy = NULL;
	Buffer		buf;

	if (tid == NULL || !ItemPointerIsValid(tid))
		return NULL;
	tuple.t_self = *tid;
	/* (a version this transaction locked is neither pruned nor its slot reused while
	 * the lock holds; a tid from elsewhere may find any tuple, or none) */
	if (heap_fetch(rel, SnapshotAny, &tuple, &buf, true))
	{
		uint16		infomask;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		infomask = tuple.t_data->t_infomask;
		if (!(infomask & (HEAP_XMAX_INVALID | HEAP_XMAX_IS_MULTI)) &&
			HEAP_XMAX_IS_LOCKED_ONLY(infomask) && HEAP_XMAX_IS_EXCL_LOCKED(infomask) &&
			TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmax(tuple.t_data)))
			copy = heap_copytuple(&tuple);
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	}
	if (BufferIsValid(buf))
		ReleaseBuffer(buf);
	return copy;
}

bool
sched_tuple_has_keys(Relation rel, Relation index, HeapTuple tup, ScanKeyData *keys, int nkeys)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			k;

	for (k = 0; k < nkeys; k++)
	{
		AttrNumber	att = index->rd_index->indkey.values[keys[k].sk_attno - 1];
		bool		isnull;
		Datum		d;

		if (att == InvalidAttrNumber)
			return false;		/* an expression: not compared here */
		d = heap_getattr(tup, att, desc, &isnull);
		if (isnull || !DatumGetBool(FunctionCall2Coll(&keys[k].sk_func, keys[k].sk_collation,
													  d, keys[k].sk_argument)))
			return false;
	}
	return true;
}

/* The hinted lock of sched_index_lock_row_hinted; SCHED_ROW_GONE: look it up by key. */
static SchedRowLockResult
lock_row_at(SchedIndexScan *s, ScanKeyData *keys, int nkeys, LockTupleMode mode, bool wait,
			ItemPointer hint)
{
	HeapTupleData tuple;
	Buffer		buf;
	ItemPointerData tid = *hint;
	TM_FailureData tmfd;
	TM_Result	result;

	/* (the block is there: the caller saw the hint under a lock on the table it still
	 * holds, which no truncation gets past; heap_fetch checks the line pointer) */
	tuple.t_self = tid;
	if (!heap_fetch(s->rel, SnapshotAny, &tuple, &buf, true))
	{
		if (BufferIsValid(buf))
			ReleaseBuffer(buf);
		return SCHED_ROW_GONE;
	}
	/* the key columns, read under the pin (a pinned page is not pruned, and a tuple's
	 * data is never changed in place) */
	if (!sched_tuple_has_keys(s->rel, s->index, &tuple, keys, nkeys))
	{
		ReleaseBuffer(buf);
		return SCHED_ROW_GONE;
	}
	/* as sched_lock_row_by_key: this transaction's writes made visible first */
	CommandCounterIncrement();
	s->own_snapshot = RegisterSnapshot(GetTransactionSnapshot());
	result = table_tuple_lock(s->rel, &tid, s->own_snapshot, s->slot, GetCurrentCommandId(true),
							  mode, wait ? LockWaitBlock : LockWaitSkip,
							  TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	ReleaseBuffer(buf);			/* (held through the lock: the hint's slot stays) */
	if (result == TM_Ok)
		return SCHED_ROW_LOCKED;
	if (result == TM_WouldBlock)
		return SCHED_ROW_BUSY;
	/* deleted (the key may be in a row inserted since), invisible, or changed by this
	 * command: by the index, as without a hint */
	ExecClearTuple(s->slot);
	UnregisterSnapshot(s->own_snapshot);
	s->own_snapshot = NULL;
	return SCHED_ROW_GONE;
}

SchedRowLockResult
sched_index_lock_row_hinted(SchedIndexScan *s, const char *table, const char *index,
							ScanKeyData *keys, int nkeys, LockTupleMode mode, bool wait,
							ItemPointer hint)
{
	SchedRowLockResult r;

	if (hint == NULL || !ItemPointerIsValid(hint) || IsolationUsesXactSnapshot())
		return sched_index_lock_row(s, table, index, keys, nkeys, mode, wait);
	index_scan_open(s, table, index, InvalidSnapshot, keys, 0, RowShareLock);
	r = lock_row_at(s, keys, nkeys, mode, wait, hint);
	if (r != SCHED_ROW_GONE)
		return r;
	return sched_lock_row_by_key(s->rel, s->index, s->slot, keys, nkeys, mode, wait,
								 InvalidSnapshot, &s->own_snapshot);
}

SchedRowLockResult
sched_index_lock_row(SchedIndexScan *s, const char *table, const char *index,
					 ScanKeyData *keys, int nkeys, LockTupleMode mode, bool wait)
{
	/* (the scan opened for sched_index_scan_end to close: its own scan is not used) */
	index_scan_open(s, table, index, InvalidSnapshot, keys, 0, RowShareLock);
	return sched_lock_row_by_key(s->rel, s->index, s->slot, keys, nkeys, mode, wait,
								 InvalidSnapshot, &s->own_snapshot);
}

bool
sched_index_scan_next(SchedIndexScan *s)
{
	return index_getnext_slot(s->scan, ForwardScanDirection, s->slot);
}

bool
sched_index_scan_next_entry(SchedIndexScan *s)
{
	return index_getnext_tid(s->scan, ForwardScanDirection) != NULL;
}

bool
sched_index_scan_prev(SchedIndexScan *s)
{
	return index_getnext_slot(s->scan, BackwardScanDirection, s->slot);
}

void
sched_index_scan_rescan(SchedIndexScan *s, ScanKeyData *keys, int nkeys)
{
	index_rescan(s->scan, keys, nkeys, NULL, 0);
}

void
sched_index_scan_begin_fresh(SchedIndexScan *s, const char *table, const char *index,
							 ScanKeyData *keys, int nkeys)
{
	Snapshot	snapshot;

	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	index_scan_open(s, table, index, snapshot, keys, nkeys, AccessShareLock);
	s->own_snapshot = snapshot;
}

void
sched_index_scan_end(SchedIndexScan *s)
{
	if (s->scan != NULL)
		index_endscan(s->scan);
	ExecDropSingleTupleTableSlot(s->slot);
	index_close(s->index, AccessShareLock);
	/* a table whose row was locked keeps its lock to the transaction's end */
	table_close(s->rel, s->lockmode == AccessShareLock ? AccessShareLock : NoLock);
	if (s->own_snapshot != NULL)
		UnregisterSnapshot(s->own_snapshot);
}
