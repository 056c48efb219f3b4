/*
 * lifecycle.c — what happens to an attempt after its reservation: the worker protocol
 * (poll_commands, wait_commands, start_attempt, renew_lease, finish_attempt), leases and reaping
 * (reap_expired), the end of an attempt (release of its reservation, retry or failure
 * of the execution) and the close of an execution (complete_execution,
 * cancel_execution).
 *
 * Locks, in the order of the protocol of reservation.c: the attempt row, then the
 * execution row, then the worker row, then its node row.  Terminal transitions release
 * the worker's slot and the node's reservations (sched_release_reservation, batch.c,
 * the owner of the reservation writes) in the same transaction as the status change,
 * and only from a live status, so a slot is released exactly once.
 *
 * Who may: the worker functions act only for a worker the caller may act for (its
 * registering role, that role's members, sched_admin: privileges.c), the application's
 * (complete, cancel) only on a tenant the caller may act for; both are checked before
 * anything is written or said of the object's state (42501).
 *
 * Errors: a stale lease_version or generation, or an attempt that is no longer live, is
 * 55000 and changes nothing (a zombie worker never overwrites what happened after its
 * lease was lost); unknown ids are 42704; NULL parameters 22004, invalid ones 22023; an
 * `at` in the future, from a caller other than sched_admin, 22023 (it would stretch the
 * lease).
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "access/stratnum.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "lifecycle.h"
#include "privileges.h"
#include "reservation_rows.h"
#include "settings.h"
#include "spi_util.h"
#include "validate.h"
#include "wakeup.h"

PG_FUNCTION_INFO_V1(sched_poll_commands);
PG_FUNCTION_INFO_V1(sched_wait_commands);
PG_FUNCTION_INFO_V1(sched_start_attempt);
PG_FUNCTION_INFO_V1(sched_renew_lease);
PG_FUNCTION_INFO_V1(sched_finish_attempt);
PG_FUNCTION_INFO_V1(sched_reap_expired);
PG_FUNCTION_INFO_V1(sched_complete_execution);
PG_FUNCTION_INFO_V1(sched_cancel_execution);

/* An attempt row, as the lifecycle needs it. */
typedef struct AttemptRow
{
	pg_uuid_t	attempt_id;
	int64		request_id;
	pg_uuid_t	execution_id;
	pg_uuid_t	step_id;
	int32		attempt_number;
	char	   *node_id;
	pg_uuid_t	worker_id;
	int64		worker_generation;
	int64		lease_version;
	char	   *status;
	int32		reserve_cpu_millis;
	int64		reserve_memory_mb;
	int32		reserve_gpus;
	TimestampTz lease_expires_at;
	Oid			worker_owner;	/* the worker's registered_by; InvalidOid: none */
	char	   *execution_status;	/* by attempt_lock_to_start (read, not locked) and
									 * attempt_lock_to_end (locked FOR SHARE); NULL
									 * otherwise */
	bool		execution_shared;	/* execution_status was read under FOR SHARE */
} AttemptRow;

#define ATTEMPT_SELECT_LIST \
	"SELECT x.attempt_id, x.request_id, x.execution_id, x.step_id, x.attempt_number, " \
	"       x.node_id, x.worker_id, x.worker_generation, x.lease_version, x.status, " \
	"       x.reserve_cpu_millis, x.reserve_memory_mb, x.reserve_gpus, x.lease_expires_at, " \
	"       (SELECT w.registered_by FROM sched.worker w " \
	"         WHERE w.worker_id OPERATOR(pg_catalog.=) x.worker_id) "

#define ATTEMPT_COLUMNS ATTEMPT_SELECT_LIST "  FROM sched.attempt x "

/* a worker's runtime_state, as read_worker reads it */
typedef char WorkerState[16];

/*
 * How lock_attempt takes an attempt: its row FOR UPDATE (as SELECT ... FOR UPDATE,
 * in C: sched_index_lock_row), with the registered_by of its worker, and
 *   ATTEMPT_TO_START: the status of its execution, read: an execution never goes back
 *     to CREATED or QUEUED, so a start that reads another status has none to change;
 *   ATTEMPT_TO_END: its execution locked FOR SHARE, in the lock order (the attempt,
 *     then the execution): what an end that closes no execution takes (finish_attempt
 *     SUCCEEDED or CANCELLED).
 */
typedef enum AttemptLockKind
{
	ATTEMPT_ONLY,
	ATTEMPT_TO_START,
	ATTEMPT_TO_END
} AttemptLockKind;

/* a preemption's victim, live, taken without waiting */
static SchedStatement attempt_lock_live_skip = {
	ATTEMPT_COLUMNS " WHERE x.attempt_id OPERATOR(pg_catalog.=) $1 "
	"   AND x.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) "
	" FOR UPDATE OF x SKIP LOCKED",
	1, {UUIDOID},
	.keyed = true
};

/* holds (preemption) whose time passed, or whose request waits no more: released */
static SchedStatement holds_ended = {
	"SELECT r.request_id, r.held_worker_id, r.held_node_id, r.reserve_cpu_millis, "
	"       r.reserve_memory_mb, r.reserve_gpus FROM sched.request r "
	" WHERE r.held_until IS NOT NULL AND (r.held_until OPERATOR(pg_catalog.<=) $1 "
	"       OR r.state OPERATOR(pg_catalog.<>) ALL ('{PENDING,CLAIMED}'::pg_catalog.text[])) "
	" ORDER BY r.held_until, r.request_id FOR UPDATE OF r SKIP LOCKED",
	1, {TIMESTAMPTZOID},
	.keyed = true
};


/* live attempts whose lease expired, oldest first; a concurrent finish holds its own */
static SchedStatement attempts_expired = {
	ATTEMPT_COLUMNS
	" WHERE x.finished_at IS NULL "
	"   AND x.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) AND x.lease_expires_at OPERATOR(pg_catalog.<) $1 "
	" ORDER BY x.lease_expires_at, x.attempt_id FOR UPDATE OF x SKIP LOCKED",
	1, {TIMESTAMPTZOID},
	.keyed = true
};

static SchedStatement attempts_live_of_execution = {
	ATTEMPT_COLUMNS
	" WHERE x.execution_id OPERATOR(pg_catalog.=) $1 AND x.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) "
	" ORDER BY x.dispatched_at, x.attempt_id",
	1, {UUIDOID},
	.keyed = true
};

/* a milestone, appended once (idempotent on its key: 25_work_api.sql, Timeline) */
static SchedStatement milestone = {
	"INSERT INTO sched.timeline (execution_id, milestone_key, stage, step_id, attempt_number, "
	"                            attempt_id, state, component, title, detail, at) "
	"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
	"ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING",
	11, {UUIDOID, TEXTOID, TEXTOID, UUIDOID, INT4OID, UUIDOID, TEXTOID, TEXTOID, TEXTOID,
		JSONBOID, TIMESTAMPTZOID},
	.generic_plan = true
};

/* a live attempt's lease extended to $2 + $3 seconds: it never shrinks */
#define LEASE_EXTENDED \
	"GREATEST(x.lease_expires_at, $2 OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => $3))"

static SchedStatement lease_extend = {
	"UPDATE sched.attempt x "
	"   SET lease_expires_at = " LEASE_EXTENDED " "
	" WHERE x.attempt_id OPERATOR(pg_catalog.=) $1 RETURNING x.lease_expires_at",
	3, {UUIDOID, TIMESTAMPTZOID, FLOAT8OID},
	.keyed = true
};

/* the start and the lease's extension in one row version (extend_lease's rule) */
static SchedStatement attempt_started = {
	"UPDATE sched.attempt x SET status = 'RUNNING', "
	"       started_at = COALESCE(x.started_at, $2), "
	"       lease_expires_at = " LEASE_EXTENDED " "
	" WHERE x.attempt_id OPERATOR(pg_catalog.=) $1 RETURNING x.lease_expires_at",
	3, {UUIDOID, TIMESTAMPTZOID, FLOAT8OID},
	.keyed = true
};

static SchedStatement execution_running = {
	"UPDATE sched.execution e SET status = 'RUNNING', updated_at = $2 "
	" WHERE e.execution_id OPERATOR(pg_catalog.=) $1 AND e.status OPERATOR(pg_catalog.=) ANY ('{CREATED,QUEUED}'::pg_catalog.text[])",
	2, {UUIDOID, TIMESTAMPTZOID},
	.keyed = true
};

static SchedStatement attempt_ended = {
	"UPDATE sched.attempt x SET status = $2, finished_at = $3, "
	"       detail = COALESCE($4, x.detail) "
	" WHERE x.attempt_id OPERATOR(pg_catalog.=) $1",
	4, {UUIDOID, TEXTOID, TIMESTAMPTZOID, JSONBOID},
	.keyed = true
};

static SchedStatement request_of_attempt = {
	"SELECT r.max_attempts FROM sched.request r WHERE r.request_id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID},
	.keyed = true
};

static SchedStatement execution_share = {
	"SELECT e.status FROM sched.execution e WHERE e.execution_id OPERATOR(pg_catalog.=) $1 "
	"   FOR SHARE OF e",
	1, {UUIDOID},
	.keyed = true
};

static SchedStatement execution_no_key_update = {
	"SELECT e.status FROM sched.execution e WHERE e.execution_id OPERATOR(pg_catalog.=) $1 "
	"   FOR NO KEY UPDATE OF e",
	1, {UUIDOID},
	.keyed = true
};

/* the same, for the reaper, which never waits (no rows: another transaction holds it) */
static SchedStatement execution_share_skip = {
	"SELECT e.status FROM sched.execution e WHERE e.execution_id OPERATOR(pg_catalog.=) $1 "
	"   FOR SHARE OF e SKIP LOCKED",
	1, {UUIDOID},
	.keyed = true
};

static SchedStatement execution_no_key_update_skip = {
	"SELECT e.status FROM sched.execution e WHERE e.execution_id OPERATOR(pg_catalog.=) $1 "
	"   FOR NO KEY UPDATE OF e SKIP LOCKED",
	1, {UUIDOID},
	.keyed = true
};

/* the worker and node rows the release updates, taken by the reaper before it writes */
static SchedStatement pair_lock_skip = {
	"SELECT 1 FROM sched.worker w JOIN sched.node n ON n.node_id OPERATOR(pg_catalog.=) w.node_id "
	" WHERE w.worker_id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE OF w, n SKIP LOCKED",
	1, {UUIDOID},
	.keyed = true
};

/* an execution's tenant and the tenant's owner (NULL: none) */
static SchedStatement execution_tenant = {
	"SELECT e.tenant, t.owner FROM sched.execution e "
	"  LEFT JOIN sched.tenant t ON t.tenant OPERATOR(pg_catalog.=) (e.tenant COLLATE pg_catalog.\"C\") "
	" WHERE e.execution_id OPERATOR(pg_catalog.=) $1",
	1, {UUIDOID},
	.keyed = true
};

static SchedStatement execution_update = {
	"SELECT e.status FROM sched.execution e WHERE e.execution_id OPERATOR(pg_catalog.=) $1 "
	"   FOR UPDATE OF e",
	1, {UUIDOID},
	.keyed = true
};

/* the retry: the same step as attempt_number + 1, avoiding the node ($4), with $5 more
 * attempts allowed (a preempted attempt does not use one up); a gang member's retry is
 * a request of its own (a gang is placed whole once) */
static SchedStatement request_retry = {
	"INSERT INTO sched.request AS r ( "
	"    execution_id, step_id, attempt_number, tenant, priority, capability, capability_version, "
	"    required_labels, preferred_labels, min_cpu_millis, min_memory_mb, min_gpus, "
	"    reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id, max_attempts, "
	"    state, queued_at, available_at, sort_key, avoid_node_id, payload, concurrency_key, spread_key, "
	"    preemptible) "
	"SELECT q.execution_id, q.step_id, $2, q.tenant, q.priority, q.capability, "
	"       q.capability_version, q.required_labels, q.preferred_labels, q.min_cpu_millis, "
	"       q.min_memory_mb, q.min_gpus, q.reserve_cpu_millis, q.reserve_memory_mb, "
	"       q.reserve_gpus, q.node_id, q.max_attempts OPERATOR(pg_catalog.+) $5, 'PENDING', $3, $3, "
	"       sched._queue_key(q.priority, $3), $4, q.payload, q.concurrency_key, q.spread_key, "
	"       q.preemptible "
	"  FROM sched.request q WHERE q.request_id OPERATOR(pg_catalog.=) $1 "
	"ON CONFLICT ON CONSTRAINT request_one_per_step_attempt DO NOTHING "
	"RETURNING r.request_id",
	5, {INT8OID, INT4OID, TIMESTAMPTZOID, TEXTOID, INT4OID},
	.keyed = true
};

static SchedStatement execution_closed = {
	"UPDATE sched.execution e SET status = $2, updated_at = $3, finished_at = $3 "
	" WHERE e.execution_id OPERATOR(pg_catalog.=) $1",
	3, {UUIDOID, TEXTOID, TIMESTAMPTZOID},
	.keyed = true
};

/* open requests of an execution, cancelled; those a dispatcher holds are left to it */
static SchedStatement requests_cancelled = {
	"UPDATE sched.request r SET state = 'CANCELLED', claim_id = NULL, claimed_until = NULL "
	" WHERE r.request_id OPERATOR(pg_catalog.=) ANY ( "
	"    SELECT r2.request_id FROM sched.request r2 "
	"     WHERE r2.execution_id OPERATOR(pg_catalog.=) $1 "
	"       AND r2.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[]) "
	"     FOR UPDATE SKIP LOCKED)",
	1, {UUIDOID},
	.keyed = true
};

static SchedStatement cancel_command = {
	"INSERT INTO sched.command (worker_id, worker_generation, kind, attempt_id, lease_version, "
	"                           request_id, created_at) "
	"VALUES ($1, $2, 'CANCEL', $3, $4, $5, $6)",
	6, {UUIDOID, INT8OID, UUIDOID, INT8OID, INT8OID, TIMESTAMPTZOID},
	.keyed = true
};

static SchedStatement execution_open_work = {
	"SELECT EXISTS (SELECT 1 FROM sched.request r "
	"                WHERE r.execution_id OPERATOR(pg_catalog.=) $1 "
	"                  AND r.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[])) "
	"    OR EXISTS (SELECT 1 FROM sched.attempt a "
	"                WHERE a.execution_id OPERATOR(pg_catalog.=) $1 "
	"                  AND a.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]))",
	1, {UUIDOID},
	.keyed = true
};

static SchedStatement expired_claims_returned = {
	"UPDATE sched.request r SET state = 'PENDING', claim_id = NULL, claimed_until = NULL "
	" WHERE r.request_id OPERATOR(pg_catalog.=) ANY ( "
	"    SELECT r2.request_id FROM sched.request r2 "
	"     WHERE r2.state = 'CLAIMED' AND r2.claimed_until OPERATOR(pg_catalog.<=) $1 "
	"     FOR UPDATE SKIP LOCKED)",
	1, {TIMESTAMPTZOID},
	.keyed = true
};

/* live counters back at zero (tenants that come and go would pile them up); a row a
 * running dispatch holds is left for the next time */
static SchedStatement tenant_live_pruned_0_1 = {
	"DELETE FROM sched.tenant_live l WHERE ROW(l.tenant, l.backend) OPERATOR(pg_catalog.=) ANY ( "
	"    SELECT z.tenant, z.backend FROM sched.tenant_live z WHERE z.live OPERATOR(pg_catalog.=) 0 "
	"       FOR UPDATE SKIP LOCKED)",
	0, {InvalidOid}
};

/* (0.2.0: the reservations' sums too.  A row's sums are not zero with its live count:
 * a slot's row gains what the attempts dispatched in it reserve and loses what those
 * that end in it reserved, so a row at live 0 may still hold a part of a tenant's sums) */
static SchedStatement tenant_live_pruned = {
	"DELETE FROM sched.tenant_live l WHERE ROW(l.tenant, l.backend) OPERATOR(pg_catalog.=) ANY ( "
	"    SELECT z.tenant, z.backend FROM sched.tenant_live z WHERE z.live OPERATOR(pg_catalog.=) 0 "
	"       AND z.cpu_millis OPERATOR(pg_catalog.=) 0 AND z.memory_mb OPERATOR(pg_catalog.=) 0 "
	"       AND z.gpus OPERATOR(pg_catalog.=) 0 "
	"       FOR UPDATE SKIP LOCKED)",
	0, {InvalidOid}
};

/* commands of attempts that already ended (lost, failed, cancelled) are not delivered:
 * the worker could only be refused on them, except the CANCEL of a preempted attempt,
 * which ended before its worker stopped it (preemption.c); commands an earlier session
 * of the worker did not receive go to the current one (nothing else ever will).
 * One plan for every call (generic: with LIMIT $3 the plan cache found every custom
 * plan cheaper and planned again at each call, about 3 ms, more than the rest of a
 * wait_commands), in the order (worker_id, command_id), which only the partial index
 * command_undelivered_idx gives without a sort: a walk of the primary key instead reads
 * every command ever delivered to any worker.  The worker is matched as a range of one
 * value: with worker_id = $1 the planner would drop worker_id from the order (a
 * constant) and walk the primary key again.  The attempt, the command's own row and the
 * request are reached by key from each row (a sub-select, an array of keys, a fenced
 * LATERAL): a plan made once while the tables were empty would otherwise join them by
 * full scans, and keep doing so as they grow. */
static SchedStatement commands_delivered = {
	"WITH next AS ( "
	"    SELECT c.command_id FROM sched.command c "
	"     WHERE c.worker_id OPERATOR(pg_catalog.>=) $1 AND c.worker_id OPERATOR(pg_catalog.<=) $1 "
	"       AND c.delivered_at IS NULL "
	"       AND c.worker_generation OPERATOR(pg_catalog.<=) $2 "
	"       AND (SELECT a.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) "
	"                   OR (c.kind OPERATOR(pg_catalog.=) 'CANCEL' AND a.status OPERATOR(pg_catalog.=) 'PREEMPTED') "
	"              FROM sched.attempt a WHERE a.attempt_id OPERATOR(pg_catalog.=) c.attempt_id) "
	"     ORDER BY c.worker_id, c.command_id "
	"     LIMIT $3 "
	"     FOR UPDATE OF c SKIP LOCKED "
	"), delivered AS ( "
	"    UPDATE sched.command c SET delivered_at = $4, delivered_generation = $2 "
	"     WHERE c.command_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n.command_id FROM next n)) "
	"    RETURNING c.command_id, c.kind, c.attempt_id, c.lease_version, c.request_id "
	") "
	"SELECT d.command_id, d.kind, d.attempt_id, d.lease_version, d.request_id, "
	"       r.execution_id, r.step_id, r.attempt_number, r.capability, r.capability_version, "
	"       r.payload "
	"  FROM delivered d, LATERAL ( "
	"       SELECT r.execution_id, r.step_id, r.attempt_number, r.capability, r.capability_version, "
	"              r.payload FROM sched.request r "
	"        WHERE r.request_id OPERATOR(pg_catalog.=) d.request_id OFFSET 0) r "
	" ORDER BY d.command_id",
	4, {UUIDOID, INT8OID, INT4OID, TIMESTAMPTZOID},
	.keyed = true, .ordered = true, .generic_plan = true
};

/* the key of a late renewal: the lease's end, in epoch seconds as the server prints them */
static SchedStatement key_renewed_late = {
	"SELECT 'step.lease.renewed_late:' OPERATOR(pg_catalog.||) $1::pg_catalog.text "
	"       OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) $2::pg_catalog.text "
	"       OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) "
	"       EXTRACT(epoch FROM $3::pg_catalog.timestamptz)::pg_catalog.text",
	3, {UUIDOID, INT4OID, TIMESTAMPTZOID}
};

/* ---- helpers -------------------------------------------------------------------------- */

static pg_uuid_t
uuid_arg(FunctionCallInfo fcinfo, int argno)
{
	return *PG_GETARG_UUID_P(argno);
}

static void
unknown(const char *kind, const char *id)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("%s \"%s\" does not exist (parameter \"%s_id\")", kind, id, kind)));
}

static const char *
lower_status(const char *status)
{
	char	   *s = pstrdup(status);
	char	   *p;

	for (p = s; *p; p++)
		*p = (char) pg_tolower((unsigned char) *p);
	return s;
}

/* The attempt row of the current SPI result's row `row`. */
static void
attempt_from_spi(int row, AttemptRow *a)
{
	bool		isnull;

	a->attempt_id = *DatumGetUUIDP(sched_spi_get(row, 1, &isnull));
	a->request_id = sched_spi_int64(row, 2);
	a->execution_id = *DatumGetUUIDP(sched_spi_get(row, 3, &isnull));
	a->step_id = *DatumGetUUIDP(sched_spi_get(row, 4, &isnull));
	a->attempt_number = (int32) sched_spi_int64(row, 5);
	a->node_id = sched_spi_text(row, 6);
	a->worker_id = *DatumGetUUIDP(sched_spi_get(row, 7, &isnull));
	a->worker_generation = sched_spi_int64(row, 8);
	a->lease_version = sched_spi_int64(row, 9);
	a->status = sched_spi_text(row, 10);
	a->reserve_cpu_millis = (int32) sched_spi_int64(row, 11);
	a->reserve_memory_mb = sched_spi_int64(row, 12);
	a->reserve_gpus = (int32) sched_spi_int64(row, 13);
	a->lease_expires_at = DatumGetTimestampTz(sched_spi_get(row, 14, &isnull));
	a->worker_owner = DatumGetObjectId(sched_spi_get(row, 15, &isnull));
	if (isnull)
		a->worker_owner = InvalidOid;
	a->execution_status = SPI_tuptable->tupdesc->natts >= 16 ? sched_spi_text(row, 16) : NULL;
	a->execution_shared = false;
}

/*
 * The worker row of worker_id, read with `snapshot`: false when there is none; else its
 * generation, registered_by (InvalidOid when NULL) and runtime_state (unless state is
 * NULL).  One index read in C (what a statement by key would read).
 */
static bool
read_worker(const pg_uuid_t *worker_id, Snapshot snapshot, int64 *generation, Oid *owner,
			WorkerState *state)
{
	SchedIndexScan scan;
	ScanKeyData key;
	bool		found;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(worker_id));
	sched_index_scan_begin(&scan, "worker", "worker_pkey", snapshot, &key, 1);
	found = sched_index_scan_next(&scan);
	if (found)
	{
		bool		isnull;
		Datum		d;

		if (generation != NULL)
			*generation = DatumGetInt64(sched_slot_value(scan.slot, scan.rel, "generation"));
		d = slot_getattr(scan.slot, sched_column_of(scan.rel, "registered_by"), &isnull);
		*owner = isnull ? InvalidOid : DatumGetObjectId(d);
		if (state != NULL)
		{
			char	   *rs = sched_slot_text(scan.slot, scan.rel, "runtime_state");

			strlcpy(*state, rs == NULL ? "" : rs, sizeof(WorkerState));
		}
	}
	sched_index_scan_end(&scan);
	return found;
}

/*
 * Locks attempt_id's row FOR UPDATE, waiting for a transaction that holds it, as
 * `kind` says (AttemptLockKind), and reads it into *a; false when there is none (for
 * ATTEMPT_TO_END also when its execution is gone, as the join of a statement would).
 * The worker and the execution are read with the snapshot the attempt was found with,
 * as a statement's sub-selects would; the attempt's columns are its locked, newest
 * version's.
 */
static bool
lock_attempt(AttemptLockKind kind, const pg_uuid_t *attempt_id, AttemptRow *a)
{
	SchedIndexScan scan;
	ScanKeyData key;
	TupleTableSlot *slot;
	Relation	rel;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(attempt_id));
	if (sched_index_lock_row(&scan, "attempt", "attempt_pkey", &key, 1, LockTupleExclusive,
							 true) != SCHED_ROW_LOCKED)
	{
		sched_index_scan_end(&scan);
		return false;
	}
	slot = scan.slot;
	rel = scan.rel;
	a->attempt_id = *DatumGetUUIDP(sched_slot_value(slot, rel, "attempt_id"));
	a->request_id = DatumGetInt64(sched_slot_value(slot, rel, "request_id"));
	a->execution_id = *DatumGetUUIDP(sched_slot_value(slot, rel, "execution_id"));
	a->step_id = *DatumGetUUIDP(sched_slot_value(slot, rel, "step_id"));
	a->attempt_number = DatumGetInt32(sched_slot_value(slot, rel, "attempt_number"));
	a->node_id = sched_slot_text(slot, rel, "node_id");
	a->worker_id = *DatumGetUUIDP(sched_slot_value(slot, rel, "worker_id"));
	a->worker_generation = DatumGetInt64(sched_slot_value(slot, rel, "worker_generation"));
	a->lease_version = DatumGetInt64(sched_slot_value(slot, rel, "lease_version"));
	a->status = sched_slot_text(slot, rel, "status");
	a->reserve_cpu_millis = DatumGetInt32(sched_slot_value(slot, rel, "reserve_cpu_millis"));
	a->reserve_memory_mb = DatumGetInt64(sched_slot_value(slot, rel, "reserve_memory_mb"));
	a->reserve_gpus = DatumGetInt32(sched_slot_value(slot, rel, "reserve_gpus"));
	a->lease_expires_at = DatumGetTimestampTz(sched_slot_value(slot, rel, "lease_expires_at"));
	if (!read_worker(&a->worker_id, scan.own_snapshot, NULL, &a->worker_owner, NULL))
		a->worker_owner = InvalidOid;
	a->execution_status = NULL;
	a->execution_shared = false;
	if (kind == ATTEMPT_TO_START)
	{
		SchedIndexScan es;

		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(&a->execution_id));
		sched_index_scan_begin(&es, "execution", "execution_pkey", scan.own_snapshot, &key, 1);
		if (sched_index_scan_next(&es))
			a->execution_status = sched_slot_text(es.slot, es.rel, "status");
		sched_index_scan_end(&es);
	}
	sched_index_scan_end(&scan);
	if (kind == ATTEMPT_TO_END)
	{
		SchedIndexScan es;
		bool		locked;

		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(&a->execution_id));
		locked = sched_index_lock_row(&es, "execution", "execution_pkey", &key, 1,
									  LockTupleShare, true) == SCHED_ROW_LOCKED;
		if (locked)
			a->execution_status = sched_slot_text(es.slot, es.rel, "status");
		sched_index_scan_end(&es);
		if (!locked)
			return false;
		a->execution_shared = true;
	}
	return true;
}

/* a live attempt holds its slot: DISPATCHED or RUNNING */
static bool
attempt_is_live(const AttemptRow *a)
{
	return sched_attempt_status_live(a->status);
}

/* ERROR unless attempt a (locked) is live and lease_version is its lease's (55000). */
static void
check_live(const AttemptRow *a, int64 lease_version)
{
	if (a->lease_version != lease_version)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stale lease_version " INT64_FORMAT " for attempt %s", lease_version,
						sched_uuid_out(&a->attempt_id)),
				 errdetail("The current lease_version is " INT64_FORMAT ".", a->lease_version)));
	if (!attempt_is_live(a))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("attempt %s is no longer live: it is %s", sched_uuid_out(&a->attempt_id),
						a->status),
				 errhint("The lease was lost; a newer attempt may own the step now.")));
}

/* Locks and returns a live attempt of a worker the caller may act for, checking its
 * lease_version; ERROR otherwise (42501 for a stranger, before anything is said of the
 * attempt's state). */
static void
live_attempt(FunctionCallInfo fcinfo, int attempt_arg, int lease_arg, AttemptLockKind lock,
			 AttemptRow *a)
{
	pg_uuid_t	attempt_id;

	sched_check_not_null(fcinfo, attempt_arg, "attempt_id");
	sched_check_not_null(fcinfo, lease_arg, "lease_version");
	attempt_id = uuid_arg(fcinfo, attempt_arg);
	if (!lock_attempt(lock, &attempt_id, a))
		unknown("attempt", sched_uuid_out(&attempt_id));
	sched_require_worker_access(&a->worker_id, a->worker_owner);
	check_live(a, PG_GETARG_INT64(lease_arg));
}

/* Appends a milestone to the execution's timeline (idempotent on its key). */
static void
add_milestone(const pg_uuid_t *execution_id, const char *key, const char *stage,
			  const pg_uuid_t *step_id, int32 attempt_number, const pg_uuid_t *attempt_id,
			  const char *state, const char *component, const char *title, Jsonb *detail,
			  TimestampTz at)
{
	Datum		v[11];
	char		n[11] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

	v[0] = UUIDPGetDatum(execution_id);
	v[1] = CStringGetTextDatum(key);
	v[2] = CStringGetTextDatum(stage);
	v[3] = step_id ? UUIDPGetDatum(step_id) : (Datum) 0;
	n[3] = step_id ? ' ' : 'n';
	v[4] = Int32GetDatum(attempt_number);
	n[4] = attempt_number > 0 ? ' ' : 'n';
	v[5] = attempt_id ? UUIDPGetDatum(attempt_id) : (Datum) 0;
	n[5] = attempt_id ? ' ' : 'n';
	v[6] = CStringGetTextDatum(state);
	v[7] = CStringGetTextDatum(component);
	v[8] = CStringGetTextDatum(title);
	v[9] = detail ? JsonbPGetDatum(detail) : (Datum) 0;
	n[9] = detail ? ' ' : 'n';
	v[10] = TimestampTzGetDatum(at);
	if (sched_milestone_direct(execution_id, key, stage, step_id, attempt_number, attempt_id,
							   state, component, title, v[9], n[9] == 'n', at))
		return;
	sched_spi_exec(&milestone, v, n, false, 0, SPI_OK_INSERT);
}

/*
 * The details of the milestones: jsonb objects as jsonb_build_object makes them (text
 * and uuids as strings, integers as numbers, timestamps as JSON timestamps, NULL as
 * null), built here rather than by a statement: one is written at every start and end.
 */
typedef struct DetailObject
{
	StringInfoData buf;
} DetailObject;

static void
detail_begin(DetailObject *o)
{
	initStringInfo(&o->buf);
	appendStringInfoChar(&o->buf, '{');
}

static void
detail_key(DetailObject *o, const char *key)
{
	if (o->buf.len > 1)
		appendStringInfoString(&o->buf, ", ");
	escape_json(&o->buf, key);
	appendStringInfoString(&o->buf, ": ");
}

static void
detail_text(DetailObject *o, const char *key, const char *value)
{
	detail_key(o, key);
	if (value == NULL)
		appendStringInfoString(&o->buf, "null");
	else
		escape_json(&o->buf, value);
}

static void
detail_uuid(DetailObject *o, const char *key, const pg_uuid_t *value)
{
	detail_text(o, key, sched_uuid_out(value));
}

static void
detail_int8(DetailObject *o, const char *key, const int64 *value)
{
	detail_key(o, key);
	if (value == NULL)
		appendStringInfoString(&o->buf, "null");
	else
		appendStringInfo(&o->buf, INT64_FORMAT, *value);
}

static void
detail_timestamptz(DetailObject *o, const char *key, TimestampTz value)
{
	char		buf[MAXDATELEN + 1];

	detail_key(o, key);
	JsonEncodeDateTime(buf, TimestampTzGetDatum(value), TIMESTAMPTZOID, NULL);
	appendStringInfoChar(&o->buf, '"');
	appendStringInfoString(&o->buf, buf);
	appendStringInfoChar(&o->buf, '"');
}

/* a jsonb value, or nothing at all when it is NULL (as jsonb_strip_nulls would leave it) */
static void
detail_jsonb_unless_null(DetailObject *o, const char *key, Jsonb *value)
{
	if (value == NULL)
		return;
	detail_key(o, key);
	(void) JsonbToCString(&o->buf, &value->root, VARSIZE(value));
}

static Jsonb *
detail_end(DetailObject *o)
{
	appendStringInfoChar(&o->buf, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(o->buf.data)));
}

/* {node_id, worker_id}: where an attempt runs */
static Jsonb *
detail_node_worker(const char *node_id, const pg_uuid_t *worker_id)
{
	DetailObject o;

	detail_begin(&o);
	detail_text(&o, "node_id", node_id);
	detail_uuid(&o, "worker_id", worker_id);
	return detail_end(&o);
}

/* {worker_id}: whom a CANCEL went to */
static Jsonb *
detail_cancel_sent(const pg_uuid_t *worker_id)
{
	DetailObject o;

	detail_begin(&o);
	detail_uuid(&o, "worker_id", worker_id);
	return detail_end(&o);
}

/* {node_id, worker_id, detail}: where an attempt ended, and the worker's detail, without
 * the keys whose value is null (at any depth) */
static Jsonb *
detail_ended(const char *node_id, const pg_uuid_t *worker_id, Jsonb *detail)
{
	DetailObject o;
	Jsonb	   *j;

	detail_begin(&o);
	detail_text(&o, "node_id", node_id);
	detail_uuid(&o, "worker_id", worker_id);
	detail_jsonb_unless_null(&o, "detail", detail);
	j = detail_end(&o);
	return detail == NULL ? j : DatumGetJsonbP(DirectFunctionCall1(jsonb_strip_nulls,
																   JsonbPGetDatum(j)));
}

/* {request_id, available_at, avoid_node_id, previous_status}: a retry queued (its
 * request_id null when a concurrent end had queued it) */
static Jsonb *
detail_requeued(const int64 *request_id, TimestampTz available_at, const char *avoid_node_id,
				const char *previous_status)
{
	DetailObject o;

	detail_begin(&o);
	detail_int8(&o, "request_id", request_id);
	detail_timestamptz(&o, "available_at", available_at);
	detail_text(&o, "avoid_node_id", avoid_node_id);
	detail_text(&o, "previous_status", previous_status);
	return detail_end(&o);
}

/* {lease_expired_at, renewed_at}: a renewal that came late */
static Jsonb *
detail_renewed_late(TimestampTz lease_expired_at, TimestampTz renewed_at)
{
	DetailObject o;

	detail_begin(&o);
	detail_timestamptz(&o, "lease_expired_at", lease_expired_at);
	detail_timestamptz(&o, "renewed_at", renewed_at);
	return detail_end(&o);
}

/* Extends a live attempt's lease (locked by the caller) to at + sched.lease_ttl; a lease
 * never shrinks.  Returns the new lease_expires_at. */
static TimestampTz
extend_lease(const pg_uuid_t *attempt_id, TimestampTz at)
{
	Datum		v[3];
	bool		isnull;

	v[0] = UUIDPGetDatum(attempt_id);
	v[1] = TimestampTzGetDatum(at);
	v[2] = Float8GetDatum((double) sched_lease_ttl_s);
	sched_spi_exec(&lease_extend, v, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	return DatumGetTimestampTz(sched_spi_get(0, 1, &isnull));
}

/* The status of the execution, locked as `lock` (an execution always exists: FK). */
static char *
lock_execution(SchedStatement *lock, const pg_uuid_t *execution_id)
{
	Datum		v[1] = {UUIDPGetDatum(execution_id)};

	sched_spi_exec(lock, v, NULL, false, 0, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return NULL;
	return sched_spi_text(0, 1);
}

static bool
execution_open(const char *status)
{
	return strcmp(status, "CREATED") == 0 || strcmp(status, "QUEUED") == 0 ||
		strcmp(status, "RUNNING") == 0;
}

/*
 * Closes an execution (FAILED or CANCELLED): its open requests are cancelled (SKIP
 * LOCKED: a dispatcher holding one sees the closed execution and cancels it itself) and
 * each live attempt gets a CANCEL command.  The caller holds the execution row lock.
 */
static void
close_execution(const pg_uuid_t *execution_id, const char *status, TimestampTz at)
{
	Datum		v[6];
	AttemptRow *live;
	int			nlive;
	int			i;
	char	   *key;

	v[0] = UUIDPGetDatum(execution_id);
	v[1] = CStringGetTextDatum(status);
	v[2] = TimestampTzGetDatum(at);
	sched_spi_exec(&execution_closed, v, NULL, false, 0, SPI_OK_UPDATE);
	sched_spi_exec(&requests_cancelled, v, NULL, false, 0, SPI_OK_UPDATE);

	sched_spi_exec(&attempts_live_of_execution, v, NULL, false, 0, SPI_OK_SELECT);
	nlive = (int) SPI_processed;
	live = palloc(sizeof(AttemptRow) * Max(nlive, 1));
	for (i = 0; i < nlive; i++)
		attempt_from_spi(i, &live[i]);
	for (i = 0; i < nlive; i++)
	{
		AttemptRow *a = &live[i];
		Jsonb	   *detail;

		v[0] = UUIDPGetDatum(&a->worker_id);
		v[1] = Int64GetDatum(a->worker_generation);
		v[2] = UUIDPGetDatum(&a->attempt_id);
		v[3] = Int64GetDatum(a->lease_version);
		v[4] = Int64GetDatum(a->request_id);
		v[5] = TimestampTzGetDatum(at);
		sched_spi_exec(&cancel_command, v, NULL, false, 0, SPI_OK_INSERT);
		sched_wake_worker(&a->worker_id);
		detail = detail_cancel_sent(&a->worker_id);
		key = psprintf("step.cancel.sent:%s:%d", sched_uuid_out(&a->step_id), a->attempt_number);
		add_milestone(execution_id, key, "EXECUTION", &a->step_id, a->attempt_number,
					  &a->attempt_id, "CANCELLING", "Scheduler", "Cancel sent to worker",
					  detail, at);
	}
	add_milestone(execution_id, psprintf("execution.%s", lower_status(status)), "EXECUTION",
				  NULL, 0, NULL, status, "Scheduler",
				  psprintf("Execution %s", lower_status(status)), NULL, at);
}

/*
 * Ends live attempt `a` (locked by the caller) with status SUCCEEDED, FAILED, CANCELLED,
 * LOST or PREEMPTED: releases its slot and reservations, records the milestone, and for
 * FAILED and LOST requeues the step as attempt_number + 1 (retry backoff 1 s doubling, at
 * most sched.retry_backoff_max; the retry avoids this node when another is eligible)
 * while attempts remain, else fails the execution.  PREEMPTED requeues it at once, with
 * max_attempts one higher: a preemption uses up no attempt.  Returns true.
 *
 * no_wait (the reaper): the execution, worker and node rows are taken with SKIP LOCKED
 * before anything is written; when another transaction holds one, nothing is written
 * and it returns false (the attempt is left for the next reap).  So the reaper never
 * waits while it holds the rows of attempts it has already ended, and a finish or a
 * dispatch contending for one attempt cannot deadlock with it or hold it up.
 */
static bool
end_attempt(const AttemptRow *a, const char *status, Jsonb *detail, TimestampTz at,
			bool no_wait)
{
	Datum		v[4];
	char		n[4] = {' ', ' ', ' ', ' '};
	int32		max_attempts;
	bool		preempted = strcmp(status, "PREEMPTED") == 0;
	bool		failed = strcmp(status, "FAILED") == 0 || strcmp(status, "LOST") == 0;
	bool		will_retry;
	char	   *exec_status;
	const char *title;
	char	   *key;

	if (failed)
	{
		v[0] = Int64GetDatum(a->request_id);
		sched_spi_exec(&request_of_attempt, v, NULL, false, 0, SPI_OK_SELECT);
		max_attempts = (int32) sched_spi_int64(0, 1);
		will_retry = a->attempt_number < max_attempts;
	}
	else
		will_retry = preempted;

	/* the execution before the worker and node (lock order); exclusive only to fail it */
	if (no_wait)
	{
		exec_status = lock_execution(failed && !will_retry ? &execution_no_key_update_skip
									 : &execution_share_skip, &a->execution_id);
		if (exec_status == NULL)
			return false;
		v[0] = UUIDPGetDatum(&a->worker_id);
		sched_spi_exec(&pair_lock_skip, v, NULL, false, 0, SPI_OK_SELECT);
		if (SPI_processed == 0)
			return false;
	}
	else if (a->execution_shared && !(failed && !will_retry))
		exec_status = a->execution_status;	/* locked with the attempt, as needed */
	else
		exec_status = lock_execution(failed && !will_retry ? &execution_no_key_update : &execution_share,
									 &a->execution_id);

	v[0] = UUIDPGetDatum(&a->attempt_id);
	v[1] = CStringGetTextDatum(status);
	v[2] = TimestampTzGetDatum(at);
	v[3] = detail ? JsonbPGetDatum(detail) : (Datum) 0;
	n[3] = detail ? ' ' : 'n';
	if (!sched_attempt_end_direct(&a->attempt_id, status, at, v[3], n[3] == 'n'))
		sched_spi_exec(&attempt_ended, v, n, false, 0, SPI_OK_UPDATE);
	sched_release_reservation(&a->worker_id, a->node_id, a->reserve_cpu_millis,
							  a->reserve_memory_mb, a->reserve_gpus);

	if (strcmp(status, "SUCCEEDED") == 0)
		title = "Attempt succeeded";
	else if (strcmp(status, "FAILED") == 0)
		title = "Attempt failed";
	else if (strcmp(status, "CANCELLED") == 0)
		title = "Attempt cancelled";
	else if (preempted)
		title = "Attempt preempted";
	else
		title = "Attempt lost: lease expired";
	key = psprintf("step.attempt.%s:%s:%d", lower_status(status), sched_uuid_out(&a->step_id),
				   a->attempt_number);
	add_milestone(&a->execution_id, key, "EXECUTION", &a->step_id, a->attempt_number,
				  &a->attempt_id, status,
				  strcmp(status, "LOST") == 0 ? "Reaper" : preempted ? "Scheduler" : "Worker",
				  title, detail_ended(a->node_id, &a->worker_id, detail), at);

	if (!(failed || preempted) || exec_status == NULL || !execution_open(exec_status))
		return true;
	if (!will_retry)
	{
		close_execution(&a->execution_id, "FAILED", at);
		return true;
	}

	{
		double		backoff_s = preempted ? 0 : Min(pow(2.0, (double) (a->attempt_number - 1)),
												 (double) sched_retry_backoff_max_s);
		TimestampTz retry_at = at + (int64) (backoff_s * USECS_PER_SEC);
		bool		isnull;
		int64		retry_id = 0;
		Datum		r[5];

		r[0] = Int64GetDatum(a->request_id);
		r[1] = Int32GetDatum(a->attempt_number + 1);
		r[2] = TimestampTzGetDatum(retry_at);
		r[3] = CStringGetTextDatum(a->node_id);
		r[4] = Int32GetDatum(preempted ? 1 : 0);
		sched_spi_exec(&request_retry, r, NULL, false, 0, SPI_OK_INSERT_RETURNING);
		if (SPI_processed > 0)
			retry_id = DatumGetInt64(sched_spi_get(0, 1, &isnull));
		/* no row: a concurrent end already queued it */
		detail = detail_requeued(SPI_processed > 0 ? &retry_id : NULL, retry_at, a->node_id,
								 status);
		key = psprintf("step.requeued:%s:%d", sched_uuid_out(&a->step_id), a->attempt_number + 1);
		add_milestone(&a->execution_id, key, "SCHEDULING", &a->step_id, a->attempt_number + 1,
					  NULL, "QUEUED", "Scheduler", "Requeued for retry", detail, at);
	}
	return true;
}

bool
sched_preempt_attempt(const pg_uuid_t *attempt_id, int64 preemptor_request_id,
					  TimestampTz at)
{
	AttemptRow	a;
	Datum		v[6];
	Jsonb	   *detail;
	char	   *key;

	v[0] = UUIDPGetDatum(attempt_id);
	sched_spi_exec(&attempt_lock_live_skip, v, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	attempt_from_spi(0, &a);
	detail = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(
		psprintf("{\"preempted_by_request_id\": " INT64_FORMAT "}", preemptor_request_id))));
	if (!end_attempt(&a, "PREEMPTED", detail, at, true))
		return false;
	/* the worker stops it: a CANCEL, as for a cancelled execution */
	v[0] = UUIDPGetDatum(&a.worker_id);
	v[1] = Int64GetDatum(a.worker_generation);
	v[2] = UUIDPGetDatum(&a.attempt_id);
	v[3] = Int64GetDatum(a.lease_version);
	v[4] = Int64GetDatum(a.request_id);
	v[5] = TimestampTzGetDatum(at);
	sched_spi_exec(&cancel_command, v, NULL, false, 0, SPI_OK_INSERT);
	sched_wake_worker(&a.worker_id);
	key = psprintf("step.cancel.sent:%s:%d", sched_uuid_out(&a.step_id), a.attempt_number);
	add_milestone(&a.execution_id, key, "EXECUTION", &a.step_id, a.attempt_number,
				  &a.attempt_id, "CANCELLING", "Scheduler", "Cancel sent to worker (preempted)",
				  detail_cancel_sent(&a.worker_id), at);
	return true;
}

/*
 * Releases the holds (preemption.c) that ended: their time passed, or their request no
 * longer waits (dispatched holds are released by the dispatch itself).  Rows another
 * transaction holds are left for the next time.  Returns how many.
 */
static int
release_ended_holds(TimestampTz at)
{
	Datum		v[1] = {TimestampTzGetDatum(at)};
	int			n;
	int			i;
	int			released = 0;
	int64	   *ids;
	pg_uuid_t  *workers;
	char	  **nodes;
	int32	   *cpu;
	int64	   *mem;
	int32	   *gpus;

	sched_spi_exec(&holds_ended, v, NULL, false, 0, SPI_OK_SELECT);
	n = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(n, 1));
	workers = palloc(sizeof(pg_uuid_t) * Max(n, 1));
	nodes = palloc(sizeof(char *) * Max(n, 1));
	cpu = palloc(sizeof(int32) * Max(n, 1));
	mem = palloc(sizeof(int64) * Max(n, 1));
	gpus = palloc(sizeof(int32) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = sched_spi_int64(i, 1);
		workers[i] = *DatumGetUUIDP(sched_spi_get(i, 2, &isnull));
		nodes[i] = sched_spi_text(i, 3);
		cpu[i] = (int32) sched_spi_int64(i, 4);
		mem[i] = sched_spi_int64(i, 5);
		gpus[i] = (int32) sched_spi_int64(i, 6);
	}
	for (i = 0; i < n; i++)
	{
		Datum		w[1] = {UUIDPGetDatum(&workers[i])};

		sched_spi_exec(&pair_lock_skip, w, NULL, false, 0, SPI_OK_SELECT);
		if (SPI_processed == 0)
			continue;			/* a dispatch holds the pair: next time */
		sched_release_hold_reservation(ids[i], &workers[i], nodes[i], cpu[i], mem[i], gpus[i]);
		released++;
	}
	return released;
}

/* ---- the SQL functions ---------------------------------------------------------------- */

/*
 * Refuses a caller who may not act for the worker (42501), an unknown worker (42704) and
 * a generation that is not the current one (55000); sets *state (unless NULL) to the
 * worker's runtime_state.  Reads the worker by key in C, with the snapshot a statement
 * would take now (no SPI needed).
 */
static void
check_worker_session(const pg_uuid_t *worker_id, int64 generation, WorkerState *state)
{
	Snapshot	snapshot;
	bool		found;
	int64		current = 0;
	Oid			owner = InvalidOid;

	/* what a statement would read now: this transaction's writes, then a new snapshot */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	found = read_worker(worker_id, snapshot, &current, &owner, state);
	UnregisterSnapshot(snapshot);
	if (!found)
		unknown("worker", sched_uuid_out(worker_id));
	sched_require_worker_access(worker_id, owner);
	if (current != generation)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stale generation " INT64_FORMAT " for worker %s", generation,
						sched_uuid_out(worker_id)),
				 errdetail("The current generation is " INT64_FORMAT ".", current)));
}

/*
 * Starts live attempt a (locked by the caller, its lease_version checked): RUNNING, its
 * lease extended from `at` (extend_lease's rule), the execution RUNNING when it was
 * CREATED or QUEUED, the milestone.  Returns lease_expires_at.  Inside SPI.
 */
static TimestampTz
begin_attempt(const AttemptRow *a, TimestampTz at)
{
	TimestampTz expires;
	Datum		v[3];
	bool		isnull;

	v[0] = UUIDPGetDatum(&a->attempt_id);
	v[1] = TimestampTzGetDatum(at);
	v[2] = Float8GetDatum((double) sched_lease_ttl_s);
	if (!sched_attempt_start_direct(&a->attempt_id, at, &expires))
	{
		sched_spi_exec(&attempt_started, v, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
		expires = DatumGetTimestampTz(sched_spi_get(0, 1, &isnull));
	}
	if (a->execution_status == NULL || (strcmp(a->execution_status, "CREATED") == 0 ||
										strcmp(a->execution_status, "QUEUED") == 0))
	{
		v[0] = UUIDPGetDatum(&a->execution_id);
		sched_spi_exec(&execution_running, v, NULL, false, 0, SPI_OK_UPDATE);
	}
	add_milestone(&a->execution_id,
				  psprintf("step.attempt.started:%s:%d", sched_uuid_out(&a->step_id), a->attempt_number),
				  "EXECUTION", &a->step_id, a->attempt_number, &a->attempt_id, "RUNNING", "Worker",
				  "Attempt started", detail_node_worker(a->node_id, &a->worker_id), at);
	return expires;
}

/* the columns of a delivered command (commands_delivered), and the started lease's end */
#define DELIVERED_COLUMNS SCHED_DELIVERED_COLUMNS
#define COMMAND_COLUMNS (DELIVERED_COLUMNS + 1)

/* A command read by deliver_commands, as it goes into the result (once started). */
typedef struct DeliveredCommand
{
	Datum		values[COMMAND_COLUMNS];
	bool		nulls[COMMAND_COLUMNS];
	bool		to_start;		/* a START whose attempt (locked) is to be started */
	bool		dropped;		/* a START whose attempt ended meanwhile: not returned */
	AttemptRow	attempt;		/* a START's, as locked */
} DeliveredCommand;

/*
 * Delivers up to `max` commands of the worker's generation into the call's result set,
 * marked delivered at `at`; returns how many were marked.  check_worker_session() first
 * (setting *state), unless the caller passes the state its own check read earlier in
 * this call (`checked`: wait_commands' first poll, whose check ran after it began to
 * wait for wake-ups, so no change of state can fall between the two).  With `start`,
 * each START's attempt is started at `at` as start_attempt starts it (begin_attempt),
 * its lease_expires_at in the row; a START whose attempt ended between the delivery's
 * snapshot and its lock (a reap, a preemption, an end an operator made) is marked
 * delivered and not returned: there is nothing to run.
 * Locks, in the order of the protocol: the delivered command rows (SKIP LOCKED), then
 * the attempts of every START delivered, all of them before any start writes (waiting
 * for them: nothing holds an attempt and waits for a command row), then their
 * executions, as the starts update them.  Inside SPI.
 */
static uint64
deliver_commands(ReturnSetInfo *rsinfo, const pg_uuid_t *worker_id, int64 generation,
				 int32 max, TimestampTz at, bool start, const WorkerState *checked,
				 WorkerState *state)
{
	Datum		v[4];
	SPITupleTable *delivered;
	uint64		ndelivered;
	DeliveredCommand *cmds;
	uint64		i;
	int			direct;
	Datum		(*dvalues)[SCHED_DELIVERED_COLUMNS];
	bool		(*dnulls)[SCHED_DELIVERED_COLUMNS];

	if (checked == NULL)
		check_worker_session(worker_id, generation, state);
	else if (state != NULL)
		memcpy(*state, *checked, sizeof(WorkerState));
	direct = sched_commands_deliver_direct(worker_id, generation, max, at, &dvalues, &dnulls);
	if (direct >= 0)
	{
		ndelivered = (uint64) direct;
		if (ndelivered == 0)
			return 0;
		delivered = NULL;
		cmds = palloc0(sizeof(DeliveredCommand) * ndelivered);
		for (i = 0; i < ndelivered; i++)
		{
			memcpy(cmds[i].values, dvalues[i], sizeof(dvalues[i]));
			memcpy(cmds[i].nulls, dnulls[i], sizeof(dnulls[i]));
			cmds[i].nulls[DELIVERED_COLUMNS] = true;
		}
	}
	else
	{
		v[0] = UUIDPGetDatum(worker_id);
		v[1] = Int64GetDatum(generation);
		v[2] = Int32GetDatum(max);
		v[3] = TimestampTzGetDatum(at);
		sched_spi_exec(&commands_delivered, v, NULL, false, 0, SPI_OK_SELECT);
		ndelivered = SPI_processed;
		if (ndelivered == 0)
			return 0;

		/* each row read once; the result kept to the end of the call, out of
		 * sched_spi_exec's reach (it frees the last result before it runs a statement):
		 * the values point into it, and the locks and starts below run statements of
		 * their own */
		delivered = SPI_tuptable;
		SPI_tuptable = NULL;
		cmds = palloc0(sizeof(DeliveredCommand) * ndelivered);
		for (i = 0; i < ndelivered; i++)
		{
			heap_deform_tuple(delivered->vals[i], delivered->tupdesc, cmds[i].values,
							  cmds[i].nulls);
			cmds[i].nulls[DELIVERED_COLUMNS] = true;
		}
	}

	/* every START's attempt locked first (the attempts before their executions) */
	for (i = 0; start && i < ndelivered; i++)
	{
		DeliveredCommand *c = &cmds[i];
		int64		command_id = DatumGetInt64(c->values[0]);

		if (strcmp(TextDatumGetCString(c->values[1]), "START") != 0)
			continue;
		if (!lock_attempt(ATTEMPT_TO_START, DatumGetUUIDP(c->values[2]), &c->attempt))
			elog(ERROR, "pg_sched: the attempt of command " INT64_FORMAT " is gone", command_id);
		if (memcmp(&c->attempt.worker_id, worker_id, sizeof(pg_uuid_t)) != 0)
			elog(ERROR, "pg_sched: command " INT64_FORMAT " is not for its attempt's worker",
				 command_id);
		c->to_start = attempt_is_live(&c->attempt) &&
			c->attempt.lease_version == DatumGetInt64(c->values[3]);
		c->dropped = !c->to_start;
	}
	for (i = 0; i < ndelivered; i++)
	{
		DeliveredCommand *c = &cmds[i];

		if (c->dropped)
			continue;
		if (c->to_start)
		{
			c->values[DELIVERED_COLUMNS] = TimestampTzGetDatum(begin_attempt(&c->attempt, at));
			c->nulls[DELIVERED_COLUMNS] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, c->values, c->nulls);
	}
	if (delivered != NULL)
		SPI_freetuptable(delivered);
	return ndelivered;
}

static int32
max_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		max;

	sched_check_not_null(fcinfo, argno, "max");
	max = PG_GETARG_INT32(argno);
	if (max < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"max\" must be at least 1: %d", max)));
	return max;
}

/*
 * poll_commands(worker_id, generation, max, at, start) → the worker session's commands (START,
 * CANCEL) for its live attempts, oldest first, each delivered once, with everything the
 * worker needs to run the attempt: those made for this session, and those an earlier
 * session of the worker did not receive (a START no process received may run here; a
 * CANCEL for an attempt this session does not hold is to be ignored).
 * With `start`, each START's attempt is also started (RUNNING, its lease from `at`, as
 * start_attempt; an `at` in the future is refused then, as there): the worker receives
 * and begins an attempt in one transaction, as a job queue's claim marks its job
 * running.  A stale generation is refused (55000).  Locks: the delivered command rows
 * (SKIP LOCKED), then the attempts started (deliver_commands).
 */
Datum
sched_poll_commands(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pg_uuid_t	worker_id;
	int64		generation;
	int32		max;
	bool		start;

	sched_check_not_null(fcinfo, 0, "worker_id");
	sched_check_not_null(fcinfo, 1, "generation");
	max = max_arg(fcinfo, 2);
	sched_check_not_null(fcinfo, 3, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(3), "at");
	sched_check_not_null(fcinfo, 4, "start");
	start = PG_GETARG_BOOL(4);
	if (start)
		sched_check_at_not_future(PG_GETARG_TIMESTAMPTZ(3), "at");
	worker_id = uuid_arg(fcinfo, 0);
	generation = PG_GETARG_INT64(1);

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	deliver_commands(rsinfo, &worker_id, generation, max, PG_GETARG_TIMESTAMPTZ(3), start, NULL,
					 NULL);
	SPI_finish();
	return (Datum) 0;
}

/* sched._wake_worker(worker_id): the worker's waiting session returns at this
 * transaction's commit (heartbeat to DRAINING or STOPPED, register_worker). */
PG_FUNCTION_INFO_V1(sched_wake_worker_at_commit);

Datum
sched_wake_worker_at_commit(PG_FUNCTION_ARGS)
{
	pg_uuid_t	worker_id = uuid_arg(fcinfo, 0);

	sched_wake_worker(&worker_id);
	PG_RETURN_VOID();
}

/* the longest wait_commands may sleep */
#define WAIT_TIMEOUT_MAX_S 3600

/*
 * wait_commands(worker_id, generation, max, timeout, start) → what poll_commands returns, at
 * once when there is something; otherwise it sleeps until a command for the worker
 * commits (wakeup.c: no NOTIFY), the worker's runtime_state changes (a heartbeat to
 * DRAINING or STOPPED wakes it), or `timeout` passes, then returns what there is, maybe
 * nothing.  Commands are marked delivered at the moment they are read, and with `start`
 * the STARTs' attempts started then (as poll_commands does).  While it sleeps
 * it holds no snapshot and no lock (the delivered rows are locked only by the poll that
 * returns them), and a cancel or statement_timeout ends it at once.
 *
 * Refused: on a standby (25006: commands are delivered by writing), without pg_sched in
 * shared_preload_libraries (55000: nothing would wake it; poll_commands works there),
 * to a caller who may not act for the worker (42501), and then, whether or not it would
 * have to sleep, where its snapshot could be read again after the wait (25000, see
 * wakeup.c).
 */
Datum
sched_wait_commands(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pg_uuid_t	worker_id;
	int64		generation;
	int32		max;
	Interval   *timeout;
	int64		timeout_us;
	TimestampTz deadline;
	WorkerState state_at_start;
	WorkerState state;
	bool		start;

	sched_check_not_null(fcinfo, 0, "worker_id");
	sched_check_not_null(fcinfo, 1, "generation");
	max = max_arg(fcinfo, 2);
	sched_check_not_null(fcinfo, 3, "timeout");
	timeout = PG_GETARG_INTERVAL_P(3);
	timeout_us = -1;
	if (timeout->month == 0 && timeout->day >= 0 && timeout->day <= 1)
		timeout_us = timeout->day * USECS_PER_DAY + timeout->time;
	if (timeout_us < 0 || timeout_us > (int64) WAIT_TIMEOUT_MAX_S * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"timeout\" must be between 0 and 1 hour: %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(timeout))))));
	sched_check_not_null(fcinfo, 4, "start");
	start = PG_GETARG_BOOL(4);
	worker_id = uuid_arg(fcinfo, 0);
	generation = PG_GETARG_INT64(1);
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("sched.wait_commands cannot run on a standby"),
				 errdetail("Commands are delivered by marking them delivered, which only the primary can."),
				 errhint("Connect the worker to the primary.")));
	if (!sched_wakeup_available())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sched.wait_commands needs pg_sched in shared_preload_libraries"),
				 errdetail("The wake-up of waiting workers lives in shared memory."),
				 errhint("Add pg_sched to shared_preload_libraries and restart the server, "
						 "or call sched.poll_commands in a loop.")));
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_us / 1000);

	/*
	 * Waiting for wake-ups begins before the session is checked, so the first poll needs
	 * no check of its own: a change of the worker's state that commits after the check
	 * finds this session waiting and sets its latch (wakeup.c).
	 */
	sched_wakeup_wait_for(&worker_id);
	PG_TRY();
	{
		bool		first = true;

		sched_wakeup_arm();
		/* who may, before where: a caller who may not act for the worker always gets 42501 */
		check_worker_session(&worker_id, generation, &state_at_start);
		sched_wakeup_check_can_sleep();
		InitMaterializedSRF(fcinfo, 0);
		for (;;)
		{
			uint64		n;

			if (!first)
				sched_wakeup_arm();
			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "pg_sched: SPI_connect failed");
			n = deliver_commands(rsinfo, &worker_id, generation, max, GetCurrentTimestamp(),
								 start, first ? &state_at_start : NULL, &state);
			SPI_finish();
			first = false;
			if (n > 0 || strcmp(state, state_at_start) != 0 || !sched_wakeup_sleep(deadline))
				break;
		}
	}
	PG_FINALLY();
	{
		sched_wakeup_done();
	}
	PG_END_TRY();
	return (Datum) 0;
}

/*
 * start_attempt(attempt_id, lease_version, at): the worker begins the attempt: RUNNING,
 * lease renewed, the execution RUNNING.  Repeating it on a RUNNING attempt renews the
 * lease.  Returns lease_expires_at.
 */
Datum
sched_start_attempt(PG_FUNCTION_ARGS)
{
	AttemptRow	a;
	TimestampTz at;
	TimestampTz expires;

	sched_check_not_null(fcinfo, 2, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(2), "at");
	at = PG_GETARG_TIMESTAMPTZ(2);
	sched_check_at_not_future(at, "at");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	live_attempt(fcinfo, 0, 1, ATTEMPT_TO_START, &a);
	expires = begin_attempt(&a, at);
	SPI_finish();
	PG_RETURN_TIMESTAMPTZ(expires);
}

/*
 * renew_lease(attempt_id, lease_version, at): extends a live attempt's lease to at +
 * sched.lease_ttl; records a late renewal (one that arrives after the lease expired but
 * before it was reaped).  Returns lease_expires_at.
 */
Datum
sched_renew_lease(PG_FUNCTION_ARGS)
{
	AttemptRow	a;
	TimestampTz at;
	TimestampTz expires;

	sched_check_not_null(fcinfo, 2, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(2), "at");
	at = PG_GETARG_TIMESTAMPTZ(2);
	sched_check_at_not_future(at, "at");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	live_attempt(fcinfo, 0, 1, ATTEMPT_ONLY, &a);
	if (a.lease_expires_at < at)
	{
		Datum		v[3];
		char	   *key;

		v[0] = UUIDPGetDatum(&a.step_id);
		v[1] = Int32GetDatum(a.attempt_number);
		v[2] = TimestampTzGetDatum(a.lease_expires_at);
		sched_spi_exec(&key_renewed_late, v, NULL, false, 1, SPI_OK_SELECT);
		key = sched_spi_text(0, 1);
		add_milestone(&a.execution_id, key, "EXECUTION", &a.step_id, a.attempt_number,
					  &a.attempt_id, a.status, "Worker", "Lease renewed after it had expired",
					  detail_renewed_late(a.lease_expires_at, at), at);
	}
	expires = extend_lease(&a.attempt_id, at);
	SPI_finish();
	PG_RETURN_TIMESTAMPTZ(expires);
}

/*
 * finish_attempt(attempt_id, lease_version, outcome, detail, at): the worker reports the
 * end: SUCCEEDED, FAILED or CANCELLED.  Repeating the same call returns the same status
 * and changes nothing.  A stale lease_version, or an attempt that ended otherwise (LOST,
 * another outcome), is refused (55000).
 */
Datum
sched_finish_attempt(PG_FUNCTION_ARGS)
{
	AttemptRow	a;
	char	   *outcome;
	TimestampTz at;
	pg_uuid_t	attempt_id;

	sched_check_not_null(fcinfo, 0, "attempt_id");
	sched_check_not_null(fcinfo, 1, "lease_version");
	sched_check_not_null(fcinfo, 2, "outcome");
	outcome = text_to_cstring(PG_GETARG_TEXT_PP(2));
	sched_check_name_length(outcome, "outcome");
	if (outcome[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"outcome\" must not be empty")));
	if (strcmp(outcome, "SUCCEEDED") != 0 && strcmp(outcome, "FAILED") != 0 &&
		strcmp(outcome, "CANCELLED") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"outcome\": \"%s\"", outcome),
				 errdetail("Valid values are SUCCEEDED, FAILED, CANCELLED.")));
	sched_check_not_null(fcinfo, 4, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(4), "at");
	at = PG_GETARG_TIMESTAMPTZ(4);
	attempt_id = uuid_arg(fcinfo, 0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	/* the execution is locked with the attempt unless the end may close it (FAILED) */
	if (!lock_attempt(strcmp(outcome, "FAILED") == 0 ? ATTEMPT_ONLY : ATTEMPT_TO_END,
					  &attempt_id, &a))
		unknown("attempt", sched_uuid_out(&attempt_id));
	sched_require_worker_access(&a.worker_id, a.worker_owner);
	if (strcmp(a.status, outcome) == 0 && a.lease_version == PG_GETARG_INT64(1))
	{
		SPI_finish();
		PG_RETURN_TEXT_P(cstring_to_text(outcome));		/* the same report again */
	}
	check_live(&a, PG_GETARG_INT64(1));
	(void) end_attempt(&a, outcome, PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3), at, false);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(outcome));
}

/*
 * Ends one expired attempt as LOST in a subtransaction of its own: true when it did.
 * An attempt whose rows another transaction holds is left for the next reap (false);
 * one whose end fails on its own data (a counter broken by a direct write, say: classes
 * 22, 23, 40, 55) is rolled back alone, with a WARNING, so one attempt never stops the
 * reaping of the others; any other error (a cancel, a shutdown) ends the call.
 */
static bool
reap_one(const AttemptRow *a, TimestampTz at)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	bool		ended = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		ended = end_attempt(a, "LOST", NULL, at, true);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(context);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		/* only what the attempt's own rows caused is passed over: a cancel, a shutdown,
		 * a read-only transaction or a resource error ends the whole call */
		if (ERRCODE_TO_CATEGORY(e->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(e->sqlerrcode) != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION &&
			ERRCODE_TO_CATEGORY(e->sqlerrcode) != ERRCODE_TRANSACTION_ROLLBACK &&
			ERRCODE_TO_CATEGORY(e->sqlerrcode) != ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
			ReThrowError(e);
		ereport(WARNING,
				(errcode(e->sqlerrcode),
				 errmsg("pg_sched: could not reap attempt %s: %s", sched_uuid_out(&a->attempt_id),
						e->message),
				 e->detail ? errdetail("%s", e->detail) : 0,
				 errhint("The attempt is left live; the other expired attempts are reaped.")));
		FreeErrorData(e);
		ended = false;
	}
	PG_END_TRY();
	return ended;
}

/*
 * reap_expired(at): marks LOST every live attempt whose lease expired before `at`,
 * releasing it and requeueing its step (or failing the execution), and returns expired
 * claims to the queue.  Returns the number of attempts marked LOST.  Attempts locked by
 * a concurrent finish are skipped (SKIP LOCKED): that finish ends them, exactly once.
 * Each attempt is locked as the scan reaches it.  Also drops the rows of
 * sched.tenant_live that are back at zero.
 */
Datum
sched_reap_expired(PG_FUNCTION_ARGS)
{
	TimestampTz at;
	Datum		v[1];
	Portal		portal;
	int32		lost = 0;

	sched_check_not_null(fcinfo, 0, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(0), "at");
	at = PG_GETARG_TIMESTAMPTZ(0);
	sched_check_at_not_future(at, "at");	/* it would expire leases before their time */
	PreventCommandIfReadOnly("reap_expired");	/* a standby, or a read-only transaction */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	v[0] = TimestampTzGetDatum(at);
	portal = sched_spi_cursor_open(&attempts_expired, v, NULL, false);
	for (;;)
	{
		AttemptRow	a;

		SPI_cursor_fetch(portal, true, 1);
		if (SPI_processed == 0)
			break;
		attempt_from_spi(0, &a);
		if (reap_one(&a, at))
			lost++;
	}
	SPI_cursor_close(portal);
	if (sched_schema_is_0_2())
		(void) release_ended_holds(at);
	sched_spi_exec(&expired_claims_returned, v, NULL, false, 0, SPI_OK_UPDATE);
	sched_spi_exec(sched_schema_is_0_2() ? &tenant_live_pruned : &tenant_live_pruned_0_1, NULL, NULL,
				   false, 0, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_INT32(lost);
}

/*
 * Locks an execution (FOR UPDATE) for the application's transition to `target` and
 * returns its status: `target` itself when it is there already (the caller returns, the
 * call being idempotent), else an open status.  Unknown id: 42704; closed otherwise: 55000.
 */
static char *
lock_execution_for(const pg_uuid_t *execution_id, const char *target)
{
	Datum		v[1] = {UUIDPGetDatum(execution_id)};
	bool		isnull;
	Datum		owner;
	char	   *cur;

	/* the tenant's owner first: a stranger learns nothing and changes nothing */
	sched_spi_exec(&execution_tenant, v, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		unknown("execution", sched_uuid_out(execution_id));
	owner = sched_spi_get(0, 2, &isnull);
	sched_require_tenant_access(sched_spi_text(0, 1), isnull ? InvalidOid : DatumGetObjectId(owner));

	cur = lock_execution(&execution_update, execution_id);
	if (cur == NULL)
		unknown("execution", sched_uuid_out(execution_id));
	if (strcmp(cur, target) != 0 && !execution_open(cur))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("execution %s is already closed as %s", sched_uuid_out(execution_id), cur)));
	return cur;
}

/*
 * complete_execution(execution_id, at): the application declares the execution done.
 * Refused (55000) while a request of it is pending or claimed or an attempt is live.
 * Idempotent on SUCCEEDED.
 */
Datum
sched_complete_execution(PG_FUNCTION_ARGS)
{
	pg_uuid_t	execution_id;
	TimestampTz at;
	char	   *cur;
	Datum		v[3];
	bool		isnull;

	sched_check_not_null(fcinfo, 1, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(1), "at");
	sched_check_not_null(fcinfo, 0, "execution_id");
	at = PG_GETARG_TIMESTAMPTZ(1);
	execution_id = uuid_arg(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	cur = lock_execution_for(&execution_id, "SUCCEEDED");
	if (strcmp(cur, "SUCCEEDED") != 0)
	{
		v[0] = UUIDPGetDatum(&execution_id);
		sched_spi_exec(&execution_open_work, v, NULL, false, 1, SPI_OK_SELECT);
		if (DatumGetBool(sched_spi_get(0, 1, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("execution %s still has pending requests or live attempts",
							sched_uuid_out(&execution_id)),
					 errhint("Finish or cancel its work first, or call cancel_execution.")));
		v[1] = CStringGetTextDatum("SUCCEEDED");
		v[2] = TimestampTzGetDatum(at);
		sched_spi_exec(&execution_closed, v, NULL, false, 0, SPI_OK_UPDATE);
		add_milestone(&execution_id, "execution.succeeded", "EXECUTION", NULL, 0, NULL,
					  "SUCCEEDED", "Application", "Execution completed", NULL, at);
	}
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text("SUCCEEDED"));
}

/*
 * cancel_execution(execution_id, at): marks the execution CANCELLED, cancels its pending
 * and claimed requests, and sends a CANCEL command to the worker of each live attempt
 * (the attempt stays live until the worker finishes it or its lease expires).
 * Idempotent.  Locks: the execution row (FOR UPDATE), then its open requests with SKIP
 * LOCKED: a request locked by a dispatcher is left to it, and that dispatcher, which
 * must lock the execution after the request, sees CANCELLED and cancels the request
 * itself (EXECUTION_CLOSED).  It never waits for a request while holding the execution.
 */
Datum
sched_cancel_execution(PG_FUNCTION_ARGS)
{
	pg_uuid_t	execution_id;
	TimestampTz at;
	char	   *cur;

	sched_check_not_null(fcinfo, 1, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(1), "at");
	sched_check_not_null(fcinfo, 0, "execution_id");
	at = PG_GETARG_TIMESTAMPTZ(1);
	execution_id = uuid_arg(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	cur = lock_execution_for(&execution_id, "CANCELLED");
	if (strcmp(cur, "CANCELLED") != 0)
		close_execution(&execution_id, "CANCELLED", at);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text("CANCELLED"));
}
