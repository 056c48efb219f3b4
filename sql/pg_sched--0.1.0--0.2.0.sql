/*
 * pg_sched 0.1.0 → 0.2.0 — upgrade script (ALTER EXTENSION pg_sched UPDATE).
 *
 * Brings a 0.1.0 database to exactly what pg_sched--0.2.0.sql installs: the upgrade test
 * (test/upgrade) compares every object of the two.  Every change of 0.2.0 goes both
 * here and into the install script.
 */

\echo Use "ALTER EXTENSION pg_sched UPDATE TO '0.2.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------
-- Waiting for capacity: the request's shape, and the application's payload
-- ---------------------------------------------------------------------------------

ALTER TABLE sched.request ADD COLUMN payload jsonb;
ALTER TABLE sched.request ADD COLUMN
    shape               bigint NOT NULL GENERATED ALWAYS AS (pg_catalog.hashtextextended(
                            pg_catalog.length(capability)::text || ':' || capability
                            || pg_catalog.length(capability_version)::text || ':' || capability_version
                            || pg_catalog.length(required_labels::text)::text || ':' || required_labels::text
                            || min_cpu_millis::text || ',' || min_memory_mb::text || ','
                            || min_gpus::text || ',' || reserve_cpu_millis::text || ','
                            || reserve_memory_mb::text || ',' || reserve_gpus::text || ','
                            || coalesce(pg_catalog.length(node_id)::text || ':' || node_id, '-'),
                            0)) STORED;
CREATE INDEX request_shape_idx ON sched.request (shape, available_at)
    WHERE state IN ('PENDING', 'CLAIMED');

-- submit gains payload (a new signature: the old one is dropped, not overloaded)
DROP FUNCTION sched.submit(uuid, uuid, text, text, int, text, int, jsonb, jsonb, int, bigint,
                           int, int, bigint, int, text, int, timestamptz);

/*
 * submit: queues one attempt of one step.  Idempotent on (step_id, attempt_number): a
 * repeated call returns the existing request_id and changes nothing.  Creates the
 * execution (QUEUED, with this tenant) at its first submit.  A request is ready from
 * available_at, which is also its queued_at (backoffs move available_at only).  payload
 * is the application's: stored as given, carried by retries and by the START command.
 * Locks: the execution row (FOR SHARE, so cancel/complete cannot interleave).
 */
CREATE FUNCTION sched.submit(
    execution_id uuid,
    step_id uuid,
    capability text,
    capability_version text,
    attempt_number int DEFAULT 1,
    tenant text DEFAULT 'default',
    priority int DEFAULT 0,
    required_labels jsonb DEFAULT '{}',
    preferred_labels jsonb DEFAULT '{}',
    min_cpu_millis int DEFAULT 0,
    min_memory_mb bigint DEFAULT 0,
    min_gpus int DEFAULT 0,
    reserve_cpu_millis int DEFAULT 0,
    reserve_memory_mb bigint DEFAULT 0,
    reserve_gpus int DEFAULT 0,
    node_id text DEFAULT NULL,
    max_attempts int DEFAULT 3,
    available_at timestamptz DEFAULT now(),
    payload jsonb DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    existing sched.request;
    new_id bigint;
BEGIN
    PERFORM sched._require(execution_id, 'execution_id');
    PERFORM sched._require(step_id, 'step_id');
    PERFORM sched._require_text(capability, 'capability');
    PERFORM sched._require_text(capability_version, 'capability_version');
    PERFORM sched._require(attempt_number, 'attempt_number');
    IF attempt_number < 1 THEN
        RAISE EXCEPTION 'parameter "attempt_number" must be at least 1: %', attempt_number
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM sched._require_text(tenant, 'tenant');
    PERFORM sched._require(priority, 'priority');
    PERFORM sched._require(required_labels, 'required_labels');
    PERFORM sched._check_labels(required_labels, 'required_labels');
    PERFORM sched._require(preferred_labels, 'preferred_labels');
    PERFORM sched._check_labels(preferred_labels, 'preferred_labels');
    PERFORM sched._check_nonnegative(sched._require(min_cpu_millis, 'min_cpu_millis'), 'min_cpu_millis');
    PERFORM sched._check_nonnegative(sched._require(min_memory_mb, 'min_memory_mb'), 'min_memory_mb');
    PERFORM sched._check_nonnegative(sched._require(min_gpus, 'min_gpus'), 'min_gpus');
    PERFORM sched._check_nonnegative(sched._require(reserve_cpu_millis, 'reserve_cpu_millis'), 'reserve_cpu_millis');
    PERFORM sched._check_nonnegative(sched._require(reserve_memory_mb, 'reserve_memory_mb'), 'reserve_memory_mb');
    PERFORM sched._check_nonnegative(sched._require(reserve_gpus, 'reserve_gpus'), 'reserve_gpus');
    IF node_id = '' THEN
        RAISE EXCEPTION 'parameter "node_id" must not be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass NULL for a request that is not pinned to a node.';
    END IF;
    PERFORM sched._require(max_attempts, 'max_attempts');
    IF max_attempts < 1 THEN
        RAISE EXCEPTION 'parameter "max_attempts" must be at least 1: %', max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM sched._require(available_at, 'available_at');

    INSERT INTO sched.execution AS e (execution_id, tenant, status, created_at, updated_at)
    VALUES (submit.execution_id, submit.tenant, 'QUEUED', now(), now())
    ON CONFLICT ON CONSTRAINT execution_pkey DO NOTHING;
    PERFORM 1 FROM sched.execution e WHERE e.execution_id = submit.execution_id FOR SHARE;

    SELECT * INTO existing FROM sched.request r
     WHERE r.step_id = submit.step_id AND r.attempt_number = submit.attempt_number;
    IF FOUND THEN
        IF existing.execution_id <> submit.execution_id THEN
            RAISE EXCEPTION 'step % attempt % belongs to execution %, not %',
                step_id, attempt_number, existing.execution_id, execution_id
                USING ERRCODE = 'unique_violation';
        END IF;
        RETURN existing.request_id;
    END IF;

    INSERT INTO sched.request AS r (
        execution_id, step_id, attempt_number, tenant, priority, capability, capability_version,
        required_labels, preferred_labels, min_cpu_millis, min_memory_mb, min_gpus,
        reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id, max_attempts,
        state, queued_at, available_at, sort_key, payload)
    VALUES (
        submit.execution_id, submit.step_id, submit.attempt_number, submit.tenant, submit.priority,
        submit.capability, submit.capability_version, submit.required_labels, submit.preferred_labels,
        submit.min_cpu_millis, submit.min_memory_mb, submit.min_gpus, submit.reserve_cpu_millis,
        submit.reserve_memory_mb, submit.reserve_gpus, submit.node_id, submit.max_attempts,
        'PENDING', submit.available_at, submit.available_at,
        sched._queue_key(submit.priority, submit.available_at), submit.payload)
    ON CONFLICT ON CONSTRAINT request_one_per_step_attempt DO NOTHING
    RETURNING r.request_id INTO new_id;

    IF new_id IS NULL THEN
        -- a concurrent submit of the same step and attempt won: return its request
        SELECT r.request_id INTO new_id FROM sched.request r
         WHERE r.step_id = submit.step_id AND r.attempt_number = submit.attempt_number;
        RETURN new_id;
    END IF;

    PERFORM sched._milestone(submit.execution_id,
        format('step.queued:%s:%s', submit.step_id, submit.attempt_number),
        'SCHEDULING', submit.step_id, submit.attempt_number, NULL, 'QUEUED', 'Queue',
        'Queued for scheduling',
        jsonb_build_object('request_id', new_id, 'capability', submit.capability,
                           'capability_version', submit.capability_version, 'tenant', submit.tenant,
                           'priority', submit.priority),
        submit.available_at);
    RETURN new_id;
END
$$;


-- ---------------------------------------------------------------------------------
-- The lifecycle in C (src/lifecycle.c): the worker protocol, leases, reaping, ending
-- attempts (retries carry the payload) and closing executions.  The PL/pgSQL helpers it
-- replaces go; poll_commands returns what the worker needs (a new result type: drop
-- and create).
-- ---------------------------------------------------------------------------------

DROP FUNCTION sched._end_attempt(sched.attempt, text, jsonb, timestamptz);
DROP FUNCTION sched._close_execution(uuid, text, timestamptz);
DROP FUNCTION sched._live_attempt(uuid, bigint);
DROP FUNCTION sched._extend_lease(uuid, timestamptz);
DROP FUNCTION sched._lock_execution_for(uuid, text);
DROP FUNCTION sched.poll_commands(uuid, bigint, int, timestamptz);

/* poll_commands: the worker session's commands (START, CANCEL) for its live attempts,
 * oldest first, each delivered once, with everything the worker needs. */
CREATE FUNCTION sched.poll_commands(
    worker_id uuid,
    generation bigint,
    max int DEFAULT 10,
    at timestamptz DEFAULT now())
RETURNS TABLE (command_id bigint, kind text, attempt_id uuid, lease_version bigint, request_id bigint,
               execution_id uuid, step_id uuid, attempt_number int, capability text,
               capability_version text, payload jsonb)
AS 'MODULE_PATHNAME', 'sched_poll_commands'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* start_attempt: RUNNING, lease renewed, the execution RUNNING; returns lease_expires_at. */
CREATE OR REPLACE FUNCTION sched.start_attempt(attempt_id uuid, lease_version bigint, at timestamptz DEFAULT now())
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'sched_start_attempt'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* renew_lease: the lease runs sched.lease_ttl from `at`; returns lease_expires_at. */
CREATE OR REPLACE FUNCTION sched.renew_lease(attempt_id uuid, lease_version bigint, at timestamptz DEFAULT now())
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'sched_renew_lease'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* finish_attempt: SUCCEEDED, FAILED (requeued while attempts remain) or CANCELLED. */
CREATE OR REPLACE FUNCTION sched.finish_attempt(
    attempt_id uuid,
    lease_version bigint,
    outcome text,
    detail jsonb DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS text
AS 'MODULE_PATHNAME', 'sched_finish_attempt'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* reap_expired: live attempts whose lease expired become LOST and are requeued;
 * expired claims return to the queue.  Returns the number marked LOST. */
CREATE OR REPLACE FUNCTION sched.reap_expired(at timestamptz DEFAULT now())
RETURNS int
AS 'MODULE_PATHNAME', 'sched_reap_expired'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* complete_execution: the application declares the execution done (refused while it
 * has pending requests or live attempts).  Idempotent on SUCCEEDED. */
CREATE OR REPLACE FUNCTION sched.complete_execution(execution_id uuid, at timestamptz DEFAULT now())
RETURNS text
AS 'MODULE_PATHNAME', 'sched_complete_execution'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* cancel_execution: CANCELLED, its open requests cancelled, a CANCEL command to the
 * worker of each live attempt.  Idempotent. */
CREATE OR REPLACE FUNCTION sched.cancel_execution(execution_id uuid, at timestamptz DEFAULT now())
RETURNS text
AS 'MODULE_PATHNAME', 'sched_cancel_execution'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

-- dispatch_next of 0.2.0 judges each shape once (the 0.1.0 entry point refuses, asking
-- for this update)
CREATE OR REPLACE FUNCTION sched.dispatch_next(
    max_dispatches int DEFAULT 1,
    capability text DEFAULT NULL,
    tenant text DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS SETOF sched.dispatch_result
AS 'MODULE_PATHNAME', 'sched_dispatch_next_0_2'
LANGUAGE C VOLATILE;

-- the functions created above, like every function, are not granted to PUBLIC
REVOKE ALL ON FUNCTION
    sched.submit(uuid, uuid, text, text, int, text, int, jsonb, jsonb, int, bigint, int, int,
                 bigint, int, text, int, timestamptz, jsonb),
    sched.poll_commands(uuid, bigint, int, timestamptz)
FROM PUBLIC;
