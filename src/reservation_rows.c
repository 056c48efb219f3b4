/*
 * reservation_rows.c — the rows placements and the worker protocol write most often,
 * written without a statement (row_write.c):
 *  - a reservation: its attempt, its START command, the selection milestone and the
 *    request's DISPATCHED state, then each worker's slots and each node's reservations,
 *    summed over the reservations on it, then the tenants' sums of live attempts: the
 *    same rows, with the same values, as batch.c's statements RESERVATION_WRITES and
 *    RESERVATION_WRITES_BATCH;
 *  - the counters of one reservation moved (taken by a preemption's hold, released at
 *    the end of an attempt): batch.c's adjust_worker_and_node;
 *  - an attempt started or ended, with what the attempts' statement trigger does to the
 *    tenants' sums, and a milestone: lifecycle.c's attempt_started, attempt_ended and
 *    milestone.
 * Each function returns false, having written nothing, when sched.direct_writes is off
 * or a table it writes is not as pg_sched made it; the caller then runs its statement.
 *
 * Locks: a reservation's worker and node rows are this transaction's already (placement
 * locked the pair before it chose it, reservation.c), the request row too (the queue's
 * fetch or dispatch_attempt's read), and an attempt started or ended is locked by its
 * caller (lifecycle.c); each update takes the newest version's lock again, which waits
 * for nobody then.  The release's rows are locked here, worker first, as the
 * statement's UPDATEs lock them.  A milestone is written only when its execution has
 * none of that key yet (the statements' ON CONFLICT DO NOTHING): only the transaction
 * holding the request's or execution's lock writes a milestone of a given key, so none
 * can be in flight in another transaction.
 *
 * All or nothing: every table a reservation writes is opened and checked (row_write.c's
 * guard) before its first row is written.  An error after that aborts the transaction
 * (or the caller's subtransaction) with whatever was written.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "commands/sequence.h"
#include "common/int.h"
#include "executor/executor.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/datum.h"
#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "batch.h"
#include "reservation_rows.h"
#include "row_checks.h"
#include "row_write.h"
#include "settings.h"
#include "spi_util.h"
#include "tenant_live.h"

static const char *const fleet_triggers[] = {"fleet_changed", "fleet_truncated", NULL};
static const char *const attempt_triggers[] = {"attempt_live_inserted", "attempt_live_updated",
"attempt_live_deleted", "attempt_live_truncated", NULL};
static const char *const request_triggers[] = {"request_queued", NULL};
static const char *const no_triggers[] = {NULL};

enum
{
	A_ATTEMPT_ID, A_REQUEST_ID, A_EXECUTION_ID, A_STEP_ID, A_ATTEMPT_NUMBER, A_TENANT,
	A_NODE_ID, A_WORKER_ID, A_WORKER_GENERATION, A_LEASE_VERSION, A_STATUS, A_RES_CPU,
	A_RES_MEM, A_RES_GPUS, A_SCORE, A_DISPATCHED_AT, A_STARTED_AT, A_LEASE_EXPIRES_AT,
	A_FINISHED_AT, A_DETAIL, A_CONCURRENCY_KEY, A_SPREAD_KEY, A_COUNT
};
static const char *const attempt_columns[] = {
	"attempt_id", "request_id", "execution_id", "step_id", "attempt_number", "tenant",
	"node_id", "worker_id", "worker_generation", "lease_version", "status",
	"reserve_cpu_millis", "reserve_memory_mb", "reserve_gpus", "score", "dispatched_at",
	"started_at", "lease_expires_at", "finished_at", "detail", "concurrency_key",
	"spread_key", NULL
};

enum
{
	C_COMMAND_ID, C_WORKER_ID, C_WORKER_GENERATION, C_KIND, C_ATTEMPT_ID, C_LEASE_VERSION,
	C_REQUEST_ID, C_CREATED_AT, C_DELIVERED_AT, C_DELIVERED_GENERATION, C_COUNT
};
static const char *const command_columns[] = {
	"command_id", "worker_id", "worker_generation", "kind", "attempt_id", "lease_version",
	"request_id", "created_at", "delivered_at", "delivered_generation", NULL
};

enum
{
	T_TIMELINE_ID, T_EXECUTION_ID, T_MILESTONE_KEY, T_STAGE, T_STEP_ID, T_ATTEMPT_NUMBER,
	T_ATTEMPT_ID, T_STATE, T_COMPONENT, T_TITLE, T_DETAIL, T_AT, T_COUNT
};
static const char *const timeline_columns[] = {
	"timeline_id", "execution_id", "milestone_key", "stage", "step_id", "attempt_number",
	"attempt_id", "state", "component", "title", "detail", "at", NULL
};

static const SchedTableShape worker_shape = {
	"worker", fleet_triggers, sched_worker_valid, "worker_valid", NULL, true, NULL
};
static const SchedTableShape node_shape = {
	"node", fleet_triggers, sched_node_valid, "node_valid", NULL, true, NULL
};
static const SchedTableShape request_shape = {
	"request", request_triggers, sched_request_valid, "request_valid", "shape", false, NULL
};
static const SchedTableShape attempt_shape = {
	"attempt", attempt_triggers, sched_attempt_valid, "attempt_valid", NULL, false,
	attempt_columns
};
static const SchedTableShape command_shape = {
	"command", no_triggers, sched_command_valid, "command_valid", NULL, false,
	command_columns
};
static const SchedTableShape timeline_shape = {
	"timeline", no_triggers, NULL, NULL, NULL, false, timeline_columns
};

enum
{
	W_WORKER, W_NODE, W_REQUEST, W_ATTEMPT, W_COMMAND, W_TIMELINE, W_COUNT
};
static const SchedTableShape *const shapes[W_COUNT] = {
	&worker_shape, &node_shape, &request_shape, &attempt_shape, &command_shape,
	&timeline_shape
};

static Datum
text_datum(const char *s)
{
	return s == NULL ? (Datum) 0 : CStringGetTextDatum(s);
}

static int32
add_int32(int32 a, int64 b)
{
	int32		r;

	if (b > PG_INT32_MAX || b < PG_INT32_MIN || pg_add_s32_overflow(a, (int32) b, &r))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("integer out of range")));
	return r;
}

static int64
add_int64(int64 a, int64 b)
{
	int64		r;

	if (pg_add_s64_overflow(a, b, &r))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bigint out of range")));
	return r;
}

/* The next value of sequence sched.<name> (the column's default). */
static Datum
next_of(const char *name)
{
	Oid			seq = get_relname_relid(name, get_namespace_oid("sched", false));

	if (!OidIsValid(seq))
		elog(ERROR, "pg_sched: sequence sched.%s is missing", name);
	return Int64GetDatum(nextval_internal(seq, false));
}

/* A key of an object being built, or a string value. */
static void
push_string(JsonbParseState **state, JsonbIteratorToken token, const char *s)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) s;
	v.val.string.len = strlen(s);
	(void) pushJsonbValue(state, token, &v);
}

/* A number value (numeric, as a JSON number's text becomes). */
static void
push_int64(JsonbParseState **state, int64 x)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(x);
	(void) pushJsonbValue(state, WJB_VALUE, &v);
}

/* The milestone's detail: jsonb_build_object('node_id', node, 'worker_id', worker,
 * 'score', score, 'request_id', request), the same jsonb value (built, not parsed from
 * its text: the parse cost a tenth of the milestone's write). */
static Datum
milestone_detail(const SchedReservationWrite *r)
{
	JsonbParseState *state = NULL;
	JsonbValue *object;

	(void) pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	push_string(&state, WJB_KEY, "node_id");
	push_string(&state, WJB_VALUE, r->node_id);
	push_string(&state, WJB_KEY, "worker_id");
	push_string(&state, WJB_VALUE, sched_uuid_out(&r->worker_id));
	push_string(&state, WJB_KEY, "score");
	push_int64(&state, r->score);
	push_string(&state, WJB_KEY, "request_id");
	push_int64(&state, r->request_id);
	object = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(object));
}

/* The request's DISPATCHED state; its concurrency_key and spread_key into *ckey, *skey
 * (NULL: none). */
static void
request_dispatched(SchedRowWriter *w, const SchedReservationWrite *r, Datum *ckey,
				   bool *ckey_null, Datum *skey, bool *skey_null)
{
	static const char *const names[] = {"state", "attempt_id", "claim_id", "claimed_until",
	"last_reason", "tries"};
	ScanKeyData key;
	HeapTuple	old;
	Datum		v[6];
	bool		n[6] = {false, false, true, true, true, false};
	bool		isnull;
	Datum		tries;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(r->request_id));
	old = sched_row_lock_held(w, (ItemPointer) &r->request_tid, "request_pkey", &key, 1);
	if (old == NULL)
		elog(ERROR, "pg_sched: reservation of request " INT64_FORMAT " found no request row",
			 r->request_id);
	*ckey = heap_getattr(old, sched_column_of(w->rel, "concurrency_key"),
						 RelationGetDescr(w->rel), ckey_null);
	*skey = heap_getattr(old, sched_column_of(w->rel, "spread_key"),
						 RelationGetDescr(w->rel), skey_null);
	tries = heap_getattr(old, sched_column_of(w->rel, "tries"), RelationGetDescr(w->rel), &isnull);
	v[0] = CStringGetTextDatum("DISPATCHED");
	v[1] = UUIDPGetDatum(&r->attempt_id);
	v[2] = v[3] = v[4] = (Datum) 0;
	/* tries + 1 (NULL stays NULL, as in SQL) */
	n[5] = isnull;
	v[5] = isnull ? (Datum) 0 : Int32GetDatum(add_int32(DatumGetInt32(tries), 1));
	/* the key columns are read before the update, as the statement's sub-selects did */
	if (!*ckey_null)
		*ckey = PointerGetDatum(PG_DETOAST_DATUM_COPY(*ckey));
	if (!*skey_null)
		*skey = PointerGetDatum(PG_DETOAST_DATUM_COPY(*skey));
	(void) sched_row_update(w, old, names, v, n, 6);
}

/* at + make_interval(secs => sched.lease_ttl): a lease's end from `at` */
static TimestampTz
lease_end(TimestampTz at)
{
	TimestampTz end;

	if (pg_add_s64_overflow(at, (int64) sched_lease_ttl_s * USECS_PER_SEC, &end) ||
		!IS_VALID_TIMESTAMP(end))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	return end;
}

static void
attempt_inserted(SchedRowWriter *w, const SchedReservationWrite *r, TimestampTz at,
				 Datum ckey, bool ckey_null, Datum skey, bool skey_null)
{
	Datum		v[A_COUNT];
	bool		n[A_COUNT];
	TimestampTz expires;

	memset(n, 0, sizeof(n));
	expires = lease_end(at);
	v[A_ATTEMPT_ID] = UUIDPGetDatum(&r->attempt_id);
	v[A_REQUEST_ID] = Int64GetDatum(r->request_id);
	v[A_EXECUTION_ID] = UUIDPGetDatum(&r->execution_id);
	v[A_STEP_ID] = UUIDPGetDatum(&r->step_id);
	v[A_ATTEMPT_NUMBER] = Int32GetDatum(r->attempt_number);
	v[A_TENANT] = text_datum(r->tenant);
	v[A_NODE_ID] = text_datum(r->node_id);
	v[A_WORKER_ID] = UUIDPGetDatum(&r->worker_id);
	v[A_WORKER_GENERATION] = Int64GetDatum(r->generation);
	v[A_LEASE_VERSION] = Int64GetDatum(1);
	v[A_STATUS] = CStringGetTextDatum("DISPATCHED");
	v[A_RES_CPU] = Int32GetDatum(r->reserve_cpu_millis);
	v[A_RES_MEM] = Int64GetDatum(r->reserve_memory_mb);
	v[A_RES_GPUS] = Int32GetDatum(r->reserve_gpus);
	v[A_SCORE] = Int64GetDatum(r->score);
	v[A_DISPATCHED_AT] = TimestampTzGetDatum(at);
	n[A_STARTED_AT] = true;
	v[A_STARTED_AT] = (Datum) 0;
	v[A_LEASE_EXPIRES_AT] = TimestampTzGetDatum(expires);
	n[A_FINISHED_AT] = n[A_DETAIL] = true;
	v[A_FINISHED_AT] = v[A_DETAIL] = (Datum) 0;
	v[A_CONCURRENCY_KEY] = ckey;
	n[A_CONCURRENCY_KEY] = ckey_null;
	v[A_SPREAD_KEY] = skey;
	n[A_SPREAD_KEY] = skey_null;
	sched_row_insert(w, v, n);
}

static void
command_inserted(SchedRowWriter *w, const SchedReservationWrite *r, TimestampTz at)
{
	Datum		v[C_COUNT];
	bool		n[C_COUNT];

	memset(n, 0, sizeof(n));
	v[C_COMMAND_ID] = next_of("command_id_seq");
	v[C_WORKER_ID] = UUIDPGetDatum(&r->worker_id);
	v[C_WORKER_GENERATION] = Int64GetDatum(r->generation);
	v[C_KIND] = CStringGetTextDatum("START");
	v[C_ATTEMPT_ID] = UUIDPGetDatum(&r->attempt_id);
	v[C_LEASE_VERSION] = Int64GetDatum(1);
	v[C_REQUEST_ID] = Int64GetDatum(r->request_id);
	v[C_CREATED_AT] = TimestampTzGetDatum(at);
	n[C_DELIVERED_AT] = n[C_DELIVERED_GENERATION] = true;
	v[C_DELIVERED_AT] = v[C_DELIVERED_GENERATION] = (Datum) 0;
	sched_row_insert(w, v, n);
}

/*
 * A milestone of the execution's timeline, unless it has one of that key (the
 * statements' ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING).  step_id,
 * attempt_id and detail may be NULL, attempt_number 0 (NULL).  Only the transaction that
 * holds the execution's or request's lock writes a milestone of a given key, so none of
 * that key can be in flight in another transaction.
 */
static void
milestone_inserted(SchedRowWriter *w, const pg_uuid_t *execution_id, const char *key,
				   const char *stage, const pg_uuid_t *step_id, int32 attempt_number,
				   const pg_uuid_t *attempt_id, const char *state, const char *component,
				   const char *title, Datum detail, bool detail_null, TimestampTz at)
{
	Datum		v[T_COUNT];
	bool		n[T_COUNT];
	ScanKeyData keys[2];

	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(execution_id));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(key));
	keys[1].sk_collation = DEFAULT_COLLATION_OID;	/* milestone_key's */
	if (sched_row_exists(w, "timeline_milestone_once", keys, 2))
		return;
	memset(n, 0, sizeof(n));
	v[T_TIMELINE_ID] = next_of("timeline_id_seq");
	v[T_EXECUTION_ID] = UUIDPGetDatum(execution_id);
	v[T_MILESTONE_KEY] = CStringGetTextDatum(key);
	v[T_STAGE] = CStringGetTextDatum(stage);
	n[T_STEP_ID] = step_id == NULL;
	v[T_STEP_ID] = step_id == NULL ? (Datum) 0 : UUIDPGetDatum(step_id);
	n[T_ATTEMPT_NUMBER] = attempt_number <= 0;
	v[T_ATTEMPT_NUMBER] = Int32GetDatum(attempt_number);
	n[T_ATTEMPT_ID] = attempt_id == NULL;
	v[T_ATTEMPT_ID] = attempt_id == NULL ? (Datum) 0 : UUIDPGetDatum(attempt_id);
	v[T_STATE] = CStringGetTextDatum(state);
	v[T_COMPONENT] = CStringGetTextDatum(component);
	v[T_TITLE] = CStringGetTextDatum(title);
	n[T_DETAIL] = detail_null;
	v[T_DETAIL] = detail_null ? (Datum) 0 : detail;
	v[T_AT] = TimestampTzGetDatum(at);
	sched_row_insert(w, v, n);
}

/* The selection milestone of reservation r. */
static void
selected_milestone(SchedRowWriter *w, const SchedReservationWrite *r, TimestampTz at)
{
	milestone_inserted(w, &r->execution_id,
					   psprintf("step.worker.selected:%s:%d", sched_uuid_out(&r->step_id),
								r->attempt_number),
					   "SCHEDULING", &r->step_id, r->attempt_number, &r->attempt_id,
					   "SUCCEEDED", "Scheduler", "Node and worker selected",
					   milestone_detail(r), false, at);
}

/* One worker's or node's share of the reservations: how many, and what they reserve
 * (negative: released).  Every reservation of one write locked the same version of its
 * worker and node (nothing updates them before the write), first's tids among them. */
typedef struct CounterSum
{
	const SchedReservationWrite *first;
	int			count;
	int64		cpu_millis;
	int64		memory_mb;
	int64		gpus;
} CounterSum;

/* The worker's live_attempts moved by count; false when it has no row.  held: the
 * version this transaction locked, or NULL (sched_row_lock_held). */
static bool
worker_counted(SchedRowWriter *w, const pg_uuid_t *worker_id, ItemPointer held, int64 count)
{
	static const char *const names[] = {"live_attempts"};
	ScanKeyData key;
	HeapTuple	old;
	Datum		v[1];
	bool		n[1] = {false};
	Datum		live;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(worker_id));
	old = sched_row_lock_held(w, held, "worker_pkey", &key, 1);
	if (old == NULL)
		return false;
	live = heap_getattr(old, sched_column_of(w->rel, "live_attempts"), RelationGetDescr(w->rel),
						&n[0]);
	v[0] = n[0] ? (Datum) 0 : Int32GetDatum(add_int32(DatumGetInt32(live), count));
	(void) sched_row_update(w, old, names, v, n, 1);
	return true;
}

/* The node's reservations and live_attempts moved by sum; false when it has no row.
 * held: as worker_counted's. */
static bool
node_counted(SchedRowWriter *w, const char *node_id, ItemPointer held, const CounterSum *sum)
{
	static const char *const names[] = {"reserved_cpu_millis", "reserved_memory_mb",
	"reserved_gpus", "live_attempts"};
	ScanKeyData key;
	HeapTuple	old;
	TupleDesc	desc = RelationGetDescr(w->rel);
	Datum		v[4];
	bool		n[4];
	int			k;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(node_id));
	key.sk_collation = C_COLLATION_OID; /* node_id's */
	old = sched_row_lock_held(w, held, "node_pkey", &key, 1);
	if (old == NULL)
		return false;
	for (k = 0; k < 4; k++)
	{
		Datum		d = heap_getattr(old, sched_column_of(w->rel, names[k]), desc, &n[k]);

		if (n[k])
			v[k] = (Datum) 0;
		else if (k == 0)
			v[k] = Int32GetDatum(add_int32(DatumGetInt32(d), sum->cpu_millis));
		else if (k == 1)
			v[k] = Int64GetDatum(add_int64(DatumGetInt64(d), sum->memory_mb));
		else if (k == 2)
			v[k] = Int32GetDatum(add_int32(DatumGetInt32(d), sum->gpus));
		else
			v[k] = Int32GetDatum(add_int32(DatumGetInt32(d), sum->count));
	}
	(void) sched_row_update(w, old, names, v, n, 4);
	return true;
}

/* The reservations summed by worker (by_node false) or node (true), into sums; their
 * number. */
static int
sum_by(const SchedReservationWrite *r, int n, bool by_node, CounterSum *sums)
{
	int			nsums = 0;
	int			i;
	int			k;

	for (i = 0; i < n; i++)
	{
		for (k = 0; k < nsums; k++)
			if (by_node ? strcmp(sums[k].first->node_id, r[i].node_id) == 0
				: memcmp(&sums[k].first->worker_id, &r[i].worker_id, sizeof(pg_uuid_t)) == 0)
				break;
		if (k == nsums)
		{
			memset(&sums[k], 0, sizeof(CounterSum));
			sums[k].first = &r[i];
			nsums++;
		}
		sums[k].count++;
		sums[k].cpu_millis += r[i].reserve_cpu_millis;
		sums[k].memory_mb += r[i].reserve_memory_mb;
		sums[k].gpus += r[i].reserve_gpus;
	}
	return nsums;
}

/* Table shape->table opened for a write of its own, in an executor state of its own;
 * false (nothing open) when direct writes are off or the table is not as made. */
static bool
open_alone(SchedRowWriter *w, const SchedTableShape *shape)
{
	EState	   *estate;

	if (!sched_direct_writes)
		return false;
	estate = CreateExecutorState();
	if (sched_row_writer_open(w, shape, estate))
		return true;
	FreeExecutorState(estate);
	return false;
}

/* Closes what open_alone opened; what was written is seen by what the caller reads
 * next, as after a statement. */
static void
close_alone(SchedRowWriter *w)
{
	EState	   *estate = w->estate;

	sched_row_writer_close(w);
	FreeExecutorState(estate);
	CommandCounterIncrement();
}

bool
sched_reservation_rows_write(const SchedReservationWrite *r, int n, TimestampTz at)
{
	SchedRowWriter w[W_COUNT];
	EState	   *estate;
	CounterSum *sums;
	SchedTenantDelta *deltas;
	int			nsums;
	int			i;
	int			k;

	MemoryContext cxt;
	MemoryContext row_cxt;
	MemoryContext old;

	if (n <= 0)
		return true;
	if (!sched_direct_writes)
		return false;
	/* what the writes allocate (rows, their copies, keys) goes with the write: a batch
	 * of 1,000 placements keeps none of it */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_sched direct writes",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	estate = CreateExecutorState();
	for (k = 0; k < W_COUNT; k++)
		if (!sched_row_writer_open(&w[k], shapes[k], estate))
		{
			while (--k >= 0)
				sched_row_writer_close(&w[k]);
			FreeExecutorState(estate);
			MemoryContextSwitchTo(old);
			MemoryContextDelete(cxt);
			return false;
		}

	deltas = palloc(sizeof(SchedTenantDelta) * n);
	row_cxt = AllocSetContextCreate(cxt, "pg_sched direct writes, one reservation",
									ALLOCSET_DEFAULT_SIZES);
	for (i = 0; i < n; i++)
	{
		Datum		ckey,
					skey;
		bool		ckey_null,
					skey_null;

		/* one reservation's rows at a time: a batch's peak is one reservation's */
		MemoryContextSwitchTo(row_cxt);
		request_dispatched(&w[W_REQUEST], &r[i], &ckey, &ckey_null, &skey, &skey_null);
		attempt_inserted(&w[W_ATTEMPT], &r[i], at, ckey, ckey_null, skey, skey_null);
		command_inserted(&w[W_COMMAND], &r[i], at);
		selected_milestone(&w[W_TIMELINE], &r[i], at);
		MemoryContextSwitchTo(cxt);
		MemoryContextReset(row_cxt);
		deltas[i].tenant = (char *) r[i].tenant;
		deltas[i].live = 1;
		deltas[i].cpu_millis = r[i].reserve_cpu_millis;
		deltas[i].memory_mb = r[i].reserve_memory_mb;
		deltas[i].gpus = r[i].reserve_gpus;
	}
	sums = palloc(sizeof(CounterSum) * n);
	nsums = sum_by(r, n, false, sums);
	for (k = 0; k < nsums; k++)
		if (!worker_counted(&w[W_WORKER], &sums[k].first->worker_id,
							(ItemPointer) &sums[k].first->worker_tid, sums[k].count))
			elog(ERROR, "pg_sched: reservation of request " INT64_FORMAT " found no worker row",
				 sums[k].first->request_id);
	nsums = sum_by(r, n, true, sums);
	for (k = 0; k < nsums; k++)
		if (!node_counted(&w[W_NODE], sums[k].first->node_id,
						  (ItemPointer) &sums[k].first->node_tid, &sums[k]))
			elog(ERROR, "pg_sched: reservation of request " INT64_FORMAT " found no node row",
				 sums[k].first->request_id);

	for (k = 0; k < W_COUNT; k++)
		sched_row_writer_close(&w[k]);
	FreeExecutorState(estate);
	/* the attempts' statement trigger's work (tenant_live.c) */
	sched_tenant_live_add(deltas, n);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	/* what was written is seen by what the call reads next, as after a statement */
	CommandCounterIncrement();
	return true;
}

bool
sched_counters_adjust_direct(const pg_uuid_t *worker_id, const char *node_id, int sign,
							 int32 reserve_cpu_millis, int64 reserve_memory_mb,
							 int32 reserve_gpus)
{
	SchedRowWriter w;
	SchedRowWriter nw;
	CounterSum	sum;

	if (!open_alone(&w, &worker_shape))
		return false;
	if (!open_alone(&nw, &node_shape))
	{
		close_alone(&w);
		return false;
	}
	memset(&sum, 0, sizeof(sum));
	sum.count = sign;
	sum.cpu_millis = (int64) sign * reserve_cpu_millis;
	sum.memory_mb = (int64) sign * reserve_memory_mb;
	sum.gpus = (int64) sign * reserve_gpus;
	/* the statement's order: the worker, then the node, either way */
	(void) worker_counted(&w, worker_id, NULL, sign);
	(void) node_counted(&nw, node_id, NULL, &sum);
	close_alone(&w);
	close_alone(&nw);
	return true;
}

bool
sched_milestone_direct(const pg_uuid_t *execution_id, const char *key, const char *stage,
					   const pg_uuid_t *step_id, int32 attempt_number,
					   const pg_uuid_t *attempt_id, const char *state, const char *component,
					   const char *title, Datum detail, bool detail_null, TimestampTz at)
{
	SchedRowWriter w;

	if (!open_alone(&w, &timeline_shape))
		return false;
	milestone_inserted(&w, execution_id, key, stage, step_id, attempt_number, attempt_id,
					   state, component, title, detail, detail_null, at);
	close_alone(&w);
	return true;
}

/* Whether status (a text Datum) is a live one. */
static bool
live_status(Datum status)
{
	return sched_attempt_status_live(TextDatumGetCString(status));
}

/* The tenant's share of attempt row tup (of w's table), counted sign. */
static void
attempt_delta(SchedRowWriter *w, HeapTuple tup, int sign, SchedTenantDelta *d)
{
	TupleDesc	desc = RelationGetDescr(w->rel);
	bool		isnull;

	sched_tenant_delta_of_attempt(heap_getattr(tup, sched_column_of(w->rel, "tenant"), desc, &isnull),
								  heap_getattr(tup, sched_column_of(w->rel, "reserve_cpu_millis"), desc, &isnull),
								  heap_getattr(tup, sched_column_of(w->rel, "reserve_memory_mb"), desc, &isnull),
								  heap_getattr(tup, sched_column_of(w->rel, "reserve_gpus"), desc, &isnull),
								  sign, d);
}

/*
 * Attempt row old (locked) updated: columns names[0..n) set to v/n; and the tenants'
 * sums moved as the attempts' statement trigger moves them, the old row's share out
 * when it was live and the new row's in when it is.
 */
static void
attempt_updated(SchedRowWriter *w, HeapTuple old, const char *const *names, const Datum *v,
				const bool *n, int count)
{
	TupleDesc	desc = RelationGetDescr(w->rel);
	AttrNumber	status = sched_column_of(w->rel, "status");
	HeapTuple	new = sched_row_update(w, old, names, v, n, count);
	SchedTenantDelta deltas[2];
	int			ndeltas = 0;
	bool		isnull;

	if (live_status(heap_getattr(old, status, desc, &isnull)))
		attempt_delta(w, old, -1, &deltas[ndeltas++]);
	if (live_status(heap_getattr(new, status, desc, &isnull)))
		attempt_delta(w, new, 1, &deltas[ndeltas++]);
	sched_tenant_live_add(deltas, ndeltas);
}

bool
sched_attempt_end_direct(const pg_uuid_t *attempt_id, const char *status, TimestampTz at,
						 Datum detail, bool detail_null)
{
	static const char *const names[] = {"status", "finished_at", "detail"};
	SchedRowWriter w;
	ScanKeyData key;
	HeapTuple	old;
	Datum		v[3];
	bool		n[3] = {false, false, false};

	if (!open_alone(&w, &attempt_shape))
		return false;
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(attempt_id));
	old = sched_row_lock(&w, "attempt_pkey", &key, 1);
	if (old != NULL)
	{
		v[0] = CStringGetTextDatum(status);
		v[1] = TimestampTzGetDatum(at);
		/* detail = COALESCE($4, x.detail) */
		if (detail_null)
			v[2] = heap_getattr(old, sched_column_of(w.rel, "detail"), RelationGetDescr(w.rel),
								&n[2]);
		else
			v[2] = detail;
		attempt_updated(&w, old, names, v, n, 3);
	}
	close_alone(&w);
	return true;
}

bool
sched_attempt_start_direct(const pg_uuid_t *attempt_id, TimestampTz at, TimestampTz *expires)
{
	static const char *const names[] = {"status", "started_at", "lease_expires_at"};
	SchedRowWriter w;
	ScanKeyData key;
	HeapTuple	old;
	TupleDesc	desc;
	Datum		v[3];
	bool		n[3] = {false, false, false};
	bool		isnull;
	Datum		d;
	TimestampTz extended;

	if (!open_alone(&w, &attempt_shape))
		return false;
	desc = RelationGetDescr(w.rel);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(attempt_id));
	old = sched_row_lock(&w, "attempt_pkey", &key, 1);
	if (old == NULL)
		elog(ERROR, "pg_sched: attempt %s to start is gone", sched_uuid_out(attempt_id));
	v[0] = CStringGetTextDatum("RUNNING");
	/* started_at = COALESCE(started_at, at) */
	d = heap_getattr(old, sched_column_of(w.rel, "started_at"), desc, &isnull);
	v[1] = isnull ? TimestampTzGetDatum(at) : d;
	/* lease_expires_at = GREATEST(lease_expires_at, at + make_interval(secs => ttl)) */
	extended = lease_end(at);
	d = heap_getattr(old, sched_column_of(w.rel, "lease_expires_at"), desc, &isnull);
	*expires = isnull ? extended : Max(DatumGetTimestampTz(d), extended);
	v[2] = TimestampTzGetDatum(*expires);
	attempt_updated(&w, old, names, v, n, 3);
	close_alone(&w);
	return true;
}

/* An open read of one row by a unique key of a table: the table, the index, a slot. */
/* Whether the attempt of command row `slot` (of table rel) lets the command be delivered:
 * live, or preempted for a CANCEL (the statement's sub-select; no attempt: no). */
static bool
attempt_takes_command(SchedIndexScan *attempts, Snapshot snapshot, Relation rel,
					  TupleTableSlot *slot)
{
	ScanKeyData key;
	bool		isnull;
	Datum		attempt_id = slot_getattr(slot, sched_column_of(rel, "attempt_id"), &isnull);
	Datum		status;
	Datum		kind;

	if (isnull)
		return false;
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, attempt_id);
	if (!sched_index_reader_get(attempts, snapshot, &key, 1))
		return false;
	status = slot_getattr(attempts->slot, sched_column_of(attempts->rel, "status"), &isnull);
	if (isnull)
		return false;
	if (live_status(status))
		return true;
	kind = slot_getattr(slot, sched_column_of(rel, "kind"), &isnull);
	return !isnull && strcmp(TextDatumGetCString(kind), "CANCEL") == 0 &&
		strcmp(TextDatumGetCString(status), "PREEMPTED") == 0;
}

/* Whether command row `slot` is one the worker's session `generation` may receive: not
 * delivered, made for that session or an earlier one. */
static bool
command_deliverable(Relation rel, TupleTableSlot *slot, int64 generation)
{
	bool		isnull;
	Datum		gen;

	(void) slot_getattr(slot, sched_column_of(rel, "delivered_at"), &isnull);
	if (!isnull)
		return false;
	gen = slot_getattr(slot, sched_column_of(rel, "worker_generation"), &isnull);
	return !isnull && DatumGetInt64(gen) <= generation;
}

int
sched_commands_deliver_direct(const pg_uuid_t *worker_id, int64 generation, int32 max,
							  TimestampTz at, Datum (**values_out)[SCHED_DELIVERED_COLUMNS],
							  bool (**nulls_out)[SCHED_DELIVERED_COLUMNS])
{
	Datum		(*values)[SCHED_DELIVERED_COLUMNS];
	bool		(*nulls)[SCHED_DELIVERED_COLUMNS];
	int			size = Min(max, 16);
	static const char *const names[] = {"delivered_at", "delivered_generation"};
	static const char *const command_columns_out[] = {"command_id", "kind", "attempt_id",
	"lease_version", "request_id"};
	static const char *const request_columns[] = {"execution_id", "step_id", "attempt_number",
	"capability", "capability_version", "payload"};
	SchedRowWriter w;
	SchedIndexScan attempts;
	SchedIndexScan requests;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt;
	Relation	index;
	IndexScanDesc scan;
	ScanKeyData key;
	TupleTableSlot *locked;
	int			n = 0;

	if (!open_alone(&w, &command_shape))
		return -1;
	values = palloc(sizeof(*values) * size);
	nulls = palloc(sizeof(*nulls) * size);
	cxt = AllocSetContextCreate(caller, "pg_sched command delivery", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(cxt);
	sched_index_reader_open(&attempts, "attempt", "attempt_pkey");
	sched_index_reader_open(&requests, "request", "request_pkey");
	locked = table_slot_create(w.rel, NULL);
	index = sched_row_writer_index(&w, "command_undelivered_idx");
	/* the worker's undelivered commands, oldest first (worker_id, command_id) */
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(worker_id));
	scan = index_beginscan(w.rel, index, w.snapshot, 1, 0);
	index_rescan(scan, &key, 1, NULL, 0);
	while (n < max && index_getnext_slot(scan, ForwardScanDirection, w.read_slot))
	{
		ItemPointerData tid = w.read_slot->tts_tid;
		bool		newer;
		HeapTuple	old;
		Datum		v[2];
		bool		vn[2] = {false, false};
		ScanKeyData rkey;
		bool		isnull;

		if (!command_deliverable(w.rel, w.read_slot, generation) ||
			!attempt_takes_command(&attempts, w.snapshot, w.rel, w.read_slot))
			continue;
		/* FOR UPDATE OF c SKIP LOCKED, with LockRows' recheck of a newer version */
		if (!sched_lock_skip_locked(w.rel, &tid, w.snapshot, locked, &newer))
			continue;
		if (newer &&
			(!command_deliverable(w.rel, locked, generation) ||
			 !attempt_takes_command(&attempts, w.snapshot, w.rel, locked)))
			continue;

		/* delivered_at = at, delivered_generation = generation */
		old = ExecCopySlotHeapTuple(locked);
		old->t_self = locked->tts_tid;
		old->t_tableOid = RelationGetRelid(w.rel);
		v[0] = TimestampTzGetDatum(at);
		v[1] = Int64GetDatum(generation);
		(void) sched_row_update(&w, old, names, v, vn, 2);

		/* the row returned: the command's columns, then its request's (none: not
		 * returned, as the statement's join left it out) */
		ScanKeyInit(&rkey, 1, BTEqualStrategyNumber, F_INT8EQ,
					slot_getattr(locked, sched_column_of(w.rel, "request_id"), &isnull));
		if (isnull || !sched_index_reader_get(&requests, w.snapshot, &rkey, 1))
			continue;
		MemoryContextSwitchTo(caller);
		if (n == size)
		{
			size = Min(2 * size, max);
			values = repalloc(values, sizeof(*values) * size);
			nulls = repalloc(nulls, sizeof(*nulls) * size);
		}
		/* copied out of the slots, into the caller's memory */
		sched_slot_copy_columns(locked, w.rel, command_columns_out, 5, values[n], nulls[n]);
		sched_slot_copy_columns(requests.slot, requests.rel, request_columns, 6, values[n] + 5,
								nulls[n] + 5);
		MemoryContextSwitchTo(cxt);
		n++;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(locked);
	sched_index_scan_end(&requests);
	sched_index_scan_end(&attempts);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	close_alone(&w);
	*values_out = values;
	*nulls_out = nulls;
	return n;
}
