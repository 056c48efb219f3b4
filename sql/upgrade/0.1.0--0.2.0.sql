/*
 * pg_sched 0.1.0 → 0.2.0 — upgrade script (ALTER EXTENSION pg_sched UPDATE).
 *
 * Brings a 0.1.0 database to exactly what pg_sched--0.2.0.sql installs: the upgrade test
 * (test/upgrade) compares every object of the two.  The Makefile builds
 * pg_sched--0.1.0--0.2.0.sql from this file, which changes the tables and drops what
 * goes, followed by the install pieces written to be run again (CREATE OR REPLACE):
 * sql/install/05_who_may, 15_fleet_api, 25_work_api, 50_diagnostics and 90_privileges,
 * which sets every privilege from scratch.  Every other change of 0.2.0 goes both here
 * and into the install pieces.
 */

\echo Use "ALTER EXTENSION pg_sched UPDATE TO '0.2.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------
-- Waiting for capacity: the request's shape, and the application's payload
-- ---------------------------------------------------------------------------------

ALTER TABLE sched.request ADD COLUMN payload jsonb;
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

ALTER TABLE sched.request ADD COLUMN
    shape               bigint NOT NULL GENERATED ALWAYS AS (sched._request_shape(
                            capability, capability_version, required_labels, min_cpu_millis,
                            min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb,
                            reserve_gpus, node_id)) STORED;
CREATE INDEX request_shape_idx ON sched.request (shape, available_at)
    WHERE state IN ('PENDING', 'CLAIMED');

-- submit gains payload (a new signature: the old one is dropped, not overloaded; the new
-- one comes with 25_work_api below)
DROP FUNCTION sched.submit(uuid, uuid, text, text, int, text, int, jsonb, jsonb, int, bigint,
                           int, int, bigint, int, text, int, timestamptz);

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
-- each writer of the timeline inserts its milestones itself (25_work_api.sql, Timeline)
DROP FUNCTION sched._milestone(uuid, text, text, uuid, int, uuid, text, text, text, jsonb, timestamptz);
-- the tenant sums' trigger is C and takes its backend slot itself (src/tenant_live.c);
-- it replaces the PL/pgSQL one below (25_work_api.sql), which called this
DROP FUNCTION sched._backend_slot();

/* poll_commands: the worker session's commands (START, CANCEL) for its live attempts,
 * oldest first, each delivered once, with everything the worker needs.  With start, each
 * START's attempt is started as start_attempt starts it, in the same transaction as its
 * delivery (lease_expires_at: the started lease's end; NULL otherwise). */
CREATE FUNCTION sched.poll_commands(
    worker_id uuid,
    generation bigint,
    max int DEFAULT 10,
    at timestamptz DEFAULT now(),
    start boolean DEFAULT false)
RETURNS TABLE (command_id bigint, kind text, attempt_id uuid, lease_version bigint, request_id bigint,
               execution_id uuid, step_id uuid, attempt_number int, capability text,
               capability_version text, payload jsonb, lease_expires_at timestamptz)
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
-- for this update): its new entry point comes with 30_dispatch below

-- ---------------------------------------------------------------------------------
-- Least privilege: who registered each worker, who owns each tenant; the helpers the
-- diagnostics share become public read-only functions (no role calls an internal one)
-- ---------------------------------------------------------------------------------

ALTER TABLE sched.worker ADD COLUMN registered_by regrole;
/* room on each page for the counters' updates to stay HOT (sql/install/10_fleet.sql);
 * pages already full get it as they are rewritten */
ALTER TABLE sched.node SET (fillfactor = 80);
ALTER TABLE sched.worker SET (fillfactor = 80);
ALTER TABLE sched.tenant_live SET (fillfactor = 80);
ALTER TABLE sched.tenant ADD COLUMN owner regrole;
COMMENT ON TABLE sched.tenant IS 'Tenants: fair-share weight (a tenant not listed has weight 1) and owner (not listed or NULL: none).';

DROP FUNCTION sched._setting_seconds(text);
DROP FUNCTION sched._pending_explanations(timestamptz);
DROP FUNCTION sched._cpus(bigint);
DROP FUNCTION sched._amount(text, text);
DROP FUNCTION sched._duration(interval);

-- The fleet mirror's counters gain rows_patched (counters taken from the row version a
-- change wrote) and the admissions that walked every row or read the carried ones.
DROP FUNCTION sched._fleet_mirror_stats();
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

-- ---------------------------------------------------------------------------------
-- Dump and restore: sched.tenant_live is derived from sched.attempt (its triggers rebuild
-- it while pg_restore loads the attempts), so it leaves the dumped tables; 0.1.0 dumped
-- it too and a restore counted every live attempt twice, or failed on its primary key.
-- Dropping a table from the extension takes it out of pg_extension.extconfig.
-- ---------------------------------------------------------------------------------

ALTER EXTENSION pg_sched DROP TABLE sched.tenant_live;
ALTER EXTENSION pg_sched ADD TABLE sched.tenant_live;

-- The tenant quota reads what a tenant's live attempts reserve from sched.tenant_live,
-- which 0.2.0 sums too (sched._attempt_live_changed, replaced by 25_work_api.sql): each
-- tenant's sums go into its row of the lowest backend slot (a tenant with live attempts
-- has rows: their live counts sum to its live attempts), with the attempts' writers held
-- off meanwhile; the rows' 0.1.0 columns are kept as they are.
LOCK TABLE sched.attempt IN SHARE MODE;
ALTER TABLE sched.tenant_live ADD COLUMN cpu_millis bigint NOT NULL DEFAULT 0,
    ADD COLUMN memory_mb bigint NOT NULL DEFAULT 0, ADD COLUMN gpus bigint NOT NULL DEFAULT 0;
COMMENT ON TABLE sched.tenant_live IS 'Live attempts per tenant and what they reserve, summed by trigger over sched.attempt in one row per backend slot; sum(live) per tenant is its live attempts.';
UPDATE sched.tenant_live l
   SET cpu_millis = s.cpu_millis, memory_mb = s.memory_mb, gpus = s.gpus
  FROM (SELECT a.tenant, sum(a.reserve_cpu_millis) AS cpu_millis,
               sum(a.reserve_memory_mb)::bigint AS memory_mb, sum(a.reserve_gpus) AS gpus
          FROM sched.attempt a WHERE a.status IN ('DISPATCHED', 'RUNNING') GROUP BY a.tenant) s
 WHERE l.tenant = s.tenant
   AND l.backend = (SELECT min(z.backend) FROM sched.tenant_live z WHERE z.tenant = l.tenant);

-- ---------------------------------------------------------------------------------
-- Waking workers without NOTIFY (src/wakeup.c): wait_commands
-- ---------------------------------------------------------------------------------

/* wait_commands: what poll_commands returns, at once when there is something; otherwise it
 * sleeps, holding no snapshot, until a command for the worker commits or `timeout`
 * passes.  A statement of its own, in autocommit or a READ COMMITTED transaction that
 * has written nothing (25000 otherwise); needs pg_sched preloaded (55000); not on a
 * standby (25006).  start as for poll_commands. */
CREATE FUNCTION sched.wait_commands(
    worker_id uuid,
    generation bigint,
    max int DEFAULT 10,
    timeout interval DEFAULT '30 seconds',
    start boolean DEFAULT false)
RETURNS TABLE (command_id bigint, kind text, attempt_id uuid, lease_version bigint, request_id bigint,
               execution_id uuid, step_id uuid, attempt_number int, capability text,
               capability_version text, payload jsonb, lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'sched_wait_commands'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;


-- A session that registers again receives the commands earlier sessions did not
-- (src/lifecycle.c, commands_delivered); each command records the session it went to
-- (0.1.0 delivered only to the session a command was made for)
ALTER TABLE sched.command ADD COLUMN delivered_generation bigint;
UPDATE sched.command SET delivered_generation = worker_generation WHERE delivered_at IS NOT NULL;
ALTER TABLE sched.command
    ADD CONSTRAINT command_delivered_whole CHECK ((delivered_at IS NULL) = (delivered_generation IS NULL)),
    ADD CONSTRAINT command_delivered_no_earlier CHECK (delivered_generation >= worker_generation);
COMMENT ON TABLE sched.command IS 'Commands for workers (START, CANCEL), each delivered once, to the worker''s session current when it is read.';

-- ---------------------------------------------------------------------------------
-- pg_restore -j: the data of two tables linked by a foreign key may be loaded in either
-- order by parallel jobs (the archive does not order them), and the COPY of the second
-- fails (or, without --exit-on-error, leaves it empty).  The functions keep the links
-- (register_worker checks the node, submit creates the execution), like those of
-- attempt, command and timeline, which never had a foreign key; invariants.sql checks.
-- ---------------------------------------------------------------------------------

ALTER TABLE sched.worker DROP CONSTRAINT worker_node_id_fkey;
ALTER TABLE sched.request DROP CONSTRAINT request_execution_id_fkey;

-- ---------------------------------------------------------------------------------
-- Limits (issue 14): concurrency keys, rate limits, tenant quotas
-- ---------------------------------------------------------------------------------

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

SELECT pg_catalog.pg_extension_config_dump('sched.concurrency_limit', '');
SELECT pg_catalog.pg_extension_config_dump('sched.rate_limit', '');
SELECT pg_catalog.pg_extension_config_dump('sched.tenant_quota', '');

ALTER TABLE sched.request ADD COLUMN concurrency_key text COLLATE "C";
ALTER TABLE sched.attempt ADD COLUMN concurrency_key text COLLATE "C";
CREATE INDEX attempt_live_key_idx ON sched.attempt (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND finished_at IS NULL;
CREATE INDEX attempt_key_dispatched_idx ON sched.attempt (concurrency_key, dispatched_at)
    WHERE concurrency_key IS NOT NULL;
CREATE INDEX attempt_live_tenant_idx ON sched.attempt (tenant) WHERE finished_at IS NULL;
-- queue_stats gains the column `limited` (requests held back by a limit): a new result
-- type, so the view and function go and come back with 50_diagnostics
DROP VIEW sched.queue_stats;
DROP FUNCTION sched.queue_stats(timestamptz);

-- Issue 15: spread keys.  The request and its attempts carry spread_key; the placement
-- functions take it as a new last parameter and rank_candidates reports the spread
-- term (a new attribute of its result type), so the three are dropped here and come
-- back with 30_dispatch below.
ALTER TABLE sched.request ADD COLUMN spread_key text COLLATE "C";
ALTER TABLE sched.attempt ADD COLUMN spread_key text COLLATE "C";
CREATE INDEX attempt_live_spread_idx ON sched.attempt (spread_key, node_id)
    WHERE spread_key IS NOT NULL AND finished_at IS NULL;
DROP FUNCTION sched.select_candidate(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz);
DROP FUNCTION sched.rank_candidates(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz);
DROP FUNCTION sched.qualification_reasons(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz);
ALTER TYPE sched.ranked_candidate ADD ATTRIBUTE spread_matches int;

-- Issue 15: gangs.  sched.gang (dumped) and request.gang_id; submit gains gang_id,
-- gang_size and distinct_nodes with 25_work_api below.
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
SELECT pg_catalog.pg_extension_config_dump('sched.gang', '');
ALTER TABLE sched.request ADD COLUMN gang_id uuid;
CREATE INDEX request_gang_idx ON sched.request (gang_id) WHERE gang_id IS NOT NULL;

-- Issue 15: preemption.  A request may be submitted preemptible; a preemption ends its
-- attempts PREEMPTED and holds the capacity for the preemptor (request.held_*).
ALTER TABLE sched.attempt DROP CONSTRAINT attempt_status_valid;
ALTER TABLE sched.attempt ADD CONSTRAINT attempt_status_valid
    CHECK (status IN ('DISPATCHED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED'));
ALTER TABLE sched.request ADD COLUMN preemptible boolean NOT NULL DEFAULT false;
ALTER TABLE sched.request ADD COLUMN held_node_id text COLLATE "C";
ALTER TABLE sched.request ADD COLUMN held_worker_id uuid;
ALTER TABLE sched.request ADD COLUMN held_until timestamptz;
ALTER TABLE sched.request ADD CONSTRAINT request_hold_consistent CHECK (
    (held_node_id IS NULL) = (held_worker_id IS NULL) AND (held_node_id IS NULL) = (held_until IS NULL));
CREATE INDEX request_held_idx ON sched.request (held_until) WHERE held_until IS NOT NULL;
CREATE INDEX attempt_live_node_idx ON sched.attempt (node_id) WHERE finished_at IS NULL;

-- Issue 16: no index of sched.attempt has status or lease_expires_at in its key or
-- predicate, so a start and a lease's renewal are HOT updates (20_work.sql): the live
-- worker index of 0.1.0 comes back on finished_at IS NULL (the same rows: 0.1.0's
-- attempt_finished_when_terminal), and the lease index goes (the reaper reads the live
-- attempts).
ALTER TABLE sched.attempt SET (fillfactor = 85);
DROP INDEX sched.attempt_live_lease_idx;
DROP INDEX sched.attempt_live_worker_idx;
CREATE INDEX attempt_live_worker_idx ON sched.attempt (worker_id) WHERE finished_at IS NULL;
