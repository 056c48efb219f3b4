/*
 * reservation.c — stage 4, the reservation transaction (SPEC section 6), and the SQL
 * function dispatch_attempt.
 *
 * Locking protocol.  Every transaction that touches scheduling state takes its locks in
 * this order, and never waits for a lock that comes earlier than one it holds:
 *
 *   1. advisory lock on (step_id, attempt_number), transaction scope, with the tag of
 *      pg_advisory_xact_lock(sched.step_lock_key(step_id, attempt_number));
 *   2. the request row (FOR UPDATE);
 *   3. the attempt row (finish, renew, reap; a new attempt is inserted, never waited on);
 *   4. the execution row (dispatch: FOR SHARE, so dispatches of one execution run in
 *      parallel; cancel and complete: FOR UPDATE);
 *   5. the worker row, then its node row (FOR UPDATE OF both in one statement).
 *
 * Worker/node pairs are the contended resource.  A dispatch first tries candidates in
 * rank order with SKIP LOCKED; a pair held by another transaction is skipped, and the
 * next candidate is tried.  Only when it holds no pair lock at all (nothing was locked
 * in that first pass) and the caller allows waiting does it wait for the best skipped
 * pair, once: a dispatcher therefore never waits for a pair while holding another, so
 * two dispatchers cannot deadlock on pairs.  Waiting is what lets a dispatch observe a
 * concurrent drain, cordon, re-registration or reservation and refuse the pair.
 *
 * Under the pair lock every admission rule is evaluated again on the freshly read rows
 * (the same sched_admission() that selection used), and the worker's generation must
 * equal the one seen at selection.  Only then are the worker's slot and the node's
 * resources reserved (counter updates guarded by CHECK constraints), and the attempt,
 * its START command, the timeline milestone and the request's DISPATCHED state written,
 * all in the caller's transaction, followed by NOTIFY sched_worker_<worker_id> (sent at
 * commit, so a worker is never woken for a reservation that rolled back).
 *
 * Expected outcomes (EXISTING, UNSCHEDULABLE, EXECUTION_CLOSED, CANCELLED, NOT_CLAIMED)
 * are results, not errors: a scheduler loop's transaction is never aborted by them.
 */
#include "pg_sched.h"

#include "catalog/pg_type.h"
#include "commands/async.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(sched_dispatch_attempt);
PG_FUNCTION_INFO_V1(sched_step_lock_key);

static SchedStatement request_head = {
	"SELECT r.step_id, r.attempt_number FROM sched.request r "
	" WHERE r.request_id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID}
};

static SchedStatement execution_share = {
	"SELECT e.status FROM sched.execution e "
	" WHERE e.execution_id OPERATOR(pg_catalog.=) $1 FOR SHARE",
	1, {UUIDOID}
};

static SchedStatement request_cancel = {
	"UPDATE sched.request SET state = 'CANCELLED', claim_id = NULL, claimed_until = NULL "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID}
};

static SchedStatement attempt_existing = {
	"SELECT a.attempt_id, a.node_id, a.worker_id, a.lease_version, a.score "
	"  FROM sched.attempt a "
	" WHERE a.step_id OPERATOR(pg_catalog.=) $1 AND a.attempt_number OPERATOR(pg_catalog.=) $2",
	2, {UUIDOID, INT4OID}
};

static SchedStatement request_dispatched = {
	"UPDATE sched.request SET state = 'DISPATCHED', attempt_id = $2, claim_id = NULL, "
	"       claimed_until = NULL, last_reason = NULL, tries = tries OPERATOR(pg_catalog.+) $3 "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	3, {INT8OID, UUIDOID, INT4OID}
};

static SchedStatement request_waits = {
	"UPDATE sched.request SET state = 'PENDING', claim_id = NULL, claimed_until = NULL, "
	"       tries = tries OPERATOR(pg_catalog.+) $2, last_reason = $3, available_at = $4 "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	4, {INT8OID, INT4OID, TEXTOID, TIMESTAMPTZOID}
};

static SchedStatement worker_reserve = {
	"UPDATE sched.worker SET live_attempts = live_attempts OPERATOR(pg_catalog.+) 1 "
	" WHERE worker_id OPERATOR(pg_catalog.=) $1",
	1, {UUIDOID}
};

static SchedStatement node_reserve = {
	"UPDATE sched.node SET "
	"       reserved_cpu_millis = reserved_cpu_millis OPERATOR(pg_catalog.+) $2, "
	"       reserved_memory_mb = reserved_memory_mb OPERATOR(pg_catalog.+) $3, "
	"       reserved_gpus = reserved_gpus OPERATOR(pg_catalog.+) $4, "
	"       live_attempts = live_attempts OPERATOR(pg_catalog.+) 1 "
	" WHERE node_id OPERATOR(pg_catalog.=) $1",
	4, {TEXTOID, INT4OID, INT8OID, INT4OID}
};

static SchedStatement attempt_insert = {
	"INSERT INTO sched.attempt (request_id, execution_id, step_id, attempt_number, tenant, "
	"       node_id, worker_id, worker_generation, lease_version, status, reserve_cpu_millis, "
	"       reserve_memory_mb, reserve_gpus, score, dispatched_at, lease_expires_at) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, 'DISPATCHED', $9, $10, $11, $12, $13, "
	"        $13 OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $14)) "
	"RETURNING attempt_id",
	14, {INT8OID, UUIDOID, UUIDOID, INT4OID, TEXTOID, TEXTOID, UUIDOID, INT8OID,
		INT4OID, INT8OID, INT4OID, INT8OID, TIMESTAMPTZOID, FLOAT8OID}
};

static SchedStatement command_start = {
	"INSERT INTO sched.command (worker_id, worker_generation, kind, attempt_id, lease_version, "
	"       request_id, created_at) VALUES ($1, $2, 'START', $3, 1, $4, $5)",
	5, {UUIDOID, INT8OID, UUIDOID, INT8OID, TIMESTAMPTZOID}
};

static SchedStatement milestone_selected = {
	"SELECT sched._milestone($1, 'step.worker.selected:' OPERATOR(pg_catalog.||) $2::text "
	"       OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) $3::text, 'SCHEDULING', $2, $3, $4, "
	"       'SUCCEEDED', 'Scheduler', 'Node and worker selected', "
	"       pg_catalog.jsonb_build_object('node_id', $5, 'worker_id', $6, 'score', $7, "
	"                                     'request_id', $8), $9)",
	9, {UUIDOID, UUIDOID, INT4OID, UUIDOID, TEXTOID, UUIDOID, INT8OID, INT8OID, TIMESTAMPTZOID}
};

/* The key of the advisory lock on (step_id, attempt_number): 64 bits of a hash of the
 * step's 16 bytes followed by the attempt number, big-endian. */
static int64
step_lock_key(const pg_uuid_t *step_id, int32 attempt_number)
{
	unsigned char buf[UUID_LEN + 4];

	memcpy(buf, step_id->data, UUID_LEN);
	buf[UUID_LEN] = (unsigned char) ((uint32) attempt_number >> 24);
	buf[UUID_LEN + 1] = (unsigned char) ((uint32) attempt_number >> 16);
	buf[UUID_LEN + 2] = (unsigned char) ((uint32) attempt_number >> 8);
	buf[UUID_LEN + 3] = (unsigned char) (uint32) attempt_number;
	return (int64) hash_bytes_extended(buf, sizeof(buf), 0);
}

Datum
sched_step_lock_key(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(step_lock_key(PG_GETARG_UUID_P(0), PG_GETARG_INT32(1)));
}

/* Takes (wait) or tries (no wait) the transaction-scoped advisory lock on the step. */
static bool
lock_step(const pg_uuid_t *step_id, int32 attempt_number, bool wait)
{
	LOCKTAG		tag;
	int64		key = step_lock_key(step_id, attempt_number);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) ((uint64) key >> 32), (uint32) key, 1);
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

static bool
same_uuid(const pg_uuid_t *a, const pg_uuid_t *b)
{
	return memcmp(a->data, b->data, UUID_LEN) == 0;
}

static void
set_outcome(SchedDispatchResult *res, const char *outcome, char *detail)
{
	res->outcome = outcome;
	res->detail = detail;
}

/* Returns an existing attempt for (step, number) into res and marks the request
 * DISPATCHED; false when there is none. */
static bool
return_existing(const SchedRequestRow *req, SchedDispatchResult *res)
{
	Datum		args[3];
	bool		isnull;

	args[0] = UUIDPGetDatum(&req->step_id);
	args[1] = Int32GetDatum(req->attempt_number);
	sched_spi_exec(&attempt_existing, args, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	res->has_attempt = true;
	res->attempt_id = *DatumGetUUIDP(sched_spi_get(0, 1, &isnull));
	res->node_id = sched_spi_text(0, 2);
	res->worker_id = *DatumGetUUIDP(sched_spi_get(0, 3, &isnull));
	res->lease_version = sched_spi_int64(0, 4);
	res->has_score = true;
	res->score = sched_spi_int64(0, 5);
	if (strcmp(req->state, "DISPATCHED") != 0)
	{
		args[0] = Int64GetDatum(req->request_id);
		args[1] = UUIDPGetDatum(&res->attempt_id);
		args[2] = Int32GetDatum(0);
		sched_spi_exec(&request_dispatched, args, NULL, false, 0, SPI_OK_UPDATE);
	}
	set_outcome(res, "EXISTING",
				psprintf("attempt %d of step %s already exists",
						 req->attempt_number, sched_uuid_out(&req->step_id)));
	return true;
}

/* Writes the reservation of pair `row` for request `req`: see the file header. */
static void
reserve(const SchedRequestRow *req, const SchedPlacementArgs *args,
		SchedFleetRow *row, SchedFleetCache *cache, SchedDispatchResult *res)
{
	const SchedPlacement *p = &args->p;
	SchedRanked scored;
	Datum		v[14];
	bool		isnull;
	char	   *channel;
	char	   *payload;

	sched_score(p, &row->c, &scored);

	v[0] = UUIDPGetDatum(&row->worker_id);
	sched_spi_exec(&worker_reserve, v, NULL, false, 0, SPI_OK_UPDATE);

	v[0] = CStringGetTextDatum(row->c.node_id);
	v[1] = Int32GetDatum((int32) p->reserve_cpu_millis);
	v[2] = Int64GetDatum(p->reserve_memory_mb);
	v[3] = Int32GetDatum((int32) p->reserve_gpus);
	sched_spi_exec(&node_reserve, v, NULL, false, 0, SPI_OK_UPDATE);

	v[0] = Int64GetDatum(req->request_id);
	v[1] = UUIDPGetDatum(&req->execution_id);
	v[2] = UUIDPGetDatum(&req->step_id);
	v[3] = Int32GetDatum(req->attempt_number);
	v[4] = CStringGetTextDatum(req->tenant);
	v[5] = CStringGetTextDatum(row->c.node_id);
	v[6] = UUIDPGetDatum(&row->worker_id);
	v[7] = Int64GetDatum(row->generation);
	v[8] = Int32GetDatum((int32) p->reserve_cpu_millis);
	v[9] = Int64GetDatum(p->reserve_memory_mb);
	v[10] = Int32GetDatum((int32) p->reserve_gpus);
	v[11] = Int64GetDatum(scored.score);
	v[12] = TimestampTzGetDatum(args->at);
	v[13] = Float8GetDatum((double) sched_lease_ttl_s);
	sched_spi_exec(&attempt_insert, v, NULL, false, 0, SPI_OK_INSERT_RETURNING);
	res->attempt_id = *DatumGetUUIDP(sched_spi_get(0, 1, &isnull));
	res->has_attempt = true;

	v[0] = UUIDPGetDatum(&row->worker_id);
	v[1] = Int64GetDatum(row->generation);
	v[2] = UUIDPGetDatum(&res->attempt_id);
	v[3] = Int64GetDatum(req->request_id);
	v[4] = TimestampTzGetDatum(args->at);
	sched_spi_exec(&command_start, v, NULL, false, 0, SPI_OK_INSERT);

	v[0] = UUIDPGetDatum(&req->execution_id);
	v[1] = UUIDPGetDatum(&req->step_id);
	v[2] = Int32GetDatum(req->attempt_number);
	v[3] = UUIDPGetDatum(&res->attempt_id);
	v[4] = CStringGetTextDatum(row->c.node_id);
	v[5] = UUIDPGetDatum(&row->worker_id);
	v[6] = Int64GetDatum(scored.score);
	v[7] = Int64GetDatum(req->request_id);
	v[8] = TimestampTzGetDatum(args->at);
	sched_spi_exec(&milestone_selected, v, NULL, false, 0, SPI_OK_SELECT);

	v[0] = Int64GetDatum(req->request_id);
	v[1] = UUIDPGetDatum(&res->attempt_id);
	v[2] = Int32GetDatum(1);
	sched_spi_exec(&request_dispatched, v, NULL, false, 0, SPI_OK_UPDATE);

	/* what the updates above did, for the batch's cached fleet */
	row->c.worker_live_attempts++;
	row->c.node_live_attempts++;
	row->c.reserved_cpu_millis += p->reserve_cpu_millis;
	row->c.reserved_memory_mb += p->reserve_memory_mb;
	row->c.reserved_gpus += p->reserve_gpus;
	sched_fleet_cache_update(cache, row);

	channel = psprintf("sched_worker_%s", sched_uuid_out(&row->worker_id));
	payload = psprintf("START %s", sched_uuid_out(&res->attempt_id));
	Async_Notify(channel, payload);

	res->node_id = pstrdup(row->c.node_id);
	res->worker_id = row->worker_id;
	res->lease_version = 1;
	res->has_score = true;
	res->score = scored.score;
	set_outcome(res, "DISPATCHED",
				psprintf("placed on node %s, worker %s", row->c.node_id,
						 sched_uuid_out(&row->worker_id)));
}

/* Locks pair `seen` and re-checks it; true when it still admits the request. */
static bool
lock_and_recheck(const SchedPlacementArgs *args, const SchedFleetRow *seen, bool skip_locked,
				 SchedFleetCache *cache, bool *locked, SchedFleetRow *fresh)
{
	pg_uuid_t	worker_id = seen->worker_id;
	int64		seen_generation = seen->generation;

	*locked = sched_fleet_lock_pair(&worker_id, skip_locked, fresh);
	if (!*locked)
		return false;
	sched_fleet_cache_update(cache, fresh);
	if (fresh->generation != seen_generation)
		return false;
	return fresh->c.has_worker && sched_admission(&args->p, &fresh->c) == 0;
}

/*
 * Leaves the request queued after no pair could be reserved.  With no eligible node in
 * a fresh snapshot, the request backs off (1 s doubling per try, at most
 * sched.unschedulable_backoff_max); when eligible nodes exist but were held or taken by
 * concurrent dispatches, it stays ready at once.
 */
static void
leave_queued(const SchedRequestRow *req, const SchedPlacementArgs *args, int conflicts,
			 SchedFleetCache *cache, SchedDispatchResult *res)
{
	SchedFleet	local;
	SchedFleet *fleet = &local;
	int			eligible;
	char	   *summary;
	TimestampTz next = args->at;
	int			tries_added = 0;
	Datum		v[4];

	if (cache != NULL)
		fleet = sched_fleet_cached(cache, args->p.capability, true);
	else
		sched_fleet_load(args->p.capability,
						 SCHED_FLEET_ALL_NODES | SCHED_FLEET_FRESH | sched_fleet_flags_for(&args->p, true),
						 &local);
	summary = sched_fleet_summary(&args->p, fleet, &eligible);
	if (eligible == 0)
	{
		int64		backoff_s = sched_unschedulable_backoff_max_s;

		if (req->tries < 30)
			backoff_s = Min((int64) 1 << req->tries, backoff_s);
		next = args->at + backoff_s * USECS_PER_SEC;
		tries_added = 1;
	}
	else
		summary = psprintf("%s; %d candidate%s held or taken by concurrent dispatches",
						   summary, conflicts, conflicts == 1 ? "" : "s");

	v[0] = Int64GetDatum(req->request_id);
	v[1] = Int32GetDatum(tries_added);
	v[2] = CStringGetTextDatum(summary);
	v[3] = TimestampTzGetDatum(next);
	sched_spi_exec(&request_waits, v, NULL, false, 0, SPI_OK_UPDATE);
	set_outcome(res, "UNSCHEDULABLE", summary);
}

/* A retry avoids the node that lost or failed the step: that node moves to the end of
 * the ranking, so it is taken only when no other eligible node can be reserved. */
static void
rank_avoid_last(SchedRanked *ranked, int n, const char *avoid_node_id)
{
	int			i;

	if (avoid_node_id == NULL || n < 2)
		return;
	for (i = 0; i < n; i++)
		if (strcmp(ranked[i].node_id, avoid_node_id) == 0)
		{
			SchedRanked avoided = ranked[i];

			memmove(&ranked[i], &ranked[i + 1], sizeof(SchedRanked) * (n - i - 1));
			ranked[n - 1] = avoided;
			return;
		}
}

/* A queued request that is no longer ready (dispatched, cancelled, backed off, or
 * claimed by a live claim since the queue scan read it) is not tried. */
static bool
still_ready(const SchedRequestRow *req, TimestampTz at)
{
	if (req->available_at > at)
		return false;
	if (strcmp(req->state, "PENDING") == 0)
		return true;
	return strcmp(req->state, "CLAIMED") == 0 && req->claimed_until <= at;
}

bool
sched_dispatch_request(int64 request_id, const pg_uuid_t *claim_id, TimestampTz at,
					   bool from_queue, bool may_wait_pair, SchedFleetCache *cache,
					   SchedDispatchResult *res)
{
	Datum		v[2];
	bool		isnull;
	pg_uuid_t	step_id;
	int32		attempt_number;
	SchedRequestRow req;
	SchedPlacementArgs args;
	char	   *status;
	SchedFleet	local;
	SchedFleet *fleet = &local;
	SchedRanked *ranked;
	int			n;
	int			i;
	int		   *skipped;
	int			nskipped = 0;
	bool		holds_pair = false;

	memset(res, 0, sizeof(*res));
	res->request_id = request_id;

	v[0] = Int64GetDatum(request_id);
	sched_spi_exec(&request_head, v, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("request " INT64_FORMAT " does not exist", request_id)));
	step_id = *DatumGetUUIDP(sched_spi_get(0, 1, &isnull));
	attempt_number = (int32) sched_spi_int64(0, 2);

	/* 1. the step's advisory lock; 2. the request row */
	if (!lock_step(&step_id, attempt_number, !from_queue))
		return false;
	if (!sched_request_load(request_id, from_queue ? SCHED_LOCK_SKIP : SCHED_LOCK_WAIT,
							at, &args, &req))
	{
		if (from_queue)
			return false;
		elog(ERROR, "pg_sched: request " INT64_FORMAT " vanished", request_id);
	}
	if (from_queue && !still_ready(&req, at))
		return false;

	if (strcmp(req.state, "DISPATCHED") == 0 && return_existing(&req, res))
		return true;
	if (strcmp(req.state, "CANCELLED") == 0)
	{
		set_outcome(res, "CANCELLED", pstrdup("the request was cancelled"));
		return true;
	}
	if (claim_id != NULL)
	{
		if (strcmp(req.state, "CLAIMED") != 0 || !req.has_claim ||
			!same_uuid(&req.claim_id, claim_id))
		{
			set_outcome(res, "NOT_CLAIMED",
						psprintf("claim %s does not hold the request", sched_uuid_out(claim_id)));
			return true;
		}
		if (req.claimed_until <= at)
		{
			set_outcome(res, "NOT_CLAIMED",
						psprintf("claim %s expired at %s", sched_uuid_out(claim_id),
								 timestamptz_to_str(req.claimed_until)));
			return true;
		}
	}
	else if (strcmp(req.state, "CLAIMED") == 0 && req.claimed_until > at)
	{
		set_outcome(res, "NOT_CLAIMED",
					psprintf("the request is claimed by another scheduler until %s",
							 timestamptz_to_str(req.claimed_until)));
		return true;
	}

	/* 4. the execution, shared: refuse closed ones */
	v[0] = UUIDPGetDatum(&req.execution_id);
	sched_spi_exec(&execution_share, v, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		elog(ERROR, "pg_sched: execution of request " INT64_FORMAT " is missing", request_id);
	status = sched_spi_text(0, 1);
	if (strcmp(status, "CREATED") != 0 && strcmp(status, "QUEUED") != 0 &&
		strcmp(status, "RUNNING") != 0)
	{
		v[0] = Int64GetDatum(request_id);
		sched_spi_exec(&request_cancel, v, NULL, false, 0, SPI_OK_UPDATE);
		set_outcome(res, "EXECUTION_CLOSED",
					psprintf("execution %s is %s", sched_uuid_out(&req.execution_id), status));
		return true;
	}

	/* an attempt for this step and number already exists: return it, create nothing */
	if (return_existing(&req, res))
		return true;

	/* stages 2 and 3 on a fresh snapshot, then 5. pairs in rank order */
	if (cache != NULL)
		fleet = sched_fleet_cached(cache, args.p.capability, false);
	else
		sched_fleet_load(args.p.capability, SCHED_FLEET_FRESH | sched_fleet_flags_for(&args.p, false),
						 &local);
	ranked = sched_fleet_rank(&args.p, fleet, &n);
	rank_avoid_last(ranked, n, req.avoid_node_id);
	skipped = palloc(sizeof(int) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		SchedFleetRow fresh;
		bool		locked;

		if (lock_and_recheck(&args, &fleet->rows[ranked[i].index], true, cache, &locked, &fresh))
		{
			reserve(&req, &args, &fresh, cache, res);
			return true;
		}
		if (locked)
			holds_pair = true;
		else
			skipped[nskipped++] = i;
		res->conflicts++;
	}
	for (i = 0; i < nskipped; i++)
	{
		SchedFleetRow fresh;
		bool		locked;
		bool		wait = may_wait_pair && !holds_pair;

		if (lock_and_recheck(&args, &fleet->rows[ranked[skipped[i]].index], !wait, cache,
							 &locked, &fresh))
		{
			reserve(&req, &args, &fresh, cache, res);
			return true;
		}
		if (locked)
			holds_pair = true;
		res->conflicts++;
	}

	leave_queued(&req, &args, res->conflicts, cache, res);
	return true;
}

void
sched_dispatch_result_values(const SchedDispatchResult *res, Datum *values, bool *nulls)
{
	memset(nulls, 0, sizeof(bool) * 8);
	values[0] = CStringGetTextDatum(res->outcome);
	values[1] = Int64GetDatum(res->request_id);
	if (res->has_attempt)
	{
		values[2] = UUIDPGetDatum(&res->attempt_id);
		values[4] = UUIDPGetDatum(&res->worker_id);
		values[5] = Int64GetDatum(res->lease_version);
	}
	else
		nulls[2] = nulls[4] = nulls[5] = true;
	if (res->node_id != NULL)
		values[3] = CStringGetTextDatum(res->node_id);
	else
		nulls[3] = true;
	if (res->has_score)
		values[6] = Int64GetDatum(res->score);
	else
		nulls[6] = true;
	if (res->detail != NULL)
		values[7] = CStringGetTextDatum(res->detail);
	else
		nulls[7] = true;
}

/* dispatch_attempt(request_id, claim_id, at) → sched.dispatch_result */
Datum
sched_dispatch_attempt(PG_FUNCTION_ARGS)
{
	SchedDispatchResult res;
	TupleDesc	tupdesc;
	Datum		values[8];
	bool		nulls[8];
	pg_uuid_t	claim;
	HeapTuple	tuple;
	Datum		result;

	sched_check_not_null(fcinfo, 0, "request_id");
	sched_check_not_null(fcinfo, 2, "at");
	if (!PG_ARGISNULL(1))
		claim = *PG_GETARG_UUID_P(1);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_sched: dispatch_attempt must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	(void) sched_dispatch_request(PG_GETARG_INT64(0), PG_ARGISNULL(1) ? NULL : &claim,
								  PG_GETARG_TIMESTAMPTZ(2), false, true, NULL, &res);
	sched_dispatch_result_values(&res, values, nulls);
	/* the tuple is formed in SPI's memory and copied out before SPI_finish frees it */
	tuple = heap_form_tuple(tupdesc, values, nulls);
	result = SPI_datumTransfer(HeapTupleGetDatum(tuple), false, -1);
	SPI_finish();
	PG_RETURN_DATUM(result);
}
