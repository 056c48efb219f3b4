-- sql/install/10_fleet.sql — the fleet: nodes and workers, and the triggers that keep fleet
-- mirrors current (src/fleet.c, src/fleet_mirror.c); the fleet API is 15_fleet_api.sql
-- A piece of pg_sched--0.2.0.sql, which the Makefile builds from sql/install/*.sql in
-- the order of their names.

-- ---------------------------------------------------------------------------------
-- Fleet
-- ---------------------------------------------------------------------------------

CREATE TABLE sched.node (
    node_id             text COLLATE "C" PRIMARY KEY,
    management_status   text NOT NULL DEFAULT 'ACTIVE',
    labels              jsonb NOT NULL DEFAULT '{}',
    cpu_millis          int NOT NULL DEFAULT 0,
    memory_mb           bigint NOT NULL DEFAULT 0,
    gpus                int NOT NULL DEFAULT 0,
    weight              int NOT NULL DEFAULT 100,
    -- live reservations: sums over the node's DISPATCHED and RUNNING attempts
    reserved_cpu_millis int NOT NULL DEFAULT 0,
    reserved_memory_mb  bigint NOT NULL DEFAULT 0,
    reserved_gpus       int NOT NULL DEFAULT 0,
    live_attempts       int NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
)
/* every placement and every end updates its node's and worker's counters: room on
 * each page for their new versions keeps those updates HOT (no index entries), also
 * on pages filled when the fleet grew */
WITH (fillfactor = 80);
COMMENT ON TABLE sched.node IS 'Worker nodes: static capacity, trusted labels, weight, and live reservations.';

CREATE TABLE sched.worker (
    worker_id           uuid PRIMARY KEY,
    -- a node of sched.node (register_worker checks it; no foreign key, so that
    -- pg_restore -j may load the two tables in either order, as for every other table)
    node_id             text COLLATE "C" NOT NULL,
    capability          text NOT NULL,
    capability_versions text[] NOT NULL,
    runtime_state       text NOT NULL DEFAULT 'READY',
    scheduling_status   text NOT NULL DEFAULT 'ELIGIBLE',
    slots               int NOT NULL,
    live_attempts       int NOT NULL DEFAULT 0,
    last_heartbeat      timestamptz,
    generation          bigint NOT NULL DEFAULT 1,
    registered_at       timestamptz NOT NULL DEFAULT now(),
    -- the role that registered the worker (the session's role: privileges.c); only it,
    -- its members and sched_admin act for the worker.  NULL: registered before 0.2.0,
    -- owned by no role until it registers again.
    registered_by       regrole,
    CONSTRAINT worker_one_per_node_and_capability UNIQUE (node_id, capability)
)
WITH (fillfactor = 80);			-- (as sched.node's)
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
 * since the backend started (rows_patched: rows whose counters were taken from the row
 * version a change wrote, without a statement; admissions_walked and admissions_carried:
 * placements judged with an admission memo over every row of a fleet, and over only the
 * rows the memo carried from its last walk). */
CREATE FUNCTION sched._fleet_mirror_stats(
    OUT usable boolean, OUT capabilities int, OUT rows_held int, OUT pending int,
    OUT refreshes bigint, OUT full_loads bigint, OUT rows_reread bigint,
    OUT bypassed bigint, OUT losses bigint, OUT rows_patched bigint,
    OUT admissions_walked bigint, OUT admissions_carried bigint)
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
