-- sql/install/25_work_api.sql — tenants, the timeline's one writer, and submitting work.
-- A piece of pg_sched--0.2.0.sql (the Makefile builds it from sql/install/*.sql in the
-- order of their names) and of the upgrade from 0.1.0, hence CREATE OR REPLACE.  Who may
-- call what, and as whom it runs: 90_privileges.sql.

-- ---------------------------------------------------------------------------------
-- The sums of sched.tenant_live (20_work.sql), kept by triggers on sched.attempt
-- ---------------------------------------------------------------------------------

/* For each tenant a statement changed attempts of: the change in its live attempts and
 * in what they reserve, from the statement's transition tables, added to its row of this
 * backend's slot (its BackendId); TRUNCATE empties the table.  In C
 * (src/tenant_live.c): it runs at every change of an attempt, and most (a start, say)
 * change no sums, which it sees without running a statement. */
CREATE OR REPLACE FUNCTION sched._attempt_live_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'sched_attempt_live_changed'
LANGUAGE C
SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE TRIGGER attempt_live_inserted AFTER INSERT ON sched.attempt
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
CREATE OR REPLACE TRIGGER attempt_live_updated AFTER UPDATE ON sched.attempt
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
CREATE OR REPLACE TRIGGER attempt_live_deleted AFTER DELETE ON sched.attempt
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
CREATE OR REPLACE TRIGGER attempt_live_truncated AFTER TRUNCATE ON sched.attempt
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_inserted;
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_updated;
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_deleted;
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_truncated;

-- ---------------------------------------------------------------------------------
-- Tenants
-- ---------------------------------------------------------------------------------

/* set_tenant_weight: a tenant's fair-share weight (a tenant not listed has 1). */
CREATE OR REPLACE FUNCTION sched.set_tenant_weight(tenant text, weight int)
RETURNS sched.tenant
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.tenant;
BEGIN
    PERFORM sched._require_text(tenant, 'tenant');
    PERFORM sched._require(weight, 'weight');
    IF weight <= 0 THEN
        RAISE EXCEPTION 'parameter "weight" must be positive: %', weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO sched.tenant AS t (tenant, weight) VALUES (set_tenant_weight.tenant, set_tenant_weight.weight)
    ON CONFLICT ON CONSTRAINT tenant_pkey DO UPDATE SET weight = excluded.weight
    RETURNING * INTO result;
    RETURN result;
END
$$;

/*
 * set_tenant_owner: fences a tenant.  Once it has an owner, only members of that role
 * (and sched_admin) may submit, cancel or complete its work; others get 42501.  NULL
 * removes the fence (any sched_scheduler may, as for a tenant without a row).
 * Locks: the tenant row.
 */
CREATE OR REPLACE FUNCTION sched.set_tenant_owner(tenant text, owner regrole)
RETURNS sched.tenant
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.tenant;
BEGIN
    PERFORM sched._require_text(tenant, 'tenant');
    INSERT INTO sched.tenant AS t (tenant, owner) VALUES (set_tenant_owner.tenant, set_tenant_owner.owner)
    ON CONFLICT ON CONSTRAINT tenant_pkey DO UPDATE SET owner = excluded.owner
    RETURNING * INTO result;
    RETURN result;
END
$$;

-- ---------------------------------------------------------------------------------
-- Timeline
-- ---------------------------------------------------------------------------------

/* A milestone is appended once: each writer (submit below, src/lifecycle.c, batch.c,
 * preemption.c) inserts it with ON CONFLICT ON CONSTRAINT timeline_milestone_once DO
 * NOTHING, so a milestone_key already recorded for the execution is kept as is.  (0.1.0
 * had a function for it, sched._milestone; a call of it parsed and planned its body
 * again at every milestone.) */

-- ---------------------------------------------------------------------------------
-- Work
-- ---------------------------------------------------------------------------------

/*
 * set_concurrency_limit: at most max_live live attempts of the requests submitted with
 * concurrency_key; NULL removes the limit.  Exact under concurrency (src/reservation.c
 * checks it under a lock of the key).  Returns the limit, or NULL when removed.
 */
CREATE OR REPLACE FUNCTION sched.set_concurrency_limit(concurrency_key text, max_live int)
RETURNS sched.concurrency_limit
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.concurrency_limit;
BEGIN
    PERFORM sched._require_text(concurrency_key, 'concurrency_key');
    PERFORM sched._check_name(concurrency_key, 'concurrency_key');
    IF max_live IS NULL THEN
        DELETE FROM sched.concurrency_limit l WHERE l.concurrency_key = set_concurrency_limit.concurrency_key;
        RETURN NULL;
    END IF;
    IF max_live <= 0 THEN
        RAISE EXCEPTION 'parameter "max_live" must be positive: %', max_live
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO sched.concurrency_limit AS l (concurrency_key, max_live)
    VALUES (set_concurrency_limit.concurrency_key, set_concurrency_limit.max_live)
    ON CONFLICT ON CONSTRAINT concurrency_limit_pkey DO UPDATE SET max_live = excluded.max_live
    RETURNING * INTO result;
    RETURN result;
END
$$;

/*
 * set_rate_limit: at most `dispatches` dispatches of the key in any sliding window of
 * length `per` (more than 0, at most 30 days); dispatches NULL (and per NULL) removes the
 * limit.  Returns the limit, or NULL when removed.
 */
CREATE OR REPLACE FUNCTION sched.set_rate_limit(concurrency_key text, dispatches int, per interval)
RETURNS sched.rate_limit
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.rate_limit;
BEGIN
    PERFORM sched._require_text(concurrency_key, 'concurrency_key');
    PERFORM sched._check_name(concurrency_key, 'concurrency_key');
    IF dispatches IS NULL AND per IS NULL THEN
        DELETE FROM sched.rate_limit l WHERE l.concurrency_key = set_rate_limit.concurrency_key;
        RETURN NULL;
    END IF;
    PERFORM sched._require(dispatches, 'dispatches');
    PERFORM sched._require(per, 'per');
    IF dispatches <= 0 THEN
        RAISE EXCEPTION 'parameter "dispatches" must be positive: %', dispatches
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (per > interval '0' AND per <= interval '30 days') THEN
        RAISE EXCEPTION 'parameter "per" must be more than 0 and at most 30 days: %', per
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO sched.rate_limit AS l (concurrency_key, dispatches, per)
    VALUES (set_rate_limit.concurrency_key, set_rate_limit.dispatches, set_rate_limit.per)
    ON CONFLICT ON CONSTRAINT rate_limit_pkey DO UPDATE SET dispatches = excluded.dispatches, per = excluded.per
    RETURNING * INTO result;
    RETURN result;
END
$$;

/*
 * set_tenant_quota: hard limits on what the tenant's live attempts hold: their number and
 * the sums of their reservations (NULL: no limit on that dimension; all NULL removes the
 * quota).  Returns the quota, or NULL when removed.
 */
CREATE OR REPLACE FUNCTION sched.set_tenant_quota(tenant text, max_live int, max_cpu_millis int,
                                                  max_memory_mb bigint, max_gpus int)
RETURNS sched.tenant_quota
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.tenant_quota;
BEGIN
    PERFORM sched._require_text(tenant, 'tenant');
    PERFORM sched._check_name(tenant, 'tenant');
    IF num_nonnulls(max_live, max_cpu_millis, max_memory_mb, max_gpus) = 0 THEN
        DELETE FROM sched.tenant_quota q WHERE q.tenant = set_tenant_quota.tenant;
        RETURN NULL;
    END IF;
    IF max_live <= 0 THEN
        RAISE EXCEPTION 'parameter "max_live" must be positive: %', max_live USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_cpu_millis <= 0 THEN
        RAISE EXCEPTION 'parameter "max_cpu_millis" must be positive: %', max_cpu_millis USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_memory_mb <= 0 THEN
        RAISE EXCEPTION 'parameter "max_memory_mb" must be positive: %', max_memory_mb USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_gpus <= 0 THEN
        RAISE EXCEPTION 'parameter "max_gpus" must be positive: %', max_gpus USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO sched.tenant_quota AS q (tenant, max_live, max_cpu_millis, max_memory_mb, max_gpus)
    VALUES (set_tenant_quota.tenant, set_tenant_quota.max_live, set_tenant_quota.max_cpu_millis,
            set_tenant_quota.max_memory_mb, set_tenant_quota.max_gpus)
    ON CONFLICT ON CONSTRAINT tenant_quota_pkey DO UPDATE
        SET max_live = excluded.max_live, max_cpu_millis = excluded.max_cpu_millis,
            max_memory_mb = excluded.max_memory_mb, max_gpus = excluded.max_gpus
    RETURNING * INTO result;
    RETURN result;
END
$$;

/*
 * submit: queues one attempt of one step.  Idempotent on (step_id, attempt_number): a
 * repeated call returns the existing request_id and changes nothing.  Creates the
 * execution (QUEUED, with this tenant) at its first submit.  A request is ready from
 * available_at, which is also its queued_at (backoffs move available_at only).  payload
 * is the application's: stored as given, carried by retries and by the START command.
 * A fenced tenant (set_tenant_owner) takes work only from members of its owner and
 * sched_admin (42501 otherwise, and nothing is written).  A closed execution takes no
 * new request (55000), and every request of an execution has the execution's tenant.
 * Locks: the execution row (FOR SHARE, so cancel/complete cannot interleave).
 */
CREATE OR REPLACE FUNCTION sched.submit(
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
    payload jsonb DEFAULT NULL,
    concurrency_key text DEFAULT NULL,
    spread_key text DEFAULT NULL,
    gang_id uuid DEFAULT NULL,
    gang_size int DEFAULT NULL,
    distinct_nodes boolean DEFAULT false,
    preemptible boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    existing sched.request;
    new_id bigint;
    fence regrole;
    execution_fence regrole;
    execution_tenant text;
    execution_status text;
    gang sched.gang;
BEGIN
    -- each check calls its helper (which raises) only when it fails: a call of a function
    -- with a pinned search_path costs a setting's switch, and submit made 30 per request
    IF execution_id IS NULL THEN PERFORM sched._require(execution_id, 'execution_id'); END IF;
    IF step_id IS NULL THEN PERFORM sched._require(step_id, 'step_id'); END IF;
    IF capability IS NULL OR capability = '' THEN PERFORM sched._require_text(capability, 'capability'); END IF;
    IF capability_version IS NULL OR capability_version = '' THEN
        PERFORM sched._require_text(capability_version, 'capability_version');
    END IF;
    IF attempt_number IS NULL THEN PERFORM sched._require(attempt_number, 'attempt_number'); END IF;
    IF attempt_number < 1 THEN
        RAISE EXCEPTION 'parameter "attempt_number" must be at least 1: %', attempt_number
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF tenant IS NULL OR tenant = '' THEN PERFORM sched._require_text(tenant, 'tenant'); END IF;
    -- the length limit of every name (validate.c), in one statement
    PERFORM sched._check_name(capability, 'capability'), sched._check_name(capability_version, 'capability_version'),
            sched._check_name(tenant, 'tenant'), sched._check_name(node_id, 'node_id'),
            sched._check_name(concurrency_key, 'concurrency_key'), sched._check_name(spread_key, 'spread_key');
    IF priority IS NULL THEN PERFORM sched._require(priority, 'priority'); END IF;
    IF required_labels IS NULL THEN PERFORM sched._require(required_labels, 'required_labels'); END IF;
    IF required_labels <> '{}' THEN
        PERFORM sched._check_required_labels(required_labels, 'required_labels');
    END IF;
    IF preferred_labels IS NULL THEN PERFORM sched._require(preferred_labels, 'preferred_labels'); END IF;
    IF preferred_labels <> '{}' THEN
        PERFORM sched._check_labels(preferred_labels, 'preferred_labels');
    END IF;
    IF num_nulls(min_cpu_millis, min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus) > 0
       OR least(min_cpu_millis, min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus) < 0 THEN
        PERFORM sched._check_nonnegative(sched._require(min_cpu_millis, 'min_cpu_millis'), 'min_cpu_millis');
        PERFORM sched._check_nonnegative(sched._require(min_memory_mb, 'min_memory_mb'), 'min_memory_mb');
        PERFORM sched._check_nonnegative(sched._require(min_gpus, 'min_gpus'), 'min_gpus');
        PERFORM sched._check_nonnegative(sched._require(reserve_cpu_millis, 'reserve_cpu_millis'), 'reserve_cpu_millis');
        PERFORM sched._check_nonnegative(sched._require(reserve_memory_mb, 'reserve_memory_mb'), 'reserve_memory_mb');
        PERFORM sched._check_nonnegative(sched._require(reserve_gpus, 'reserve_gpus'), 'reserve_gpus');
    END IF;
    IF node_id = '' THEN
        RAISE EXCEPTION 'parameter "node_id" must not be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass NULL for a request that is not pinned to a node.';
    END IF;
    IF max_attempts IS NULL THEN PERFORM sched._require(max_attempts, 'max_attempts'); END IF;
    IF max_attempts < 1 THEN
        RAISE EXCEPTION 'parameter "max_attempts" must be at least 1: %', max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF available_at IS NULL THEN PERFORM sched._require(available_at, 'available_at'); END IF;
    PERFORM sched._check_time(available_at, 'available_at');
    IF concurrency_key = '' THEN
        RAISE EXCEPTION 'parameter "concurrency_key" must not be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass NULL for a request that no concurrency or rate limit counts.';
    END IF;
    IF gang_id IS NULL AND gang_size IS NOT NULL THEN
        RAISE EXCEPTION 'parameter "gang_size" is given without a gang_id'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass gang_id and gang_size together, or neither.';
    END IF;
    IF gang_id IS NOT NULL AND gang_size IS NULL THEN
        RAISE EXCEPTION 'parameter "gang_size" must not be NULL when parameter "gang_id" is given'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF gang_size < 2 THEN
        RAISE EXCEPTION 'parameter "gang_size" must be at least 2: %', gang_size
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A request on its own needs no gang: pass gang_id NULL.';
    END IF;
    IF gang_size > 64 THEN
        RAISE EXCEPTION 'parameter "gang_size" is too large: %', gang_size
            USING ERRCODE = 'program_limit_exceeded', DETAIL = 'The limit is 64 members.';
    END IF;
    IF distinct_nodes IS NULL THEN PERFORM sched._require(distinct_nodes, 'distinct_nodes'); END IF;
    IF preemptible IS NULL THEN PERFORM sched._require(preemptible, 'preemptible'); END IF;
    IF distinct_nodes AND gang_id IS NULL THEN
        RAISE EXCEPTION 'parameter "distinct_nodes" is true without a gang_id'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'distinct_nodes places the members of a gang on different nodes; use spread_key to spread requests that are not a gang.';
    END IF;
    IF spread_key = '' THEN
        RAISE EXCEPTION 'parameter "spread_key" must not be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass NULL for a request that is not spread.';
    END IF;

    -- the fence of the tenant named, and of the tenant of the execution if it exists (one
    -- statement reads both; the named tenant's is checked first)
    SELECT (SELECT t.owner FROM sched.tenant t WHERE t.tenant = submit.tenant), e.tenant, et.owner
      INTO fence, execution_tenant, execution_fence
      FROM (SELECT) one
      LEFT JOIN sched.execution e ON e.execution_id = submit.execution_id
      LEFT JOIN sched.tenant et ON et.tenant = (e.tenant COLLATE "C");
    PERFORM sched._require_tenant_access(tenant, fence);
    IF execution_tenant IS NOT NULL THEN
        PERFORM sched._require_tenant_access(execution_tenant, execution_fence);
        IF execution_tenant <> tenant THEN
            RAISE EXCEPTION 'parameter "tenant" ("%") is not the tenant of execution % ("%")',
                tenant, execution_id, execution_tenant
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Every step of an execution belongs to the tenant of its first submit.';
        END IF;
    ELSE
        -- its first submit (executions are never deleted: one that was read exists)
        INSERT INTO sched.execution AS e (execution_id, tenant, status, created_at, updated_at)
        VALUES (submit.execution_id, submit.tenant, 'QUEUED', now(), now())
        ON CONFLICT ON CONSTRAINT execution_pkey DO NOTHING;
    END IF;
    SELECT e.status INTO execution_status FROM sched.execution e
     WHERE e.execution_id = submit.execution_id FOR SHARE;

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
    IF execution_status NOT IN ('CREATED', 'QUEUED', 'RUNNING') THEN
        RAISE EXCEPTION 'execution % is already closed as %', execution_id, execution_status
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A closed execution takes no more work: submit into a new execution.';
    END IF;
    IF gang_id IS NOT NULL THEN
        -- the first member makes the gang; every member, under its row lock, must agree
        -- with it and find room
        INSERT INTO sched.gang AS g (gang_id, tenant, gang_size, distinct_nodes, created_at)
        VALUES (submit.gang_id, submit.tenant, submit.gang_size, submit.distinct_nodes, now())
        ON CONFLICT ON CONSTRAINT gang_pkey DO NOTHING;
        SELECT * INTO gang FROM sched.gang g WHERE g.gang_id = submit.gang_id FOR UPDATE;
        IF gang.tenant <> submit.tenant THEN
            RAISE EXCEPTION 'parameter "gang_id": gang % belongs to tenant "%", not "%"',
                gang_id, gang.tenant, tenant
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'The members of a gang belong to one tenant.';
        END IF;
        IF gang.gang_size <> submit.gang_size OR gang.distinct_nodes <> submit.distinct_nodes THEN
            RAISE EXCEPTION 'parameter "gang_size" or "distinct_nodes" disagrees with gang %: it has gang_size %, distinct_nodes %',
                gang_id, gang.gang_size, gang.distinct_nodes
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Every member of a gang is submitted with the same gang_size and distinct_nodes.';
        END IF;
        IF gang.placed_at IS NOT NULL THEN
            RAISE EXCEPTION 'gang % was placed at %: it takes no more members', gang_id, gang.placed_at
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Submit new work with a new gang_id.';
        END IF;
        IF (SELECT count(*) FROM sched.request r WHERE r.gang_id = submit.gang_id) >= gang.gang_size THEN
            RAISE EXCEPTION 'parameter "gang_id": gang % already has its % members', gang_id, gang.gang_size
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    INSERT INTO sched.request AS r (
        execution_id, step_id, attempt_number, tenant, priority, capability, capability_version,
        required_labels, preferred_labels, min_cpu_millis, min_memory_mb, min_gpus,
        reserve_cpu_millis, reserve_memory_mb, reserve_gpus, node_id, max_attempts,
        state, queued_at, available_at, sort_key, payload, concurrency_key, spread_key, gang_id,
        preemptible)
    VALUES (
        submit.execution_id, submit.step_id, submit.attempt_number, submit.tenant, submit.priority,
        submit.capability, submit.capability_version, submit.required_labels, submit.preferred_labels,
        submit.min_cpu_millis, submit.min_memory_mb, submit.min_gpus, submit.reserve_cpu_millis,
        submit.reserve_memory_mb, submit.reserve_gpus, submit.node_id, submit.max_attempts,
        'PENDING', submit.available_at, submit.available_at,
        sched._queue_key(submit.priority, submit.available_at), submit.payload, submit.concurrency_key,
        submit.spread_key, submit.gang_id, submit.preemptible)
    ON CONFLICT ON CONSTRAINT request_one_per_step_attempt DO NOTHING
    RETURNING r.request_id INTO new_id;

    IF new_id IS NULL THEN
        -- a concurrent submit of the same step and attempt won: return its request
        SELECT r.request_id INTO new_id FROM sched.request r
         WHERE r.step_id = submit.step_id AND r.attempt_number = submit.attempt_number;
        RETURN new_id;
    END IF;

    -- the milestone, once (see Timeline above)
    INSERT INTO sched.timeline AS t (execution_id, milestone_key, stage, step_id, attempt_number,
                                     attempt_id, state, component, title, detail, at)
    VALUES (submit.execution_id, format('step.queued:%s:%s', submit.step_id, submit.attempt_number),
            'SCHEDULING', submit.step_id, submit.attempt_number, NULL, 'QUEUED', 'Queue',
            'Queued for scheduling',
            jsonb_build_object('request_id', new_id, 'capability', submit.capability,
                               'capability_version', submit.capability_version, 'tenant', submit.tenant,
                               'priority', submit.priority),
            submit.available_at)
    ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING;
    RETURN new_id;
END
$$;

