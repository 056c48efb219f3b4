-- sql/install/30_dispatch.sql — placement, reservation and the queue: the C functions of src/selection.c, src/reservation.c and src/queue.c
-- A piece of pg_sched--0.2.0.sql, which the Makefile builds from sql/install/*.sql in
-- the order of their names, and of the upgrade from 0.1.0 (which drops first what
-- changed its signature or result), hence CREATE OR REPLACE.

-- ---------------------------------------------------------------------------------
-- Placement and reservation (C)
-- ---------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION sched.select_candidate(
    capability text,
    capability_version text,
    required_labels jsonb DEFAULT '{}',
    preferred_labels jsonb DEFAULT '{}',
    min_cpu_millis int DEFAULT 0,
    min_memory_mb bigint DEFAULT 0,
    min_gpus int DEFAULT 0,
    reserve_cpu_millis int DEFAULT 0,
    reserve_memory_mb bigint DEFAULT 0,
    reserve_gpus int DEFAULT 0,
    node_id text DEFAULT NULL,
    heartbeat_ttl interval DEFAULT NULL,
    at timestamptz DEFAULT now(),
    spread_key text DEFAULT NULL)
RETURNS SETOF sched.candidate
AS 'MODULE_PATHNAME', 'sched_select_candidate'
LANGUAGE C STABLE ROWS 1;

CREATE OR REPLACE FUNCTION sched.rank_candidates(
    capability text,
    capability_version text,
    required_labels jsonb DEFAULT '{}',
    preferred_labels jsonb DEFAULT '{}',
    min_cpu_millis int DEFAULT 0,
    min_memory_mb bigint DEFAULT 0,
    min_gpus int DEFAULT 0,
    reserve_cpu_millis int DEFAULT 0,
    reserve_memory_mb bigint DEFAULT 0,
    reserve_gpus int DEFAULT 0,
    node_id text DEFAULT NULL,
    heartbeat_ttl interval DEFAULT NULL,
    at timestamptz DEFAULT now(),
    spread_key text DEFAULT NULL)
RETURNS SETOF sched.ranked_candidate
AS 'MODULE_PATHNAME', 'sched_rank_candidates'
LANGUAGE C STABLE;

CREATE OR REPLACE FUNCTION sched.qualification_reasons(
    capability text,
    capability_version text,
    required_labels jsonb DEFAULT '{}',
    preferred_labels jsonb DEFAULT '{}',
    min_cpu_millis int DEFAULT 0,
    min_memory_mb bigint DEFAULT 0,
    min_gpus int DEFAULT 0,
    reserve_cpu_millis int DEFAULT 0,
    reserve_memory_mb bigint DEFAULT 0,
    reserve_gpus int DEFAULT 0,
    node_id text DEFAULT NULL,
    heartbeat_ttl interval DEFAULT NULL,
    at timestamptz DEFAULT now(),
    spread_key text DEFAULT NULL)
RETURNS SETOF sched.qualification
AS 'MODULE_PATHNAME', 'sched_qualification_reasons'
LANGUAGE C STABLE;

CREATE OR REPLACE FUNCTION sched.qualification_reasons(request_id bigint, at timestamptz DEFAULT now())
RETURNS SETOF sched.qualification
AS 'MODULE_PATHNAME', 'sched_qualification_reasons_for_request'
LANGUAGE C STABLE;

CREATE OR REPLACE FUNCTION sched.dispatch_attempt(
    request_id bigint,
    claim_id uuid DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS sched.dispatch_result
AS 'MODULE_PATHNAME', 'sched_dispatch_attempt'
LANGUAGE C VOLATILE;

/* The bigint key of the advisory lock dispatch takes on (step_id, attempt_number), as
 * shown in pg_locks (classid = high 32 bits, objid = low 32 bits, objsubid = 21315: a
 * lock space of pg_sched's own, which pg_advisory_lock() and its kin cannot take). */
CREATE OR REPLACE FUNCTION sched.step_lock_key(step_id uuid, attempt_number int)
RETURNS bigint
AS 'MODULE_PATHNAME', 'sched_step_lock_key'
LANGUAGE C IMMUTABLE STRICT;

-- ---------------------------------------------------------------------------------
-- Queue (C, src/queue.c): queue order of SPEC section 7, served from request_queue_idx
-- and request_age_idx.
-- ---------------------------------------------------------------------------------

/*
 * claim_requests: hands up to max_requests ready requests, in queue order, to a scheduler
 * that decides placement itself; it must dispatch each with dispatch_attempt(request_id,
 * claim_id) before claimed_until.  An expired claim returns the request to the queue.
 * Locks: each claimed request row (SKIP LOCKED: claimers never wait for each other).
 */
CREATE OR REPLACE FUNCTION sched.claim_requests(
    max_requests int DEFAULT 1,
    claim_ttl interval DEFAULT '30 s',
    capability text DEFAULT NULL,
    tenant text DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS SETOF sched.claim
AS 'MODULE_PATHNAME', 'sched_claim_requests'
LANGUAGE C VOLATILE;

/*
 * dispatch_next: takes ready requests in queue order and dispatches each through the
 * reservation transaction of dispatch_attempt, until max_dispatches are DISPATCHED or a
 * bounded number of requests was tried.  Returns one row per request tried, in order.
 * Requests of a shape that waits for capacity (no node admits it, some only for
 * transient reasons) are not tried: they keep their place and are taken by the first
 * call after capacity frees (src/queue.c).
 */
CREATE OR REPLACE FUNCTION sched.dispatch_next(
    max_dispatches int DEFAULT 1,
    capability text DEFAULT NULL,
    tenant text DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS SETOF sched.dispatch_result
AS 'MODULE_PATHNAME', 'sched_dispatch_next_0_2'
LANGUAGE C VOLATILE;

-- ---------------------------------------------------------------------------------
-- Dispatch counters (src/counters.c)
-- ---------------------------------------------------------------------------------

/* Cluster-wide since the server started (NULLs without preloading): requests dispatch
 * calls took up, placements made, conflicts met (candidates skipped because another
 * transaction held them, or refused by the re-check under lock), and better candidates
 * not tried because concurrent dispatches were reserving on them (held_passed). */
CREATE OR REPLACE FUNCTION sched._dispatch_counters(OUT calls bigint, OUT placements bigint,
                                         OUT conflicts bigint, OUT held_passed bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'sched_dispatch_counters'
LANGUAGE C VOLATILE;


/* The dispatch gate (dispatch_gate.c): the limit in force for this session
 * (sched.dispatch_concurrency; 0: none, NULL without preloading), the turns held and the
 * calls waiting for one now, and cluster-wide since the server started the calls that
 * took a turn, those of them that waited for it, those that waited sched.dispatch_wait_max
 * in vain and ran over the limit, those let through without a turn (their transaction
 * held an xid or had made a placement call), those that waited and moved to the CPU
 * their turn was freed on (sched.dispatch_move_to_free_cpu), and the turns handed to a
 * waiter that had waited sched.dispatch_handoff_after.  Internal: the owner's only. */
CREATE OR REPLACE FUNCTION sched._dispatch_gate(OUT concurrency int, OUT running int, OUT waiting int,
                                                OUT entered bigint, OUT waited bigint,
                                                OUT timed_out bigint, OUT bypassed bigint,
                                                OUT moved bigint, OUT handed bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'sched_dispatch_gate'
LANGUAGE C VOLATILE;


/* The filter of dispatch_next's queue fetch (queue_held.c): whether another running
 * transaction held the request locked when the fetch began, so that the fetch passes over
 * it without trying its row lock.  False outside a fetch.  Internal: the owner's only. */
CREATE OR REPLACE FUNCTION sched._request_held_elsewhere(request_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'sched_request_held_elsewhere'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

/* This backend's side of the queue fetch's shared state (diagnostics.c): the requests its
 * transaction has published as held, the rows its fetches left out as held by others,
 * its scans that moved a tenant's bound and its fetches that started at one.
 * Internal: the owner's only. */
CREATE OR REPLACE FUNCTION sched._queue_fetch_stats(OUT held_published int, OUT held_passed_over bigint,
                                                    OUT bounds_found bigint, OUT bounds_used bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'sched_queue_fetch_stats'
LANGUAGE C VOLATILE;

/* Where each tenant's queue begins (queue_bound.c): every version that enters
 * request_queue_idx's range lowers its tenant's bound to its key. */
CREATE OR REPLACE FUNCTION sched._request_queued()
RETURNS trigger
AS 'MODULE_PATHNAME', 'sched_request_queued'
LANGUAGE C;
CREATE OR REPLACE TRIGGER request_queued AFTER INSERT OR UPDATE ON sched.request
    FOR EACH ROW WHEN (NEW.state IN ('PENDING', 'CLAIMED'))
    EXECUTE FUNCTION sched._request_queued();
-- also when rows are applied as a replica (session_replication_role): a row that entered
-- the range without lowering the bound would be passed over
ALTER TABLE sched.request ENABLE ALWAYS TRIGGER request_queued;
