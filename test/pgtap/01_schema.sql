-- 01_schema.sql — pgTAP: the schema objects pg_sched installs (SPEC.md sections 2 and 5).
--
-- Checks, in a fresh database where neither pgtap nor pg_sched is installed:
--   * schema sched and the tables operators read: node, worker, execution, request,
--     attempt, command, timeline, tenant;
--   * every column SPEC.md names, with its type (col_type_is), and node ids compared
--     bytewise (COLLATE "C");
--   * primary keys, UNIQUE (step_id, attempt_number) on request and on attempt, UNIQUE
--     (node_id, capability) on worker, UNIQUE (execution_id, milestone_key) on timeline;
--   * the composite result types (sched.candidate, sched.dispatch_result, ...) with their
--     columns in order (the order is the shape of `SELECT *` on the functions).
-- Everything happens in one transaction that is rolled back: both extensions vanish.
--
-- Run: pg_prove -h $PGHOST -p $PGPORT -U postgres -d postgres --failures test/pgtap/*.sql
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION pg_sched;

SELECT plan(132);

-- ---------------------------------------------------------------------------------
-- Schema and tables
-- ---------------------------------------------------------------------------------
SELECT has_schema('sched', 'schema sched exists');
SELECT has_table('sched'::name, t::name, format('table sched.%s exists', t))
  FROM unnest(ARRAY['node', 'worker', 'execution', 'request', 'attempt', 'command',
                    'timeline', 'tenant', 'tenant_live']) AS t;

-- ---------------------------------------------------------------------------------
-- Columns and their types.  Contract columns (SPEC sections 2 and 5) plus the live
-- counters on node and worker that the reservation maintains (they are what the
-- CHECK constraints of 03_constraints.sql guard).
-- ---------------------------------------------------------------------------------
SELECT col_type_is('sched'::name, tbl::name, col::name, typ, format('sched.%s.%s is %s', tbl, col, typ))
  FROM (VALUES
    -- node (SPEC 2)
    ('node', 'node_id', 'text'),
    ('node', 'management_status', 'text'),
    ('node', 'labels', 'jsonb'),
    ('node', 'cpu_millis', 'integer'),
    ('node', 'memory_mb', 'bigint'),
    ('node', 'gpus', 'integer'),
    ('node', 'weight', 'integer'),
    ('node', 'reserved_cpu_millis', 'integer'),
    ('node', 'reserved_memory_mb', 'bigint'),
    ('node', 'reserved_gpus', 'integer'),
    ('node', 'live_attempts', 'integer'),
    -- worker (SPEC 2)
    ('worker', 'worker_id', 'uuid'),
    ('worker', 'node_id', 'text'),
    ('worker', 'capability', 'text'),
    ('worker', 'capability_versions', 'text[]'),
    ('worker', 'runtime_state', 'text'),
    ('worker', 'scheduling_status', 'text'),
    ('worker', 'slots', 'integer'),
    ('worker', 'last_heartbeat', 'timestamp with time zone'),
    ('worker', 'generation', 'bigint'),
    ('worker', 'live_attempts', 'integer'),
    -- execution
    ('execution', 'execution_id', 'uuid'),
    ('execution', 'tenant', 'text'),
    ('execution', 'status', 'text'),
    -- request: the submit parameters (SPEC 5) ...
    ('request', 'execution_id', 'uuid'),
    ('request', 'step_id', 'uuid'),
    ('request', 'capability', 'text'),
    ('request', 'capability_version', 'text'),
    ('request', 'attempt_number', 'integer'),
    ('request', 'tenant', 'text'),
    ('request', 'priority', 'integer'),
    ('request', 'required_labels', 'jsonb'),
    ('request', 'preferred_labels', 'jsonb'),
    ('request', 'min_cpu_millis', 'integer'),
    ('request', 'min_memory_mb', 'bigint'),
    ('request', 'min_gpus', 'integer'),
    ('request', 'reserve_cpu_millis', 'integer'),
    ('request', 'reserve_memory_mb', 'bigint'),
    ('request', 'reserve_gpus', 'integer'),
    ('request', 'node_id', 'text'),
    ('request', 'max_attempts', 'integer'),
    ('request', 'available_at', 'timestamp with time zone'),
    -- ... plus its queue state (SPEC 5)
    ('request', 'request_id', 'bigint'),
    ('request', 'state', 'text'),
    ('request', 'queued_at', 'timestamp with time zone'),
    ('request', 'claim_id', 'uuid'),
    ('request', 'claimed_until', 'timestamp with time zone'),
    ('request', 'tries', 'integer'),
    ('request', 'last_reason', 'text'),
    ('request', 'payload', 'jsonb'),
    ('request', 'shape', 'bigint'),
    -- attempt (SPEC 5, the full list)
    ('attempt', 'attempt_id', 'uuid'),
    ('attempt', 'request_id', 'bigint'),
    ('attempt', 'execution_id', 'uuid'),
    ('attempt', 'step_id', 'uuid'),
    ('attempt', 'attempt_number', 'integer'),
    ('attempt', 'node_id', 'text'),
    ('attempt', 'worker_id', 'uuid'),
    ('attempt', 'worker_generation', 'bigint'),
    ('attempt', 'lease_version', 'bigint'),
    ('attempt', 'status', 'text'),
    ('attempt', 'reserve_cpu_millis', 'integer'),
    ('attempt', 'reserve_memory_mb', 'bigint'),
    ('attempt', 'reserve_gpus', 'integer'),
    ('attempt', 'score', 'bigint'),
    ('attempt', 'dispatched_at', 'timestamp with time zone'),
    ('attempt', 'lease_expires_at', 'timestamp with time zone'),
    ('attempt', 'finished_at', 'timestamp with time zone'),
    -- command: what poll_commands delivers (SPEC 5), addressed to a worker
    ('command', 'command_id', 'bigint'),
    ('command', 'worker_id', 'uuid'),
    ('command', 'kind', 'text'),
    ('command', 'attempt_id', 'uuid'),
    ('command', 'lease_version', 'bigint'),
    ('command', 'request_id', 'bigint'),
    -- timeline: milestones per execution, idempotent on their key (SPEC 6)
    ('timeline', 'execution_id', 'uuid'),
    ('timeline', 'milestone_key', 'text'),
    -- tenant (set_tenant_weight)
    ('tenant', 'tenant', 'text'),
    ('tenant', 'weight', 'integer'),
    -- tenant_live: live attempts per tenant and backend slot (fair share)
    ('tenant_live', 'tenant', 'text'),
    ('tenant_live', 'backend', 'integer'),
    ('tenant_live', 'live', 'bigint')
  ) AS v(tbl, col, typ);

-- node ids compare bytewise (SPEC 2: COLLATE "C"), wherever they are stored
SELECT is((SELECT c.collname::text
             FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
            WHERE a.attrelid = format('sched.%I', tbl)::regclass AND a.attname = 'node_id'),
          'C', format('sched.%s.node_id has COLLATE "C"', tbl))
  FROM unnest(ARRAY['node', 'worker', 'request', 'attempt']) AS tbl;

-- states and counters are never NULL: every row is in exactly one state
SELECT col_not_null('sched'::name, tbl::name, col::name, format('sched.%s.%s is NOT NULL', tbl, col))
  FROM (VALUES ('node', 'management_status'), ('node', 'reserved_cpu_millis'),
               ('node', 'reserved_memory_mb'), ('node', 'reserved_gpus'), ('node', 'live_attempts'),
               ('worker', 'runtime_state'), ('worker', 'scheduling_status'), ('worker', 'slots'),
               ('worker', 'live_attempts'), ('worker', 'generation'),
               ('execution', 'status'), ('request', 'state'), ('attempt', 'status')) AS v(tbl, col);

-- ---------------------------------------------------------------------------------
-- Keys
-- ---------------------------------------------------------------------------------
SELECT col_is_pk('sched'::name, tbl::name, col::name, format('sched.%s has primary key %s', tbl, col))
  FROM (VALUES ('node', 'node_id'), ('worker', 'worker_id'), ('execution', 'execution_id'),
               ('request', 'request_id'), ('attempt', 'attempt_id'), ('command', 'command_id'),
               ('tenant', 'tenant')) AS v(tbl, col);
SELECT has_pk('sched', 'timeline', 'sched.timeline has a primary key');

-- one request and at most one attempt per (step, attempt number): the exactly-once key
SELECT col_is_unique('sched', 'request', ARRAY['step_id', 'attempt_number']::name[],
                     'sched.request is UNIQUE (step_id, attempt_number)');
SELECT col_is_unique('sched', 'attempt', ARRAY['step_id', 'attempt_number']::name[],
                     'sched.attempt is UNIQUE (step_id, attempt_number)');
-- one worker per (node, capability) (SPEC 2)
SELECT col_is_unique('sched', 'worker', ARRAY['node_id', 'capability']::name[],
                     'sched.worker is UNIQUE (node_id, capability)');
-- a milestone is recorded once per execution (SPEC 6: the timeline insert is idempotent)
SELECT col_is_unique('sched', 'timeline', ARRAY['execution_id', 'milestone_key']::name[],
                     'sched.timeline is UNIQUE (execution_id, milestone_key)');

-- (No foreign keys are required: the implementation may leave them out for speed.  That
-- attempts, commands and requests reference existing rows is checked on real data by
-- test/pgbench/invariants.sql.)

-- ---------------------------------------------------------------------------------
-- Composite result types: name, then the exact column list in order
-- ---------------------------------------------------------------------------------
SELECT has_composite('sched'::name, t::name, format('composite type sched.%s exists', t))
  FROM unnest(ARRAY['candidate', 'ranked_candidate', 'qualification', 'dispatch_result',
                    'registration', 'claim']) AS t;

CREATE FUNCTION pg_temp.type_columns(t regtype)
RETURNS TABLE (name text, type text)
LANGUAGE sql STABLE AS $$
    SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
      FROM pg_type ty JOIN pg_attribute a ON a.attrelid = ty.typrelid
     WHERE ty.oid = t AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY a.attnum
$$;

SELECT results_eq($$ SELECT * FROM pg_temp.type_columns('sched.candidate') $$,
    $$ VALUES ('node_id', 'text'), ('worker_id', 'uuid'), ('score', 'bigint') $$,
    'sched.candidate is (node_id text, worker_id uuid, score bigint)');

SELECT results_eq($$ SELECT * FROM pg_temp.type_columns('sched.ranked_candidate') $$,
    $$ VALUES ('rank', 'integer'), ('node_id', 'text'), ('worker_id', 'uuid'), ('score', 'bigint'),
              ('preferred_matches', 'integer'), ('weight', 'integer'), ('running_attempts', 'integer'),
              ('spread_matches', 'integer') $$,
    'sched.ranked_candidate is (rank, node_id, worker_id, score, preferred_matches, weight, running_attempts, spread_matches)');

SELECT results_eq($$ SELECT * FROM pg_temp.type_columns('sched.qualification') $$,
    $$ VALUES ('node_id', 'text'), ('worker_id', 'uuid'), ('eligible', 'boolean'),
              ('reasons', 'text[]'), ('score', 'bigint') $$,
    'sched.qualification is (node_id, worker_id, eligible, reasons text[], score)');

SELECT results_eq($$ SELECT * FROM pg_temp.type_columns('sched.dispatch_result') $$,
    $$ VALUES ('outcome', 'text'), ('request_id', 'bigint'), ('attempt_id', 'uuid'), ('node_id', 'text'),
              ('worker_id', 'uuid'), ('lease_version', 'bigint'), ('score', 'bigint'), ('detail', 'text') $$,
    'sched.dispatch_result is (outcome, request_id, attempt_id, node_id, worker_id, lease_version, score, detail)');

SELECT results_eq($$ SELECT * FROM pg_temp.type_columns('sched.registration') $$,
    $$ VALUES ('worker_id', 'uuid'), ('generation', 'bigint') $$,
    'sched.registration is (worker_id uuid, generation bigint)');

SELECT results_eq($$ SELECT * FROM pg_temp.type_columns('sched.claim') $$,
    $$ VALUES ('request_id', 'bigint'), ('claim_id', 'uuid'), ('claimed_until', 'timestamp with time zone') $$,
    'sched.claim is (request_id bigint, claim_id uuid, claimed_until timestamptz)');

SELECT * FROM finish();
ROLLBACK;
