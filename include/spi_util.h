/*
 * spi_util.h — statements prepared once and kept (SPI_keepplan), and SPI result accessors (spi_util.c).
 */
#ifndef PG_SCHED_SPI_UTIL_H
#define PG_SCHED_SPI_UTIL_H

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
} SchedStatement;

/* The kept plan of a statement, prepared on first use. */
extern SPIPlanPtr sched_spi_plan(SchedStatement *stmt);

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

/* Column accessors on SPI_tuptable row `row` (1-based column numbers). */
extern Datum sched_spi_get(int row, int col, bool *isnull);
extern char *sched_spi_text(int row, int col);	/* NULL when SQL NULL */
extern int64 sched_spi_int64(int row, int col); /* 0 when SQL NULL */

/* A one-dimensional array of n values of `type` (no NULLs), for a statement's parameter. */
extern Datum sched_array_of(Datum *elems, int n, Oid type);

/*
 * An internal subtransaction (for a placement that is all or nothing: a gang, a
 * preemption) that keeps the caller's memory context and resource owner: what is
 * allocated in it survives its rollback; SPI results do not.
 */
typedef struct SchedSubxact
{
	MemoryContext cxt;
	ResourceOwner owner;
} SchedSubxact;

extern void sched_subxact_begin(SchedSubxact *s);
/* Commits it (keep) or rolls it back, releasing every lock taken in it. */
extern void sched_subxact_end(SchedSubxact *s, bool keep);

/* The uuid of an array of 16 bytes, formatted. */
extern char *sched_uuid_out(const pg_uuid_t *u);

#endif							/* PG_SCHED_SPI_UTIL_H */
