/*
 * spi_util.h — statements prepared once and kept (SPI_keepplan), and SPI result accessors (spi_util.c).
 */
#ifndef PG_SCHED_SPI_UTIL_H
#define PG_SCHED_SPI_UTIL_H

#include "access/genam.h"
#include "nodes/lockoptions.h"
#include "executor/spi.h"
#include "utils/resowner.h"
#include "utils/uuid.h"

/*
 * A statement prepared on first use and kept for the life of the backend
 * (SPI_keepplan).  The plan cache re-plans it after invalidation, including after the
 * extension is dropped and created again.
 */
typedef struct SchedStatement
{
	const char *sql;
	int			nargs;
	Oid			argtypes[16];
	SPIPlanPtr	plan;
	bool		custom_plan;	/* plan for each call's values (CURSOR_OPT_CUSTOM_PLAN):
								 * for statements whose best plan depends on them */
	bool		generic_plan;	/* never plan for the values (CURSOR_OPT_GENERIC_PLAN):
								 * for statements whose values the planner would only
								 * look at to arrive at the same plan */
	bool		keyed;			/* reaches its rows by key: planned (and planned again)
								 * without sequential scans (spi_util.c) */
	bool		ordered;		/* walks an index in its ORDER BY: planned (and planned
								 * again) without sorts, bitmap or sequential scans */
} SchedStatement;

/* Installs the planner hook that plans the kept statements with their settings (jit
 * off; keyed, ordered: spi_util.c); from _PG_init. */
extern void sched_spi_install_planner_hook(void);

/* The kept plan of a statement, prepared on first use. */
extern SPIPlanPtr sched_spi_plan(SchedStatement *stmt);

/* Runs stmt (values as for sched_spi_exec, read_only as SPI's), sending each row to
 * dest as the executor makes it: nothing materialized, no cursor. */
extern void sched_spi_exec_into(SchedStatement *stmt, Datum *values, const char *nulls,
								bool read_only, DestReceiver *dest);

/* A cursor on a kept statement, planned and started with the settings every statement
 * of pg_sched runs with (spi_util.c); fails loudly when SPI cannot open it. */
extern Portal sched_spi_cursor_open(SchedStatement *stmt, Datum *values, const char *nulls,
									bool read_only);

/* Pins search_path to pg_catalog, pg_temp, the path in the proconfig of every other
 * function of schema sched, in a GUC nest level the caller ends with
 * AtEOXact_GUC(true, level) (or the abort of the (sub)transaction on error): for a
 * function called once per row that has no proconfig and runs SQL only now and then
 * (sched.pending_explanation, see spi_util.c). */
extern int	sched_pin_search_path(void);

/* Runs a kept statement; fails loudly unless SPI returns `expected`.  Returns in the
 * caller's memory context (SPI itself returns in its procedure context). */
extern void sched_spi_exec(SchedStatement *stmt, Datum *values, const char *nulls,
						   bool read_only, long count, int expected);

/* Runs a kept read-only statement with the latest snapshot (every committed
 * transaction, and this one's earlier commands), whatever the isolation level. */
extern void sched_spi_exec_latest(SchedStatement *stmt, Datum *values, const char *nulls,
								  int expected);

/* Whether this database's pg_sched has the schema of 0.2.0 (probed by
 * request.concurrency_key; the other 0.2.0 columns come with it): not while it is still
 * at 0.1.0, where this library serves the 0.1.0 functions until ALTER EXTENSION
 * pg_sched UPDATE.  Three syscache lookups. */
extern bool sched_schema_is_0_2(void);

/* The column of `rel` named `name` (1-based), or an internal error (for code that reads
 * a table through an index in C). */
extern AttrNumber sched_column_of(Relation rel, const char *name);
/* A column, by name, of the row in a slot of one of rel's rows: text (palloc'd, NULL when
 * NULL), or a value never NULL. */
extern char *sched_slot_text(TupleTableSlot *slot, Relation rel, const char *name);
extern Datum sched_slot_value(TupleTableSlot *slot, Relation rel, const char *name);

/*
 * A read of a table of schema sched through one of its indexes, in C (no plan to keep,
 * none a session could have made on an empty table): begin opens both with
 * AccessShareLock and scans with `snapshot` (registered by the caller, kept until end)
 * for the equality keys (attribute numbers of the index, 1-based); each next puts the
 * following row into slot; end closes it all.
 */
typedef struct SchedIndexScan
{
	Relation	rel;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	LOCKMODE	lockmode;		/* the table's */
	Snapshot	own_snapshot;	/* registered by sched_index_lock_row or _begin_fresh, or
								 * NULL */
} SchedIndexScan;

extern void sched_index_scan_begin(SchedIndexScan *s, const char *table, const char *index,
								   Snapshot snapshot, ScanKeyData *keys, int nkeys);
extern bool sched_index_scan_next(SchedIndexScan *s);
/* The scan's next index entry, read from the index alone: no table row is fetched, so
 * entries of versions the snapshot does not see count too (only entries marked dead,
 * whose versions no transaction sees, are skipped). */
extern bool sched_index_scan_next_entry(SchedIndexScan *s);
/* The scan's next row from the end of the index backwards. */
extern bool sched_index_scan_prev(SchedIndexScan *s);
/* The scan started again with other keys (the same snapshot; as many keys as it began
 * with). */
extern void sched_index_scan_rescan(SchedIndexScan *s, ScanKeyData *keys, int nkeys);
/* sched_index_scan_begin with the snapshot a statement would take now (this transaction's
 * own writes made visible), released by sched_index_scan_end. */
extern void sched_index_scan_begin_fresh(SchedIndexScan *s, const char *table,
										 const char *index, ScanKeyData *keys, int nkeys);
extern void sched_index_scan_end(SchedIndexScan *s);

/* A reader of single rows by key: the table and index opened once, for lookups each with
 * its own snapshot (sched_index_reader_get), ended by sched_index_scan_end. */
extern void sched_index_reader_open(SchedIndexScan *s, const char *table, const char *index);
/* The row of the equality keys (on a unique index) as snapshot sees it, into s->slot. */
extern bool sched_index_reader_get(SchedIndexScan *s, Snapshot snapshot, ScanKeyData *keys,
								   int nkeys);

/*
 * What SELECT ... FOR <mode> [SKIP LOCKED] of one row, found by the equality keys on a
 * unique index, does, in C: the table opened with RowShareLock, this transaction's own
 * writes made visible (CommandCounterIncrement) and the row read with the snapshot a
 * statement would take now, then its newest version locked, waiting for the
 * transaction that holds it (wait) or not.  Under REPEATABLE READ and SERIALIZABLE a
 * row changed since the transaction's snapshot fails with 40001, as the statement
 * would.  SCHED_ROW_LOCKED: the locked version is in s->slot until sched_index_scan_end;
 * SCHED_ROW_BUSY: another transaction holds it (only without wait); SCHED_ROW_GONE: no
 * such row (or it was deleted).  End the scan with sched_index_scan_end in every case.
 */
typedef enum SchedRowLockResult
{
	SCHED_ROW_LOCKED,
	SCHED_ROW_BUSY,
	SCHED_ROW_GONE
} SchedRowLockResult;

extern SchedRowLockResult sched_index_lock_row(SchedIndexScan *s, const char *table,
											   const char *index, ScanKeyData *keys,
											   int nkeys, LockTupleMode mode, bool wait);

/* The same on table rel and its unique index `index`, both open (RowShareLock or
 * stronger on rel), the row into slot (a slot of rel).  With `given` (registered by the
 * caller) the row is read with it, and no command boundary is made; with
 * InvalidSnapshot as sched_index_lock_row, and the snapshot it read with is
 * unregistered, or left registered in *kept for the caller to unregister (kept not
 * NULL). */
extern SchedRowLockResult sched_lock_row_by_key(Relation rel, Relation index,
												TupleTableSlot *slot, ScanKeyData *keys,
												int nkeys, LockTupleMode mode, bool wait,
												Snapshot given, Snapshot *kept);

/*
 * sched_index_lock_row, looking first at `hint` (NULL, or invalid: none), where the
 * row's newest version was seen a moment ago in this transaction, while it held a lock
 * on the table: when the tuple there has the keys, it is locked from there, the update
 * chain followed to the newest version (READ COMMITTED only); otherwise, or when that
 * version turns out deleted, invisible or changed by this transaction, the row is found
 * by the index.  Saves the index's descent when the hint is right.
 */
extern SchedRowLockResult sched_index_lock_row_hinted(SchedIndexScan *s, const char *table,
													  const char *index, ScanKeyData *keys,
													  int nkeys, LockTupleMode mode,
													  bool wait, ItemPointer hint);

/* Whether heap tuple tup (of rel) has the values of the equality keys on index's columns
 * (false when a key is on an expression). */
extern bool sched_tuple_has_keys(Relation rel, Relation index, HeapTuple tup,
								 ScanKeyData *keys, int nkeys);

/*
 * What LockRows does with a row under FOR UPDATE SKIP LOCKED, for a walk in C (the
 * queue's fetch, a worker's delivery): the row at tid (read with snapshot) locked
 * LockTupleExclusive into slot, its newest version under READ COMMITTED (*newer: not the
 * version read, whose filters the caller checks again); false, nothing locked, when
 * another transaction holds it, it was deleted, or this transaction changed it after the
 * snapshot.  Under REPEATABLE READ and SERIALIZABLE a row changed since the snapshot
 * fails with 40001.
 */
extern bool sched_lock_skip_locked(Relation rel, ItemPointer tid, Snapshot snapshot,
								   TupleTableSlot *slot, bool *newer);

/*
 * A copy of the version of a row of rel at tid (its t_self tid) when this transaction
 * holds it locked exclusively (FOR UPDATE, FOR NO KEY UPDATE) and has neither updated
 * nor deleted it since: then it is the row's newest version, and stays so until this
 * transaction changes it, since every other writer waits for the lock.  NULL otherwise
 * (the caller finds and locks the row by its key).  Saves finding again a row this
 * transaction locked a moment ago (the queue's fetch, a placement's pair lock).
 */
extern HeapTuple sched_row_version_held(Relation rel, ItemPointer tid);

/*
 * The columns `names` of the row in slot (of rel) into values/nulls, copied into the
 * current memory context (a varlena flattened), so they outlive the slot's row.
 */
extern void sched_slot_copy_columns(TupleTableSlot *slot, Relation rel,
									const char *const *names, int n, Datum *values,
									bool *nulls);

/* Column accessors on SPI_tuptable row `row` (1-based column numbers). */
extern Datum sched_spi_get(int row, int col, bool *isnull);
extern char *sched_spi_text(int row, int col);	/* NULL when SQL NULL */
extern int64 sched_spi_int64(int row, int col); /* 0 when SQL NULL */
/* An integer column's value (int2, int4 or int8: type typ) as int64; ERROR naming column
 * col for another type. */
extern int64 sched_datum_int64(Datum d, Oid typ, int col);

/* A one-dimensional array of n values of `type` (no NULLs), for a statement's parameter. */
extern Datum sched_array_of(Datum *elems, int n, Oid type);

/*
 * Runs fn(arg) in an internal subtransaction (a placement that is all or nothing: a
 * gang, a preemption): kept when fn returns true, rolled back when it returns false
 * (every write undone, every lock taken in it released), and on an ERROR rolled back
 * before the error goes on, so a caller's own subtransaction (a PL/pgSQL EXCEPTION
 * block) is never the one its handler rolls back.  fn runs in the caller's memory
 * context and resource owner: what it allocates survives a rollback; SPI results
 * do not.  Returns what fn returned.
 */
extern bool sched_in_subxact(bool (*fn) (void *arg), void *arg);

/* The uuid of an array of 16 bytes, formatted as uuid_out formats it. */
extern char *sched_uuid_out(const pg_uuid_t *u);

/*
 * A random (version 4) uuid, as gen_random_uuid makes it: its bytes from
 * pg_strong_random, drawn 4 kB at a time into a buffer of this backend (the generator's
 * cost per call is most of what a call of 16 bytes costs).
 */
extern void sched_uuid_random(pg_uuid_t *out);

#endif							/* PG_SCHED_SPI_UTIL_H */
