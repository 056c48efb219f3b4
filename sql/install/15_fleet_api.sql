-- sql/install/15_fleet_api.sql — the fleet API: nodes, worker registration and heartbeats,
-- drains and cordons.  A piece of pg_sched--0.2.0.sql (the Makefile builds it from
-- sql/install/*.sql in the order of their names) and of the upgrade from 0.1.0, hence
-- CREATE OR REPLACE.  Who may call what, and as whom it runs: 90_privileges.sql.

-- ---------------------------------------------------------------------------------
-- Fleet functions
-- ---------------------------------------------------------------------------------

/*
 * upsert_node: creates the node, or updates the given fields of an existing one.  A NULL
 * argument keeps the current value (for a new node: {} labels, 0 capacity, weight 100,
 * ACTIVE).  Capacity may not drop below what live attempts have reserved.
 * Locks: the node row (FOR UPDATE via INSERT ... ON CONFLICT).
 */
CREATE OR REPLACE FUNCTION sched.upsert_node(
    node_id text,
    labels jsonb DEFAULT NULL,
    cpu_millis int DEFAULT NULL,
    memory_mb bigint DEFAULT NULL,
    gpus int DEFAULT NULL,
    weight int DEFAULT NULL,
    management_status text DEFAULT NULL)
RETURNS sched.node
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.node;
BEGIN
    PERFORM sched._require_text(node_id, 'node_id');
    PERFORM sched._check_labels(labels, 'labels');
    PERFORM sched._check_nonnegative(cpu_millis, 'cpu_millis');
    PERFORM sched._check_nonnegative(memory_mb, 'memory_mb');
    PERFORM sched._check_nonnegative(gpus, 'gpus');
    PERFORM sched._check_one_of(management_status, 'management_status',
                                ARRAY['ACTIVE', 'DRAINING', 'DISABLED']);

    SELECT * INTO result FROM sched.node n WHERE n.node_id = upsert_node.node_id FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO sched.node AS n (node_id, labels, cpu_millis, memory_mb, gpus, weight, management_status)
        VALUES (upsert_node.node_id, coalesce(labels, '{}'), coalesce(cpu_millis, 0),
                coalesce(memory_mb, 0), coalesce(gpus, 0), coalesce(weight, 100),
                coalesce(management_status, 'ACTIVE'))
        ON CONFLICT ON CONSTRAINT node_pkey DO NOTHING
        RETURNING * INTO result;
        IF FOUND THEN
            RETURN result;
        END IF;
        -- a concurrent upsert created it: update it like any existing node
        SELECT * INTO result FROM sched.node n WHERE n.node_id = upsert_node.node_id FOR UPDATE;
    END IF;

    IF cpu_millis < result.reserved_cpu_millis THEN
        RAISE EXCEPTION 'parameter "cpu_millis" (%) is below the % reserved on node "%"',
            cpu_millis, result.reserved_cpu_millis, node_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Drain the node and wait for its attempts to end before shrinking it.';
    END IF;
    IF memory_mb < result.reserved_memory_mb THEN
        RAISE EXCEPTION 'parameter "memory_mb" (%) is below the % reserved on node "%"',
            memory_mb, result.reserved_memory_mb, node_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Drain the node and wait for its attempts to end before shrinking it.';
    END IF;
    IF gpus < result.reserved_gpus THEN
        RAISE EXCEPTION 'parameter "gpus" (%) is below the % reserved on node "%"',
            gpus, result.reserved_gpus, node_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Drain the node and wait for its attempts to end before shrinking it.';
    END IF;

    UPDATE sched.node n SET
        labels = coalesce(upsert_node.labels, n.labels),
        cpu_millis = coalesce(upsert_node.cpu_millis, n.cpu_millis),
        memory_mb = coalesce(upsert_node.memory_mb, n.memory_mb),
        gpus = coalesce(upsert_node.gpus, n.gpus),
        weight = coalesce(upsert_node.weight, n.weight),
        management_status = coalesce(upsert_node.management_status, n.management_status),
        updated_at = now()
    WHERE n.node_id = upsert_node.node_id
    RETURNING * INTO result;
    RETURN result;
END
$$;

/* _wake_worker: at the commit of the calling transaction, the worker's session waiting in
 * wait_commands returns (src/wakeup.c), as for a command.  Internal (heartbeat,
 * register_worker). */
CREATE OR REPLACE FUNCTION sched._wake_worker(worker_id uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'sched_wake_worker_at_commit'
LANGUAGE C VOLATILE STRICT
SET search_path = pg_catalog, pg_temp;

/*
 * register_worker: a worker (re)starts its session on a node for one capability.  The
 * worker of a (node, capability) keeps its worker_id across registrations; each
 * registration increments generation, marks the worker READY and counts as a heartbeat.
 * A cordon survives re-registration.  The new session receives the commands earlier
 * sessions did not (see poll_commands); the leases of the attempts they hold stay theirs.  The worker belongs to the role
 * that first registered it (registered_by, the session's role): registering it again,
 * like every other call for it, is refused (42501) to roles that are not its members,
 * except sched_admin.  A worker from before 0.2.0 (owned by no role) belongs to the
 * role of its next registration.
 * Locks: the worker row, then the node row (FOR SHARE: a drain cannot interleave).
 */
CREATE OR REPLACE FUNCTION sched.register_worker(
    node_id text,
    capability text,
    capability_versions text[],
    slots int,
    worker_id uuid DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS sched.registration
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    existing sched.worker;
    registered boolean;
    result sched.registration;
BEGIN
    PERFORM sched._require_text(node_id, 'node_id');
    PERFORM sched._require_text(capability, 'capability');
    PERFORM sched._check_versions(capability_versions);
    PERFORM sched._require(slots, 'slots');
    PERFORM sched._check_nonnegative(slots, 'slots');
    PERFORM sched._require(at, 'at');
    PERFORM sched._check_at(at, 'at');

    -- the worker row, then its node (the order of src/reservation.c, which finish and
    -- reap keep too: the other way round, a registration deadlocked with them)
    SELECT * INTO existing FROM sched.worker w
     WHERE w.node_id = register_worker.node_id AND w.capability = register_worker.capability
     FOR UPDATE;
    registered := FOUND;
    PERFORM 1 FROM sched.node n WHERE n.node_id = register_worker.node_id FOR SHARE;
    IF NOT FOUND THEN
        PERFORM sched._unknown('node', node_id);
    END IF;

    IF registered THEN
        IF existing.registered_by IS NOT NULL THEN
            PERFORM sched._require_worker_access(existing.worker_id, existing.registered_by);
        END IF;
        IF worker_id IS NOT NULL AND worker_id <> existing.worker_id THEN
            RAISE EXCEPTION 'node "%" already has worker % for capability "%"',
                node_id, existing.worker_id, capability
                USING ERRCODE = 'unique_violation',
                      DETAIL = format('Parameter "worker_id" is %s.', worker_id),
                      HINT = 'Register without worker_id to take over the existing worker identity.';
        END IF;
        IF slots < existing.live_attempts THEN
            RAISE EXCEPTION 'parameter "slots" (%) is below the % live attempts of worker %',
                slots, existing.live_attempts, existing.worker_id
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        UPDATE sched.worker w SET
            capability_versions = register_worker.capability_versions,
            slots = register_worker.slots,
            runtime_state = 'READY',
            last_heartbeat = greatest(w.last_heartbeat, register_worker.at),
            generation = w.generation + 1,
            registered_at = register_worker.at,
            registered_by = coalesce(w.registered_by, sched._caller())
        WHERE w.worker_id = existing.worker_id
        RETURNING w.worker_id, w.generation INTO result.worker_id, result.generation;
        -- the replaced session's wait_commands returns at once (and is refused, 55000)
        PERFORM sched._wake_worker(result.worker_id);
        RETURN result;
    END IF;

    SELECT * INTO existing FROM sched.worker w WHERE w.worker_id = register_worker.worker_id;
    IF FOUND THEN
        IF existing.registered_by IS NOT NULL THEN
            PERFORM sched._require_worker_access(existing.worker_id, existing.registered_by);
        END IF;
        RAISE EXCEPTION 'worker % is registered for another node or capability', worker_id
            USING ERRCODE = 'unique_violation',
                  DETAIL = format('Parameters "node_id" and "capability" are "%s" and "%s".', node_id, capability);
    END IF;

    INSERT INTO sched.worker AS w (worker_id, node_id, capability, capability_versions, slots,
                                   runtime_state, last_heartbeat, generation, registered_at,
                                   registered_by)
    VALUES (coalesce(register_worker.worker_id, gen_random_uuid()), register_worker.node_id,
            register_worker.capability, register_worker.capability_versions, register_worker.slots,
            'READY', register_worker.at, 1, register_worker.at, sched._caller())
    RETURNING w.worker_id, w.generation INTO result.worker_id, result.generation;
    RETURN result;
END
$$;

/*
 * heartbeat: the worker's session reports it is alive and its runtime state.  Refused
 * (55000) when generation is not the worker's current one: a previous session of a
 * re-registered worker cannot revive it.  last_heartbeat never moves backwards.  Only
 * for a worker the caller may act for (42501 otherwise, before anything is said of it).
 * Locks: the worker row.
 */
CREATE OR REPLACE FUNCTION sched.heartbeat(
    worker_id uuid,
    generation bigint,
    at timestamptz DEFAULT now(),
    runtime_state text DEFAULT 'READY')
RETURNS sched.worker
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur sched.worker;
BEGIN
    PERFORM sched._require(worker_id, 'worker_id');
    PERFORM sched._require(generation, 'generation');
    PERFORM sched._require(at, 'at');
    PERFORM sched._check_at(at, 'at');
    PERFORM sched._require_text(runtime_state, 'runtime_state');
    PERFORM sched._check_one_of(runtime_state, 'runtime_state',
                                ARRAY['STARTING', 'READY', 'DRAINING', 'STOPPED']);

    SELECT * INTO cur FROM sched.worker w WHERE w.worker_id = heartbeat.worker_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM sched._unknown('worker', worker_id::text);
    END IF;
    PERFORM sched._require_worker_access(cur.worker_id, cur.registered_by);
    IF cur.generation <> heartbeat.generation THEN
        RAISE EXCEPTION 'stale generation % for worker %', generation, worker_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The current generation is %s.', cur.generation),
                  HINT = 'A worker session that re-registered elsewhere replaced this one; register again.';
    END IF;

    -- a worker that starts draining or stops: its wait_commands returns at once, so a
    -- loop that cannot cancel its wait (node-postgres) sees the new state now
    IF heartbeat.runtime_state IN ('DRAINING', 'STOPPED')
       AND cur.runtime_state IS DISTINCT FROM heartbeat.runtime_state THEN
        PERFORM sched._wake_worker(cur.worker_id);
    END IF;
    UPDATE sched.worker w SET
        last_heartbeat = greatest(w.last_heartbeat, heartbeat.at),
        runtime_state = heartbeat.runtime_state
    WHERE w.worker_id = heartbeat.worker_id
    RETURNING * INTO cur;
    RETURN cur;
END
$$;

/* drain_node: the node takes no new work; live attempts run to their end.  Locks: node row. */
CREATE OR REPLACE FUNCTION sched.drain_node(node_id text)
RETURNS sched.node
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.node;
BEGIN
    PERFORM sched._require_text(node_id, 'node_id');
    UPDATE sched.node n SET management_status = 'DRAINING', updated_at = now()
     WHERE n.node_id = drain_node.node_id
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM sched._unknown('node', node_id);
    END IF;
    RETURN result;
END
$$;

/* cordon_worker / uncordon_worker: scheduling_status CORDONED / ELIGIBLE.  Locks: worker row. */
CREATE OR REPLACE FUNCTION sched.cordon_worker(worker_id uuid)
RETURNS sched.worker
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.worker;
BEGIN
    PERFORM sched._require(worker_id, 'worker_id');
    UPDATE sched.worker w SET scheduling_status = 'CORDONED'
     WHERE w.worker_id = cordon_worker.worker_id
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM sched._unknown('worker', worker_id::text);
    END IF;
    RETURN result;
END
$$;

CREATE OR REPLACE FUNCTION sched.uncordon_worker(worker_id uuid)
RETURNS sched.worker
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    result sched.worker;
BEGIN
    PERFORM sched._require(worker_id, 'worker_id');
    UPDATE sched.worker w SET scheduling_status = 'ELIGIBLE'
     WHERE w.worker_id = uncordon_worker.worker_id
    RETURNING * INTO result;
    IF NOT FOUND THEN
        PERFORM sched._unknown('worker', worker_id::text);
    END IF;
    RETURN result;
END
$$;
