-- 02_functions.sql — pgTAP: the SQL interface of pg_sched (SPEC.md section 5) and its
-- settings (issue 2: sched.heartbeat_ttl 60 s, sched.lease_ttl 5 min, defined from C).
--
-- For every public function: it exists with exactly these argument types (has_function),
-- it returns the stated type (function_returns), and its parameters carry the SPEC names
-- in the SPEC order, with the SPEC defaults where SPEC states them (named notation,
-- `name => value`, is part of the contract).  A few calls in named notation prove the
-- names resolve.  (Operator helpers beyond SPEC, such as sched.explain, are not listed.)
-- Everything happens in one transaction that is rolled back.
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

SELECT plan(106);

-- The signature table: name, argument types, result, and the full argument list as
-- pg_get_function_arguments() prints it (names, types, defaults), or NULL where SPEC
-- leaves the defaults open (then only names and types are compared, see below).
CREATE TEMP TABLE sig (
    fn       name,
    argtypes name[],
    returns  text,
    identity text,          -- pg_get_function_identity_arguments(): names and types
    full_args text          -- pg_get_function_arguments(): with defaults (NULL: not checked)
);

-- the placement parameters of SPEC section 3, with the defaults of section 5
\set placement_types '''{text,text,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,interval,"timestamp with time zone",text}'''
\set placement_identity '''capability text, capability_version text, required_labels jsonb, preferred_labels jsonb, min_cpu_millis integer, min_memory_mb bigint, min_gpus integer, reserve_cpu_millis integer, reserve_memory_mb bigint, reserve_gpus integer, node_id text, heartbeat_ttl interval, at timestamp with time zone, spread_key text'''
\set placement_full '''capability text, capability_version text, required_labels jsonb DEFAULT ''''{}''''::jsonb, preferred_labels jsonb DEFAULT ''''{}''''::jsonb, min_cpu_millis integer DEFAULT 0, min_memory_mb bigint DEFAULT 0, min_gpus integer DEFAULT 0, reserve_cpu_millis integer DEFAULT 0, reserve_memory_mb bigint DEFAULT 0, reserve_gpus integer DEFAULT 0, node_id text DEFAULT NULL::text, heartbeat_ttl interval DEFAULT NULL::interval, at timestamp with time zone DEFAULT now(), spread_key text DEFAULT NULL::text'''

INSERT INTO sig VALUES
  -- stages 2 and 3 (SPEC 5)
  ('select_candidate', :placement_types, 'setof sched.candidate', :placement_identity, :placement_full),
  ('rank_candidates', :placement_types, 'setof sched.ranked_candidate', :placement_identity, :placement_full),
  ('qualification_reasons', :placement_types, 'setof sched.qualification', :placement_identity, :placement_full),
  ('qualification_reasons', '{bigint,"timestamp with time zone"}', 'setof sched.qualification',
   'request_id bigint, at timestamp with time zone',
   'request_id bigint, at timestamp with time zone DEFAULT now()'),
  -- stage 4 and the queue
  ('dispatch_attempt', '{bigint,uuid,"timestamp with time zone"}', 'sched.dispatch_result',
   'request_id bigint, claim_id uuid, at timestamp with time zone',
   'request_id bigint, claim_id uuid DEFAULT NULL::uuid, at timestamp with time zone DEFAULT now()'),
  ('claim_requests', '{integer,interval,text,text,"timestamp with time zone"}', 'setof sched.claim',
   'max_requests integer, claim_ttl interval, capability text, tenant text, at timestamp with time zone',
   'max_requests integer DEFAULT 1, claim_ttl interval DEFAULT ''00:00:30''::interval, capability text DEFAULT NULL::text, tenant text DEFAULT NULL::text, at timestamp with time zone DEFAULT now()'),
  ('submit', '{uuid,uuid,text,text,integer,text,integer,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,integer,"timestamp with time zone",jsonb,text,text,uuid,integer,boolean,boolean}', 'bigint',
   'execution_id uuid, step_id uuid, capability text, capability_version text, attempt_number integer, tenant text, priority integer, required_labels jsonb, preferred_labels jsonb, min_cpu_millis integer, min_memory_mb bigint, min_gpus integer, reserve_cpu_millis integer, reserve_memory_mb bigint, reserve_gpus integer, node_id text, max_attempts integer, available_at timestamp with time zone, payload jsonb, concurrency_key text, spread_key text, gang_id uuid, gang_size integer, distinct_nodes boolean, preemptible boolean',
   'execution_id uuid, step_id uuid, capability text, capability_version text, attempt_number integer DEFAULT 1, tenant text DEFAULT ''default''::text, priority integer DEFAULT 0, required_labels jsonb DEFAULT ''{}''::jsonb, preferred_labels jsonb DEFAULT ''{}''::jsonb, min_cpu_millis integer DEFAULT 0, min_memory_mb bigint DEFAULT 0, min_gpus integer DEFAULT 0, reserve_cpu_millis integer DEFAULT 0, reserve_memory_mb bigint DEFAULT 0, reserve_gpus integer DEFAULT 0, node_id text DEFAULT NULL::text, max_attempts integer DEFAULT 3, available_at timestamp with time zone DEFAULT now(), payload jsonb DEFAULT NULL::jsonb, concurrency_key text DEFAULT NULL::text, spread_key text DEFAULT NULL::text, gang_id uuid DEFAULT NULL::uuid, gang_size integer DEFAULT NULL::integer, distinct_nodes boolean DEFAULT false, preemptible boolean DEFAULT false'),
  ('cancel_execution', '{uuid,"timestamp with time zone"}', 'text',
   'execution_id uuid, at timestamp with time zone',
   'execution_id uuid, at timestamp with time zone DEFAULT now()'),
  ('complete_execution', '{uuid,"timestamp with time zone"}', 'text',
   'execution_id uuid, at timestamp with time zone',
   'execution_id uuid, at timestamp with time zone DEFAULT now()'),
  -- fleet
  ('upsert_node', '{text,jsonb,integer,bigint,integer,integer,text}', 'sched.node',
   'node_id text, labels jsonb, cpu_millis integer, memory_mb bigint, gpus integer, weight integer, management_status text',
   NULL),
  ('register_worker', '{text,text,text[],integer,uuid,"timestamp with time zone"}', 'sched.registration',
   'node_id text, capability text, capability_versions text[], slots integer, worker_id uuid, at timestamp with time zone',
   'node_id text, capability text, capability_versions text[], slots integer, worker_id uuid DEFAULT NULL::uuid, at timestamp with time zone DEFAULT now()'),
  ('heartbeat', '{uuid,bigint,"timestamp with time zone",text}', 'sched.worker',
   'worker_id uuid, generation bigint, at timestamp with time zone, runtime_state text',
   'worker_id uuid, generation bigint, at timestamp with time zone DEFAULT now(), runtime_state text DEFAULT ''READY''::text'),
  ('drain_node', '{text}', 'sched.node', 'node_id text', NULL),
  ('cordon_worker', '{uuid}', 'sched.worker', 'worker_id uuid', NULL),
  ('uncordon_worker', '{uuid}', 'sched.worker', 'worker_id uuid', NULL),
  -- tenants
  ('set_tenant_weight', '{text,integer}', 'sched.tenant', 'tenant text, weight integer', NULL),
  -- the queue-order dispatcher: the same rows as dispatch_attempt
  ('dispatch_next', '{integer,text,text,"timestamp with time zone"}', 'setof sched.dispatch_result',
   'max_dispatches integer, capability text, tenant text, at timestamp with time zone',
   'max_dispatches integer DEFAULT 1, capability text DEFAULT NULL::text, tenant text DEFAULT NULL::text, at timestamp with time zone DEFAULT now()'),
  -- worker side (the result columns of poll_commands are checked below)
  ('poll_commands', '{uuid,bigint,integer,"timestamp with time zone",boolean}', 'setof record',
   'worker_id uuid, generation bigint, max integer, at timestamp with time zone, start boolean',
   'worker_id uuid, generation bigint, max integer DEFAULT 10, at timestamp with time zone DEFAULT now(), start boolean DEFAULT false'),
  ('wait_commands', '{uuid,bigint,integer,interval,boolean}', 'setof record',
   'worker_id uuid, generation bigint, max integer, timeout interval, start boolean',
   'worker_id uuid, generation bigint, max integer DEFAULT 10, timeout interval DEFAULT ''00:00:30''::interval, start boolean DEFAULT false'),
  ('start_attempt', '{uuid,bigint,"timestamp with time zone"}', 'timestamp with time zone',
   'attempt_id uuid, lease_version bigint, at timestamp with time zone',
   'attempt_id uuid, lease_version bigint, at timestamp with time zone DEFAULT now()'),
  ('renew_lease', '{uuid,bigint,"timestamp with time zone"}', 'timestamp with time zone',
   'attempt_id uuid, lease_version bigint, at timestamp with time zone',
   'attempt_id uuid, lease_version bigint, at timestamp with time zone DEFAULT now()'),
  ('finish_attempt', '{uuid,bigint,text,jsonb,"timestamp with time zone"}', 'text',
   'attempt_id uuid, lease_version bigint, outcome text, detail jsonb, at timestamp with time zone',
   'attempt_id uuid, lease_version bigint, outcome text, detail jsonb DEFAULT NULL::jsonb, at timestamp with time zone DEFAULT now()'),
  -- recovery: the number of attempts marked LOST
  ('reap_expired', '{"timestamp with time zone"}', 'integer',
   'at timestamp with time zone', 'at timestamp with time zone DEFAULT now()');

-- ---------------------------------------------------------------------------------
-- Every function of SPEC section 5: exists with these argument types, returns this type
-- (23 signatures x 2 tests)
-- ---------------------------------------------------------------------------------
SELECT has_function('sched'::name, fn, argtypes,
                    format('sched.%s(%s) exists', fn, array_to_string(argtypes, ', ')))
  FROM sig ORDER BY fn, cardinality(argtypes);
SELECT function_returns('sched'::name, fn, argtypes, returns,
                        format('sched.%s(%s) returns %s', fn, array_to_string(argtypes, ', '), returns))
  FROM sig ORDER BY fn, cardinality(argtypes);

-- ---------------------------------------------------------------------------------
-- Parameter names (named notation) and defaults (23 identity + 18 with defaults)
-- ---------------------------------------------------------------------------------
CREATE FUNCTION pg_temp.proc_of(fn name, argtypes name[])
RETURNS regprocedure LANGUAGE sql STABLE AS $$
    SELECT to_regprocedure(format('sched.%I(%s)', fn, array_to_string(argtypes, ',')))
$$;

SELECT is(pg_get_function_identity_arguments(pg_temp.proc_of(fn, argtypes)), identity,
          format('sched.%s(%s): parameter names and types', fn, array_to_string(argtypes, ', ')))
  FROM sig ORDER BY fn, cardinality(argtypes);
SELECT is(pg_get_function_arguments(pg_temp.proc_of(fn, argtypes)), full_args,
          format('sched.%s(%s): defaults as SPEC section 5 states', fn, array_to_string(argtypes, ', ')))
  FROM sig WHERE full_args IS NOT NULL ORDER BY fn, cardinality(argtypes);

-- poll_commands returns the rows the contract names, in that order: everything a
-- worker needs, so that it never reads pg_sched's tables
SELECT is(pg_get_function_result(p::regprocedure),
          'TABLE(command_id bigint, kind text, attempt_id uuid, lease_version bigint, request_id bigint, execution_id uuid, step_id uuid, attempt_number integer, capability text, capability_version text, payload jsonb, lease_expires_at timestamp with time zone)',
          format('%s returns the command, its attempt, the execution, step, attempt number, capability, version, payload and the lease of an attempt it started', p))
  FROM unnest(ARRAY['sched.poll_commands(uuid, bigint, integer, timestamptz, boolean)',
                    'sched.wait_commands(uuid, bigint, integer, interval, boolean)']) AS p;

-- dispatch writes; placement only reads (stable: one snapshot per statement)
SELECT volatility_is('sched', 'dispatch_attempt', ARRAY['bigint', 'uuid', 'timestamp with time zone'],
                     'volatile', 'dispatch_attempt is VOLATILE');
SELECT volatility_is('sched', 'claim_requests',
                     ARRAY['integer', 'interval', 'text', 'text', 'timestamp with time zone'],
                     'volatile', 'claim_requests is VOLATILE');
SELECT volatility_is('sched', fn, :placement_types::name[], 'stable', format('%s is STABLE', fn))
  FROM unnest(ARRAY['select_candidate', 'rank_candidates', 'qualification_reasons']::name[]) AS fn;

-- ---------------------------------------------------------------------------------
-- Calls in named notation resolve (empty fleet: nothing eligible, no error)
-- ---------------------------------------------------------------------------------
SELECT is_empty($$ SELECT * FROM sched.select_candidate(capability => 'build', capability_version => '1',
                                                         reserve_gpus => 1, at => '2030-01-01 00:00:00+00') $$,
                'select_candidate in named notation: no fleet, no row');
SELECT is_empty($$ SELECT * FROM sched.rank_candidates(capability_version => '1', capability => 'build',
                                                        heartbeat_ttl => '2 min') $$,
                'rank_candidates in named notation: no fleet, no row');
SELECT is_empty($$ SELECT * FROM sched.qualification_reasons(capability => 'build', capability_version => '1',
                                                              node_id => 'n1') $$,
                'qualification_reasons in named notation: no node, no row');
SELECT lives_ok($$ SELECT sched.upsert_node(node_id => 'n1', cpu_millis => 1000, memory_mb => 1024,
                                            gpus => 0, labels => '{"zone":"a"}') $$,
                'upsert_node in named notation');
SELECT is((SELECT count(*)::int FROM sched.select_candidate(capability => 'build', capability_version => '1')),
          0, 'a node without a worker is not a candidate');

-- ---------------------------------------------------------------------------------
-- Settings: defined from C (typed, with a unit), with the issue's defaults
-- ---------------------------------------------------------------------------------
SELECT results_eq(
    $$ SELECT name::text, vartype, unit, boot_val, reset_val, context
         FROM pg_settings WHERE name IN ('sched.heartbeat_ttl', 'sched.lease_ttl') ORDER BY name $$,
    $$ VALUES ('sched.heartbeat_ttl', 'integer', 's', '60', '60', 'superuser'),
              ('sched.lease_ttl', 'integer', 's', '300', '300', 'superuser') $$,
    'sched.heartbeat_ttl and sched.lease_ttl are integer settings in seconds, defaults 60 and 300');
SELECT is(current_setting('sched.heartbeat_ttl')::interval, interval '60 seconds',
          'sched.heartbeat_ttl defaults to 60 s');
SELECT is(current_setting('sched.lease_ttl')::interval, interval '5 minutes',
          'sched.lease_ttl defaults to 5 min');
-- a non-positive TTL is refused (22023), a positive one with a unit is accepted
SELECT throws_ok($$ SET LOCAL sched.heartbeat_ttl = 0 $$, '22023', NULL,
                 'sched.heartbeat_ttl = 0 is refused with 22023');
SELECT throws_ok($$ SET LOCAL sched.lease_ttl = '-5s' $$, '22023', NULL,
                 'sched.lease_ttl = -5s is refused with 22023');
SELECT lives_ok($$ SET LOCAL sched.heartbeat_ttl = '2min' $$, 'sched.heartbeat_ttl accepts 2min');
SELECT is(current_setting('sched.heartbeat_ttl')::interval, interval '120 seconds',
          'sched.heartbeat_ttl now reads 120 s');
RESET sched.heartbeat_ttl;

SELECT * FROM finish();
ROLLBACK;
