-- 04_observer.sql — pgTAP: the role sched_observer (issue 4, item 7) reads everything
-- and writes nothing, and PUBLIC gets nothing.
--
--   1. Catalog privileges: sched_observer has exactly SELECT on every table and view of
--      schema sched, USAGE (not CREATE) on the schema, EXECUTE on the read-only functions
--      (explain, execution_timeline, qualification_reasons, rank_candidates,
--      select_candidate, and the functions behind the views), and no EXECUTE on any
--      function that writes.  No function of the schema is executable by anything
--      outside the allow-list below, and PUBLIC can execute none of them.
--   2. Behaviour, as sched_observer (SET ROLE) on a small fleet: every view, table and
--      read function answers; every write function, INSERT / UPDATE / DELETE / TRUNCATE,
--      SELECT ... FOR UPDATE, nextval and CREATE in the schema fail with 42501.
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

SELECT plan(171);

-- ---------------------------------------------------------------------------------
-- The function lists (identity arguments as regprocedure prints them)
-- ---------------------------------------------------------------------------------
CREATE TEMP TABLE read_fn (fn text, args text[]);
INSERT INTO read_fn VALUES
  ('explain', '{bigint,"timestamp with time zone"}'),
  ('execution_timeline', '{uuid}'),
  ('qualification_reasons', '{bigint,"timestamp with time zone"}'),
  ('qualification_reasons', '{text,text,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,interval,"timestamp with time zone"}'),
  ('rank_candidates', '{text,text,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,interval,"timestamp with time zone"}'),
  ('select_candidate', '{text,text,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,interval,"timestamp with time zone"}'),
  ('node_overview', '{"timestamp with time zone"}'),
  ('pending', '{"timestamp with time zone"}'),
  ('queue_stats', '{"timestamp with time zone"}'),
  ('attempt_overview', '{"timestamp with time zone"}');

CREATE TEMP TABLE write_fn (fn text, args text[]);
INSERT INTO write_fn VALUES
  ('upsert_node', '{text,jsonb,integer,bigint,integer,integer,text}'),
  ('register_worker', '{text,text,text[],integer,uuid,"timestamp with time zone"}'),
  ('heartbeat', '{uuid,bigint,"timestamp with time zone",text}'),
  ('drain_node', '{text}'),
  ('cordon_worker', '{uuid}'),
  ('uncordon_worker', '{uuid}'),
  ('set_tenant_weight', '{text,integer}'),
  ('submit', '{uuid,uuid,text,text,integer,text,integer,jsonb,jsonb,integer,bigint,integer,integer,bigint,integer,text,integer,"timestamp with time zone",jsonb}'),
  ('claim_requests', '{integer,interval,text,text,"timestamp with time zone"}'),
  ('dispatch_attempt', '{bigint,uuid,"timestamp with time zone"}'),
  ('dispatch_next', '{integer,text,text,"timestamp with time zone"}'),
  ('poll_commands', '{uuid,bigint,integer,"timestamp with time zone"}'),
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
SELECT schema_privs_are('sched', 'public', ARRAY[]::name[]);

-- the tables and views operators read: exactly SELECT each
SELECT tables_are('sched', ARRAY['node', 'worker', 'tenant', 'execution', 'request',
                                 'attempt', 'command', 'timeline', 'tenant_live']);
SELECT views_are('sched', ARRAY['node_overview', 'pending', 'queue_stats', 'attempt_overview']);
SELECT table_privs_are('sched', t, 'sched_observer', ARRAY['SELECT'])
  FROM unnest(ARRAY['node', 'worker', 'tenant', 'execution', 'request', 'attempt', 'command',
                    'timeline', 'tenant_live', 'node_overview', 'pending', 'queue_stats',
                    'attempt_overview']) t;
SELECT table_privs_are('sched', t, 'public', ARRAY[]::name[])
  FROM unnest(ARRAY['node', 'worker', 'tenant', 'execution', 'request', 'attempt', 'command',
                    'timeline', 'node_overview', 'pending', 'queue_stats', 'attempt_overview']) t;
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
-- the write functions: nothing, for sched_observer and for PUBLIC
SELECT function_privs_are('sched', fn, args, 'sched_observer', ARRAY[]::name[])
  FROM write_fn ORDER BY fn;
SELECT function_privs_are('sched', fn, args, 'public', ARRAY[]::name[])
  FROM write_fn ORDER BY fn;

-- nothing outside the allow-list: the read functions and the internal read-only
-- helpers they call (formatting, settings, input checks that only raise), and the
-- counters of the session's own fleet mirror
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sched'::regnamespace
       AND has_function_privilege('sched_observer', p.oid, 'EXECUTE')
       AND p.proname NOT IN (SELECT fn FROM read_fn)
       AND p.proname NOT IN ('_pending_explanations', '_setting_seconds', '_cpus', '_amount', '_duration',
                             '_require', '_unknown', 'step_lock_key', '_fleet_mirror_stats')
$$, 'sched_observer can execute no function of schema sched outside the read-only allow-list');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sched'::regnamespace
       AND p.proname IN ('_pending_explanations', '_setting_seconds', '_cpus', '_amount', '_duration',
                         '_require', '_unknown', 'step_lock_key', '_fleet_mirror_stats')
       AND p.provolatile = 'v' AND p.proname NOT IN ('_unknown', '_fleet_mirror_stats')
$$, 'the helpers granted to sched_observer are not volatile (except _unknown, which only raises, and _fleet_mirror_stats, which reads the session''s counters)');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sched'::regnamespace AND p.prosecdef
$$, 'no function of schema sched is SECURITY DEFINER');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'sched'::regnamespace
       AND has_function_privilege('public', p.oid, 'EXECUTE')
$$, 'PUBLIC can execute no function of schema sched');
-- every function named above exists (a typo in the lists would make tests vacuous)
SELECT is((SELECT count(*)::int FROM (SELECT fn, args FROM read_fn UNION ALL SELECT fn, args FROM write_fn) l
            WHERE to_regprocedure(format('sched.%I(%s)', fn, array_to_string(args, ','))) IS NOT NULL),
          28, 'the 10 read and 18 write functions listed exist');

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

-- ---------------------------------------------------------------------------------
-- 2. As sched_observer: every write is refused (42501 insufficient_privilege)
-- ---------------------------------------------------------------------------------
SELECT throws_ok($$SELECT sched.upsert_node('obs-x')$$, '42501',
    'permission denied for function upsert_node', 'observer cannot upsert_node');
SELECT throws_ok($$SELECT sched.register_worker('obs-a', 'x', ARRAY['1'], 1)$$, '42501',
    'permission denied for function register_worker', 'observer cannot register_worker');
SELECT throws_ok($$SELECT sched.heartbeat('a0000000-0000-0000-0000-0000000000a1', 1)$$, '42501',
    'permission denied for function heartbeat', 'observer cannot heartbeat');
SELECT throws_ok($$SELECT sched.drain_node('obs-a')$$, '42501',
    'permission denied for function drain_node', 'observer cannot drain_node');
SELECT throws_ok($$SELECT sched.cordon_worker('a0000000-0000-0000-0000-0000000000a1')$$, '42501',
    'permission denied for function cordon_worker', 'observer cannot cordon_worker');
SELECT throws_ok($$SELECT sched.uncordon_worker('a0000000-0000-0000-0000-0000000000a1')$$, '42501',
    'permission denied for function uncordon_worker', 'observer cannot uncordon_worker');
SELECT throws_ok($$SELECT sched.set_tenant_weight('t', 2)$$, '42501',
    'permission denied for function set_tenant_weight', 'observer cannot set_tenant_weight');
SELECT throws_ok($$SELECT sched.submit('e0000000-0000-0000-0000-0000000000e3',
    '50000000-0000-0000-0000-000000000053', 'render', '1.0')$$, '42501',
    'permission denied for function submit', 'observer cannot submit');
SELECT throws_ok($$SELECT * FROM sched.claim_requests()$$, '42501',
    'permission denied for function claim_requests', 'observer cannot claim_requests');
SELECT throws_ok(format('SELECT * FROM sched.dispatch_attempt(%s)', :waiting), '42501',
    'permission denied for function dispatch_attempt', 'observer cannot dispatch_attempt');
SELECT throws_ok($$SELECT * FROM sched.dispatch_next()$$, '42501',
    'permission denied for function dispatch_next', 'observer cannot dispatch_next');
SELECT throws_ok($$SELECT * FROM sched.poll_commands('a0000000-0000-0000-0000-0000000000a1', 1)$$, '42501',
    'permission denied for function poll_commands', 'observer cannot poll_commands');
SELECT throws_ok($$SELECT sched.start_attempt(gen_random_uuid(), 1)$$, '42501',
    'permission denied for function start_attempt', 'observer cannot start_attempt');
SELECT throws_ok($$SELECT sched.renew_lease(gen_random_uuid(), 1)$$, '42501',
    'permission denied for function renew_lease', 'observer cannot renew_lease');
SELECT throws_ok($$SELECT sched.finish_attempt(gen_random_uuid(), 1, 'SUCCEEDED')$$, '42501',
    'permission denied for function finish_attempt', 'observer cannot finish_attempt');
SELECT throws_ok($$SELECT sched.reap_expired()$$, '42501',
    'permission denied for function reap_expired', 'observer cannot reap_expired');
SELECT throws_ok($$SELECT sched.cancel_execution('e0000000-0000-0000-0000-0000000000e1')$$, '42501',
    'permission denied for function cancel_execution', 'observer cannot cancel_execution');
SELECT throws_ok($$SELECT sched.complete_execution('e0000000-0000-0000-0000-0000000000e1')$$, '42501',
    'permission denied for function complete_execution', 'observer cannot complete_execution');
-- the internal writers too
SELECT throws_ok($$SELECT sched._milestone('e0000000-0000-0000-0000-0000000000e1', 'k', 's', NULL,
    NULL, NULL, 'x', 'c', 't', NULL, now())$$, '42501',
    'permission denied for function _milestone', 'observer cannot _milestone');
-- the lifecycle's helpers (ending an attempt, closing an execution) are C, callable by
-- nobody: none of them is a SQL function
SELECT is((SELECT count(*)::int FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'sched'
              AND p.proname IN ('_end_attempt', '_close_execution', '_live_attempt',
                                '_extend_lease', '_lock_execution_for')),
          0, 'the lifecycle helpers are not SQL functions');

-- direct DML on every table
SELECT throws_ok(format('INSERT INTO sched.%I DEFAULT VALUES', t), '42501',
                 format('permission denied for table %s', t), format('observer cannot INSERT INTO sched.%s', t))
  FROM unnest(ARRAY['node', 'worker', 'tenant', 'execution', 'request', 'attempt', 'command', 'timeline']) t;
SELECT throws_ok(format('UPDATE sched.%I SET %I = %I', t, c, c), '42501',
                 format('permission denied for table %s', t), format('observer cannot UPDATE sched.%s', t))
  FROM (VALUES ('node', 'weight'), ('worker', 'slots'), ('tenant', 'weight'), ('execution', 'status'),
               ('request', 'state'), ('attempt', 'status'), ('command', 'delivered_at'),
               ('timeline', 'title')) v(t, c);
SELECT throws_ok(format('DELETE FROM sched.%I', t), '42501',
                 format('permission denied for table %s', t), format('observer cannot DELETE FROM sched.%s', t))
  FROM unnest(ARRAY['node', 'worker', 'tenant', 'execution', 'request', 'attempt', 'command', 'timeline']) t;
SELECT throws_ok(format('TRUNCATE sched.%I CASCADE', t), '42501',
                 format('permission denied for table %s', t), format('observer cannot TRUNCATE sched.%s', t))
  FROM unnest(ARRAY['node', 'worker', 'tenant', 'execution', 'request', 'attempt', 'command', 'timeline']) t;
-- row locks would block dispatchers: refused
SELECT throws_ok($$SELECT 1 FROM sched.node FOR UPDATE$$, '42501',
    'permission denied for table node', 'observer cannot lock nodes FOR UPDATE');
SELECT throws_ok($$SELECT 1 FROM sched.request FOR SHARE$$, '42501',
    'permission denied for table request', 'observer cannot lock requests FOR SHARE');
SELECT throws_ok($$LOCK TABLE sched.worker IN EXCLUSIVE MODE$$, '42501',
    'permission denied for table worker', 'observer cannot LOCK TABLE in a blocking mode');
SELECT throws_ok($$SELECT nextval('sched.request_id_seq')$$, '42501',
    'permission denied for sequence request_id_seq', 'observer cannot advance request_id_seq');
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
