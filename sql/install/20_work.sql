-- sql/install/20_work.sql — the work: tenants, executions, requests, attempts, commands and
-- the timeline (submitting work: 25_work_api; closing it is the lifecycle's: 40_lifecycle)
-- A piece of pg_sched--0.2.0.sql, which the Makefile builds from sql/install/*.sql in
-- the order of their names.

-- ---------------------------------------------------------------------------------
-- Work
-- ---------------------------------------------------------------------------------

CREATE TABLE sched.tenant (
    tenant  text COLLATE "C" PRIMARY KEY,
    weight  int NOT NULL DEFAULT 1 CONSTRAINT tenant_weight_positive CHECK (weight > 0),
    -- only members of this role (and sched_admin) submit, cancel or complete the
    -- tenant's work; NULL: any sched_scheduler may
    owner   regrole
);
COMMENT ON TABLE sched.tenant IS 'Tenants: fair-share weight (a tenant not listed has weight 1) and owner (not listed or NULL: none).';

/* Limits that hold under any number of dispatchers (issue 14, docs/design/limits.md):
 * set by sched_admin (set_concurrency_limit, set_rate_limit, set_tenant_quota), read by
 * the reservation transaction under a lock of the limit's own, dumped with the data. */
CREATE TABLE sched.concurrency_limit (
    concurrency_key text COLLATE "C" PRIMARY KEY,
    max_live        int NOT NULL CONSTRAINT concurrency_limit_positive CHECK (max_live > 0)
);
COMMENT ON TABLE sched.concurrency_limit IS 'At most max_live live attempts of the requests submitted with this concurrency_key.';
CREATE TABLE sched.rate_limit (
    concurrency_key text COLLATE "C" PRIMARY KEY,
    dispatches      int NOT NULL CONSTRAINT rate_limit_dispatches_positive CHECK (dispatches > 0),
    per             interval NOT NULL CONSTRAINT rate_limit_per_valid
                    CHECK (per > interval '0' AND per <= interval '30 days')
);
COMMENT ON TABLE sched.rate_limit IS 'At most dispatches dispatches of the key in any sliding window of length per.';
CREATE TABLE sched.tenant_quota (
    tenant          text COLLATE "C" PRIMARY KEY,
    max_live        int CONSTRAINT tenant_quota_live_positive CHECK (max_live > 0),
    max_cpu_millis  int CONSTRAINT tenant_quota_cpu_positive CHECK (max_cpu_millis > 0),
    max_memory_mb   bigint CONSTRAINT tenant_quota_memory_positive CHECK (max_memory_mb > 0),
    max_gpus        int CONSTRAINT tenant_quota_gpus_positive CHECK (max_gpus > 0),
    CONSTRAINT tenant_quota_some_limit
        CHECK (num_nonnulls(max_live, max_cpu_millis, max_memory_mb, max_gpus) > 0)
);
COMMENT ON TABLE sched.tenant_quota IS 'Hard limits on what the live attempts of a tenant hold (NULL: no limit on that dimension).';

/* Gangs (issue 15, README "Gangs"): the requests submitted with one gang_id are placed
 * together, in one transaction, or not at all.  submit makes the row with the first
 * member and checks every later one against it (under its row lock); dispatch holds its
 * row lock (taken without waiting) while it places the members, so one transaction at a
 * time places a gang.  Dumped with the data. */
CREATE TABLE sched.gang (
    gang_id         uuid PRIMARY KEY,
    tenant          text COLLATE "C" NOT NULL,
    gang_size       int NOT NULL CONSTRAINT gang_size_valid CHECK (gang_size BETWEEN 2 AND 64),
    distinct_nodes  boolean NOT NULL,
    created_at      timestamptz NOT NULL,
    -- when its members were dispatched, all in one transaction (NULL: not yet)
    placed_at       timestamptz
);
COMMENT ON TABLE sched.gang IS 'Gangs: gang_size requests placed together or not at all, each on another node when distinct_nodes.';

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

/* A request's shape (the generated column request.shape): what admission looks at
 * (capability, version, required labels, minimums, reservations, pinned node), hashed,
 * each text length-prefixed (src/queue.c).  In C: the column's own expression was set up
 * again at every INSERT (parsed and planned, 9% of the submitting side's CPU in bench
 * workload 7).  Its body is never to change: the stored values depend on it. */
CREATE FUNCTION sched._request_shape(
    capability text, capability_version text, required_labels jsonb, min_cpu_millis int,
    min_memory_mb bigint, min_gpus int, reserve_cpu_millis int, reserve_memory_mb bigint,
    reserve_gpus int, node_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'sched_request_shape'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE TABLE sched.request (
    request_id          bigint PRIMARY KEY DEFAULT nextval('sched.request_id_seq'),
    -- an execution of sched.execution (submit creates it first; no foreign key, so that
    -- pg_restore -j may load the two tables in either order)
    execution_id        uuid NOT NULL,
    step_id             uuid NOT NULL,
    attempt_number      int NOT NULL,
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
    state               text NOT NULL DEFAULT 'PENDING',
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
    -- what admission looks at, hashed (sched._request_shape above): requests of one
    -- shape are admitted by exactly the same nodes, so dispatch_next judges a shape once
    -- (see src/queue.c).  Only the owner inserts requests (submit, the retries), and
    -- may execute it.
    shape               bigint NOT NULL GENERATED ALWAYS AS (sched._request_shape(
                            capability, capability_version, required_labels, min_cpu_millis,
                            min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb,
                            reserve_gpus, node_id)) STORED,
    -- the key its concurrency and rate limits are counted by (NULL: none)
    concurrency_key     text COLLATE "C",
    -- placement prefers nodes with fewer live attempts of this key (NULL: none)
    spread_key          text COLLATE "C",
    -- placed with the other members of its gang, or not at all (NULL: no gang)
    gang_id             uuid,
    -- its live attempts may be preempted by a request of higher priority
    preemptible         boolean NOT NULL DEFAULT false,
    -- capacity held for it on a node, by the preemption it made, until it is
    -- dispatched or held_until passes (counted in the node's and worker's counters)
    held_node_id        text COLLATE "C",
    held_worker_id      uuid,
    held_until          timestamptz,
    CONSTRAINT request_one_per_step_attempt UNIQUE (step_id, attempt_number)
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
-- the members of a gang
CREATE INDEX request_gang_idx ON sched.request (gang_id) WHERE gang_id IS NOT NULL;
-- holds to release when they expire (preemption)
CREATE INDEX request_held_idx ON sched.request (held_until) WHERE held_until IS NOT NULL;

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
    status              text NOT NULL DEFAULT 'DISPATCHED',
    reserve_cpu_millis  int NOT NULL,
    reserve_memory_mb   bigint NOT NULL,
    reserve_gpus        int NOT NULL,
    score               bigint NOT NULL,
    dispatched_at       timestamptz NOT NULL,
    started_at          timestamptz,
    lease_expires_at    timestamptz NOT NULL,
    finished_at         timestamptz,
    detail              jsonb,
    -- its request's concurrency_key, for counting live attempts and dispatches of a key
    concurrency_key     text COLLATE "C",
    -- its request's spread_key, for counting live attempts of a key per node
    spread_key          text COLLATE "C",
    CONSTRAINT attempt_one_per_step_attempt UNIQUE (step_id, attempt_number)
) WITH (fillfactor = 85);   -- room on each page for its attempts' starts, in place (below)
COMMENT ON TABLE sched.attempt IS 'Attempts: a reservation of one worker slot and node resources while DISPATCHED or RUNNING.';
-- The live attempts' partial indexes name them by finished_at IS NULL, which the row's
-- check makes the same as status IN ('DISPATCHED', 'RUNNING') (attempt_valid:
-- attempt_finished_when_terminal), and no index has status or lease_expires_at in its
-- key or predicate: a start (status, started_at, lease_expires_at) and a lease's renewal
-- (lease_expires_at) change no indexed column, so PostgreSQL updates the row in place
-- (HOT) instead of adding an entry to each of the table's indexes, when the page has
-- room for the new version (fillfactor 85: 92% of the starts of workload 7 of
-- bench/run.sh in place, against 71% with full pages).  The reaper finds
-- expired leases among the live attempts (attempt_live_worker_idx), without an index
-- on the lease: a read of every live attempt at each maintenance tick, against an index
-- entry per index at every start and renewal.  Queries of live attempts say
-- finished_at IS NULL, for the planner to use these indexes.
CREATE INDEX attempt_live_worker_idx ON sched.attempt (worker_id) WHERE finished_at IS NULL;
CREATE INDEX attempt_execution_idx ON sched.attempt (execution_id);
-- recent dispatches (sched.queue_stats)
CREATE INDEX attempt_dispatched_at_idx ON sched.attempt (dispatched_at);
-- the limits' counts: live attempts of a key, dispatches of a key in a window, live
-- attempts of a tenant
CREATE INDEX attempt_live_key_idx ON sched.attempt (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND finished_at IS NULL;
CREATE INDEX attempt_key_dispatched_idx ON sched.attempt (concurrency_key, dispatched_at)
    WHERE concurrency_key IS NOT NULL;
CREATE INDEX attempt_live_tenant_idx ON sched.attempt (tenant) WHERE finished_at IS NULL;
-- preemption: the live attempts of a node
CREATE INDEX attempt_live_node_idx ON sched.attempt (node_id) WHERE finished_at IS NULL;
-- the spread term: live attempts of a spread key, per node
CREATE INDEX attempt_live_spread_idx ON sched.attempt (spread_key, node_id)
    WHERE spread_key IS NOT NULL AND finished_at IS NULL;

/* Live attempts per tenant and what they reserve, for fair share and the tenant quota
 * (dispatch_next reads them at every call, a quota check at every dispatch): counting
 * the attempts costs as much as there are live ones, so triggers on sched.attempt
 * (sched._attempt_live_changed, 25_work_api.sql) keep sums instead.  One row per
 * (tenant, backend slot): the rows a transaction changes belong to its own backend slot
 * (its BackendId, src/tenant_live.c), which no concurrent transaction has, so dispatchers never
 * wait for one another here.  Invariant: per tenant, sum(live) = its attempts in
 * DISPATCHED or RUNNING, and sum(cpu_millis), sum(memory_mb), sum(gpus) = what those
 * attempts reserve (0.2.0 added these three). */
CREATE TABLE sched.tenant_live (
    tenant  text COLLATE "C" NOT NULL,
    backend int NOT NULL,
    live    bigint NOT NULL,
    cpu_millis bigint NOT NULL DEFAULT 0,
    memory_mb  bigint NOT NULL DEFAULT 0,
    gpus       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, backend)
)
WITH (fillfactor = 80);			-- (updated at every placement and end: see sched.node)
COMMENT ON TABLE sched.tenant_live IS 'Live attempts per tenant and what they reserve, summed by trigger over sched.attempt in one row per backend slot; sum(live) per tenant is its live attempts.';

CREATE SEQUENCE sched.command_id_seq;

CREATE TABLE sched.command (
    command_id          bigint PRIMARY KEY DEFAULT nextval('sched.command_id_seq'),
    worker_id           uuid NOT NULL,
    worker_generation   bigint NOT NULL,
    kind                text NOT NULL,
    attempt_id          uuid NOT NULL,
    lease_version       bigint NOT NULL,
    request_id          bigint NOT NULL,
    created_at          timestamptz NOT NULL,
    delivered_at        timestamptz,
    -- the worker's session it was delivered to: the one it was made for, or a later one
    -- when that one never received it
    delivered_generation bigint
);
ALTER SEQUENCE sched.command_id_seq OWNED BY sched.command.command_id;
COMMENT ON TABLE sched.command IS 'Commands for workers (START, CANCEL), each delivered once, to the worker''s session current when it is read.';
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

-- pg_dump keeps the queue and what happened to it.  sched.tenant_live is not dumped:
-- it is derived from sched.attempt, and its triggers (ENABLE ALWAYS) rebuild it while
-- pg_restore loads the attempts; dumping it too would count every live attempt twice.
SELECT pg_catalog.pg_extension_config_dump('sched.tenant', '');
SELECT pg_catalog.pg_extension_config_dump('sched.execution', '');
SELECT pg_catalog.pg_extension_config_dump('sched.gang', '');
SELECT pg_catalog.pg_extension_config_dump('sched.request', '');
SELECT pg_catalog.pg_extension_config_dump('sched.request_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sched.attempt', '');
SELECT pg_catalog.pg_extension_config_dump('sched.command', '');
SELECT pg_catalog.pg_extension_config_dump('sched.command_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sched.timeline', '');
SELECT pg_catalog.pg_extension_config_dump('sched.timeline_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('sched.concurrency_limit', '');
SELECT pg_catalog.pg_extension_config_dump('sched.rate_limit', '');
SELECT pg_catalog.pg_extension_config_dump('sched.tenant_quota', '');
