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


-- retries carry the payload

/*
 * Ends live attempt `a` (locked by the caller) with status SUCCEEDED, FAILED, CANCELLED
 * or LOST: releases its slot and reservations, records the milestone, and for FAILED and
 * LOST requeues the step as attempt_number + 1 (retry backoff 1 s doubling, at most
 * sched.retry_backoff_max; the retry avoids this node when another is eligible) while
 * attempts remain, else fails the execution.
 */
CREATE OR REPLACE FUNCTION sched._end_attempt(a sched.attempt, status text, detail jsonb, at timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    req sched.request;
    exec_status text;
    retry_at timestamptz;
    new_id bigint;
    will_retry boolean;
BEGIN
    SELECT * INTO req FROM sched.request r WHERE r.request_id = a.request_id;
    will_retry := _end_attempt.status IN ('FAILED', 'LOST') AND a.attempt_number < req.max_attempts;

    -- the execution before the worker and node (lock order); exclusive only to fail it
    IF _end_attempt.status IN ('FAILED', 'LOST') AND NOT will_retry THEN
        SELECT e.status INTO exec_status FROM sched.execution e
         WHERE e.execution_id = a.execution_id FOR NO KEY UPDATE;
    ELSE
        SELECT e.status INTO exec_status FROM sched.execution e
         WHERE e.execution_id = a.execution_id FOR SHARE;
    END IF;

    UPDATE sched.attempt x SET status = _end_attempt.status, finished_at = at,
           detail = coalesce(_end_attempt.detail, x.detail)
     WHERE x.attempt_id = a.attempt_id;
    UPDATE sched.worker w SET live_attempts = w.live_attempts - 1 WHERE w.worker_id = a.worker_id;
    UPDATE sched.node n SET
        reserved_cpu_millis = n.reserved_cpu_millis - a.reserve_cpu_millis,
        reserved_memory_mb = n.reserved_memory_mb - a.reserve_memory_mb,
        reserved_gpus = n.reserved_gpus - a.reserve_gpus,
        live_attempts = n.live_attempts - 1
     WHERE n.node_id = a.node_id;

    PERFORM sched._milestone(a.execution_id,
        format('step.attempt.%s:%s:%s', lower(_end_attempt.status), a.step_id, a.attempt_number),
        'EXECUTION', a.step_id, a.attempt_number, a.attempt_id, _end_attempt.status,
        CASE WHEN _end_attempt.status = 'LOST' THEN 'Reaper' ELSE 'Worker' END,
        CASE _end_attempt.status WHEN 'SUCCEEDED' THEN 'Attempt succeeded'
                                 WHEN 'FAILED' THEN 'Attempt failed'
                                 WHEN 'CANCELLED' THEN 'Attempt cancelled'
                                 ELSE 'Attempt lost: lease expired' END,
        jsonb_strip_nulls(jsonb_build_object('node_id', a.node_id, 'worker_id', a.worker_id,
                                             'detail', _end_attempt.detail)),
        at);

    IF _end_attempt.status NOT IN ('FAILED', 'LOST')
       OR exec_status NOT IN ('CREATED', 'QUEUED', 'RUNNING') THEN
        RETURN;
    END IF;

    IF NOT will_retry THEN
        PERFORM sched._close_execution(a.execution_id, 'FAILED', at);
        RETURN;
    END IF;

    retry_at := at + make_interval(secs => least(power(2, a.attempt_number - 1),
                                                 sched._setting_seconds('sched.retry_backoff_max')));
    INSERT INTO sched.request AS r (
        execution_id, step_id, attempt_number, tenant, priority, capability, capability_version,
        required_labels, preferred_labels, min_cpu_millis, min_memory_mb, min_gpus,
        reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id, max_attempts,
        state, queued_at, available_at, sort_key, avoid_node_id, payload)
    VALUES (
        req.execution_id, req.step_id, a.attempt_number + 1, req.tenant, req.priority,
        req.capability, req.capability_version, req.required_labels, req.preferred_labels,
        req.min_cpu_millis, req.min_memory_mb, req.min_gpus, req.reserve_cpu_millis,
        req.reserve_memory_mb, req.reserve_gpus, req.node_id, req.max_attempts,
        'PENDING', retry_at, retry_at, sched._queue_key(req.priority, retry_at), a.node_id,
        req.payload)
    ON CONFLICT ON CONSTRAINT request_one_per_step_attempt DO NOTHING
    RETURNING r.request_id INTO new_id;

    PERFORM sched._milestone(a.execution_id,
        format('step.requeued:%s:%s', a.step_id, a.attempt_number + 1), 'SCHEDULING',
        a.step_id, a.attempt_number + 1, NULL, 'QUEUED', 'Scheduler',
        'Requeued for retry',
        jsonb_build_object('request_id', new_id, 'available_at', retry_at,
                           'avoid_node_id', a.node_id, 'previous_status', _end_attempt.status),
        at);
END
$$;


-- poll_commands returns what the worker needs (a new result type: drop and create)
DROP FUNCTION sched.poll_commands(uuid, bigint, int, timestamptz);


/*
 * poll_commands: the worker session's commands (START, CANCEL) for its live attempts,
 * oldest first, each delivered once, only to the generation they were made for, with
 * everything the worker needs to run the attempt (execution, step, attempt number,
 * capability and version, the application's payload).  A stale generation is refused
 * (55000).  Locks: the delivered command rows (SKIP LOCKED).
 */
CREATE FUNCTION sched.poll_commands(
    worker_id uuid,
    generation bigint,
    max int DEFAULT 10,
    at timestamptz DEFAULT now())
RETURNS TABLE (command_id bigint, kind text, attempt_id uuid, lease_version bigint, request_id bigint,
               execution_id uuid, step_id uuid, attempt_number int, capability text,
               capability_version text, payload jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    current_generation bigint;
BEGIN
    PERFORM sched._require(worker_id, 'worker_id');
    PERFORM sched._require(generation, 'generation');
    PERFORM sched._require(max, 'max');
    IF max < 1 THEN
        RAISE EXCEPTION 'parameter "max" must be at least 1: %', max
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM sched._require(at, 'at');
    SELECT w.generation INTO current_generation FROM sched.worker w WHERE w.worker_id = poll_commands.worker_id;
    IF NOT FOUND THEN
        PERFORM sched._unknown('worker', worker_id::text);
    END IF;
    IF current_generation <> poll_commands.generation THEN
        RAISE EXCEPTION 'stale generation % for worker %', generation, worker_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The current generation is %s.', current_generation);
    END IF;

    -- commands of attempts that already ended (lost, failed, cancelled) are not
    -- delivered: the worker could only be refused on them
    RETURN QUERY
    WITH next AS (
        SELECT c.command_id FROM sched.command c
          JOIN sched.attempt a ON a.attempt_id = c.attempt_id
         WHERE c.worker_id = poll_commands.worker_id AND c.delivered_at IS NULL
           AND c.worker_generation = poll_commands.generation
           AND a.status IN ('DISPATCHED', 'RUNNING')
         ORDER BY c.command_id
         LIMIT max
         FOR UPDATE OF c SKIP LOCKED
    ), delivered AS (
        UPDATE sched.command c SET delivered_at = at
          FROM next WHERE c.command_id = next.command_id
        RETURNING c.command_id, c.kind, c.attempt_id, c.lease_version, c.request_id
    )
    SELECT d.command_id, d.kind, d.attempt_id, d.lease_version, d.request_id,
           r.execution_id, r.step_id, r.attempt_number, r.capability, r.capability_version,
           r.payload
      FROM delivered d
      JOIN sched.request r ON r.request_id = d.request_id
     ORDER BY d.command_id;
END
$$;


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
