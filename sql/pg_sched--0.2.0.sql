/*
 * pg_sched 0.2.0 — install script (a fresh install; a database at 0.1.0 is brought here by
 * pg_sched--0.1.0--0.2.0.sql, and the upgrade test proves both give the same objects).
 *
 * Tables hold the fleet (node, worker), the work (execution, request, attempt), what
 * workers are told (command) and what happened (timeline).  Writes go through the
 * functions below; placement and reservation are C (src/), fleet and submission
 * bookkeeping are PL/pgSQL.
 *
 * Reservation invariant, enforced twice: the reservation transaction (src/reservation.c)
 * re-checks admission under row locks, and CHECK constraints refuse any row where live
 * attempts exceed slots or reservations exceed capacity.  The counters on node and worker
 * are maintained only by the reservation transaction and by the transitions that end an
 * attempt, in the same transaction as the attempt row they count.
 */

\echo Use "CREATE EXTENSION pg_sched" to load this file. \quit

CREATE SCHEMA sched;
COMMENT ON SCHEMA sched IS 'pg_sched: task attempt scheduler';

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

/* Cluster-wide since the server started (NULLs without preloading): requests dispatch
 * calls took up, placements made, conflicts met (candidates skipped because another
 * transaction held them, or refused by the re-check under lock), and better candidates
 * not tried because concurrent dispatches were reserving on them (held_passed). */
CREATE FUNCTION sched._dispatch_counters(OUT calls bigint, OUT placements bigint,
                                         OUT conflicts bigint, OUT held_passed bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'sched_dispatch_counters'
LANGUAGE C VOLATILE;

/* Compares this backend's mirror of `capability`, brought up to a fresh snapshot, with
 * the tables read with that snapshot: the number of nodes that differ (0 is its
 * invariant).  For tests. */
CREATE FUNCTION sched._fleet_mirror_check(capability text)
RETURNS int
AS 'MODULE_PATHNAME', 'sched_fleet_mirror_check'
LANGUAGE C VOLATILE;

-- ---------------------------------------------------------------------------------
-- Work
-- ---------------------------------------------------------------------------------

CREATE TABLE sched.tenant (
    tenant  text COLLATE "C" PRIMARY KEY,
    weight  int NOT NULL DEFAULT 1 CONSTRAINT tenant_weight_positive CHECK (weight > 0)
);
COMMENT ON TABLE sched.tenant IS 'Tenant weights for fair share (a tenant not listed has weight 1).';

CREATE TABLE sched.execution (
    execution_id    uuid PRIMARY KEY,
    tenant          text NOT NULL,
    status          text NOT NULL DEFAULT 'QUEUED'
                    CONSTRAINT execution_status_valid
                    CHECK (status IN ('CREATED', 'QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    finished_at     timestamptz
);

CREATE SEQUENCE sched.request_id_seq;

CREATE TABLE sched.request (
    request_id          bigint PRIMARY KEY DEFAULT nextval('sched.request_id_seq'),
    execution_id        uuid NOT NULL REFERENCES sched.execution (execution_id),
    step_id             uuid NOT NULL,
    attempt_number      int NOT NULL CONSTRAINT request_attempt_number_positive CHECK (attempt_number >= 1),
    tenant              text COLLATE "C" NOT NULL,
    priority            int NOT NULL DEFAULT 0,
    capability          text NOT NULL,
    capability_version  text NOT NULL,
    required_labels     jsonb NOT NULL DEFAULT '{}',
    preferred_labels    jsonb NOT NULL DEFAULT '{}',
    min_cpu_millis      int NOT NULL DEFAULT 0,
    min_memory_mb       bigint NOT NULL DEFAULT 0,
    min_gpus            int NOT NULL DEFAULT 0,
    reserve_cpu_millis  int NOT NULL DEFAULT 0,
    reserve_memory_mb   bigint NOT NULL DEFAULT 0,
    reserve_gpus        int NOT NULL DEFAULT 0,
    node_id             text COLLATE "C",
    max_attempts        int NOT NULL DEFAULT 3,
    state               text NOT NULL DEFAULT 'PENDING'
                        CONSTRAINT request_state_valid
                        CHECK (state IN ('PENDING', 'CLAIMED', 'DISPATCHED', 'CANCELLED')),
    queued_at           timestamptz NOT NULL,
    available_at        timestamptz NOT NULL,
    claim_id            uuid,
    claimed_until       timestamptz,
    tries               int NOT NULL DEFAULT 0,
    last_reason         text,
    attempt_id          uuid,
    submitted_at        timestamptz NOT NULL DEFAULT now(),
    -- queue order within a tenant, ascending: epoch(queued_at) - priority * aging_interval
    -- (linear aging as a static key, SPEC section 7; aging_interval as set at submit)
    sort_key            double precision NOT NULL DEFAULT 0,
    -- a retry avoids the node that lost or failed the previous attempt, when it can
    avoid_node_id       text COLLATE "C",
    -- the application's payload, carried by retries and by the worker's START command
    payload             jsonb,
    -- what admission looks at (capability, version, required labels, minimums,
    -- reservations, pinned node), hashed, each text length-prefixed: requests of one
    -- shape are admitted by exactly the same nodes, so dispatch_next judges a shape once
    -- (see src/queue.c).  Built-in functions only, so inserting needs no extra grant.
    shape               bigint NOT NULL GENERATED ALWAYS AS (pg_catalog.hashtextextended(
                            pg_catalog.length(capability)::text || ':' || capability
                            || pg_catalog.length(capability_version)::text || ':' || capability_version
                            || pg_catalog.length(required_labels::text)::text || ':' || required_labels::text
                            || min_cpu_millis::text || ',' || min_memory_mb::text || ','
                            || min_gpus::text || ',' || reserve_cpu_millis::text || ','
                            || reserve_memory_mb::text || ',' || reserve_gpus::text || ','
                            || coalesce(pg_catalog.length(node_id)::text || ':' || node_id, '-'),
                            0)) STORED,
    CONSTRAINT request_one_per_step_attempt UNIQUE (step_id, attempt_number),
    CONSTRAINT request_amounts_nonnegative CHECK (
        min_cpu_millis >= 0 AND min_memory_mb >= 0 AND min_gpus >= 0 AND
        reserve_cpu_millis >= 0 AND reserve_memory_mb >= 0 AND reserve_gpus >= 0),
    CONSTRAINT request_claim_consistent CHECK ((state = 'CLAIMED') = (claim_id IS NOT NULL))
);
ALTER SEQUENCE sched.request_id_seq OWNED BY sched.request.request_id;
COMMENT ON TABLE sched.request IS 'Scheduling requests: one per (step, attempt number), in the queue until dispatched or cancelled.';
-- queue order: per tenant by (sort_key, queued_at, request_id); starving requests by age
CREATE INDEX request_queue_idx ON sched.request (tenant, sort_key, queued_at, request_id)
    WHERE state IN ('PENDING', 'CLAIMED');
CREATE INDEX request_age_idx ON sched.request (queued_at, request_id)
    WHERE state IN ('PENDING', 'CLAIMED');
CREATE INDEX request_claim_idx ON sched.request (claimed_until) WHERE state = 'CLAIMED';
-- the shapes of the open requests, and each one's ready requests (dispatch_next)
CREATE INDEX request_shape_idx ON sched.request (shape, available_at)
    WHERE state IN ('PENDING', 'CLAIMED');
CREATE INDEX request_execution_idx ON sched.request (execution_id);

-- attempt, command and timeline rows are written only by the reservation transaction
-- and the lifecycle functions, which hold locks on the request, execution, worker and
-- node they reference (none of which is ever deleted).  They carry no foreign keys:
-- the referential checks would cost more than the rest of the reservation's writes.
CREATE TABLE sched.attempt (
    attempt_id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    request_id          bigint NOT NULL,
    execution_id        uuid NOT NULL,
    step_id             uuid NOT NULL,
    attempt_number      int NOT NULL,
    tenant              text COLLATE "C" NOT NULL,
    node_id             text COLLATE "C" NOT NULL,
    worker_id           uuid NOT NULL,
    worker_generation   bigint NOT NULL,
    lease_version       bigint NOT NULL DEFAULT 1,
    status              text NOT NULL DEFAULT 'DISPATCHED'
                        CONSTRAINT attempt_status_valid
                        CHECK (status IN ('DISPATCHED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST')),
    reserve_cpu_millis  int NOT NULL,
    reserve_memory_mb   bigint NOT NULL,
    reserve_gpus        int NOT NULL,
    score               bigint NOT NULL,
    dispatched_at       timestamptz NOT NULL,
    started_at          timestamptz,
    lease_expires_at    timestamptz NOT NULL,
    finished_at         timestamptz,
    detail              jsonb,
    CONSTRAINT attempt_one_per_step_attempt UNIQUE (step_id, attempt_number),
    CONSTRAINT attempt_finished_when_terminal
        CHECK ((status IN ('DISPATCHED', 'RUNNING')) = (finished_at IS NULL))
);
COMMENT ON TABLE sched.attempt IS 'Attempts: a reservation of one worker slot and node resources while DISPATCHED or RUNNING.';
CREATE INDEX attempt_live_worker_idx ON sched.attempt (worker_id) WHERE status IN ('DISPATCHED', 'RUNNING');
CREATE INDEX attempt_live_lease_idx ON sched.attempt (lease_expires_at) WHERE status IN ('DISPATCHED', 'RUNNING');
CREATE INDEX attempt_execution_idx ON sched.attempt (execution_id);

/* Live attempts per tenant, for fair share (dispatch_next reads them at every call):
 * counting the attempts costs as much as there are live ones, so triggers on
 * sched.attempt keep sums instead.  One row per (tenant, backend slot): the rows a
 * transaction changes belong to its own backend slot (sched._backend_slot()), which no
 * concurrent transaction has, so dispatchers never wait for one another here.
 * Invariant: sum(live) per tenant = its attempts in DISPATCHED or RUNNING. */
CREATE TABLE sched.tenant_live (
    tenant  text COLLATE "C" NOT NULL,
    backend int NOT NULL,
    live    bigint NOT NULL,
    PRIMARY KEY (tenant, backend)
);
COMMENT ON TABLE sched.tenant_live IS 'Live attempts per tenant, summed by trigger over sched.attempt in one row per backend slot; sum(live) per tenant is its live attempts.';

CREATE FUNCTION sched._backend_slot()
RETURNS int
AS 'MODULE_PATHNAME', 'sched_backend_slot'
LANGUAGE C VOLATILE;

CREATE FUNCTION sched._attempt_live_changed()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM sched.tenant_live;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO sched.tenant_live AS l (tenant, backend, live)
        SELECT n.tenant, sched._backend_slot(), count(*) FROM new_rows n
         WHERE n.status IN ('DISPATCHED', 'RUNNING') GROUP BY n.tenant
        ON CONFLICT (tenant, backend) DO UPDATE SET live = l.live + excluded.live;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO sched.tenant_live AS l (tenant, backend, live)
        SELECT o.tenant, sched._backend_slot(), -count(*) FROM old_rows o
         WHERE o.status IN ('DISPATCHED', 'RUNNING') GROUP BY o.tenant
        ON CONFLICT (tenant, backend) DO UPDATE SET live = l.live + excluded.live;
    ELSE
        INSERT INTO sched.tenant_live AS l (tenant, backend, live)
        SELECT d.tenant, sched._backend_slot(), sum(d.delta) FROM (
            SELECT n.tenant, 1 AS delta FROM new_rows n WHERE n.status IN ('DISPATCHED', 'RUNNING')
            UNION ALL
            SELECT o.tenant, -1 FROM old_rows o WHERE o.status IN ('DISPATCHED', 'RUNNING')) d
         GROUP BY d.tenant HAVING sum(d.delta) <> 0
        ON CONFLICT (tenant, backend) DO UPDATE SET live = l.live + excluded.live;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER attempt_live_inserted AFTER INSERT ON sched.attempt
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
CREATE TRIGGER attempt_live_updated AFTER UPDATE ON sched.attempt
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
CREATE TRIGGER attempt_live_deleted AFTER DELETE ON sched.attempt
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
CREATE TRIGGER attempt_live_truncated AFTER TRUNCATE ON sched.attempt
    FOR EACH STATEMENT EXECUTE FUNCTION sched._attempt_live_changed();
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_inserted;
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_updated;
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_deleted;
ALTER TABLE sched.attempt ENABLE ALWAYS TRIGGER attempt_live_truncated;

CREATE SEQUENCE sched.command_id_seq;

CREATE TABLE sched.command (
    command_id          bigint PRIMARY KEY DEFAULT nextval('sched.command_id_seq'),
    worker_id           uuid NOT NULL,
    worker_generation   bigint NOT NULL,
    kind                text NOT NULL CONSTRAINT command_kind_valid CHECK (kind IN ('START', 'CANCEL')),
    attempt_id          uuid NOT NULL,
    lease_version       bigint NOT NULL,
    request_id          bigint NOT NULL,
    created_at          timestamptz NOT NULL,
    delivered_at        timestamptz
);
ALTER SEQUENCE sched.command_id_seq OWNED BY sched.command.command_id;
COMMENT ON TABLE sched.command IS 'Commands for workers (START, CANCEL), each delivered once to the generation it was made for.';
CREATE INDEX command_undelivered_idx ON sched.command (worker_id, command_id) WHERE delivered_at IS NULL;

CREATE SEQUENCE sched.timeline_id_seq;

CREATE TABLE sched.timeline (
    timeline_id     bigint PRIMARY KEY DEFAULT nextval('sched.timeline_id_seq'),
    execution_id    uuid NOT NULL,
    milestone_key   text NOT NULL,
    stage           text NOT NULL,
    step_id         uuid,
    attempt_number  int,
    attempt_id      uuid,
    state           text NOT NULL,
    component       text NOT NULL,
    title           text NOT NULL,
    detail          jsonb,
    at              timestamptz NOT NULL,
    CONSTRAINT timeline_milestone_once UNIQUE (execution_id, milestone_key)
);
ALTER SEQUENCE sched.timeline_id_seq OWNED BY sched.timeline.timeline_id;
COMMENT ON TABLE sched.timeline IS 'Milestones of each execution, appended once each (idempotent on milestone_key).';

-- pg_dump keeps the fleet and the queue.
SELECT pg_catalog.pg_extension_config_dump('sched.node', '');
SELECT pg_catalog.pg_extension_config_dump('sched.worker', '');
SELECT pg_catalog.pg_extension_config_dump('sched.tenant', '');
SELECT pg_catalog.pg_extension_config_dump('sched.execution', '');
SELECT pg_catalog.pg_extension_config_dump('sched.request', '');
SELECT pg_catalog.pg_extension_config_dump('sched.request_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sched.attempt', '');
SELECT pg_catalog.pg_extension_config_dump('sched.tenant_live', '');
SELECT pg_catalog.pg_extension_config_dump('sched.command', '');
SELECT pg_catalog.pg_extension_config_dump('sched.command_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sched.timeline', '');
SELECT pg_catalog.pg_extension_config_dump('sched.timeline_id_seq', '');

-- ---------------------------------------------------------------------------------
-- Result types (functions whose results reuse parameter names return these)
-- ---------------------------------------------------------------------------------

CREATE TYPE sched.candidate AS (node_id text, worker_id uuid, score bigint);

CREATE TYPE sched.ranked_candidate AS (
    rank int, node_id text, worker_id uuid, score bigint,
    preferred_matches int, weight int, running_attempts int);

CREATE TYPE sched.qualification AS (
    node_id text, worker_id uuid, eligible boolean, reasons text[], score bigint);

CREATE TYPE sched.dispatch_result AS (
    outcome text, request_id bigint, attempt_id uuid, node_id text, worker_id uuid,
    lease_version bigint, score bigint, detail text);

CREATE TYPE sched.registration AS (worker_id uuid, generation bigint);

CREATE TYPE sched.claim AS (request_id bigint, claim_id uuid, claimed_until timestamptz);

-- ---------------------------------------------------------------------------------
-- Input checks shared by the PL/pgSQL functions (C functions use src/validate.c, which
-- also implements sched._check_labels so label maps are checked by one routine).
-- All raise ERROR: 22004 for NULL, 22023 for an invalid value, naming the parameter.
-- ---------------------------------------------------------------------------------

CREATE FUNCTION sched._check_labels(labels jsonb, parameter text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'sched_check_labels'
LANGUAGE C IMMUTABLE;

/* The static queue key of SPEC section 7 (ascending = earlier): epoch(queued_at) -
 * priority * sched.aging_interval, in seconds. */
CREATE FUNCTION sched._queue_key(priority int, queued_at timestamptz)
RETURNS double precision
AS 'MODULE_PATHNAME', 'sched_queue_key'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION sched._require(value anyelement, parameter text)
RETURNS anyelement
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION 'parameter "%" must not be NULL', parameter
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN value;
END
$$;

CREATE FUNCTION sched._require_text(value text, parameter text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION 'parameter "%" must not be NULL', parameter
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF value = '' THEN
        RAISE EXCEPTION 'parameter "%" must not be empty', parameter
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN value;
END
$$;

CREATE FUNCTION sched._check_nonnegative(value bigint, parameter text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value < 0 THEN
        RAISE EXCEPTION 'parameter "%" must not be negative: %', parameter, value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN value;
END
$$;

CREATE FUNCTION sched._check_one_of(value text, parameter text, allowed text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NOT NULL AND NOT (value = ANY (allowed)) THEN
        RAISE EXCEPTION 'invalid value for parameter "%": "%"', parameter, value
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Valid values are %s.', array_to_string(allowed, ', '));
    END IF;
    RETURN value;
END
$$;

/* The one error for an unknown id: 42704, naming the parameter that carried it. */
CREATE FUNCTION sched._unknown(kind text, id text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '% "%" does not exist (parameter "%_id")', kind, id, kind
        USING ERRCODE = 'undefined_object';
END
$$;

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

CREATE FUNCTION sched.set_tenant_weight(tenant text, weight int)
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

-- ---------------------------------------------------------------------------------
-- Timeline
-- ---------------------------------------------------------------------------------

/* Appends one milestone; a milestone_key already recorded for the execution is kept as is. */
CREATE FUNCTION sched._milestone(
    execution_id uuid, milestone_key text, stage text, step_id uuid, attempt_number int,
    attempt_id uuid, state text, component text, title text, detail jsonb, at timestamptz)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO sched.timeline (execution_id, milestone_key, stage, step_id, attempt_number,
                                attempt_id, state, component, title, detail, at)
    VALUES (execution_id, milestone_key, stage, step_id, attempt_number,
            attempt_id, state, component, title, detail, at)
    ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING
$$;

-- ---------------------------------------------------------------------------------
-- Work
-- ---------------------------------------------------------------------------------

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

/*
 * Locks an execution (FOR UPDATE) for the application's transition to `target` and
 * returns its status: `target` itself when it is there already (the caller returns, the
 * call being idempotent), else an open status.  Unknown id: 42704; closed otherwise: 55000.
 */
CREATE FUNCTION sched._lock_execution_for(execution_id uuid, target text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur text;
BEGIN
    PERFORM sched._require(execution_id, 'execution_id');
    SELECT e.status INTO cur FROM sched.execution e
     WHERE e.execution_id = _lock_execution_for.execution_id FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM sched._unknown('execution', execution_id::text);
    END IF;
    IF cur <> target AND cur NOT IN ('CREATED', 'QUEUED', 'RUNNING') THEN
        RAISE EXCEPTION 'execution % is already closed as %', execution_id, cur
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN cur;
END
$$;

/*
 * complete_execution: the application declares the execution done.  Refused (55000) while
 * a request of it is pending or claimed or an attempt is live.  Idempotent on SUCCEEDED.
 */
CREATE FUNCTION sched.complete_execution(execution_id uuid, at timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur text;
BEGIN
    PERFORM sched._require(at, 'at');
    cur := sched._lock_execution_for(execution_id, 'SUCCEEDED');
    IF cur = 'SUCCEEDED' THEN
        RETURN cur;
    END IF;
    IF EXISTS (SELECT 1 FROM sched.request r
                WHERE r.execution_id = complete_execution.execution_id
                  AND r.state IN ('PENDING', 'CLAIMED'))
       OR EXISTS (SELECT 1 FROM sched.attempt a
                   WHERE a.execution_id = complete_execution.execution_id
                     AND a.status IN ('DISPATCHED', 'RUNNING')) THEN
        RAISE EXCEPTION 'execution % still has pending requests or live attempts', execution_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Finish or cancel its work first, or call cancel_execution.';
    END IF;
    UPDATE sched.execution e SET status = 'SUCCEEDED', updated_at = at, finished_at = at
     WHERE e.execution_id = complete_execution.execution_id;
    PERFORM sched._milestone(complete_execution.execution_id, 'execution.succeeded', 'EXECUTION',
        NULL, NULL, NULL, 'SUCCEEDED', 'Application', 'Execution completed', NULL, at);
    RETURN 'SUCCEEDED';
END
$$;

/*
 * cancel_execution: marks the execution CANCELLED, cancels its pending and claimed
 * requests, and sends a CANCEL command to the worker of each live attempt (the attempt
 * stays live until the worker finishes it or its lease expires).  Idempotent.
 * Locks: the execution row (FOR UPDATE), then its open requests with SKIP LOCKED: a
 * request locked by a dispatcher is left to it, and that dispatcher, which must lock the
 * execution after the request, sees CANCELLED and cancels the request itself
 * (EXECUTION_CLOSED).  It never waits for a request while holding the execution.
 */
CREATE FUNCTION sched.cancel_execution(execution_id uuid, at timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur text;
BEGIN
    PERFORM sched._require(at, 'at');
    cur := sched._lock_execution_for(execution_id, 'CANCELLED');
    IF cur = 'CANCELLED' THEN
        RETURN cur;
    END IF;
    PERFORM sched._close_execution(cancel_execution.execution_id, 'CANCELLED', at);
    RETURN 'CANCELLED';
END
$$;

-- ---------------------------------------------------------------------------------
-- Placement and reservation (C)
-- ---------------------------------------------------------------------------------

CREATE FUNCTION sched.select_candidate(
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
    at timestamptz DEFAULT now())
RETURNS SETOF sched.candidate
AS 'MODULE_PATHNAME', 'sched_select_candidate'
LANGUAGE C STABLE ROWS 1;

CREATE FUNCTION sched.rank_candidates(
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
    at timestamptz DEFAULT now())
RETURNS SETOF sched.ranked_candidate
AS 'MODULE_PATHNAME', 'sched_rank_candidates'
LANGUAGE C STABLE;

CREATE FUNCTION sched.qualification_reasons(
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
    at timestamptz DEFAULT now())
RETURNS SETOF sched.qualification
AS 'MODULE_PATHNAME', 'sched_qualification_reasons'
LANGUAGE C STABLE;

CREATE FUNCTION sched.qualification_reasons(request_id bigint, at timestamptz DEFAULT now())
RETURNS SETOF sched.qualification
AS 'MODULE_PATHNAME', 'sched_qualification_reasons_for_request'
LANGUAGE C STABLE;

CREATE FUNCTION sched.dispatch_attempt(
    request_id bigint,
    claim_id uuid DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS sched.dispatch_result
AS 'MODULE_PATHNAME', 'sched_dispatch_attempt'
LANGUAGE C VOLATILE;

/* The bigint key of the advisory lock dispatch takes on (step_id, attempt_number), as
 * shown in pg_locks (classid = high 32 bits, objid = low 32 bits, objsubid = 1). */
CREATE FUNCTION sched.step_lock_key(step_id uuid, attempt_number int)
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
CREATE FUNCTION sched.claim_requests(
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
CREATE FUNCTION sched.dispatch_next(
    max_dispatches int DEFAULT 1,
    capability text DEFAULT NULL,
    tenant text DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS SETOF sched.dispatch_result
AS 'MODULE_PATHNAME', 'sched_dispatch_next_0_2'
LANGUAGE C VOLATILE;

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

-- ---------------------------------------------------------------------------------
-- Diagnostics for operators (read-only; they answer on a hot standby too)
-- ---------------------------------------------------------------------------------

CREATE INDEX attempt_dispatched_at_idx ON sched.attempt (dispatched_at);

/* (request_id, explanation, blocked) for every PENDING or CLAIMED request, computed by
 * the admission routine of dispatch over the current fleet (src/diagnostics.c). */
CREATE FUNCTION sched._pending_explanations(at timestamptz)
RETURNS TABLE (request_id bigint, explanation text, blocked text)
AS 'MODULE_PATHNAME', 'sched_pending_explanations'
LANGUAGE C STABLE;

/*
 * Each view below is a thin wrapper over a function of the same name taking `at` (the
 * time the answer is computed for), so tests and reports can pass a fixed time:
 *   SELECT * FROM sched.pending;                 -- now
 *   SELECT * FROM sched.pending('2026-01-01 12:00+00');
 */

CREATE FUNCTION sched.node_overview(at timestamptz)
RETURNS TABLE (node_id text, status text, workers int, workers_ready int, worker_states text,
               heartbeat_age interval, cpu_millis int, cpu_reserved int, cpu_free int,
               memory_mb bigint, memory_reserved_mb bigint, memory_free_mb bigint,
               gpus int, gpus_reserved int, gpus_free int, slots int, slots_used int,
               slots_free int, live_attempts int, weight int, labels jsonb)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM sched._require(at, 'at');
    RETURN QUERY
SELECT n.node_id,
       n.management_status,
       count(w.worker_id)::int,
       (count(w.worker_id) FILTER (
            WHERE w.runtime_state = 'READY' AND w.scheduling_status = 'ELIGIBLE'
              AND w.last_heartbeat >= $1 - make_interval(secs => sched._setting_seconds('sched.heartbeat_ttl'))))::int,
       string_agg(w.capability || ':' || lower(w.runtime_state)
                  || CASE WHEN w.scheduling_status = 'CORDONED' THEN ',cordoned' ELSE '' END,
                  ' ' ORDER BY w.capability),
       date_trunc('second', $1 - max(w.last_heartbeat)),
       n.cpu_millis, n.reserved_cpu_millis, n.cpu_millis - n.reserved_cpu_millis,
       n.memory_mb, n.reserved_memory_mb, n.memory_mb - n.reserved_memory_mb,
       n.gpus, n.reserved_gpus, n.gpus - n.reserved_gpus,
       coalesce(sum(w.slots), 0)::int,
       coalesce(sum(w.live_attempts), 0)::int,
       coalesce(sum(w.slots - w.live_attempts), 0)::int,
       n.live_attempts, n.weight, n.labels
  FROM sched.node n
  LEFT JOIN sched.worker w ON w.node_id = n.node_id
 GROUP BY n.node_id
 ORDER BY n.node_id;
END
$$;
CREATE VIEW sched.node_overview AS SELECT * FROM sched.node_overview(now());
COMMENT ON VIEW sched.node_overview IS 'One row per node: status, workers, heartbeat age, capacity / reserved / free, slots.';

CREATE FUNCTION sched.pending(at timestamptz)
RETURNS TABLE (request_id bigint, tenant text, capability text, priority int,
               effective_priority numeric, waited interval, tries int, next_try_at timestamptz,
               state text, explanation text, blocked text, pinned_to text, last_reason text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM sched._require(at, 'at');
    RETURN QUERY
SELECT r.request_id,
       r.tenant,
       r.capability || '@' || r.capability_version,
       r.priority,
       round((r.priority + greatest(extract(epoch FROM $1 - r.queued_at), 0)
                          / sched._setting_seconds('sched.aging_interval'))::numeric, 2),
       date_trunc('second', greatest($1 - r.queued_at, interval '0')),
       r.tries,
       greatest(r.available_at, CASE WHEN r.state = 'CLAIMED' THEN r.claimed_until END),
       r.state,
       x.explanation,
       x.blocked,
       r.node_id,
       r.last_reason
  FROM sched.request r
  JOIN sched._pending_explanations($1) x ON x.request_id = r.request_id
 ORDER BY r.queued_at, r.request_id;
END
$$;
CREATE VIEW sched.pending AS SELECT * FROM sched.pending(now());
COMMENT ON VIEW sched.pending IS 'One row per pending or claimed request, with a live explanation of why it waits.';

CREATE FUNCTION sched.queue_stats(at timestamptz)
RETURNS TABLE (tenant text, capability text, pending int, ready_now int, oldest_wait interval,
               dispatched_5m int, p50_wait interval, p95_wait interval, starving int)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM sched._require(at, 'at');
    RETURN QUERY
WITH waiting AS (
    SELECT r.tenant, r.capability,
           count(*) AS pending,
           count(*) FILTER (WHERE r.available_at <= $1
                              AND (r.state = 'PENDING' OR r.claimed_until <= $1)) AS ready_now,
           date_trunc('second', max($1 - r.queued_at)) AS oldest_wait,
           count(*) FILTER (WHERE r.queued_at < $1 - make_interval(secs => sched._setting_seconds('sched.starvation_after')))
               AS starving
      FROM sched.request r
     WHERE r.state IN ('PENDING', 'CLAIMED')
     GROUP BY r.tenant, r.capability
), recent AS (
    SELECT r.tenant, r.capability,
           count(*) AS dispatched_5m,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a.dispatched_at - r.queued_at) AS p50_wait,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY a.dispatched_at - r.queued_at) AS p95_wait
      FROM sched.attempt a
      JOIN sched.request r ON r.request_id = a.request_id
     WHERE a.dispatched_at > $1 - interval '5 minutes' AND a.dispatched_at <= $1
     GROUP BY r.tenant, r.capability
)
SELECT tenant, capability,
       coalesce(w.pending, 0)::int,
       coalesce(w.ready_now, 0)::int,
       w.oldest_wait,
       coalesce(d.dispatched_5m, 0)::int,
       date_trunc('millisecond', d.p50_wait),
       date_trunc('millisecond', d.p95_wait),
       coalesce(w.starving, 0)::int
  FROM waiting w
  FULL JOIN recent d USING (tenant, capability)
 ORDER BY tenant, capability;
END
$$;
CREATE VIEW sched.queue_stats AS SELECT * FROM sched.queue_stats(now());
COMMENT ON VIEW sched.queue_stats IS 'Per tenant and capability: queue depth, oldest wait, recent dispatch waits, starving requests.';

CREATE FUNCTION sched.attempt_overview(at timestamptz)
RETURNS TABLE (attempt_id uuid, execution_id uuid, step_id uuid, attempt_number int,
               tenant text, node_id text, worker_id uuid, status text, lease_state text,
               lease_remaining interval, lease_version bigint, dispatched_at timestamptz,
               started_at timestamptz, finished_at timestamptz, duration interval,
               reserve_cpu_millis int, reserve_memory_mb bigint, reserve_gpus int, score bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM sched._require(at, 'at');
    RETURN QUERY
SELECT a.attempt_id, a.execution_id, a.step_id, a.attempt_number, a.tenant, a.node_id,
       a.worker_id, a.status,
       CASE
           WHEN a.status NOT IN ('DISPATCHED', 'RUNNING') THEN 'released'
           WHEN a.lease_expires_at < $1 THEN 'expired'
           WHEN w.generation > a.worker_generation THEN 'orphaned'
           ELSE 'held'
       END,
       CASE WHEN a.status IN ('DISPATCHED', 'RUNNING')
            THEN date_trunc('second', a.lease_expires_at - $1) END,
       a.lease_version, a.dispatched_at, a.started_at, a.finished_at,
       date_trunc('second', coalesce(a.finished_at, $1) - coalesce(a.started_at, a.dispatched_at)),
       a.reserve_cpu_millis, a.reserve_memory_mb, a.reserve_gpus, a.score
  FROM sched.attempt a
  JOIN sched.worker w ON w.worker_id = a.worker_id
 ORDER BY (a.status IN ('DISPATCHED', 'RUNNING')) DESC, a.dispatched_at DESC, a.attempt_id;
END
$$;
CREATE VIEW sched.attempt_overview AS SELECT * FROM sched.attempt_overview(now());
COMMENT ON VIEW sched.attempt_overview IS 'Attempts with their lease state: held, expired (to be reaped), orphaned (worker re-registered), released.';

/* The milestones of one execution, in order. */
CREATE FUNCTION sched.execution_timeline(execution_id uuid)
RETURNS TABLE (at timestamptz, stage text, milestone text, state text, component text,
               title text, step_id uuid, attempt_number int, detail jsonb)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM sched._require(execution_id, 'execution_id');
    IF NOT EXISTS (SELECT 1 FROM sched.execution e WHERE e.execution_id = execution_timeline.execution_id) THEN
        PERFORM sched._unknown('execution', execution_id::text);
    END IF;
    RETURN QUERY
    SELECT t.at, t.stage, t.milestone_key, t.state, t.component, t.title, t.step_id,
           t.attempt_number, t.detail
      FROM sched.timeline t
     WHERE t.execution_id = execution_timeline.execution_id
     ORDER BY t.at, t.timeline_id;
END
$$;

/* A CPU amount for people: 16000 -> '16', 1500 -> '1.5'. */
CREATE FUNCTION sched._cpus(millis bigint)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT trim_scale(round(millis / 1000.0, 3))::text $$;

/* An amount with its unit, singular or plural: (1, 'GPU') -> '1 GPU', ('1.5', 'CPU') -> '1.5 CPUs'. */
CREATE FUNCTION sched._amount(amount text, unit text)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT amount || ' ' || unit || CASE WHEN amount = '1' THEN '' ELSE 's' END $$;

/* A duration for people, whatever the session's IntervalStyle: '90 s', '2 min 5 s', '3 h 0 min'. */
CREATE FUNCTION sched._duration(d interval)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE WHEN secs < 60 THEN secs || ' s'
            WHEN secs < 3600 THEN (secs / 60) || ' min ' || (secs % 60) || ' s'
            ELSE (secs / 3600) || ' h ' || (secs % 3600 / 60) || ' min' END
  FROM (SELECT greatest(ceil(extract(epoch FROM d)), 0)::bigint AS secs) x
$$;

/*
 * explain(request_id, at): a report for one request: its constraints, every node with
 * eligible or its reasons, the ranking with score terms, and the closest misses (what
 * single change would admit a node).  Read-only; built on qualification_reasons and
 * rank_candidates, so it explains with the routine dispatch decides with.
 */
CREATE FUNCTION sched.explain(request_id bigint, at timestamptz DEFAULT now())
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r sched.request;
    out text[] := '{}';
    q record;
    total int;
    eligible int;
    ttl double precision := sched._setting_seconds('sched.heartbeat_ttl');
    need bigint;
    biggest bigint;
    misses int := 0;
BEGIN
    PERFORM sched._require(request_id, 'request_id');
    PERFORM sched._require(at, 'at');
    SELECT * INTO r FROM sched.request x WHERE x.request_id = explain.request_id;
    IF NOT FOUND THEN
        PERFORM sched._unknown('request', request_id::text);
    END IF;

    out := out || format('request %s: %s@%s for tenant %s, priority %s, attempt %s of %s',
                         r.request_id, r.capability, r.capability_version, r.tenant, r.priority,
                         r.attempt_number, r.max_attempts);
    out := out || format('  state %s, waited %s, tries: %s, next try %s',
                         r.state, sched._duration(at - r.queued_at), r.tries,
                         CASE WHEN r.available_at <= at THEN 'now'
                              ELSE 'in ' || sched._duration(r.available_at - at) END);
    out := out || format('  requires: %s; prefers: %s', r.required_labels, r.preferred_labels);
    out := out || format('  minimum: cpu %s, memory %s MB, gpus %s; reserves: cpu %s, memory %s MB, gpus %s',
                         sched._cpus(r.min_cpu_millis), r.min_memory_mb, r.min_gpus,
                         sched._cpus(r.reserve_cpu_millis), r.reserve_memory_mb, r.reserve_gpus);
    out := out || format('  heartbeat TTL %s s%s', ttl,
                         CASE WHEN r.node_id IS NOT NULL THEN format('; pinned to node %s', r.node_id) ELSE '' END);
    IF r.last_reason IS NOT NULL THEN
        out := out || format('  last dispatch: %s', r.last_reason);
    END IF;

    SELECT count(*), count(*) FILTER (WHERE qr.eligible) INTO total, eligible
      FROM sched.qualification_reasons(explain.request_id, at) qr;
    out := out || ''::text || format('nodes (%s of %s eligible):', eligible, total);
    FOR q IN SELECT * FROM sched.qualification_reasons(explain.request_id, at) ORDER BY node_id LOOP
        out := out || format('  %-20s %s', q.node_id,
                             CASE WHEN q.eligible THEN 'eligible, score ' || q.score
                                  ELSE array_to_string(q.reasons, ', ') END);
    END LOOP;

    IF eligible > 0 THEN
        out := out || ''::text || 'ranking (score = preferred x 1,000,000 + weight x 1,000 - running x 10,000):'::text;
        FOR q IN SELECT * FROM sched.rank_candidates(r.capability, r.capability_version,
                     r.required_labels, r.preferred_labels, r.min_cpu_millis, r.min_memory_mb,
                     r.min_gpus, r.reserve_cpu_millis, r.reserve_memory_mb, r.reserve_gpus,
                     r.node_id, NULL, at) LOOP
            out := out || format('  %s. %-20s %s = %s x 1,000,000 + %s x 1,000 - %s x 10,000%s',
                                 q.rank, q.node_id, q.score, q.preferred_matches, q.weight,
                                 q.running_attempts,
                                 CASE WHEN q.node_id = r.avoid_node_id THEN ' (avoided: the previous attempt failed there)' ELSE '' END);
        END LOOP;
        RETURN array_to_string(out, E'\n');
    END IF;

    out := out || ''::text || 'closest misses:'::text;
    -- nodes held back by exactly one reason: the one change that would admit them
    FOR q IN
        SELECT qr.node_id, qr.reasons[1] AS reason, n.*, w.runtime_state, w.scheduling_status,
               w.last_heartbeat, w.capability_versions, w.slots, w.live_attempts AS worker_live
          FROM sched.qualification_reasons(explain.request_id, at) qr
          JOIN sched.node n ON n.node_id = qr.node_id
          LEFT JOIN sched.worker w ON w.worker_id = qr.worker_id
         WHERE cardinality(qr.reasons) = 1
         ORDER BY qr.node_id
    LOOP
        misses := misses + 1;
        out := out || ('  ' || CASE q.reason
            WHEN 'heartbeat_expired' THEN format('%s would qualify with a heartbeat TTL of %s s',
                 q.node_id, ceil(extract(epoch FROM at - q.last_heartbeat)))
            WHEN 'pinned_to_other_node' THEN format('%s would qualify if the request were not pinned to %s',
                 q.node_id, r.node_id)
            WHEN 'node_not_active' THEN format('%s would qualify if it were ACTIVE (it is %s)',
                 q.node_id, q.management_status)
            WHEN 'capability_missing' THEN format('%s would qualify with a worker for %s',
                 q.node_id, r.capability)
            WHEN 'worker_not_ready' THEN format('%s would qualify once its worker reports READY (it is %s)',
                 q.node_id, q.runtime_state)
            WHEN 'worker_not_eligible' THEN format('%s would qualify once its worker is uncordoned',
                 q.node_id)
            WHEN 'capability_version_missing' THEN format('%s would qualify if its worker served version %s (it serves %s)',
                 q.node_id, r.capability_version, array_to_string(q.capability_versions, ', '))
            WHEN 'required_labels_mismatch' THEN format('%s would qualify with labels %s (it has %s)',
                 q.node_id, r.required_labels, q.labels)
            WHEN 'insufficient_cpu' THEN format('%s would qualify with %s (it has %s)',
                 q.node_id, sched._amount(sched._cpus(greatest(r.min_cpu_millis, r.reserve_cpu_millis)), 'CPU'),
                 sched._cpus(q.cpu_millis))
            WHEN 'insufficient_memory' THEN format('%s would qualify with %s MB of memory (it has %s MB)',
                 q.node_id, greatest(r.min_memory_mb, r.reserve_memory_mb), q.memory_mb)
            WHEN 'insufficient_gpus' THEN format('%s would qualify with %s (it has %s)',
                 q.node_id, sched._amount(greatest(r.min_gpus, r.reserve_gpus)::text, 'GPU'), q.gpus)
            WHEN 'no_free_slot' THEN format('%s would qualify when one of its %s ends',
                 q.node_id, sched._amount(q.worker_live::text, 'live attempt'))
            WHEN 'cpu_exhausted' THEN format('%s would qualify when its free CPUs reach %s (now %s)',
                 q.node_id, sched._cpus(r.reserve_cpu_millis), sched._cpus(q.cpu_millis - q.reserved_cpu_millis))
            WHEN 'memory_exhausted' THEN format('%s would qualify when its free memory reaches %s MB (now %s MB)',
                 q.node_id, r.reserve_memory_mb, q.memory_mb - q.reserved_memory_mb)
            WHEN 'gpus_exhausted' THEN format('%s would qualify when its free GPUs reach %s (now %s)',
                 q.node_id, r.reserve_gpus, q.gpus - q.reserved_gpus)
            ELSE format('%s: %s', q.node_id, q.reason) END);
    END LOOP;

    -- requirements no node of the fleet meets at all
    need := greatest(r.min_cpu_millis, r.reserve_cpu_millis);
    SELECT max(n.cpu_millis) INTO biggest FROM sched.node n;
    IF need > 0 AND biggest < need THEN
        misses := misses + 1;
        out := out || format('  no node has %s; the largest has %s', sched._amount(sched._cpus(need), 'CPU'), sched._cpus(biggest));
    END IF;
    need := greatest(r.min_memory_mb, r.reserve_memory_mb);
    SELECT max(n.memory_mb) INTO biggest FROM sched.node n;
    IF need > 0 AND biggest < need THEN
        misses := misses + 1;
        out := out || format('  no node has %s MB of memory; the largest has %s MB', need, biggest);
    END IF;
    need := greatest(r.min_gpus, r.reserve_gpus);
    SELECT max(n.gpus) INTO biggest FROM sched.node n;
    IF need > 0 AND biggest < need THEN
        misses := misses + 1;
        out := out || format('  no node has %s; the largest has %s', sched._amount(need::text, 'GPU'), biggest);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM sched.worker w WHERE w.capability = r.capability) THEN
        misses := misses + 1;
        out := out || format('  no worker serves capability %s', r.capability);
    ELSIF NOT EXISTS (SELECT 1 FROM sched.worker w WHERE w.capability = r.capability
                         AND r.capability_version = ANY (w.capability_versions)) THEN
        misses := misses + 1;
        out := out || format('  no worker serves %s version %s', r.capability, r.capability_version);
    END IF;
    IF misses = 0 THEN
        out := out || '  every node fails on two or more reasons'::text;
    END IF;
    RETURN array_to_string(out, E'\n');
END
$$;

-- ---------------------------------------------------------------------------------
-- Privileges
--
-- Nothing is granted to PUBLIC.  Role sched_observer (created if missing; roles are
-- cluster-wide and outlive the extension) reads every table and view and calls the
-- read-only functions, and nothing else.  Grant the write functions to the roles of
-- your schedulers and workers explicitly.
-- ---------------------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM PUBLIC;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'sched_observer') THEN
        CREATE ROLE sched_observer NOLOGIN;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA sched TO sched_observer;
GRANT SELECT ON ALL TABLES IN SCHEMA sched TO sched_observer;
GRANT EXECUTE ON FUNCTION
    sched.select_candidate(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz),
    sched.rank_candidates(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz),
    sched.qualification_reasons(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz),
    sched.qualification_reasons(bigint, timestamptz),
    sched.explain(bigint, timestamptz),
    sched.execution_timeline(uuid),
    sched.node_overview(timestamptz),
    sched.pending(timestamptz),
    sched.queue_stats(timestamptz),
    sched.attempt_overview(timestamptz),
    sched.step_lock_key(uuid, int),
    sched._pending_explanations(timestamptz),
    sched._setting_seconds(text),
    sched._cpus(bigint),
    sched._amount(text, text),
    sched._duration(interval),
    sched._require(anyelement, text),
    sched._unknown(text, text),
    sched._fleet_mirror_stats()
TO sched_observer;
