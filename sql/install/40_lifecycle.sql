-- sql/install/40_lifecycle.sql — the attempt lifecycle: the worker protocol, leases, reaping, and ending attempts
-- A piece of pg_sched--0.2.0.sql, which the Makefile builds from sql/install/*.sql in
-- the order of their names.

-- ---------------------------------------------------------------------------------
-- Attempt lifecycle: worker protocol and recovery
--
-- Locks, in the order of src/reservation.c: the attempt row, then the execution row,
-- then the worker row, then its node row.  Terminal transitions release the worker's
-- slot and the node's reservations in the same transaction as the status change, and
-- only from a live status, so a slot is released exactly once.
-- ---------------------------------------------------------------------------------

/* Locks and returns a live attempt, checking its lease_version; ERROR otherwise. */
CREATE FUNCTION sched._live_attempt(attempt_id uuid, lease_version bigint)
RETURNS sched.attempt
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a sched.attempt;
BEGIN
    PERFORM sched._require(attempt_id, 'attempt_id');
    PERFORM sched._require(lease_version, 'lease_version');
    SELECT * INTO a FROM sched.attempt x WHERE x.attempt_id = _live_attempt.attempt_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM sched._unknown('attempt', attempt_id::text);
    END IF;
    IF a.lease_version <> _live_attempt.lease_version THEN
        RAISE EXCEPTION 'stale lease_version % for attempt %', lease_version, attempt_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The current lease_version is %s.', a.lease_version);
    END IF;
    IF a.status NOT IN ('DISPATCHED', 'RUNNING') THEN
        RAISE EXCEPTION 'attempt % is no longer live: it is %', attempt_id, a.status
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'The lease was lost; a newer attempt may own the step now.';
    END IF;
    RETURN a;
END
$$;

/*
 * Closes an execution (FAILED or CANCELLED): its open requests are cancelled (SKIP
 * LOCKED: a dispatcher holding one sees the closed execution and cancels it itself) and
 * each live attempt gets a CANCEL command.  The caller holds the execution row lock.
 */
CREATE FUNCTION sched._close_execution(execution_id uuid, status text, at timestamptz)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a record;
BEGIN
    UPDATE sched.execution e SET status = _close_execution.status, updated_at = at, finished_at = at
     WHERE e.execution_id = _close_execution.execution_id;

    UPDATE sched.request r SET state = 'CANCELLED', claim_id = NULL, claimed_until = NULL
     WHERE r.request_id IN (
        SELECT r2.request_id FROM sched.request r2
         WHERE r2.execution_id = _close_execution.execution_id
           AND r2.state IN ('PENDING', 'CLAIMED')
         FOR UPDATE SKIP LOCKED);

    FOR a IN
        SELECT x.* FROM sched.attempt x
         WHERE x.execution_id = _close_execution.execution_id
           AND x.status IN ('DISPATCHED', 'RUNNING')
         ORDER BY x.dispatched_at, x.attempt_id
    LOOP
        INSERT INTO sched.command (worker_id, worker_generation, kind, attempt_id, lease_version, request_id, created_at)
        VALUES (a.worker_id, a.worker_generation, 'CANCEL', a.attempt_id, a.lease_version, a.request_id, at);
        PERFORM pg_catalog.pg_notify('sched_worker_' || a.worker_id::text, 'CANCEL ' || a.attempt_id::text);
        PERFORM sched._milestone(_close_execution.execution_id,
            format('step.cancel.sent:%s:%s', a.step_id, a.attempt_number), 'EXECUTION',
            a.step_id, a.attempt_number, a.attempt_id, 'CANCELLING', 'Scheduler',
            'Cancel sent to worker', jsonb_build_object('worker_id', a.worker_id), at);
    END LOOP;

    PERFORM sched._milestone(_close_execution.execution_id,
        'execution.' || lower(_close_execution.status), 'EXECUTION', NULL, NULL, NULL,
        _close_execution.status, 'Scheduler', 'Execution ' || lower(_close_execution.status), NULL, at);
END
$$;

/*
 * Ends live attempt `a` (locked by the caller) with status SUCCEEDED, FAILED, CANCELLED
 * or LOST: releases its slot and reservations, records the milestone, and for FAILED and
 * LOST requeues the step as attempt_number + 1 (retry backoff 1 s doubling, at most
 * sched.retry_backoff_max; the retry avoids this node when another is eligible) while
 * attempts remain, else fails the execution.
 */
CREATE FUNCTION sched._end_attempt(a sched.attempt, status text, detail jsonb, at timestamptz)
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

/* Extends a live attempt's lease (locked by the caller) to at + sched.lease_ttl; a lease
 * never shrinks.  Returns the new lease_expires_at. */
CREATE FUNCTION sched._extend_lease(attempt_id uuid, at timestamptz)
RETURNS timestamptz
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE sched.attempt x
       SET lease_expires_at = greatest(x.lease_expires_at,
                                       $2 + make_interval(secs => sched._setting_seconds('sched.lease_ttl')))
     WHERE x.attempt_id = $1
    RETURNING x.lease_expires_at
$$;

/*
 * start_attempt: the worker begins the attempt: RUNNING, lease renewed, the execution
 * RUNNING.  Repeating it on a RUNNING attempt renews the lease.  Returns lease_expires_at.
 */
CREATE FUNCTION sched.start_attempt(attempt_id uuid, lease_version bigint, at timestamptz DEFAULT now())
RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a sched.attempt;
    expires timestamptz;
BEGIN
    PERFORM sched._require(at, 'at');
    a := sched._live_attempt(attempt_id, lease_version);
    UPDATE sched.attempt x SET status = 'RUNNING', started_at = coalesce(x.started_at, at)
     WHERE x.attempt_id = a.attempt_id;
    expires := sched._extend_lease(a.attempt_id, at);
    UPDATE sched.execution e SET status = 'RUNNING', updated_at = at
     WHERE e.execution_id = a.execution_id AND e.status IN ('CREATED', 'QUEUED');
    PERFORM sched._milestone(a.execution_id,
        format('step.attempt.started:%s:%s', a.step_id, a.attempt_number), 'EXECUTION',
        a.step_id, a.attempt_number, a.attempt_id, 'RUNNING', 'Worker', 'Attempt started',
        jsonb_build_object('node_id', a.node_id, 'worker_id', a.worker_id), at);
    RETURN expires;
END
$$;

/* renew_lease: extends a live attempt's lease to at + sched.lease_ttl; records a late
 * renewal (one that arrives after the lease expired but before it was reaped). */
CREATE FUNCTION sched.renew_lease(attempt_id uuid, lease_version bigint, at timestamptz DEFAULT now())
RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a sched.attempt;
BEGIN
    PERFORM sched._require(at, 'at');
    a := sched._live_attempt(attempt_id, lease_version);
    IF a.lease_expires_at < at THEN
        PERFORM sched._milestone(a.execution_id,
            format('step.lease.renewed_late:%s:%s:%s', a.step_id, a.attempt_number,
                   extract(epoch FROM a.lease_expires_at)),
            'EXECUTION', a.step_id, a.attempt_number, a.attempt_id, a.status, 'Worker',
            'Lease renewed after it had expired',
            jsonb_build_object('lease_expired_at', a.lease_expires_at, 'renewed_at', at), at);
    END IF;
    RETURN sched._extend_lease(a.attempt_id, at);
END
$$;

/*
 * finish_attempt: the worker reports the end: SUCCEEDED, FAILED or CANCELLED.  Repeating
 * the same call returns the same status and changes nothing.  A stale lease_version, or
 * an attempt that ended otherwise (LOST, another outcome), is refused (55000).
 */
CREATE FUNCTION sched.finish_attempt(
    attempt_id uuid,
    lease_version bigint,
    outcome text,
    detail jsonb DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a sched.attempt;
BEGIN
    PERFORM sched._require(attempt_id, 'attempt_id');
    PERFORM sched._require(lease_version, 'lease_version');
    PERFORM sched._require_text(outcome, 'outcome');
    PERFORM sched._check_one_of(outcome, 'outcome', ARRAY['SUCCEEDED', 'FAILED', 'CANCELLED']);
    PERFORM sched._require(at, 'at');

    SELECT * INTO a FROM sched.attempt x WHERE x.attempt_id = finish_attempt.attempt_id FOR UPDATE;
    IF FOUND AND a.status = finish_attempt.outcome AND a.lease_version = finish_attempt.lease_version THEN
        RETURN a.status;        -- the same report again: harmless
    END IF;
    a := sched._live_attempt(attempt_id, lease_version);
    PERFORM sched._end_attempt(a, outcome, detail, at);
    RETURN outcome;
END
$$;

/*
 * reap_expired: marks LOST every live attempt whose lease expired before `at`, releasing
 * it and requeueing its step (or failing the execution), and returns expired claims to
 * the queue.  Returns the number of attempts marked LOST.  Attempts locked by a
 * concurrent finish are skipped (SKIP LOCKED): that finish ends them, exactly once.
 * Also drops the rows of sched.tenant_live that are back at zero.
 */
CREATE FUNCTION sched.reap_expired(at timestamptz DEFAULT now())
RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a sched.attempt;
    lost int := 0;
BEGIN
    PERFORM sched._require(at, 'at');
    FOR a IN
        SELECT x.* FROM sched.attempt x
         WHERE x.status IN ('DISPATCHED', 'RUNNING') AND x.lease_expires_at < reap_expired.at
         ORDER BY x.lease_expires_at, x.attempt_id
         FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM sched._end_attempt(a, 'LOST', NULL, at);
        lost := lost + 1;
    END LOOP;

    UPDATE sched.request r SET state = 'PENDING', claim_id = NULL, claimed_until = NULL
     WHERE r.request_id IN (
        SELECT r2.request_id FROM sched.request r2
         WHERE r2.state = 'CLAIMED' AND r2.claimed_until <= reap_expired.at
         FOR UPDATE SKIP LOCKED);

    -- live counters back at zero (tenants that come and go would pile them up); a row a
    -- running dispatch holds is left for the next time
    DELETE FROM sched.tenant_live l WHERE (l.tenant, l.backend) IN (
        SELECT z.tenant, z.backend FROM sched.tenant_live z WHERE z.live = 0
           FOR UPDATE SKIP LOCKED);
    RETURN lost;
END
$$;

/* A sched.* duration setting in seconds (the library is loaded first, defining it). */
CREATE FUNCTION sched._setting_seconds(name text)
RETURNS double precision
AS 'MODULE_PATHNAME', 'sched_setting_seconds'
LANGUAGE C STABLE STRICT;

