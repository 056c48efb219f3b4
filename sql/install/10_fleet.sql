-- sql/install/10_fleet.sql — the fleet: nodes and workers, the triggers that keep fleet mirrors current, and the fleet API (src/fleet.c, src/fleet_mirror.c)
-- A piece of pg_sched--0.2.0.sql, which the Makefile builds from sql/install/*.sql in
-- the order of their names.

-- ---------------------------------------------------------------------------------
-- Fleet
-- ---------------------------------------------------------------------------------

CREATE TABLE sched.node (
    node_id             text COLLATE "C" PRIMARY KEY
                        CONSTRAINT node_id_not_empty CHECK (node_id <> ''),
    management_status   text NOT NULL DEFAULT 'ACTIVE'
                        CONSTRAINT node_management_status_valid
                        CHECK (management_status IN ('ACTIVE', 'DRAINING', 'DISABLED')),
    labels              jsonb NOT NULL DEFAULT '{}'
                        CONSTRAINT node_labels_object CHECK (jsonb_typeof(labels) = 'object'),
    cpu_millis          int NOT NULL DEFAULT 0 CONSTRAINT node_cpu_nonnegative CHECK (cpu_millis >= 0),
    memory_mb           bigint NOT NULL DEFAULT 0 CONSTRAINT node_memory_nonnegative CHECK (memory_mb >= 0),
    gpus                int NOT NULL DEFAULT 0 CONSTRAINT node_gpus_nonnegative CHECK (gpus >= 0),
    weight              int NOT NULL DEFAULT 100,
    -- live reservations: sums over the node's DISPATCHED and RUNNING attempts
    reserved_cpu_millis int NOT NULL DEFAULT 0,
    reserved_memory_mb  bigint NOT NULL DEFAULT 0,
    reserved_gpus       int NOT NULL DEFAULT 0,
    live_attempts       int NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT node_cpu_reserved_within_capacity
        CHECK (reserved_cpu_millis BETWEEN 0 AND cpu_millis),
    CONSTRAINT node_memory_reserved_within_capacity
        CHECK (reserved_memory_mb BETWEEN 0 AND memory_mb),
    CONSTRAINT node_gpus_reserved_within_capacity
        CHECK (reserved_gpus BETWEEN 0 AND gpus),
    CONSTRAINT node_live_attempts_nonnegative CHECK (live_attempts >= 0)
);
COMMENT ON TABLE sched.node IS 'Worker nodes: static capacity, trusted labels, weight, and live reservations.';

CREATE TABLE sched.worker (
    worker_id           uuid PRIMARY KEY,
    node_id             text COLLATE "C" NOT NULL REFERENCES sched.node (node_id),
    capability          text NOT NULL CONSTRAINT worker_capability_not_empty CHECK (capability <> ''),
    capability_versions text[] NOT NULL
                        CONSTRAINT worker_versions_not_empty CHECK (cardinality(capability_versions) > 0),
    runtime_state       text NOT NULL DEFAULT 'READY'
                        CONSTRAINT worker_runtime_state_valid
                        CHECK (runtime_state IN ('STARTING', 'READY', 'DRAINING', 'STOPPED')),
    scheduling_status   text NOT NULL DEFAULT 'ELIGIBLE'
                        CONSTRAINT worker_scheduling_status_valid
                        CHECK (scheduling_status IN ('ELIGIBLE', 'CORDONED')),
    slots               int NOT NULL CONSTRAINT worker_slots_nonnegative CHECK (slots >= 0),
    live_attempts       int NOT NULL DEFAULT 0,
    last_heartbeat      timestamptz,
    generation          bigint NOT NULL DEFAULT 1,
    registered_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT worker_one_per_node_and_capability UNIQUE (node_id, capability),
    CONSTRAINT worker_live_attempts_within_slots CHECK (live_attempts BETWEEN 0 AND slots)
);
COMMENT ON TABLE sched.worker IS 'Workers: one per (node, capability); slots, session generation, heartbeat.';
-- selection reads only the workers of the requested capability
CREATE INDEX worker_capability_idx ON sched.worker (capability, node_id);

/* Every change to a node or worker row is logged (node_id, transaction) in shared memory
 * before it is written, so that each backend's copy of the fleet re-reads only the
 * nodes that changed (src/fleet_mirror.c).  ENABLE ALWAYS: also under
 * session_replication_role = replica. */
CREATE FUNCTION sched._fleet_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'sched_fleet_changed'
LANGUAGE C;

CREATE TRIGGER fleet_changed BEFORE INSERT OR UPDATE OR DELETE ON sched.node
    FOR EACH ROW EXECUTE FUNCTION sched._fleet_changed();
CREATE TRIGGER fleet_truncated BEFORE TRUNCATE ON sched.node
    FOR EACH STATEMENT EXECUTE FUNCTION sched._fleet_changed();
CREATE TRIGGER fleet_changed BEFORE INSERT OR UPDATE OR DELETE ON sched.worker
    FOR EACH ROW EXECUTE FUNCTION sched._fleet_changed();
CREATE TRIGGER fleet_truncated BEFORE TRUNCATE ON sched.worker
    FOR EACH STATEMENT EXECUTE FUNCTION sched._fleet_changed();
ALTER TABLE sched.node ENABLE ALWAYS TRIGGER fleet_changed;
ALTER TABLE sched.node ENABLE ALWAYS TRIGGER fleet_truncated;
ALTER TABLE sched.worker ENABLE ALWAYS TRIGGER fleet_changed;
ALTER TABLE sched.worker ENABLE ALWAYS TRIGGER fleet_truncated;

/* This backend's fleet mirror: whether it is in use, what it holds, and its counters
 * since the backend started. */
CREATE FUNCTION sched._fleet_mirror_stats(
    OUT usable boolean, OUT capabilities int, OUT rows_held int, OUT pending int,
    OUT refreshes bigint, OUT full_loads bigint, OUT rows_reread bigint,
    OUT bypassed bigint, OUT losses bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'sched_fleet_mirror_stats'
LANGUAGE C VOLATILE;

/* Compares this backend's mirror of `capability`, brought up to a fresh snapshot, with
 * the tables read with that snapshot: the number of nodes that differ (0 is its
 * invariant).  For tests. */
CREATE FUNCTION sched._fleet_mirror_check(capability text)
RETURNS int
AS 'MODULE_PATHNAME', 'sched_fleet_mirror_check'
LANGUAGE C VOLATILE;

-- pg_dump keeps the fleet.
SELECT pg_catalog.pg_extension_config_dump('sched.node', '');
SELECT pg_catalog.pg_extension_config_dump('sched.worker', '');

-- ---------------------------------------------------------------------------------
-- Fleet functions
-- ---------------------------------------------------------------------------------

/*
 * upsert_node: creates the node, or updates the given fields of an existing one.  A NULL
 * argument keeps the current value (for a new node: {} labels, 0 capacity, weight 100,
 * ACTIVE).  Capacity may not drop below what live attempts have reserved.
 * Locks: the node row (FOR UPDATE via INSERT ... ON CONFLICT).
 */
CREATE FUNCTION sched.upsert_node(
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

/*
 * register_worker: a worker (re)starts its session on a node for one capability.  The
 * worker of a (node, capability) keeps its worker_id across registrations; each
 * registration increments generation, marks the worker READY and counts as a heartbeat.
 * A cordon survives re-registration.  Commands and leases of older generations are not
 * delivered to the new session (see poll_commands).
 * Locks: the node row (FOR SHARE: a drain cannot interleave), then the worker row.
 */
CREATE FUNCTION sched.register_worker(
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
    result sched.registration;
BEGIN
    PERFORM sched._require_text(node_id, 'node_id');
    PERFORM sched._require_text(capability, 'capability');
    PERFORM sched._require(capability_versions, 'capability_versions');
    IF cardinality(capability_versions) = 0 THEN
        RAISE EXCEPTION 'parameter "capability_versions" must not be empty'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(capability_versions, NULL) IS NOT NULL
       OR array_position(capability_versions, '') IS NOT NULL THEN
        RAISE EXCEPTION 'parameter "capability_versions" must not contain NULL or empty versions'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM sched._require(slots, 'slots');
    PERFORM sched._check_nonnegative(slots, 'slots');
    PERFORM sched._require(at, 'at');

    PERFORM 1 FROM sched.node n WHERE n.node_id = register_worker.node_id FOR SHARE;
    IF NOT FOUND THEN
        PERFORM sched._unknown('node', node_id);
    END IF;

    SELECT * INTO existing FROM sched.worker w
     WHERE w.node_id = register_worker.node_id AND w.capability = register_worker.capability
     FOR UPDATE;

    IF FOUND THEN
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
            registered_at = register_worker.at
        WHERE w.worker_id = existing.worker_id
        RETURNING w.worker_id, w.generation INTO result.worker_id, result.generation;
        RETURN result;
    END IF;

    IF worker_id IS NOT NULL AND EXISTS (SELECT 1 FROM sched.worker w WHERE w.worker_id = register_worker.worker_id) THEN
        RAISE EXCEPTION 'worker % is registered for another node or capability', worker_id
            USING ERRCODE = 'unique_violation',
                  DETAIL = format('Parameters "node_id" and "capability" are "%s" and "%s".', node_id, capability);
    END IF;

    INSERT INTO sched.worker AS w (worker_id, node_id, capability, capability_versions, slots,
                                   runtime_state, last_heartbeat, generation, registered_at)
    VALUES (coalesce(register_worker.worker_id, gen_random_uuid()), register_worker.node_id,
            register_worker.capability, register_worker.capability_versions, register_worker.slots,
            'READY', register_worker.at, 1, register_worker.at)
    RETURNING w.worker_id, w.generation INTO result.worker_id, result.generation;
    RETURN result;
END
$$;

/*
 * heartbeat: the worker's session reports it is alive and its runtime state.  Refused
 * (55000) when generation is not the worker's current one: a previous session of a
 * re-registered worker cannot revive it.  last_heartbeat never moves backwards.
 * Locks: the worker row.
 */
CREATE FUNCTION sched.heartbeat(
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
    PERFORM sched._require_text(runtime_state, 'runtime_state');
    PERFORM sched._check_one_of(runtime_state, 'runtime_state',
                                ARRAY['STARTING', 'READY', 'DRAINING', 'STOPPED']);

    SELECT * INTO cur FROM sched.worker w WHERE w.worker_id = heartbeat.worker_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM sched._unknown('worker', worker_id::text);
    END IF;
    IF cur.generation <> heartbeat.generation THEN
        RAISE EXCEPTION 'stale generation % for worker %', generation, worker_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The current generation is %s.', cur.generation),
                  HINT = 'A worker session that re-registered elsewhere replaced this one; register again.';
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
CREATE FUNCTION sched.drain_node(node_id text)
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
CREATE FUNCTION sched.cordon_worker(worker_id uuid)
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

CREATE FUNCTION sched.uncordon_worker(worker_id uuid)
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
