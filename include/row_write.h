/*
 * row_write.h — rows of the tables of schema sched inserted and updated without a
 * statement (row_write.c).
 */
#ifndef PG_SCHED_ROW_WRITE_H
#define PG_SCHED_ROW_WRITE_H

#include "access/htup.h"
#include "access/skey.h"
#include "fmgr.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#define SCHED_ROW_COLUMNS_MAX 32

/*
 * A table as pg_sched made it: what a direct write must find on it to do what a
 * statement would (the guard, row_write.c).
 */
typedef struct SchedTableShape
{
	const char *table;
	const char *const *triggers;	/* the names of its triggers, NULL-terminated */
	PGFunction	check;			/* the function of its one CHECK constraint, or NULL */
	const char *check_name;		/* that constraint's name */
	const char *generated;		/* its one stored generated column, or NULL */
	bool		fleet_changes;	/* updates are logged for the fleet mirrors (node, worker) */
	/* the columns an insert fills, NULL-terminated (NULL: the writer only updates): a
	 * table with any other column is not as made */
	const char *const *insert_columns;
} SchedTableShape;

/* One table opened for direct writes. */
typedef struct SchedRowWriter
{
	const SchedTableShape *shape;
	Relation	rel;
	ResultRelInfo *rri;			/* its indexes, opened */
	EState	   *estate;			/* of the whole write: index predicates run in it */
	TupleTableSlot *slot;		/* rows written (heap tuples) */
	TupleTableSlot *read_slot;	/* rows read through an index (the table's slot) */
	Snapshot	snapshot;		/* what its reads see: taken at open */
	int			ninsert;
	AttrNumber	insert_attnums[SCHED_ROW_COLUMNS_MAX];	/* of shape->insert_columns */
} SchedRowWriter;

/*
 * Opens table `shape->table` of schema sched with RowExclusiveLock (the lock an INSERT or
 * UPDATE takes) and its indexes, in estate (CreateExecutorState; freed by the caller
 * after closing every writer).  Returns false, with nothing opened but the table's lock
 * (which a statement on it takes too), when the table is not as pg_sched made it: then
 * the caller writes with a statement, which fires what was added to it.
 */
extern bool sched_row_writer_open(SchedRowWriter *w, const SchedTableShape *shape,
								  EState *estate);
extern void sched_row_writer_close(SchedRowWriter *w);

/* The writer's index named `name` (opened with the table's indexes), or an error. */
extern Relation sched_row_writer_index(SchedRowWriter *w, const char *name);

/*
 * The newest version of the row found by equality keys on unique index `index` (read
 * with the writer's snapshot, taken at open: the row must not be one this write wrote),
 * locked as UPDATE locks the row it updates (FOR NO KEY UPDATE, waiting for the
 * transaction that holds it; 40001 under REPEATABLE READ when it changed since the
 * snapshot): a copy, its t_self the locked version.  NULL when there is no such row.
 */
extern HeapTuple sched_row_lock(SchedRowWriter *w, const char *index, ScanKeyData *keys,
								int nkeys);

/*
 * sched_row_lock, without finding the row again when `held` (NULL, or invalid: unknown)
 * is the version of it this transaction locked exclusively and has not changed since
 * (sched_row_version_held), and that version has the keys: that version, the newest,
 * as sched_row_lock would return it.
 */
extern HeapTuple sched_row_lock_held(SchedRowWriter *w, ItemPointer held, const char *index,
									 ScanKeyData *keys, int nkeys);

/*
 * UPDATE of the locked row oldtup (from sched_row_lock): columns names[0..n) set to
 * values/nulls, the rest kept; the table's NOT NULL and CHECK constraints enforced, the
 * fleet mirrors' change log told (fleet_changes), the new version written, and index
 * entries added unless it went on the same page without an indexed column changed
 * (HOT).  Returns the new version (its t_self set).
 */
extern HeapTuple sched_row_update(SchedRowWriter *w, HeapTuple oldtup, const char *const *names,
								  const Datum *values, const bool *nulls, int n);

/*
 * INSERT of one row: values/nulls in the order of shape->insert_columns; its
 * constraints enforced, the row written, its index entries added (a unique index
 * refuses a duplicate with 23505, as for a statement).
 */
extern void sched_row_insert(SchedRowWriter *w, const Datum *values, const bool *nulls);

/* Whether the writer's snapshot sees a row with these equality keys on index `index`
 * of the writer's table. */
extern bool sched_row_exists(SchedRowWriter *w, const char *index, ScanKeyData *keys,
							 int nkeys);

#endif
