-- 04_observer.sql — pgTAP: the role sched_observer (issue 4, item 7; issue 11) reads
-- everything and writes nothing; how every function of the schema runs.
--
--   1. Catalog privileges: sched_observer has exactly SELECT on every table and view of
--      schema sched, USAGE (not CREATE) on the schema, and EXECUTE on exactly the
--      read-only functions of README "## Privileges" (the readers and the public helpers
--      they share: setting_seconds, pending_explanations, format_cpus, format_amount,
--      format_duration, step_lock_key, check_time), none of them volatile.  Exactly the write
--      functions (and the internal writer _attempt_live_changed, a trigger) run as
--      the owner (SECURITY DEFINER); every function runs with search_path pinned to
--      pg_catalog, pg_temp.
--   2. Behaviour, as sched_observer (SET ROLE) on a small fleet: every view, table and
--      read function answers; row locks, LOCK TABLE in a blocking mode and CREATE in the
--      schema fail with 42501, and nothing changes.
--
-- The refusal of every other function, of every write and sequence to sched_observer
-- (and the other roles), and what PUBLIC has, are 05_privileges.sql's.
--
-- The role is created by CREATE EXTENSION when missing and, being cluster-wide, outlives
-- the extension (here the creation is rolled back with everything else when the role did
-- not exist before).  Everything happens in one transaction that is rolled back.
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

SELECT plan(98);

-- ---------------------------------------------------------------------------------
-- The function lists (identity arguments as regprocedure prints them)
-- ---------------------------------------------------------------------------------
CREATE TEMP TABLE read_fn (fn text, args text[]);
INSERT INTO read_fn VALUES
  ('explain', '{bigint,"timestamp with time zone"}'),
  ('execution_timeline', '{uuid}'),
  ('qualification_reasons', '{bigint,"timestamp with time zone"}'),
  ('qualification_reasons', '{text,text,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,interval,"timestamp with time zone",text}'),
  ('rank_candidates', '{text,text,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,interval,"timestamp with time zone",text}'),
  ('select_candidate', '{text,text,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,interval,"timestamp with time zone",text}'),
  ('node_overview', '{"timestamp with time zone"}'),
  ('pending', '{"timestamp with time zone"}'),
  ('queue_stats', '{"timestamp with time zone"}'),
  ('attempt_overview', '{"timestamp with time zone"}'),
  ('dispatch_stats', '{}'),
  ('pending_explanations', '{"timestamp with time zone"}'),
  ('pending_explanation', '{text,text,jsonb,integer,bigint,integer,integer,bigint,integer,text,"timestamp with time zone"}'),
  ('limit_explanations', '{"timestamp with time zone"}'),
  ('limit_reason', '{bigint,"timestamp with time zone"}'),
  ('gang_reason', '{uuid,text}'),
  ('step_lock_key', '{uuid,integer}'),
  ('setting_seconds', '{text}'),
  ('format_cpus', '{bigint}'),
  ('format_amount', '{text,text}'),
  ('format_duration', '{interval}'),
  ('check_time', '{"timestamp with time zone",text}'),
  ('labels_match', '{jsonb,jsonb}'),
  ('format_label_expression', '{text,jsonb}');

CREATE TEMP TABLE write_fn (fn text, args text[]);
INSERT INTO write_fn VALUES
  ('upsert_node', '{text,jsonb,integer,bigint,integer,integer,text}'),
  ('register_worker', '{text,text,text[],integer,uuid,"timestamp with time zone"}'),
  ('heartbeat', '{uuid,bigint,"timestamp with time zone",text}'),
  ('drain_node', '{text}'),
  ('cordon_worker', '{uuid}'),
  ('uncordon_worker', '{uuid}'),
  ('set_tenant_weight', '{text,integer}'),
  ('set_tenant_owner', '{text,regrole}'),
  ('submit', '{uuid,uuid,text,text,integer,text,integer,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,integer,"timestamp with time zone",jsonb,text,text,uuid,integer,boolean,boolean}'),
  ('set_concurrency_limit', '{text,integer}'),
  ('set_rate_limit', '{text,integer,interval}'),
  ('set_tenant_quota', '{text,integer,integer,bigint,integer}'),
  ('claim_requests', '{integer,interval,text,text,"timestamp with time zone"}'),
  ('dispatch_attempt', '{bigint,uuid,"timestamp with time zone"}'),
  ('dispatch_next', '{integer,text,text,"timestamp with time zone"}'),
  ('poll_commands', '{uuid,bigint,integer,"timestamp with time zone",boolean}'),
  ('wait_commands', '{uuid,bigint,integer,interval,boolean}'),
  ('start_attempt', '{uuid,bigint,"timestamp with time zone"}'),
  ('renew_lease', '{uuid,bigint,"timestamp with time zone"}'),
  ('finish_attempt', '{uuid,bigint,text,jsonb,"timestamp with time zone"}'),
  ('reap_expired', '{"timestamp with time zone"}'),
  ('cancel_execution', '{uuid,"timestamp with time zone"}'),
  ('complete_execution', '{uuid,"timestamp with time zone"}');

-- ---------------------------------------------------------------------------------
-- 1. Catalog privileges
-- ---------------------------------------------------------------------------------
SELECT has_role('sched_observer');
SELECT isnt_superuser('sched_observer');
SELECT ok(NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'sched_observer'),
          'sched_observer is NOLOGIN (grant it to login roles)');
SELECT schema_privs_are('sched', 'sched_observer', ARRAY['USAGE']);

-- the tables and views operators read: exactly SELECT each
SELECT tables_are('sched', ARRAY['node', 'worker', 'tenant', 'execution', 'request',
                                 'attempt', 'command', 'timeline', 'tenant_live',
                                 'concurrency_limit', 'rate_limit', 'tenant_quota', 'gang']);
SELECT views_are('sched', ARRAY['node_overview', 'pending', 'queue_stats', 'attempt_overview',
                               'dispatch_stats']);
SELECT table_privs_are('sched', t, 'sched_observer', ARRAY['SELECT'])
  FROM unnest(ARRAY['node', 'worker', 'tenant', 'execution', 'request', 'attempt', 'command',
                    'timeline', 'tenant_live', 'concurrency_limit', 'rate_limit', 'tenant_quota', 'gang',
                    'node_overview', 'pending', 'queue_stats', 'attempt_overview', 'dispatch_stats']) t;
-- and whatever relation exists in the schema (a table added later included)
SELECT is_empty($$
    SELECT c.relname FROM pg_class c
     WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
       AND NOT has_table_privilege('sched_observer', c.oid, 'SELECT')
$$, 'sched_observer can SELECT every table and view of schema sched');
SELECT is_empty($$
    SELECT c.relname, p.priv FROM pg_class c,
           unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p(priv)
     WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
       AND has_table_privilege('sched_observer', c.oid, p.priv)
$$, 'sched_observer has no privilege but SELECT on any relation of schema sched');
SELECT is_empty($$
    SELECT c.relname FROM pg_class c
     WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'S'
       AND CASE WHEN c.relkind = 'S'
                THEN has_sequence_privilege('sched_observer', c.oid, 'USAGE, UPDATE') END
$$, 'sched_observer cannot advance any sequence of schema sched');

-- the read functions: EXECUTE
SELECT function_privs_are('sched', fn, args, 'sched_observer', ARRAY['EXECUTE'])
  FROM read_fn ORDER BY fn, cardinality(args);
-- and nothing else: the write functions and the internal helpers (sched._*) are not its
SELECT set_eq($$SELECT p.oid FROM pg_proc p
                 WHERE p.pronamespace = 'sched'::regnamespace
                   AND has_function_privilege('sched_observer', p.oid, 'EXECUTE')$$,
              $$SELECT to_regprocedure(format('sched.%I(%s)', fn, array_to_string(args, ',')))::oid FROM read_fn$$,
              'sched_observer can execute exactly the read-only functions of schema sched');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sched'::regnamespace
       AND has_function_privilege('sched_observer', p.oid, 'EXECUTE')
       AND (p.provolatile = 'v' OR p.prosecdef)
$$, 'the functions sched_observer may execute are neither volatile nor SECURITY DEFINER');
-- as whom each function runs: the writers as the owner (they check their caller
-- themselves), everything else as its caller
SELECT set_eq($$SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'sched'::regnamespace AND p.prosecdef$$,
              $$SELECT to_regprocedure(format('sched.%I(%s)', fn, array_to_string(args, ',')))::oid FROM write_fn
                UNION ALL
                SELECT 'sched._attempt_live_changed()'::regprocedure::oid$$,
              'exactly the write functions and _attempt_live_changed are SECURITY DEFINER');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text, p.proconfig FROM pg_proc p
     WHERE p.pronamespace = 'sched'::regnamespace
       AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp']
       AND p.oid <> 'sched.pending_explanation(text,text,jsonb,int,bigint,int,int,bigint,int,text,timestamptz)'::regprocedure
       AND p.oid <> 'sched.submit(uuid,uuid,text,text,int,text,int,jsonb,jsonb,int,bigint,int,int,bigint,int,text,int,timestamptz,jsonb,text,text,uuid,int,boolean,boolean)'::regprocedure
       AND p.oid <> 'sched._request_shape(text,text,jsonb,int,bigint,int,int,bigint,int,text)'::regprocedure
       AND p.oid <> 'sched._queue_key(int,timestamptz)'::regprocedure
       AND p.oid <> 'sched.pending(timestamptz)'::regprocedure
       AND p.oid <> 'sched._request_held_elsewhere(bigint)'::regprocedure
       AND p.oid <> 'sched._fleet_changed()'::regprocedure
       AND p.oid <> 'sched._request_queued()'::regprocedure
       AND p.oid NOT IN ('sched._node_valid(sched.node)'::regprocedure, 'sched._worker_valid(sched.worker)'::regprocedure,
                         'sched._request_valid(sched.request)'::regprocedure, 'sched._attempt_valid(sched.attempt)'::regprocedure,
                         'sched._command_valid(sched.command)'::regprocedure)
$$, 'every function of schema sched but pending_explanation, submit, _request_shape, _queue_key, pending(at), _request_held_elsewhere, _fleet_changed, _request_queued and the five row checks has proconfig search_path=pg_catalog, pg_temp (and no other setting)');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.oid = 'sched.pending(timestamptz)'::regprocedure
       AND (p.proconfig IS NOT NULL OR p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'sql')
            OR p.prosqlbody IS NULL OR p.prosecdef OR p.provolatile <> 's' OR p.proisstrict)
$$, 'pending(at) is a STABLE SQL function with a body parsed at its creation (no name looked up at a call) and no proconfig, not strict, not SECURITY DEFINER: the planner inlines it');
SELECT is((SELECT proconfig FROM pg_proc
            WHERE oid = 'sched.submit(uuid,uuid,text,text,int,text,int,jsonb,jsonb,int,bigint,int,int,bigint,int,text,int,timestamptz,jsonb,text,text,uuid,int,boolean,boolean)'::regprocedure),
          ARRAY['search_path=pg_catalog, pg_temp', 'enable_seqscan=off'],
          'submit has the pinned search_path, and is planned without sequential scans');
SELECT is((SELECT proconfig FROM pg_proc
            WHERE oid = 'sched.pending_explanation(text,text,jsonb,int,bigint,int,int,bigint,int,text,timestamptz)'::regprocedure),
          NULL, 'pending_explanation, called once per row of sched.pending, has no proconfig: it pins search_path itself where it runs SQL');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.oid IN ('sched._request_shape(text,text,jsonb,int,bigint,int,int,bigint,int,text)'::regprocedure,
                     'sched._queue_key(int,timestamptz)'::regprocedure)
       AND (p.proconfig IS NOT NULL OR p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
            OR p.prosecdef OR p.provolatile = 'v')
$$, '_request_shape and _queue_key, computed for every request row, are C without proconfig (they run no SQL and resolve no name), not SECURITY DEFINER, not volatile');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.oid IN ('sched._request_held_elsewhere(bigint)'::regprocedure,
                     'sched._fleet_changed()'::regprocedure,
                     'sched._request_queued()'::regprocedure)
       AND (p.proconfig IS NOT NULL OR p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
            OR p.prosecdef)
$$, '_request_held_elsewhere (per queue entry a fetch walks) and the row triggers _fleet_changed and _request_queued are C without proconfig (they run no SQL and resolve no name), not SECURITY DEFINER');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.oid IN ('sched._node_valid(sched.node)'::regprocedure, 'sched._worker_valid(sched.worker)'::regprocedure,
                     'sched._request_valid(sched.request)'::regprocedure, 'sched._attempt_valid(sched.attempt)'::regprocedure,
                     'sched._command_valid(sched.command)'::regprocedure)
       AND (p.proconfig IS NOT NULL OR p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
            OR p.prosecdef OR p.provolatile <> 'i' OR NOT p.proisstrict)
$$, 'the five row checks (a CHECK constraint each, 21_row_checks.sql) are C without proconfig (they run no SQL and resolve no name), not SECURITY DEFINER, immutable and strict');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sched'::regnamespace AND p.prosecdef
       AND EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) x
                    WHERE x.grantee = 0)
$$, 'no SECURITY DEFINER function is executable by PUBLIC');
-- every function named above exists (a typo in the lists would make tests vacuous)
SELECT is((SELECT count(*)::int FROM (SELECT fn, args FROM read_fn UNION ALL SELECT fn, args FROM write_fn) l
            WHERE to_regprocedure(format('sched.%I(%s)', fn, array_to_string(args, ','))) IS NOT NULL),
          47, 'the 24 read and 23 write functions listed exist');

-- ---------------------------------------------------------------------------------
-- Fixture (as the extension owner): two nodes, a dispatched request (its execution has
-- a timeline) and a pending one.  Fixed ids and times.
-- ---------------------------------------------------------------------------------
SELECT lives_ok($$
    SELECT sched.upsert_node('obs-a', '{"tier":"fast"}', 4000, 8192, 0, 100);
    SELECT sched.upsert_node('obs-b', '{}', 8000, 16384, 1, 150);
    SELECT sched.register_worker('obs-a', 'render', ARRAY['1.0'], 2,
        'a0000000-0000-0000-0000-0000000000a1', '2024-01-01 11:59:50+00');
    SELECT sched.register_worker('obs-b', 'render', ARRAY['1.0'], 2,
        'b0000000-0000-0000-0000-0000000000b1', '2024-01-01 11:59:50+00');
    SELECT sched.submit('e0000000-0000-0000-0000-0000000000e1', '50000000-0000-0000-0000-000000000051',
        'render', '1.0', preferred_labels => '{"tier":"fast"}', available_at => '2024-01-01 11:59:00+00');
    SELECT sched.submit('e0000000-0000-0000-0000-0000000000e2', '50000000-0000-0000-0000-000000000052',
        'render', '1.0', min_gpus => 4, available_at => '2024-01-01 11:59:00+00');
$$, 'fixture: fleet and requests');
SELECT request_id AS placed FROM sched.request WHERE step_id = '50000000-0000-0000-0000-000000000051' \gset
SELECT request_id AS waiting FROM sched.request WHERE step_id = '50000000-0000-0000-0000-000000000052' \gset
SELECT is((SELECT outcome FROM sched.dispatch_attempt(:placed, at => '2024-01-01 12:00:00+00')),
          'DISPATCHED', 'fixture: one request dispatched');

-- ---------------------------------------------------------------------------------
-- 2. As sched_observer: reads answer
-- ---------------------------------------------------------------------------------
-- a fingerprint of the state, compared at the end
\set fingerprint 'SELECT (SELECT string_agg(format(''%s:%s:%s:%s'', r.request_id, r.state, r.tries, r.available_at), '' '' ORDER BY r.request_id) FROM sched.request r) || '' | '' || (SELECT string_agg(format(''%s:%s:%s:%s'', n.node_id, n.management_status, n.live_attempts, n.weight), '' '' ORDER BY n.node_id) FROM sched.node n) || '' | '' || (SELECT string_agg(format(''%s:%s:%s'', w.worker_id, w.scheduling_status, w.generation), '' '' ORDER BY w.worker_id) FROM sched.worker w) || '' | '' || (SELECT count(*) FROM sched.attempt) || '' '' || (SELECT count(*) FROM sched.command) || '' '' || (SELECT count(*) FROM sched.timeline) || '' '' || (SELECT count(*) FROM sched.tenant) || '' '' || (SELECT string_agg(e.status, '','' ORDER BY e.execution_id) FROM sched.execution e)'
SELECT (:fingerprint) AS fingerprint \gset before_

SET ROLE sched_observer;
SELECT is(current_user::text, 'sched_observer', 'now acting as sched_observer');

SELECT is((SELECT count(*)::int FROM sched.node), 2, 'observer reads sched.node');
SELECT is((SELECT count(*)::int FROM sched.worker), 2, 'observer reads sched.worker');
SELECT is((SELECT count(*)::int FROM sched.tenant), 0, 'observer reads sched.tenant');
SELECT is((SELECT count(*)::int FROM sched.execution), 2, 'observer reads sched.execution');
SELECT is((SELECT count(*)::int FROM sched.request), 2, 'observer reads sched.request');
SELECT is((SELECT count(*)::int FROM sched.attempt), 1, 'observer reads sched.attempt');
SELECT is((SELECT count(*)::int FROM sched.command), 1, 'observer reads sched.command');
SELECT is((SELECT count(*)::int FROM sched.timeline), 3, 'observer reads sched.timeline');
SELECT is((SELECT count(*)::int FROM sched.node_overview), 2, 'observer reads the view node_overview');
SELECT is((SELECT count(*)::int FROM sched.pending), 1, 'observer reads the view pending');
SELECT is((SELECT count(*)::int FROM sched.queue_stats), 1, 'observer reads the view queue_stats');
SELECT is((SELECT count(*)::int FROM sched.attempt_overview), 1, 'observer reads the view attempt_overview');

SELECT is((SELECT count(*)::int FROM sched.node_overview('2024-01-01 12:00:00+00')), 2,
          'observer calls node_overview(at)');
SELECT is((SELECT explanation FROM sched.pending('2024-01-01 12:00:00+00')),
          '0/2 nodes eligible: 2 insufficient_gpus', 'observer calls pending(at)');
SELECT is((SELECT pending || '/' || dispatched_5m FROM sched.queue_stats('2024-01-01 12:00:00+00')),
          '1/1', 'observer calls queue_stats(at)');
SELECT is((SELECT node_id || ' ' || lease_state FROM sched.attempt_overview('2024-01-01 12:00:00+00')),
          'obs-a held', 'observer calls attempt_overview(at)');
SELECT matches(sched.explain(:placed, '2024-01-01 12:00:00+00'),
               '1\. obs-a +1090000 = 1 x 1,000,000 \+ 100 x 1,000 - 1 x 10,000',
               'observer calls explain(request_id, at): ranking');
SELECT matches(sched.explain(:waiting, '2024-01-01 12:00:00+00'),
               'no node has 4 GPUs; the largest has 1',
               'observer calls explain(request_id, at): closest misses');
SELECT is((SELECT count(*)::int FROM sched.execution_timeline('e0000000-0000-0000-0000-0000000000e1')),
          2, 'observer calls execution_timeline');
SELECT is((SELECT array_agg(node_id || ':' || eligible ORDER BY node_id)
             FROM sched.qualification_reasons(:waiting, '2024-01-01 12:00:00+00')),
          ARRAY['obs-a:false', 'obs-b:false'], 'observer calls qualification_reasons(request_id, at)');
SELECT is((SELECT array_agg(node_id ORDER BY node_id)
             FROM sched.qualification_reasons('render', '1.0', at => '2024-01-01 12:00:00+00')
            WHERE eligible),
          ARRAY['obs-a', 'obs-b'], 'observer calls qualification_reasons(<placement>)');
SELECT is((SELECT array_agg(node_id ORDER BY rank)
             FROM sched.rank_candidates('render', '1.0', at => '2024-01-01 12:00:00+00')),
          ARRAY['obs-b', 'obs-a'], 'observer calls rank_candidates');
SELECT is((SELECT node_id FROM sched.select_candidate('render', '1.0',
               preferred_labels => '{"tier":"fast"}', at => '2024-01-01 12:00:00+00')),
          'obs-a', 'observer calls select_candidate');
SELECT is((SELECT count(*)::int FROM sched.pending_explanations('2024-01-01 12:00:00+00')), 1,
          'observer calls pending_explanations(at)');
SELECT ok(sched.setting_seconds('sched.heartbeat_ttl') > 0, 'observer calls setting_seconds');
SELECT is(sched.format_cpus(1500) || ' | ' || sched.format_amount('2', 'GPU') || ' | ' || sched.format_duration('125 s'),
          '1.5 | 2 GPUs | 2 min 5 s', 'observer calls format_cpus, format_amount, format_duration');
SELECT ok(sched.step_lock_key('50000000-0000-0000-0000-000000000051', 1) IS NOT NULL, 'observer calls step_lock_key');

-- ---------------------------------------------------------------------------------
-- 2. As sched_observer: no lock that would block dispatch, no object of its own
--    (every write function, write and sequence is refused in 05_privileges.sql)
-- ---------------------------------------------------------------------------------
-- row locks would block dispatchers: refused
SELECT throws_ok($$SELECT 1 FROM sched.request FOR SHARE$$, '42501',
    'permission denied for table request', 'observer cannot lock requests FOR SHARE');
SELECT throws_ok($$LOCK TABLE sched.worker IN EXCLUSIVE MODE$$, '42501',
    'permission denied for table worker', 'observer cannot LOCK TABLE in a blocking mode');
SELECT throws_ok($$CREATE TABLE sched.observer_scratch (i int)$$, '42501',
    'permission denied for schema sched', 'observer cannot CREATE in schema sched');
SELECT throws_ok($$CREATE FUNCTION sched.observer_fn() RETURNS int LANGUAGE sql AS 'SELECT 1'$$, '42501',
    'permission denied for schema sched', 'observer cannot CREATE FUNCTION in schema sched');

RESET ROLE;
-- nothing changed
SELECT is((:fingerprint), :'before_fingerprint' ,
          'fleet, queue, attempts, commands and timeline are as the fixture left them');

SELECT * FROM finish();
ROLLBACK;
