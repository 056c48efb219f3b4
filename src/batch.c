/*
 * batch.c — what one dispatch call keeps between its reservations: the fleets it read
 * once and keeps current in memory, and the reservations it has made but not written
 * yet; and the writes of a reservation, one at a time or a batch in one statement, and
 * of its release when the attempt ends: the one owner of the worker and node counters.
 *
 * A batch (SchedBatch) lives as long as one dispatch_next call, in the call's memory.
 * Its fleets are read through the fleet mirror (fleet_mirror.c) with a snapshot that
 * sees the transaction's own writes, so the batch's deferred reservations are written
 * before any new fleet is read.  A fleet from the mirror is borrowed (its rows and
 * admission memos are the mirror's) until the batch changes it; then the batch copies
 * both (ensure_own), so a call that places one request copies nothing.  After every
 * locked re-read of a pair its counters and states are copied into every fleet row of
 * that node and worker (sched_batch_update_rows): the cached values only steer ranking;
 * admission is always re-checked on the locked rows (reservation.c).
 *
 * Deferred writes: the batch holds at most SCHED_BATCH_MAX reservations, then writes
 * them in one statement; the call must write the rest (sched_batch_flush) before it
 * returns.  While a reservation is deferred, the worker and node rows it counts on stay
 * locked by the transaction, so nobody else reads counters that miss it;
 * sched_batch_count_pending adds them to rows the transaction re-reads.
 */
#include "postgres.h"

#include "batch.h"
#include "fleet_mirror.h"
#include "grow_array.h"
#include "reservation_rows.h"
#include "spi_util.h"
#include "settings.h"

#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

static void index_by_node(SchedBatchFleet *e);
static SchedFleetRow *row_of_node(SchedBatchFleet *e, const char *node_id);
static void apply_update(SchedBatchFleet *e, const SchedFleetRow *fresh);

/*
 * What a reservation writes, written once for both forms below (one reservation, a
 * batch): the attempt, its START command, the selection milestone (its key, its
 * fields, its detail) and the request's DISPATCHED state.
 */
#define ATTEMPT_INSERT \
	"  INSERT INTO sched.attempt (attempt_id, request_id, execution_id, step_id, attempt_number, " \
	"         tenant, node_id, worker_id, worker_generation, lease_version, status, " \
	"         reserve_cpu_millis, reserve_memory_mb, reserve_gpus, score, dispatched_at, " \
	"         lease_expires_at"
/* the attempt carries its request's concurrency_key and spread_key (the limits and the
 * spread term count attempts by them); a database still at 0.1.0 has no such columns
 * (the _LEGACY statements below) */
#define KEY_COLUMN ", concurrency_key, spread_key) "
#define KEY_VALUE(request) \
	", (SELECT q.concurrency_key FROM sched.request q WHERE q.request_id OPERATOR(pg_catalog.=) " request "), " \
	"  (SELECT q.spread_key FROM sched.request q WHERE q.request_id OPERATOR(pg_catalog.=) " request ")"
#define NO_KEY_COLUMN ") "
#define NO_KEY_VALUE(request) ""
#define ATTEMPT_LEASE(at, ttl) \
	at ", " at " OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => " ttl ")"
#define COMMAND_INSERT \
	"  INSERT INTO sched.command (worker_id, worker_generation, kind, attempt_id, lease_version, " \
	"         request_id, created_at) "
#define SELECTED_MILESTONE(execution, step, n, attempt, node, worker, score, request, at) \
	"  INSERT INTO sched.timeline (execution_id, milestone_key, stage, step_id, attempt_number, " \
	"         attempt_id, state, component, title, detail, at) " \
	"  SELECT " execution ", 'step.worker.selected:' OPERATOR(pg_catalog.||) " step "::pg_catalog.text " \
	"         OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) " n "::pg_catalog.text, " \
	"         'SCHEDULING', " step ", " n ", " attempt ", 'SUCCEEDED', 'Scheduler', " \
	"         'Node and worker selected', " \
	"         pg_catalog.jsonb_build_object('node_id', " node ", 'worker_id', " worker ", " \
	"                                       'score', " score ", 'request_id', " request "), " at " "
#define REQUEST_DISPATCHED(attempt, tries) \
	" SET state = 'DISPATCHED', attempt_id = " attempt ", claim_id = NULL, " \
	"     claimed_until = NULL, last_reason = NULL, tries = " tries " OPERATOR(pg_catalog.+) 1 "

/*
 * The reservation's writes, in one statement (one executor start instead of six): the
 * worker's slot, the node's reservations, the attempt, its START command, the timeline
 * milestone (idempotent) and the request's DISPATCHED state.  Foreign keys of the
 * command to the attempt are checked at the end of the statement, when both exist.
 */
#define RESERVATION_WRITES(KEYCOL, KEYVAL) {\
	"WITH w AS ( "\
	"  UPDATE sched.worker SET live_attempts = live_attempts OPERATOR(pg_catalog.+) 1 "\
	"   WHERE worker_id OPERATOR(pg_catalog.=) $7 RETURNING 1 "\
	"), n AS ( "\
	"  UPDATE sched.node SET "\
	"         reserved_cpu_millis = reserved_cpu_millis OPERATOR(pg_catalog.+) $9, "\
	"         reserved_memory_mb = reserved_memory_mb OPERATOR(pg_catalog.+) $10, "\
	"         reserved_gpus = reserved_gpus OPERATOR(pg_catalog.+) $11, "\
	"         live_attempts = live_attempts OPERATOR(pg_catalog.+) 1 "\
	"   WHERE node_id OPERATOR(pg_catalog.=) $6 RETURNING 1 "\
	"), a AS ( "\
	ATTEMPT_INSERT KEYCOL\
	"  VALUES ($15, $1, $2, $3, $4, $5, $6, $7, $8, 1, 'DISPATCHED', $9, $10, $11, $12, "\
	"          " ATTEMPT_LEASE("$13", "$14") KEYVAL("$1") ") "\
	"  RETURNING 1 "\
	"), c AS ( "\
	COMMAND_INSERT "VALUES ($7, $8, 'START', $15, 1, $1, $13) RETURNING 1 "\
	"), t AS ( "\
	SELECTED_MILESTONE("$2", "$3", "$4", "$15", "$6", "$7", "$12", "$1", "$13")\
	"  ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING RETURNING 1 "\
	"), r AS ( "\
	"  UPDATE sched.request x" REQUEST_DISPATCHED("$15", "x.tries")\
	"   WHERE x.request_id OPERATOR(pg_catalog.=) $1 RETURNING 1 "\
	") "\
	"SELECT (SELECT pg_catalog.count(*) FROM w) OPERATOR(pg_catalog.+) "\
	"       (SELECT pg_catalog.count(*) FROM n) OPERATOR(pg_catalog.+) "\
	"       (SELECT pg_catalog.count(*) FROM r)",\
	15, {INT8OID, UUIDOID, UUIDOID, INT4OID, TEXTOID, TEXTOID, UUIDOID, INT8OID,\
		INT4OID, INT8OID, INT4OID, INT8OID, TIMESTAMPTZOID, FLOAT8OID, UUIDOID}, NULL, false, true\
}
static SchedStatement reservation_writes = RESERVATION_WRITES(KEY_COLUMN, KEY_VALUE);
static SchedStatement reservation_writes_legacy = RESERVATION_WRITES(NO_KEY_COLUMN, NO_KEY_VALUE);

/*
 * The same writes for a whole batch of reservations (dispatch_next): one row per
 * reservation in the arrays; the worker and node counters are summed per row.
 */
#define RESERVATION_WRITES_BATCH(KEYCOL, KEYVAL) {\
	"WITH p AS MATERIALIZED ( "\
	"  SELECT p.request_id, p.execution_id, p.step_id, p.attempt_number, p.tenant, "\
	"         p.node_id COLLATE pg_catalog.\"C\" AS node_id, p.worker_id, p.generation, p.cpu, p.mem, "\
	"         p.gpus, p.score, p.attempt_id, p.ord "\
	"    FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.uuid[]), "\
	"                    pg_catalog.unnest($3::pg_catalog.uuid[]), pg_catalog.unnest($4::pg_catalog.int4[]), "\
	"                    pg_catalog.unnest($5::pg_catalog.text[]), pg_catalog.unnest($6::pg_catalog.text[]), "\
	"                    pg_catalog.unnest($7::pg_catalog.uuid[]), pg_catalog.unnest($8::pg_catalog.int8[]), "\
	"                    pg_catalog.unnest($9::pg_catalog.int4[]), pg_catalog.unnest($10::pg_catalog.int8[]), "\
	"                    pg_catalog.unnest($11::pg_catalog.int4[]), pg_catalog.unnest($12::pg_catalog.int8[]), "\
	"                    pg_catalog.unnest($13::pg_catalog.uuid[])) WITH ORDINALITY "\
	"         AS p(request_id, execution_id, step_id, attempt_number, tenant, node_id, "\
	"              worker_id, generation, cpu, mem, gpus, score, attempt_id, ord) "\
	"), w AS ( "\
	"  UPDATE sched.worker x SET live_attempts = x.live_attempts OPERATOR(pg_catalog.+) d.n "\
	"    FROM (SELECT p.worker_id, pg_catalog.count(*)::pg_catalog.int4 AS n FROM p GROUP BY p.worker_id) d "\
	"   WHERE x.worker_id OPERATOR(pg_catalog.=) d.worker_id "\
	"     AND x.worker_id OPERATOR(pg_catalog.=) ANY ($7::pg_catalog.uuid[]) RETURNING 1 "\
	"), n AS ( "\
	"  UPDATE sched.node x SET "\
	"         reserved_cpu_millis = x.reserved_cpu_millis OPERATOR(pg_catalog.+) d.cpu, "\
	"         reserved_memory_mb = x.reserved_memory_mb OPERATOR(pg_catalog.+) d.mem, "\
	"         reserved_gpus = x.reserved_gpus OPERATOR(pg_catalog.+) d.gpus, "\
	"         live_attempts = x.live_attempts OPERATOR(pg_catalog.+) d.n "\
	"    FROM (SELECT p.node_id, pg_catalog.count(*)::pg_catalog.int4 AS n, pg_catalog.sum(p.cpu)::pg_catalog.int4 AS cpu, "\
	"                 pg_catalog.sum(p.mem)::pg_catalog.int8 AS mem, pg_catalog.sum(p.gpus)::pg_catalog.int4 AS gpus "\
	"            FROM p GROUP BY p.node_id) d "\
	"   WHERE x.node_id OPERATOR(pg_catalog.=) d.node_id "\
	"     AND x.node_id OPERATOR(pg_catalog.=) ANY ($6::pg_catalog.text[]) RETURNING 1 "\
	"), a AS ( "\
	ATTEMPT_INSERT KEYCOL\
	"  SELECT p.attempt_id, p.request_id, p.execution_id, p.step_id, p.attempt_number, p.tenant, "\
	"         p.node_id, p.worker_id, p.generation, 1, 'DISPATCHED', p.cpu, p.mem, p.gpus, p.score, "\
	"         " ATTEMPT_LEASE("$14", "$15") KEYVAL("p.request_id") " FROM p "\
	"  RETURNING 1 "\
	"), c AS ( "\
	COMMAND_INSERT\
	"  SELECT p.worker_id, p.generation, 'START', p.attempt_id, 1, p.request_id, $14 "\
	"    FROM p ORDER BY p.ord RETURNING 1 "\
	"), t AS ( "\
	SELECTED_MILESTONE("p.execution_id", "p.step_id", "p.attempt_number", "p.attempt_id",\
					   "p.node_id", "p.worker_id", "p.score", "p.request_id", "$14")\
	"    FROM p ORDER BY p.ord "\
	"  ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING RETURNING 1 "\
	"), r AS ( "\
	"  UPDATE sched.request x" REQUEST_DISPATCHED("p.attempt_id", "x.tries")\
	"    FROM p WHERE x.request_id OPERATOR(pg_catalog.=) p.request_id "\
	"     AND x.request_id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[]) RETURNING 1 "\
	") "\
	"SELECT (SELECT pg_catalog.count(*) FROM r), (SELECT pg_catalog.count(*) FROM a)",\
	15, {INT8ARRAYOID, UUIDARRAYOID, UUIDARRAYOID, INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID,\
		UUIDARRAYOID, INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID, INT4ARRAYOID, INT8ARRAYOID,\
		UUIDARRAYOID, TIMESTAMPTZOID, FLOAT8OID}, NULL, false, true\
}
static SchedStatement reservation_writes_batch = RESERVATION_WRITES_BATCH(KEY_COLUMN, KEY_VALUE);
static SchedStatement reservation_writes_batch_legacy = RESERVATION_WRITES_BATCH(NO_KEY_COLUMN, NO_KEY_VALUE);

void
sched_batch_flush(SchedBatch *cache)
{
	int			n = cache == NULL ? 0 : cache->npending;
	Datum	   *cols[13];
	Datum		v[15];
	int			i;
	int			k;
	static const Oid types[13] = {INT8OID, UUIDOID, UUIDOID, INT4OID, TEXTOID, TEXTOID,
	UUIDOID, INT8OID, INT4OID, INT8OID, INT4OID, INT8OID, UUIDOID};

	if (n == 0)
		return;
	if (n == 1)
	{
		/* the one-reservation statement: no arrays to build, unnest and group */
		sched_write_reservation(&cache->pending[0], cache->at);
		cache->npending = 0;
		return;
	}
	if (sched_schema_is_0_2() && sched_reservation_rows_write(cache->pending, n, cache->at))
	{
		cache->npending = 0;
		return;
	}
	for (k = 0; k < 13; k++)
		cols[k] = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
	{
		SchedReservationWrite *r = &cache->pending[i];

		cols[0][i] = Int64GetDatum(r->request_id);
		cols[1][i] = UUIDPGetDatum(&r->execution_id);
		cols[2][i] = UUIDPGetDatum(&r->step_id);
		cols[3][i] = Int32GetDatum(r->attempt_number);
		cols[4][i] = CStringGetTextDatum(r->tenant);
		cols[5][i] = CStringGetTextDatum(r->node_id);
		cols[6][i] = UUIDPGetDatum(&r->worker_id);
		cols[7][i] = Int64GetDatum(r->generation);
		cols[8][i] = Int32GetDatum(r->reserve_cpu_millis);
		cols[9][i] = Int64GetDatum(r->reserve_memory_mb);
		cols[10][i] = Int32GetDatum(r->reserve_gpus);
		cols[11][i] = Int64GetDatum(r->score);
		cols[12][i] = UUIDPGetDatum(&r->attempt_id);
	}
	for (k = 0; k < 13; k++)
		v[k] = sched_array_of(cols[k], n, types[k]);
	v[13] = TimestampTzGetDatum(cache->at);
	v[14] = Float8GetDatum((double) sched_lease_ttl_s);
	sched_spi_exec(sched_schema_is_0_2() ? &reservation_writes_batch : &reservation_writes_batch_legacy,
				   v, NULL, false, 1, SPI_OK_SELECT);
	if (sched_spi_int64(0, 1) != n || sched_spi_int64(0, 2) != n)
		elog(ERROR, "pg_sched: batched reservation wrote " INT64_FORMAT " of %d requests",
			 sched_spi_int64(0, 1), n);
	cache->npending = 0;
	for (k = 0; k < 13; k++)
		pfree(cols[k]);
}

/*
 * The batch's unwritten reservations on the worker and node of `row`, added to the rows
 * read from the table: what the counters will be once the batch is written.  Only the
 * batch's own transaction can change these rows meanwhile (it holds them locked).
 */
void
sched_batch_count_pending(const SchedBatch *cache, SchedFleetRow *row)
{
	int			i;

	if (cache == NULL)
		return;
	for (i = 0; i < cache->npending; i++)
	{
		const SchedReservationWrite *r = &cache->pending[i];

		if (memcmp(&r->worker_id, &row->worker_id, sizeof(pg_uuid_t)) == 0)
			row->c.worker_live_attempts++;
		if (strcmp(r->node_id, row->c.node_id) == 0)
		{
			row->c.node_live_attempts++;
			row->c.reserved_cpu_millis += r->reserve_cpu_millis;
			row->c.reserved_memory_mb += r->reserve_memory_mb;
			row->c.reserved_gpus += r->reserve_gpus;
		}
	}
}

/*
 * A reservation's counters moved by one attempt (+1: taken, -1: released): the worker's
 * slot, then (lock order) the node's resources, in one statement.  The worker's UPDATE
 * runs first, whatever the plan: the node's waits behind a one-time filter on the
 * worker's result (an InitPlan, evaluated before the node is scanned), which holds
 * whether or not the worker row is there, so the node is updated either way.
 */
static SchedStatement adjust_worker_and_node = {
	"WITH w AS ( "
	"    UPDATE sched.worker w SET live_attempts = w.live_attempts OPERATOR(pg_catalog.+) $2 "
	"     WHERE w.worker_id OPERATOR(pg_catalog.=) $1 RETURNING 1) "
	"UPDATE sched.node n SET "
	"       reserved_cpu_millis = n.reserved_cpu_millis OPERATOR(pg_catalog.+) $4, "
	"       reserved_memory_mb = n.reserved_memory_mb OPERATOR(pg_catalog.+) $5, "
	"       reserved_gpus = n.reserved_gpus OPERATOR(pg_catalog.+) $6, "
	"       live_attempts = n.live_attempts OPERATOR(pg_catalog.+) $2 "
	" WHERE n.node_id OPERATOR(pg_catalog.=) $3 "
	"   AND (SELECT pg_catalog.count(*) FROM w) IS NOT NULL",
	6, {UUIDOID, INT4OID, TEXTOID, INT4OID, INT8OID, INT4OID},
	.keyed = true, .generic_plan = true
};

static void
adjust_reservation(const pg_uuid_t *worker_id, const char *node_id, int sign,
				   int32 reserve_cpu_millis, int64 reserve_memory_mb, int32 reserve_gpus)
{
	Datum		v[6];

	if (sched_counters_adjust_direct(worker_id, node_id, sign, reserve_cpu_millis,
									 reserve_memory_mb, reserve_gpus))
		return;
	v[0] = UUIDPGetDatum(worker_id);
	v[1] = Int32GetDatum(sign);
	v[2] = CStringGetTextDatum(node_id);
	v[3] = Int32GetDatum(sign * reserve_cpu_millis);
	v[4] = Int64GetDatum(sign * reserve_memory_mb);
	v[5] = Int32GetDatum(sign * reserve_gpus);
	sched_spi_exec(&adjust_worker_and_node, v, NULL, false, 0, SPI_OK_UPDATE);
}

/*
 * Releases what a reservation took: one slot of the worker, the reserved resources of
 * the node.  The caller ends the attempt in the same transaction, from a live status
 * only (lifecycle.c), so each reservation is released exactly once.
 */
void
sched_release_reservation(const pg_uuid_t *worker_id, const char *node_id,
						  int32 reserve_cpu_millis, int64 reserve_memory_mb, int32 reserve_gpus)
{
	adjust_reservation(worker_id, node_id, -1, reserve_cpu_millis, reserve_memory_mb, reserve_gpus);
}

static SchedStatement hold_cleared = {
	"UPDATE sched.request SET held_node_id = NULL, held_worker_id = NULL, held_until = NULL "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID},
	.keyed = true
};

void
sched_release_hold_reservation(int64 request_id, const pg_uuid_t *worker_id,
							   const char *node_id, int32 reserve_cpu_millis,
							   int64 reserve_memory_mb, int32 reserve_gpus)
{
	Datum		v[1];

	adjust_reservation(worker_id, node_id, -1, reserve_cpu_millis, reserve_memory_mb, reserve_gpus);
	v[0] = Int64GetDatum(request_id);
	sched_spi_exec(&hold_cleared, v, NULL, false, 0, SPI_OK_UPDATE);
}

void
sched_hold_reservation(const pg_uuid_t *worker_id, const char *node_id,
					   int32 reserve_cpu_millis, int64 reserve_memory_mb, int32 reserve_gpus)
{
	adjust_reservation(worker_id, node_id, 1, reserve_cpu_millis, reserve_memory_mb, reserve_gpus);
}

/* Writes one reservation at once (dispatch_attempt, or a call that does not defer). */
void
sched_write_reservation(const SchedReservationWrite *r, TimestampTz at)
{
	Datum		v[15];

	if (sched_schema_is_0_2() && sched_reservation_rows_write(r, 1, at))
		return;
	v[0] = Int64GetDatum(r->request_id);
	v[1] = UUIDPGetDatum(&r->execution_id);
	v[2] = UUIDPGetDatum(&r->step_id);
	v[3] = Int32GetDatum(r->attempt_number);
	v[4] = CStringGetTextDatum(r->tenant);
	v[5] = CStringGetTextDatum(r->node_id);
	v[6] = UUIDPGetDatum(&r->worker_id);
	v[7] = Int64GetDatum(r->generation);
	v[8] = Int32GetDatum(r->reserve_cpu_millis);
	v[9] = Int64GetDatum(r->reserve_memory_mb);
	v[10] = Int32GetDatum(r->reserve_gpus);
	v[11] = Int64GetDatum(r->score);
	v[12] = TimestampTzGetDatum(at);
	v[13] = Float8GetDatum((double) sched_lease_ttl_s);
	v[14] = UUIDPGetDatum(&r->attempt_id);
	sched_spi_exec(sched_schema_is_0_2() ? &reservation_writes : &reservation_writes_legacy,
				   v, NULL, false, 1, SPI_OK_SELECT);
	if (sched_spi_int64(0, 1) != 3)
		elog(ERROR, "pg_sched: reservation of request " INT64_FORMAT " wrote an unexpected number of rows",
			 r->request_id);
}

/*
 * Records reservation r (its strings copied into the batch's memory) to be written with
 * the batch, writing the batch first when it is full.
 */
void
sched_batch_defer(SchedBatch *batch, const SchedReservationWrite *r)
{
	MemoryContext old;
	SchedReservationWrite *w;

	if (batch->npending == SCHED_BATCH_MAX)
		sched_batch_flush(batch);
	old = MemoryContextSwitchTo(batch->cxt);
	w = &batch->pending[batch->npending++];
	*w = *r;
	w->tenant = pstrdup(r->tenant);
	w->concurrency_key = r->concurrency_key ? pstrdup(r->concurrency_key) : NULL;
	w->node_id = pstrdup(r->node_id);
	MemoryContextSwitchTo(old);
}

/* e's rows made the batch's own (a copy of the mirror's), with the changes recorded
 * while they were borrowed applied. */
static void
ensure_own(SchedBatch *cache, SchedBatchFleet *e)
{
	MemoryContext old;
	SchedFleetRow *rows;
	const SchedAdmitMemos *memos;
	int			k;

	if (!e->borrowed)
		return;
	old = MemoryContextSwitchTo(cache->cxt);
	rows = palloc(sizeof(SchedFleetRow) * Max(e->fleet.count, 1));
	memcpy(rows, e->fleet.rows, sizeof(SchedFleetRow) * e->fleet.count);
	memos = sched_fleet_mirror_memos(&e->fleet);
	if (memos != NULL)
		sched_admit_memos_copy(&e->memos, memos);	/* the same rows, at the same indexes */
	e->fleet.rows = rows;
	e->borrowed = false;
	index_by_node(e);
	MemoryContextSwitchTo(old);
	for (k = 0; k < e->nupdates; k++)
		apply_update(e, &e->updates[k]);
	e->nupdates = 0;
}

SchedFleet *
sched_batch_fleet(SchedBatch *cache, const char *capability, bool all_nodes)
{
	int			i;
	MemoryContext old;
	SchedBatchFleet *e;

	for (i = 0; i < cache->count; i++)
		if (cache->entries[i].all_nodes == all_nodes &&
			strcmp(cache->entries[i].capability, capability) == 0)
		{
			e = &cache->entries[i];
			if (e->nupdates > 0)
				ensure_own(cache, e);
			return &e->fleet;
		}
	/* a read from the mirror may patch its rows in place: borrowed rows are copied
	 * first (a read of every node comes from the tables) */
	for (i = 0; !all_nodes && i < cache->count; i++)
		ensure_own(cache, &cache->entries[i]);
	/* the new read must see the batch's reservations: write them first */
	sched_batch_flush(cache);
	old = MemoryContextSwitchTo(cache->cxt);
	if (cache->count == cache->allocated)
	{
		cache->allocated = Max(4, cache->allocated * 2);
		cache->entries = cache->entries == NULL
			? palloc(sizeof(SchedBatchFleet) * cache->allocated)
			: repalloc(cache->entries, sizeof(SchedBatchFleet) * cache->allocated);
	}
	e = &cache->entries[cache->count++];
	memset(e, 0, sizeof(*e));
	sched_admit_memos_init(&e->memos, cache->cxt);
	e->capability = pstrdup(capability);
	e->all_nodes = all_nodes;
	if (!all_nodes && sched_fleet_mirror_read(capability, true, &e->fleet))
		e->borrowed = true;
	else
	{
		sched_fleet_load(capability,
						 SCHED_FLEET_FRESH | SCHED_FLEET_LABELS |
						 (all_nodes ? SCHED_FLEET_ALL_NODES : 0),
						 NULL, &e->fleet);
		index_by_node(e);
	}
	if (e->fleet.count > cache->ranked_size)
	{
		cache->ranked_size = e->fleet.count;
		cache->ranked = cache->ranked == NULL
			? palloc(sizeof(SchedRanked) * cache->ranked_size)
			: repalloc(cache->ranked, sizeof(SchedRanked) * cache->ranked_size);
	}
	MemoryContextSwitchTo(old);
	return &e->fleet;
}

/* The batch's entry of `fleet`, or NULL. */
static SchedBatchFleet *
entry_of(SchedBatch *cache, const SchedFleet *fleet)
{
	int			i;

	for (i = 0; cache != NULL && i < cache->count; i++)
		if (&cache->entries[i].fleet == fleet)
			return &cache->entries[i];
	return NULL;
}

void
sched_batch_mark_busy(SchedBatch *cache, SchedFleet *fleet, int index)
{
	SchedBatchFleet *e = entry_of(cache, fleet);

	if (fleet->rows[index].busy)
		return;
	if (e != NULL)
		ensure_own(cache, e);
	sched_grow_array(cache->cxt, (void **) &fleet->busy_rows, &fleet->busy_allocated,
					 fleet->busy_count + 1, sizeof(int32), 16);
	fleet->rows[index].busy = true;
	fleet->busy_rows[fleet->busy_count++] = index;
}

void
sched_batch_forget_fleets(SchedBatch *cache)
{
	int			i;

	if (cache == NULL)
		return;
	for (i = 0; i < cache->count; i++)
		sched_admit_memos_reset(&cache->entries[i].memos);
	cache->count = 0;			/* the rest of the entries' memory lives as long as the call */
}

bool
sched_batch_gang_tried(SchedBatch *cache, const pg_uuid_t *gang_id)
{
	int			i;

	if (cache == NULL)
		return false;
	for (i = 0; i < cache->ngangs_tried; i++)
		if (memcmp(&cache->gangs_tried[i], gang_id, sizeof(pg_uuid_t)) == 0)
			return true;
	if (cache->ngangs_tried == cache->gangs_tried_size)
	{
		MemoryContext old = MemoryContextSwitchTo(cache->cxt);

		cache->gangs_tried_size = Max(8, cache->gangs_tried_size * 2);
		cache->gangs_tried = cache->gangs_tried == NULL
			? palloc(sizeof(pg_uuid_t) * cache->gangs_tried_size)
			: repalloc(cache->gangs_tried, sizeof(pg_uuid_t) * cache->gangs_tried_size);
		MemoryContextSwitchTo(old);
	}
	cache->gangs_tried[cache->ngangs_tried++] = *gang_id;
	return false;
}

int
sched_batch_admit(SchedBatch *cache, SchedFleet *fleet, const SchedPlacement *p,
				  SchedRanked *out)
{
	SchedBatchFleet *e = entry_of(cache, fleet);

	if (e != NULL && e->nupdates > 0)
		ensure_own(cache, e);
	if (e != NULL && !e->borrowed)
		return sched_admit_memos_admit(&e->memos, fleet, p, out);
	/* borrowed rows are the mirror's as they are: its memos hold */
	return sched_fleet_mirror_admit(fleet, p, out);
}

int
sched_batch_admit_best(SchedBatch *cache, SchedFleet *fleet, const SchedPlacement *p,
					   SchedRanked *out, const SchedRanked **bound)
{
	SchedBatchFleet *e = entry_of(cache, fleet);
	bool		walked;

	*bound = NULL;
	if (e != NULL && e->nupdates > 0)
		ensure_own(cache, e);
	if (e != NULL && !e->borrowed)
		return sched_admit_memos_best(&e->memos, fleet, p, out, bound, &walked);
	return sched_fleet_mirror_admit_best(fleet, p, out, bound);
}

/* Copies what `fresh` says of its node and worker into e's row of that node (own rows). */
static void
apply_update(SchedBatchFleet *e, const SchedFleetRow *fresh)
{
	SchedFleetRow *r = row_of_node(e, fresh->c.node_id);
	SchedCandidate *c;

	Assert(!e->borrowed);
	if (r == NULL)
		return;
	sched_admit_memos_forget(&e->memos, (int) (r - e->fleet.rows));
	c = &r->c;
	/* node fields: shared by the node's workers of every capability */
	sched_candidate_take_node(c, &fresh->c);
	/* worker fields: only the row of that worker (labels and versions, which live
	 * in the caller's memory, are not copied) */
	if (c->has_worker && memcmp(&r->worker_id, &fresh->worker_id, sizeof(pg_uuid_t)) == 0)
	{
		c->runtime_state = fresh->c.runtime_state;
		c->scheduling_status = fresh->c.scheduling_status;
		c->has_heartbeat = fresh->c.has_heartbeat;
		c->last_heartbeat = fresh->c.last_heartbeat;
		c->slots = fresh->c.slots;
		c->worker_live_attempts = fresh->c.worker_live_attempts;
		r->generation = fresh->generation;
	}
}

void
sched_batch_update_rows(SchedBatch *cache, const SchedFleetRow *fresh)
{
	int			i;

	if (cache == NULL)
		return;
	for (i = 0; i < cache->count; i++)
	{
		SchedBatchFleet *e = &cache->entries[i];
		MemoryContext old;

		if (!e->borrowed)
		{
			apply_update(e, fresh);
			continue;
		}
		/* recorded (its scalars, and its node_id copied) for the copy */
		old = MemoryContextSwitchTo(cache->cxt);
		if (e->nupdates == e->updates_size)
		{
			e->updates_size = Max(8, e->updates_size * 2);
			e->updates = e->updates == NULL
				? palloc(sizeof(SchedFleetRow) * e->updates_size)
				: repalloc(e->updates, sizeof(SchedFleetRow) * e->updates_size);
		}
		e->updates[e->nupdates] = *fresh;
		e->updates[e->nupdates].c.node_id = pstrdup(fresh->c.node_id);
		e->updates[e->nupdates].c.labels.count = 0;
		e->updates[e->nupdates].c.labels.items = NULL;
		e->updates[e->nupdates].c.version_count = 0;
		e->updates[e->nupdates].c.versions = NULL;
		e->nupdates++;
		MemoryContextSwitchTo(old);
	}
}

static const SchedFleet *sort_fleet;

static int
row_node_cmp(const void *a, const void *b)
{
	return strcmp(sort_fleet->rows[*(const int *) a].c.node_id,
				  sort_fleet->rows[*(const int *) b].c.node_id);
}

/* Builds e->by_node: row indexes of e's fleet sorted by node_id (one row per node). */
static void
index_by_node(SchedBatchFleet *e)
{
	int			i;

	bool		sorted = true;

	e->by_node = palloc(sizeof(int) * Max(e->fleet.count, 1));
	for (i = 0; i < e->fleet.count; i++)
	{
		e->by_node[i] = i;
		if (i > 0 && sorted &&
			strcmp(e->fleet.rows[i - 1].c.node_id, e->fleet.rows[i].c.node_id) > 0)
			sorted = false;
	}
	/* fleets are read in node order (fleet.c); a mirror patched since may not be */
	if (!sorted)
	{
		sort_fleet = &e->fleet;
		qsort(e->by_node, e->fleet.count, sizeof(int), row_node_cmp);
		sort_fleet = NULL;
	}
}

/* The row of node_id in e's fleet, or NULL. */
static SchedFleetRow *
row_of_node(SchedBatchFleet *e, const char *node_id)
{
	int			lo = 0;
	int			hi = e->fleet.count - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		SchedFleetRow *r = &e->fleet.rows[e->by_node[mid]];
		int			c = strcmp(r->c.node_id, node_id);

		if (c == 0)
			return r;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

