/*
 * reservation.c — stage 4, the reservation transaction (SPEC section 6), and the SQL
 * function dispatch_attempt.
 *
 * Locking protocol.  Every transaction that touches scheduling state takes its locks in
 * this order, and never waits for a lock that comes earlier than one it holds:
 *
 *   1. advisory lock on (step_id, attempt_number), transaction scope, keyed by
 *      sched.step_lock_key(step_id, attempt_number) in a lock space of pg_sched's own
 *      (objsubid SCHED_STEP_LOCK_SPACE in pg_locks), which no SQL function can take:
 *      pg_advisory_lock() and its kin use objsubid 1 and 2, so no role can hold a
 *      step's lock at will and make its dispatch wait;
 *   2. the request row (FOR UPDATE);
 *   3. the attempt row (finish, renew, reap; a new attempt is inserted, never waited on);
 *   4. the execution row (dispatch: FOR SHARE, so dispatches of one execution run in
 *      parallel; cancel and complete: FOR UPDATE);
 *   4a. for a request that a limit applies to, the advisory locks of its concurrency key
 *      and its tenant (queue_limits.c), taken only by dispatch and never waited for;
 *   5. the worker row, then its node row (FOR UPDATE OF both in one statement).
 *
 * Two placements take more rows, always without waiting (so the order above may be
 * broken: a lock that is not waited for cannot close a cycle):
 *   - a gang member (see "Gangs" below): after its own 1, 2 and 4, the gang's row, then
 *     each other member's 1, 2 and 4, then pairs;
 *   - a preemption (preemption.c), after the preemptor's own pairs were tried: each
 *     victim's 3, 4 and 5 (lifecycle.c), then the preemptor's pair.
 *
 * Worker/node pairs are the contended resource.  A dispatch tries candidates in rank
 * order; a pair whose worker or node row another transaction holds is passed over
 * without locking either row (sched_fleet_pair_locker reads the rows' lockers), so a
 * dispatcher never ends up holding one row of a pair it did not take.  Waiting is
 * allowed only to a dispatch_attempt that is the first dispatch of its transaction, and
 * only for locks 1, 2 and 4 and, when every admissible pair was busy, for the end of
 * the transaction holding the best one (XactLockTableWait: no row of the pair is held
 * while waiting); then the busy pairs are tried once more.  Once a transaction holds
 * a step lock or a pair it never waits again: later dispatches in it, and every
 * dispatch of a queue scan (dispatch_next), pass busy steps, requests, executions and
 * pairs over.  So two dispatching transactions cannot wait for each other in a cycle,
 * whatever order they dispatch in, and an operator's transaction that drains, cordons
 * or heartbeats is never waited for by a dispatcher that holds rows it needs.
 *
 * Under the pair lock every admission rule is evaluated again on the freshly read rows
 * (the same sched_admission() that selection used), and the worker's generation must
 * equal the one seen at selection.  Only then are the worker's slot and the node's
 * resources reserved (counter updates guarded by CHECK constraints), and the attempt,
 * its START command, the timeline milestone and the request's DISPATCHED state written,
 * all in the caller's transaction; at commit (never for a reservation that rolled back)
 * the worker's session waiting in wait_commands is woken, and, when
 * sched.notify_workers is on, NOTIFY sched_worker_<worker_id> is sent (wakeup.c).  The
 * notification's payload is empty: anyone may LISTEN on any channel, so it says only
 * "poll now"; what to run is read with poll_commands, which only the worker's role may.
 *
 * Expected outcomes (EXISTING, UNSCHEDULABLE, EXECUTION_CLOSED, CANCELLED, NOT_CLAIMED)
 * are results, not errors: a scheduler loop's transaction is never aborted by them.
 */
#include "postgres.h"

#include "reservation.h"
#include "spread.h"
#include "gang.h"
#include "preemption.h"
#include "privileges.h"
#include "counters.h"
#include "dispatch_gate.h"
#include "batch.h"
#include "fleet_mirror.h"
#include "inflight.h"
#include "queue_limits.h"
#include "validate.h"
#include "spi_util.h"
#include "settings.h"
#include "wakeup.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/resowner.h"

PG_FUNCTION_INFO_V1(sched_dispatch_attempt);
PG_FUNCTION_INFO_V1(sched_step_lock_key);

static SchedStatement request_head = {
	"SELECT r.step_id, r.attempt_number FROM sched.request r "
	" WHERE r.request_id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID},
	.keyed = true
};

/*
 * The execution's row locked FOR SHARE (SELECT ... FOR SHARE [SKIP LOCKED], in C: one
 * statement fewer per dispatch), waiting for a transaction that holds it or not: its
 * status (palloc'd) into *status, true; false when another transaction holds it and
 * !wait, or it does not exist.  Like the statement, it makes this transaction's own
 * writes visible first (existing_attempt reads with the snapshot that follows).
 */
static bool
lock_execution_share(const pg_uuid_t *execution_id, bool wait, char **status)
{
	SchedIndexScan scan;
	ScanKeyData key;
	bool		locked;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(execution_id));
	locked = sched_index_lock_row(&scan, "execution", "execution_pkey", &key, 1,
								  LockTupleShare, wait) == SCHED_ROW_LOCKED;
	if (locked)
		*status = sched_slot_text(scan.slot, scan.rel, "status");
	sched_index_scan_end(&scan);
	return locked;
}

/*
 * The local transaction in which this backend last took a dispatch lock (a step lock or
 * a pair).  While it is the current one, the transaction holds dispatch locks and must
 * not wait for any other: see "never waits for a lock ... while it holds" above.
 */
static LocalTransactionId dispatch_lxid = InvalidLocalTransactionId;

static bool
xact_holds_dispatch_locks(void)
{
	return dispatch_lxid == MyProc->lxid;
}

/*
 * Candidates ranked after ranked[chosen] only because concurrent dispatches were
 * reserving on their nodes, which would otherwise have come first (scores of
 * sched_inflight_project).
 */
static int
held_passed(const SchedRanked *ranked, int n, int chosen)
{
	int			found = 0;
	int			i;

	for (i = 0; i < n; i++)
		if (i != chosen && ranked[i].held &&
			ranked[i].score > ranked[chosen].score)
			found++;
	return found;
}

/* Busy rows that would admit p: candidates passed over because others hold them.
 * (The busy rows' list, not the fleet: at every placement of a call.) */
static int
busy_admissible(const SchedPlacement *p, const SchedFleet *fleet)
{
	int			found = 0;
	int			i;

	for (i = 0; i < fleet->busy_count; i++)
		if (sched_admission(p, &fleet->rows[fleet->busy_rows[i]].c) == 0)
			found++;
	return found;
}

static void
note_dispatch_lock(void)
{
	dispatch_lxid = MyProc->lxid;
}

static SchedStatement request_cancel = {
	"UPDATE sched.request SET state = 'CANCELLED', claim_id = NULL, claimed_until = NULL "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID},
	.keyed = true
};


static SchedStatement request_dispatched = {
	"UPDATE sched.request SET state = 'DISPATCHED', attempt_id = $2, claim_id = NULL, "
	"       claimed_until = NULL, last_reason = NULL, tries = tries OPERATOR(pg_catalog.+) $3 "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	3, {INT8OID, UUIDOID, INT4OID},
	.keyed = true
};

static SchedStatement request_waits = {
	"UPDATE sched.request SET state = 'PENDING', claim_id = NULL, claimed_until = NULL, "
	"       tries = tries OPERATOR(pg_catalog.+) $2, last_reason = $3, available_at = $4 "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	4, {INT8OID, INT4OID, TEXTOID, TIMESTAMPTZOID},
	.keyed = true
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

/* The objsubid (advisory lock tag field 4) of step locks: pg_advisory_lock() and its
 * kin use 1 (one bigint key) and 2 (two int keys), never this. */
#define SCHED_STEP_LOCK_SPACE 0x5343

/* Takes (wait) or tries (no wait) the transaction-scoped advisory lock on the step. */
static bool
lock_step(const pg_uuid_t *step_id, int32 attempt_number, bool wait)
{
	LOCKTAG		tag;
	int64		key = step_lock_key(step_id, attempt_number);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) ((uint64) key >> 32), (uint32) key,
						 SCHED_STEP_LOCK_SPACE);
	if (LockAcquire(&tag, ExclusiveLock, false, !wait) == LOCKACQUIRE_NOT_AVAIL)
		return false;
	note_dispatch_lock();
	return true;
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

/*
 * The attempt of (step_id, attempt_number), if one exists: into res (attempt, node,
 * worker, lease version, score), true.  Read through the unique index
 * attempt_one_per_step_attempt, on the snapshot a statement would take now (the
 * execution's lock just taken made this transaction's own writes visible), so the read
 * costs one index probe however large sched.attempt has grown and whatever the planner
 * would have chosen for a table that was empty when its plan was made (a statement
 * joined to sched.attempt, planned against an empty table and kept, scanned the whole
 * table at every dispatch once it had grown).
 */
static bool
existing_attempt(const pg_uuid_t *step_id, int32 attempt_number, SchedDispatchResult *res)
{
	SchedIndexScan scan;
	ScanKeyData keys[2];
	Snapshot	snapshot;
	bool		found;

	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(step_id));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(attempt_number));
	sched_index_scan_begin(&scan, "attempt", "attempt_one_per_step_attempt", snapshot, keys, 2);
	found = sched_index_scan_next(&scan);
	if (found)
	{
		Relation	rel = scan.rel;
		TupleTableSlot *slot = scan.slot;

		res->has_attempt = true;
		res->attempt_id = *DatumGetUUIDP(sched_slot_value(slot, rel, "attempt_id"));
		res->node_id = sched_slot_text(slot, rel, "node_id");
		res->worker_id = *DatumGetUUIDP(sched_slot_value(slot, rel, "worker_id"));
		res->lease_version = DatumGetInt64(sched_slot_value(slot, rel, "lease_version"));
		res->has_score = true;
		res->score = DatumGetInt64(sched_slot_value(slot, rel, "score"));
	}
	sched_index_scan_end(&scan);
	UnregisterSnapshot(snapshot);
	return found;
}

/*
 * When an attempt already exists for the request's (step, number): returns it into res,
 * marks the request DISPATCHED, true.  Else false.
 */
static bool
return_existing(const SchedRequestRow *req, SchedDispatchResult *res)
{
	Datum		args[3];

	if (!existing_attempt(&req->step_id, req->attempt_number, res))
		return false;
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
		SchedFleetRow *row, int spread_matches, SchedBatch *cache, SchedDispatchResult *res)
{
	const SchedPlacement *p = &args->p;
	SchedRanked scored;
	SchedReservationWrite w;

	sched_score(p, &row->c, &scored);
	sched_score_add_spread(&scored, spread_matches);
	sched_uuid_random(&res->attempt_id);
	res->has_attempt = true;

	w.request_id = req->request_id;
	w.execution_id = req->execution_id;
	w.step_id = req->step_id;
	w.attempt_number = req->attempt_number;
	w.tenant = req->tenant;
	w.concurrency_key = req->concurrency_key;
	w.node_id = row->c.node_id;
	w.worker_id = row->worker_id;
	w.generation = row->generation;
	w.reserve_cpu_millis = (int32) p->reserve_cpu_millis;
	w.reserve_memory_mb = p->reserve_memory_mb;
	w.reserve_gpus = (int32) p->reserve_gpus;
	w.score = scored.score;
	w.attempt_id = res->attempt_id;
	w.request_tid = req->tid;
	w.worker_tid = row->worker_tid;
	w.node_tid = row->node_tid;
	if (cache != NULL && cache->defer)
		sched_batch_defer(cache, &w);
	else
		sched_write_reservation(&w, args->at);

	/* what the updates above did, for the batch's cached fleet */
	row->c.worker_live_attempts++;
	row->c.node_live_attempts++;
	row->c.reserved_cpu_millis += p->reserve_cpu_millis;
	row->c.reserved_memory_mb += p->reserve_memory_mb;
	row->c.reserved_gpus += p->reserve_gpus;
	sched_batch_update_rows(cache, row);

	sched_wake_worker(&row->worker_id);

	res->node_id = pstrdup(row->c.node_id);
	res->worker_id = row->worker_id;
	res->lease_version = 1;
	res->has_score = true;
	res->score = scored.score;
	set_outcome(res, "DISPATCHED",
				psprintf("placed on node %s, worker %s", row->c.node_id,
						 sched_uuid_out(&row->worker_id)));
}

/*
 * Locks pair `seen` unless another transaction holds either of its rows (then *locker is
 * that transaction and nothing is locked), and re-checks it on the fresh rows; true when
 * it still admits the request.  *locked tells whether the pair is now locked by us.
 */
static bool
lock_and_recheck_pair(const SchedPlacementArgs *args, const SchedFleetRow *seen,
				 SchedBatch *cache, bool *locked, TransactionId *locker,
				 SchedFleetRow *fresh)
{
	pg_uuid_t	worker_id = seen->worker_id;
	int64		seen_generation = seen->generation;
	SchedPairHint hint;

	*locked = false;
	*locker = sched_fleet_pair_locker(seen, &hint);
	if (TransactionIdIsValid(*locker))
		return false;
	*locked = sched_fleet_lock_pair(&worker_id, true, &hint, fresh);
	if (!*locked)
		return false;			/* locked since the check; it may hold the worker row */
	note_dispatch_lock();
	sched_batch_count_pending(cache, fresh);
	sched_batch_update_rows(cache, fresh);
	if (fresh->generation != seen_generation)
		return false;
	return fresh->c.has_worker && sched_admission(&args->p, &fresh->c) == 0;
}

/*
 * lock_and_recheck_pair, with the pair published as this transaction's reservation in
 * flight while it is tried (inflight.c), and withdrawn unless it is taken.
 */
static bool
lock_and_recheck(const SchedPlacementArgs *args, const SchedFleetRow *seen,
				 SchedBatch *cache, bool *locked, TransactionId *locker,
				 SchedFleetRow *fresh)
{
	bool		ok;

	sched_inflight_add(seen->node_hash);
	ok = lock_and_recheck_pair(args, seen, cache, locked, locker, fresh);
	if (!ok)
		sched_inflight_remove(seen->node_hash);
	return ok;
}

/* When a request that fits nowhere (a static reason) after `tries` tries is tried again:
 * 1 s doubling per try, at most sched.unschedulable_backoff_max. */
static TimestampTz
unschedulable_retry_at(int32 tries, TimestampTz at)
{
	int64		backoff_s = sched_unschedulable_backoff_max_s;

	if (tries < 30)
		backoff_s = Min((int64) 1 << tries, backoff_s);
	return at + backoff_s * USECS_PER_SEC;
}

/* Whether an execution in this status takes more work (a closed one does not). */
static bool
execution_takes_work(const char *status)
{
	return strcmp(status, "CREATED") == 0 || strcmp(status, "QUEUED") == 0 ||
		strcmp(status, "RUNNING") == 0;
}

/*
 * Leaves the request queued after no pair could be reserved, judged on a fresh snapshot:
 *   - no eligible node, and some node refuses it only for transient reasons (no_free_slot,
 *     *_exhausted): it waits for capacity.  That is not a failure: it stays ready with
 *     its place in the queue (available_at unchanged, no try counted), so the first
 *     dispatch after capacity frees takes it;
 *   - no eligible node, and every node has a static reason: the fleet as it is cannot run
 *     it; it backs off (1 s doubling per try, at most sched.unschedulable_backoff_max);
 *   - eligible nodes exist but were held or taken by concurrent dispatches: it stays
 *     ready at once.
 * The row is written only when something in it changes (a request waiting for capacity
 * with the same reason as last time is left alone).
 */
static void
leave_queued(const SchedRequestRow *req, const SchedPlacementArgs *args, int conflicts,
			 SchedBatch *cache, SchedDispatchResult *res)
{
	SchedFleet	local;
	SchedFleet *fleet = &local;
	char	   *summary;
	TimestampTz next = args->at;
	int			tries_added = 0;
	SchedVerdict verdict;
	Datum		v[4];

	if (cache != NULL)
		fleet = sched_batch_fleet(cache, args->p.capability, true);
	else
		sched_fleet_load(args->p.capability,
						 SCHED_FLEET_ALL_NODES | SCHED_FLEET_FRESH | sched_fleet_flags_for(&args->p, true),
						 &args->p, &local);
	summary = sched_fleet_summary(&args->p, fleet, &verdict);
	if (verdict == SCHED_VERDICT_WAITS)
	{
		res->waits = SCHED_WAIT_CAPACITY;
		next = req->available_at;
		if (strcmp(req->state, "PENDING") == 0 && req->last_reason != NULL &&
			strcmp(req->last_reason, summary) == 0)
		{
			set_outcome(res, "UNSCHEDULABLE", summary);
			return;
		}
	}
	else if (verdict == SCHED_VERDICT_STATIC)
	{
		next = unschedulable_retry_at(req->tries, args->at);
		tries_added = 1;
		res->waits = SCHED_WAIT_STATIC;
	}
	else
	{
		res->waits = SCHED_WAIT_CONTENTION;
		/* contention only: stays ready (available_at unchanged), no try counted */
		next = Max(req->available_at, args->at);
		summary = psprintf("%s; %d candidate%s held or taken by concurrent dispatches",
						   summary, conflicts, conflicts == 1 ? "" : "s");
	}

	v[0] = Int64GetDatum(req->request_id);
	v[1] = Int32GetDatum(tries_added);
	v[2] = CStringGetTextDatum(summary);
	v[3] = TimestampTzGetDatum(next);
	sched_spi_exec(&request_waits, v, NULL, false, 0, SPI_OK_UPDATE);
	set_outcome(res, "UNSCHEDULABLE", summary);
}

/*
 * The request waits for a limit (queue_limits.c): it keeps its place and no try is counted; a
 * rate-limited one is not tried again before the window frees a dispatch.  Nothing is
 * written when it was already waiting for the same reason and time.
 */
static void
leave_limited(const SchedRequestRow *req, const SchedLimitsResult *limits,
			  SchedDispatchResult *res)
{
	TimestampTz next = req->available_at;
	Datum		v[4];

	if (limits->waits == SCHED_WAIT_RATE)
		next = Max(next, limits->eligible_at);
	res->waits = limits->waits;
	res->tenant_full = limits->tenant_full;
	set_outcome(res, "UNSCHEDULABLE", limits->detail);
	if (strcmp(req->state, "PENDING") == 0 && next == req->available_at &&
		req->last_reason != NULL && strcmp(req->last_reason, limits->detail) == 0)
		return;
	v[0] = Int64GetDatum(req->request_id);
	v[1] = Int32GetDatum(0);
	v[2] = CStringGetTextDatum(limits->detail);
	v[3] = TimestampTzGetDatum(next);
	sched_spi_exec(&request_waits, v, NULL, false, 0, SPI_OK_UPDATE);
}

/* busy pairs remembered for the second try after waiting */
#define SKIPPED_MAX 64

/*
 * Candidates are tried best first, but ranked lazily: select_next() moves the best of
 * ranked[k..n-1] to position k, so a dispatch that succeeds with its first choice costs
 * one pass over the candidates instead of a sort.  A retry avoids the node that lost or
 * failed the step: that node is kept at the end (tried only after every other one).
 */
static void
select_next(SchedRanked *ranked, int n, int k, bool avoided_last)
{
	int			end = avoided_last ? n - 1 : n;
	int			best = k;
	int			i;

	if (k >= end)
		return;
	for (i = k + 1; i < end; i++)
		if (sched_ranked_order(&ranked[i], &ranked[best]) < 0)
			best = i;
	if (best != k)
	{
		SchedRanked tmp = ranked[k];

		ranked[k] = ranked[best];
		ranked[best] = tmp;
	}
}

/* Moves avoid_node_id's entry to the end; true if it was there (and others are). */
static bool
avoid_last(SchedRanked *ranked, int n, const char *avoid_node_id)
{
	int			i;

	if (avoid_node_id == NULL || n < 2)
		return false;
	for (i = 0; i < n; i++)
		if (strcmp(ranked[i].node_id, avoid_node_id) == 0)
		{
			SchedRanked tmp = ranked[n - 1];

			ranked[n - 1] = ranked[i];
			ranked[i] = tmp;
			return true;
		}
	return false;
}

/*
 * The step, request or execution is held by another transaction and this dispatch may
 * not wait: a queue scan passes the request over (false); dispatch_attempt answers
 * UNSCHEDULABLE without changing anything.
 */
static bool
busy(bool from_queue, SchedDispatchResult *res)
{
	if (from_queue)
		return false;
	res->waits = SCHED_WAIT_CONTENTION;	/* counted with the other contention */
	set_outcome(res, "UNSCHEDULABLE",
				pstrdup("the request is being dispatched, claimed or closed by another "
						"transaction, and this transaction already holds dispatch locks: "
						"nothing changed; try again after commit"));
	return true;
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

/* Leaves out of ranked[0..n-1] the candidates on the nodes of taken; returns the count left. */
static int
drop_taken(SchedRanked *ranked, int n, char **taken, int ntaken)
{
	int			kept = 0;
	int			i;
	int			k;

	if (ntaken == 0)
		return n;
	for (i = 0; i < n; i++)
	{
		for (k = 0; k < ntaken; k++)
			if (strcmp(ranked[i].node_id, taken[k]) == 0)
				break;
		if (k == ntaken)
			ranked[kept++] = ranked[i];
	}
	return kept;
}

/*
 * What a dispatch adds to the scores of ranked[from..n-1] before it tries them: the
 * spread term (when counted), the running attempts of concurrent reservations (held:
 * ranked last, inflight.c), the node that lost the step last (moved to the end).  Each
 * only ranks a candidate later.  Returns whether the last entry is the avoided node.
 */
static bool
adjust_candidates(const SchedRequestRow *req, const SchedPlacementArgs *args,
				  const SchedFleet *fleet, const SchedSpread *spread, SchedRanked *ranked,
				  int from, int n)
{
	if (args->spread_key != NULL)
		sched_spread_score(spread, ranked + from, n - from);
	sched_inflight_project(ranked + from, n - from, fleet);
	return avoid_last(ranked + from, n - from, req->avoid_node_id);
}

/*
 * ranked[0..tried-1] (candidates tried already) followed by every other admitted
 * candidate of fleet, adjusted: the candidates a dispatch tries once the rows the mirror
 * carried gave none that ranks first for certain.  Returns the new array (n into *n).
 */
static SchedRanked *
rank_every_candidate(const SchedRequestRow *req, const SchedPlacementArgs *args,
					 SchedFleet *fleet, SchedBatch *cache, const SchedSpread *spread,
					 char **taken, int ntaken, const SchedRanked *ranked, int tried,
					 int *n, bool *avoided_last)
{
	int			size = Max(fleet->count, 1) + tried;
	SchedRanked *all;
	bool	   *was_tried = palloc0(sizeof(bool) * Max(fleet->count, 1));
	int			nall;
	int			kept = tried;
	int			i;

	/* a batch's placements share one array (a call's memory stays flat) */
	if (cache == NULL)
		all = palloc(sizeof(SchedRanked) * size);
	else
	{
		if (cache->ranked_all_size < size)
		{
			if (cache->ranked_all != NULL)
				pfree(cache->ranked_all);
			cache->ranked_all = MemoryContextAlloc(cache->cxt, sizeof(SchedRanked) * size);
			cache->ranked_all_size = size;
		}
		all = cache->ranked_all;
	}

	memcpy(all, ranked, sizeof(SchedRanked) * tried);
	for (i = 0; i < tried; i++)
		was_tried[ranked[i].index] = true;
	nall = sched_batch_admit(cache, fleet, &args->p, all + tried);
	nall = drop_taken(all + tried, nall, taken, ntaken);
	for (i = 0; i < nall; i++)
		if (!was_tried[all[tried + i].index])
			all[kept++] = all[tried + i];
	*avoided_last = adjust_candidates(req, args, fleet, spread, all, tried, kept);
	*n = kept;
	pfree(was_tried);
	return all;
}

/*
 * Stages 2, 3 and 5 for one request, locked and ready: candidates ranked on a fresh
 * snapshot (minus the nodes in taken: a gang's distinct_nodes), then pairs tried in
 * rank order until one is reserved.  may_wait: a first dispatch, which may wait once
 * for the transaction holding the best pair.  False when no pair could be reserved
 * (res->conflicts counts the candidates held or refused by the re-check).
 *
 * The candidates are first only the rows the fleet mirror carries for the shape
 * (sched_batch_admit_best): a carried candidate that, adjusted, ranks before the bound
 * ranks before every other row, so it is tried as the full ranking would try it; at the
 * first candidate that does not (or none left), every admitted row is ranked.
 */
static bool
place_request(const SchedRequestRow *req, const SchedPlacementArgs *args, bool may_wait,
			  SchedBatch *cache, char **taken, int ntaken, SchedDispatchResult *res)
{
	SchedFleet	local;
	SchedFleet *fleet = &local;
	SchedRanked *ranked;
	const SchedRanked *bound;
	int			n;
	int			i;
	int		   *skipped;
	TransactionId *lockers;
	int			nskipped = 0;
	bool		holds_pair = false;
	bool		avoided_last;
	SchedSpread spread = {0, NULL};

	/* stages 2 and 3 on a fresh snapshot, then 5. pairs in rank order */
	if (cache != NULL)
		fleet = sched_batch_fleet(cache, args->p.capability, false);
	else
		sched_fleet_read(args->p.capability, SCHED_FLEET_FRESH | sched_fleet_flags_for(&args->p, false),
						 &args->p, &local);
	ranked = cache != NULL ? cache->ranked : palloc(sizeof(SchedRanked) * Max(fleet->count, 1));
	n = sched_batch_admit_best(cache, fleet, &args->p, ranked, &bound);
	n = drop_taken(ranked, n, taken, ntaken);
	if (args->spread_key != NULL && (n > 0 || bound != NULL))
	{
		/* the batch's reservations so far count: they are written first */
		if (cache != NULL && cache->defer)
			sched_batch_flush(cache);
		sched_spread_count(args->spread_key, true, fleet, &spread);
	}
	res->conflicts += busy_admissible(&args->p, fleet);
	/* try first what will be best once concurrent reservations commit (inflight.c) */
	avoided_last = adjust_candidates(req, args, fleet, &spread, ranked, 0, n);
	skipped = palloc(sizeof(int) * SKIPPED_MAX);
	lockers = palloc(sizeof(TransactionId) * SKIPPED_MAX);
	for (i = 0;; i++)
	{
		SchedFleetRow fresh;
		bool		locked;
		TransactionId locker;

		if (i < n)
			select_next(ranked, n, i, avoided_last);
		if (bound != NULL &&
			(i >= n || (avoided_last && i == n - 1) ||
			 sched_ranked_order(&ranked[i], bound) >= 0))
		{
			/* rows not carried may rank before it */
			ranked = rank_every_candidate(req, args, fleet, cache, &spread, taken, ntaken,
										  ranked, i, &n, &avoided_last);
			bound = NULL;
			if (i < n)
				select_next(ranked, n, i, avoided_last);
		}
		if (i >= n)
			break;
		if (lock_and_recheck(args, &fleet->rows[ranked[i].index], cache, &locked, &locker,
							 &fresh))
		{
			res->held_passed = held_passed(ranked, n, i);
			reserve(req, args, &fresh, ranked[i].spread_matches, cache, res);
			return true;
		}
		res->conflicts++;
		if (locked)
			holds_pair = true;
		else
		{
			/*
			 * Held by another transaction (seen by its lock on the row version the
			 * fleet read, or by the skip-locked lock of a newer version).  A batch never
			 * waits: the pair stays held until the other transaction ends, so it is not
			 * tried again in this call (each try costs a statement, and under
			 * concurrent batches most of the top-ranked pairs are held).
			 */
			if (cache != NULL && !may_wait)
			{
				sched_batch_mark_busy(cache, fleet, ranked[i].index);
			}
			if (!TransactionIdIsValid(locker))
				holds_pair = true;	/* the skip-locked join may have kept the worker row */
			else if (nskipped < SKIPPED_MAX)
			{
				lockers[nskipped] = locker;
				skipped[nskipped++] = i;
			}
		}
	}

	/*
	 * Every admissible pair was busy.  Holding no pair, a first dispatch waits for the
	 * transaction that holds the best one to end (holding no row of that pair), then
	 * tries the busy pairs once more: this is where a concurrent drain, cordon,
	 * re-registration or reservation is seen and the pair refused.
	 */
	if (nskipped > 0 && may_wait && !holds_pair)
	{
		XactLockTableWait(lockers[0], NULL, NULL, XLTW_None);
		for (i = 0; i < nskipped; i++)
		{
			SchedFleetRow fresh;
			bool		locked;
			TransactionId locker;

			if (lock_and_recheck(args, &fleet->rows[ranked[skipped[i]].index], cache,
								 &locked, &locker, &fresh))
			{
				reserve(req, args, &fresh, ranked[skipped[i]].spread_matches, cache, res);
				return true;
			}
		}
	}

	return false;
}

/*
 * The rest of sched_dispatch_request once the request's limits passed: its preemption's
 * hold, the pair, and (waiting for capacity) a preemption.  Same result.
 */
static bool
place_within_limits(SchedRequestRow *req, SchedPlacementArgs *args, TimestampTz at,
					bool may_wait, bool from_queue, SchedBatch *cache,
					SchedDispatchResult *res)
{
	/* the room its preemption holds for it, released under the rows' locks */
	if (req->held_node_id != NULL)
	{
		if (!sched_release_hold(req, args))
		{
			if (from_queue)
				return false;
			res->waits = SCHED_WAIT_CONTENTION;
			set_outcome(res, "UNSCHEDULABLE",
						psprintf("the worker and node its preemption holds room on (node %s) are held by "
								 "another transaction: nothing changed; the room stays held for it",
								 req->held_node_id));
			return true;
		}
		sched_batch_forget_fleets(cache);
	}

	/* (having taken its hold's rows, it may no longer wait: it holds a pair) */
	if (place_request(req, args, may_wait && req->held_node_id == NULL, cache, NULL, 0, res))
		return true;

	/* waits for capacity: preemption may make room (preemption.c) */
	if (sched_preemption && !req->in_gang)
	{
		char	   *done;

		sched_batch_flush(cache);
		done = sched_preempt_for(req, args, at);
		if (done != NULL)
		{
			Datum		v[4];

			sched_batch_forget_fleets(cache);
			v[0] = Int64GetDatum(req->request_id);
			v[1] = Int32GetDatum(0);
			v[2] = CStringGetTextDatum(done);
			v[3] = TimestampTzGetDatum(req->available_at);
			sched_spi_exec(&request_waits, v, NULL, false, 0, SPI_OK_UPDATE);
			res->waits = SCHED_WAIT_PREEMPTION;
			set_outcome(res, "UNSCHEDULABLE", done);
			return true;
		}
	}
	leave_queued(req, args, res->conflicts, cache, res);
	return true;
}

/*
 * Gangs (README, "Gangs"; gang.c holds the rows).  A gang member met by a dispatch
 * places its whole gang or nothing:
 *   1. the gang row, locked without waiting (busy: passed over, as a busy request);
 *   2. every member, in request_id order: its step lock and request row, without
 *      waiting (the met one is held already), then its execution, shared;
 *   3. unless every member is submitted, ready and in an open execution, the members
 *      wait with the reason gang_incomplete (nothing is reserved);
 *   4. in one subtransaction, each member in turn: its limits, then a pair, on a fresh
 *      snapshot that sees the members placed before it (with distinct_nodes, not on
 *      their nodes).  Every member is tried, to say how many could be placed;
 *   5. all placed: the subtransaction is kept and the gang marked placed.  Otherwise it
 *      is rolled back whole, which undoes every write and releases every lock taken in
 *      it (pairs, limit locks), and the members wait with "gang 3/4 placeable".
 * The members' own locks (step 2) are taken before the subtransaction, so they stay
 * held until the transaction ends and the reasons are written under them.  Nothing of
 * a half-placed gang is ever visible to another transaction: it is all one transaction,
 * and the part that is undone never committed.  Never waits once it holds a lock.
 */
typedef struct GangMember
{
	SchedRequestRow req;
	SchedPlacementArgs args;
} GangMember;

/* Leaves the members held (ids) waiting with reason; a static reason backs them off. */
static void
gang_leave(const int64 *ids, int n, const SchedRequestRow *met, char *reason, bool is_static,
		   TimestampTz at, TimestampTz not_before, SchedDispatchResult *res)
{
	if (is_static)
		not_before = Max(not_before, unschedulable_retry_at(met->tries, at));
	sched_gang_leave(ids, n, reason, is_static ? 1 : 0, not_before);
	res->waits = SCHED_WAIT_GANG;
	set_outcome(res, "UNSCHEDULABLE", reason);
}

/* What one try of step 4 takes and finds (place_members). */
typedef struct GangTry
{
	SchedGang  *g;
	GangMember *m;
	TimestampTz at;
	SchedDispatchResult *results;	/* one per member */
	char	  **taken;			/* the nodes of the members placed */
	int			ntaken;
	int			placed;
	int			first_failed;	/* the first member not placed, or -1 */
	char	   *failed_detail;
	bool		failed_static;
	bool		contention;		/* a limit's lock was held: try again later */
} GangTry;

/* Step 4, in its subtransaction (sched_in_subxact): kept only when every member is placed. */
static bool
place_members(void *arg)
{
	GangTry    *t = (GangTry *) arg;
	int			k;

	t->first_failed = -1;
	for (k = 0; k < t->g->nmembers; k++)
	{
		GangMember *x = &t->m[k];
		SchedLimitsResult limits;
		SchedDispatchResult *r = &t->results[k];

		r->request_id = x->req.request_id;
		sched_limits_check(&x->req, &x->args.p, t->at, NULL, &limits);
		if (limits.verdict == SCHED_LIMITS_BUSY)
		{
			t->contention = true;
			break;
		}
		if (limits.verdict == SCHED_LIMITS_OK &&
			place_request(&x->req, &x->args, false, NULL,
						  t->g->distinct_nodes ? t->taken : NULL, t->g->distinct_nodes ? t->ntaken : 0, r))
		{
			t->placed++;
			t->taken[t->ntaken++] = r->node_id;
			continue;
		}
		if (limits.verdict == SCHED_LIMITS_OK)
			sched_limits_withdraw(&limits);	/* (the placed members' claims stay, also
											 * when the subtransaction is rolled back:
											 * the safe side, until this one ends) */
		if (t->first_failed >= 0)
			continue;
		t->first_failed = k;
		if (limits.verdict == SCHED_LIMITS_REACHED)
			t->failed_detail = limits.detail;
		else
		{
			SchedFleet	fleet;
			SchedVerdict verdict;

			sched_fleet_load(x->args.p.capability,
							 SCHED_FLEET_ALL_NODES | SCHED_FLEET_FRESH |
							 sched_fleet_flags_for(&x->args.p, true), &x->args.p, &fleet);
			t->failed_detail = sched_fleet_summary(&x->args.p, &fleet, &verdict);
			t->failed_static = verdict == SCHED_VERDICT_STATIC;
			if (verdict == SCHED_VERDICT_FITS)
				t->failed_detail = psprintf("%s; %s", t->failed_detail,
										 t->g->distinct_nodes && t->ntaken > 0
										 ? "the eligible nodes are taken by other members (distinct_nodes) or by concurrent dispatches"
										 : "the eligible candidates are held or taken by concurrent dispatches");
		}
	}

	return t->placed == t->g->nmembers;
}

static bool
dispatch_gang(const SchedRequestRow *met, const SchedPlacementArgs *met_args,
			  const pg_uuid_t *claim_id,
			  TimestampTz at, bool from_queue, SchedBatch *cache, SchedDispatchResult *res)
{
	SchedGang	g;
	GangMember *m;
	int64	   *held;
	int			nheld = 0;
	char	   *gang = sched_uuid_out(&met->gang_id);
	char	   *waiting = NULL;
	bool		waiting_static = false;
	TimestampTz not_before = DT_NOBEGIN;
	GangTry		try = {0};
	int			k;

	/* one try per gang and call: its other members are passed over after it */
	if (sched_batch_gang_tried(cache, &met->gang_id))
		return false;

	/* 1. the gang */
	if (!sched_gang_lock(&met->gang_id, &g))
		return busy(from_queue, res);

	/* (a gang placed already has no waiting member, and none has more members than its
	 * size: a submit in REPEATABLE READ may count on an old snapshot) */
	if (g.placed || g.nmembers > g.size)
	{
		waiting = g.placed ? pstrdup("it was placed already")
			: psprintf("it has %d members, more than its size", g.nmembers);
		waiting_static = true;
	}

	/* 2. its members */
	m = palloc0(sizeof(GangMember) * Max(g.nmembers, 1));
	held = palloc(sizeof(int64) * Max(g.nmembers, 1));
	for (k = 0; k < g.nmembers; k++)
	{
		GangMember *x = &m[k];
		Datum		v[3];
		char	   *status;
		bool		isnull;
		bool		claimed_by_other;
		bool		dispatched;

		if (g.members[k] == met->request_id)
		{
			x->req = *met;
			x->args = *met_args;
		}
		else
		{
			v[0] = Int64GetDatum(g.members[k]);
			sched_spi_exec(&request_head, v, NULL, false, 1, SPI_OK_SELECT);
			if (SPI_processed == 0 ||
				!lock_step(DatumGetUUIDP(sched_spi_get(0, 1, &isnull)),
						   (int32) sched_spi_int64(0, 2), false) ||
				!sched_request_load(g.members[k], SCHED_LOCK_SKIP, at, &x->args, &x->req))
				return busy(from_queue, res);
		}
		/* a live claim of another scheduler (not this call's claim_id) is left alone */
		claimed_by_other = x->req.request_id != met->request_id &&
			strcmp(x->req.state, "CLAIMED") == 0 && x->req.claimed_until > at &&
			!(claim_id != NULL && x->req.has_claim && same_uuid(&x->req.claim_id, claim_id));
		if (!claimed_by_other)
			held[nheld++] = x->req.request_id;

		if (!lock_execution_share(&x->req.execution_id, false, &status))
			return busy(from_queue, res);
		{
			SchedDispatchResult probe;

			memset(&probe, 0, sizeof(probe));
			dispatched = existing_attempt(&x->req.step_id, x->req.attempt_number, &probe);
		}

		/* 3. what keeps the gang from being tried */
		if (waiting != NULL)
			continue;
		if (!execution_takes_work(status))
		{
			waiting = psprintf("member request " INT64_FORMAT " is in execution %s, which is %s",
							   x->req.request_id, sched_uuid_out(&x->req.execution_id), status);
			waiting_static = true;
		}
		else if (strcmp(x->req.state, "CANCELLED") == 0 || strcmp(x->req.state, "DISPATCHED") == 0 || dispatched)
		{
			waiting = psprintf("member request " INT64_FORMAT " is %s", x->req.request_id,
							   dispatched ? "dispatched already" : x->req.state);
			waiting_static = true;
		}
		else if (claimed_by_other)
			waiting = psprintf("member request " INT64_FORMAT " is claimed until %s",
							   x->req.request_id, timestamptz_to_str(x->req.claimed_until));
		else if (x->req.available_at > at)
		{
			waiting = psprintf("member request " INT64_FORMAT " is not ready before %s",
							   x->req.request_id, timestamptz_to_str(x->req.available_at));
			not_before = x->req.available_at;
		}
	}
	if (g.nmembers < g.size)
	{
		gang_leave(held, nheld, met,
				   psprintf("gang_incomplete: gang %s has %d of %d members submitted",
							gang, g.nmembers, g.size),
				   false, at, DT_NOBEGIN, res);
		return true;
	}
	if (waiting != NULL)
	{
		gang_leave(held, nheld, met,
				   psprintf("gang_incomplete: gang %s cannot be placed: %s", gang, waiting),
				   waiting_static, at, not_before, res);
		return true;
	}

	/* 4. every member, in one subtransaction; the batch's placements are written first */
	sched_batch_flush(cache);
	try.g = &g;
	try.m = m;
	try.at = at;
	try.results = palloc0(sizeof(SchedDispatchResult) * g.nmembers);
	try.taken = palloc(sizeof(char *) * g.nmembers);
	if (sched_in_subxact(place_members, &try))
	{
		SchedDispatchResult *results = try.results;

		/* 5. the whole gang (the subtransaction was kept) */
		sched_gang_mark_placed(&g, at);
		sched_batch_forget_fleets(cache);	/* its members were placed without it */
		for (k = 0; k < g.nmembers; k++)
			if (results[k].request_id == met->request_id)
				break;
		*res = results[k];
		res->detail = psprintf("gang %s placed whole: %d members%s", gang, g.nmembers,
							   g.distinct_nodes ? " on distinct nodes" : "");
		res->gang = palloc(sizeof(SchedDispatchResult) * g.nmembers);
		for (k = 0; k < g.nmembers; k++)
			if (results[k].request_id != met->request_id)
			{
				results[k].detail = res->detail;
				res->gang[res->ngang++] = results[k];
			}
		return true;
	}

	/* 5. not whole: nothing of it stayed (the pairs it published in flight go too) */
	for (k = 0; k < try.ntaken; k++)
		sched_inflight_remove(sched_node_hash(try.taken[k]));
	sched_batch_forget_fleets(cache);
	if (try.contention)
		return busy(from_queue, res);
	gang_leave(held, nheld, met,
			   psprintf("gang_incomplete: gang %s %d/%d placeable; request " INT64_FORMAT ": %s",
						gang, try.placed, g.nmembers, m[try.first_failed].req.request_id,
						try.failed_detail),
			   try.failed_static, at, DT_NOBEGIN, res);
	return true;
}

bool
sched_dispatch_request(int64 request_id, const SchedStepKey *key, const ItemPointerData *locked,
					   const pg_uuid_t *claim_id, TimestampTz at, bool from_queue,
					   SchedBatch *cache, SchedDispatchResult *res)
{
	Datum		v[3];
	bool		isnull;
	pg_uuid_t	step_id;
	int32		attempt_number;
	SchedRequestRow req;
	SchedPlacementArgs args;
	char	   *status;
	bool		done;

	SchedLimitsResult limits;
	bool		may_wait;

	memset(res, 0, sizeof(*res));
	res->request_id = request_id;

	if (key != NULL)
	{
		step_id = key->step_id;
		attempt_number = key->attempt_number;
	}
	else
	{
		v[0] = Int64GetDatum(request_id);
		sched_spi_exec(&request_head, v, NULL, false, 1, SPI_OK_SELECT);
		if (SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("request \"" INT64_FORMAT "\" does not exist (parameter \"request_id\")", request_id)));
		step_id = *DatumGetUUIDP(sched_spi_get(0, 1, &isnull));
		attempt_number = (int32) sched_spi_int64(0, 2);
	}

	/*
	 * Waits are allowed only to a dispatch_attempt that is the first dispatch of its
	 * transaction; a queue scan, or a transaction that already holds dispatch locks,
	 * never waits (a busy step, request or execution is passed over).
	 */
	may_wait = !from_queue && !xact_holds_dispatch_locks();

	/* 1. the step's advisory lock; 2. the request row (unless the caller's scan holds
	 * its newest version locked already) */
	if (!lock_step(&step_id, attempt_number, may_wait) ||
		(!sched_request_read_locked((ItemPointer) locked, at, &args, &req) &&
		 !sched_request_load(request_id, may_wait ? SCHED_LOCK_WAIT : SCHED_LOCK_SKIP,
							 at, &args, &req)))
		return busy(from_queue, res);
	if (from_queue && !still_ready(&req, at))
		return false;

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
						psprintf("claim %s does not hold the request (it is %s)",
								 sched_uuid_out(claim_id), req.state));
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
	if (!lock_execution_share(&req.execution_id, may_wait, &status))
		return busy(from_queue, res);	/* locked by cancel/complete (it exists: submit made it) */
	if (!execution_takes_work(status))
	{
		/* a closed execution dispatches nothing more: its open request is cancelled */
		if (strcmp(req.state, "DISPATCHED") != 0)
		{
			v[0] = Int64GetDatum(request_id);
			sched_spi_exec(&request_cancel, v, NULL, false, 0, SPI_OK_UPDATE);
		}
		set_outcome(res, "EXECUTION_CLOSED",
					psprintf("execution %s is %s", sched_uuid_out(&req.execution_id), status));
		return true;
	}

	/* an attempt for this step and number already exists: return it, create nothing */
	if (return_existing(&req, res))
		return true;

	/* a gang member places its whole gang, or nothing */
	if (req.in_gang)
		return dispatch_gang(&req, &args, claim_id, at, from_queue, cache, res);

	/* the queue-level limits, under their own locks, before any pair (queue_limits.c) */
	sched_limits_check(&req, &args.p, args.at, cache, &limits);
	if (limits.verdict == SCHED_LIMITS_BUSY)
	{
		res->limit_busy = limits.tenant_busy ? SCHED_LIMIT_TENANT_BUSY : SCHED_LIMIT_KEY_BUSY;
		if (from_queue)
			return false;
		res->waits = SCHED_WAIT_CONTENTION;
		set_outcome(res, "UNSCHEDULABLE", limits.detail);
		return true;
	}
	if (limits.verdict == SCHED_LIMITS_REACHED)
	{
		leave_limited(&req, &limits, res);
		return true;
	}

	/* the reservation; a quota claim whose reservation did not happen is withdrawn */
	done = place_within_limits(&req, &args, at, may_wait, from_queue, cache, res);
	if (!done || res->outcome == NULL || strcmp(res->outcome, "DISPATCHED") != 0)
		sched_limits_withdraw(&limits);
	return done;
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
	bool		turn;

	sched_check_not_null(fcinfo, 0, "request_id");
	sched_check_not_null(fcinfo, 2, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(2), "at");
	sched_check_at_not_future(PG_GETARG_TIMESTAMPTZ(2), "at");	/* it starts the lease */
	if (!PG_ARGISNULL(1))
		claim = *PG_GETARG_UUID_P(1);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pg_sched: dispatch_attempt must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	PreventCommandIfReadOnly("dispatch_attempt");	/* a standby, or a read-only transaction */
	turn = sched_dispatch_gate_enter();	/* before anything is read or locked */

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	(void) sched_dispatch_request(PG_GETARG_INT64(0), NULL, NULL, PG_ARGISNULL(1) ? NULL : &claim,
								  PG_GETARG_TIMESTAMPTZ(2), false, NULL, &res);
	sched_counters_add(&res);
	/* a gang placed whole: its other members are dispatched too (detail says so) */
	for (int g = 0; g < res.ngang; g++)
		sched_counters_add(&res.gang[g]);
	sched_dispatch_result_values(&res, values, nulls);
	/* the tuple is formed in SPI's memory and copied out before SPI_finish frees it */
	tuple = heap_form_tuple(tupdesc, values, nulls);
	result = SPI_datumTransfer(HeapTupleGetDatum(tuple), false, -1);
	SPI_finish();
	if (turn)
		sched_dispatch_gate_leave();
	PG_RETURN_DATUM(result);
}
