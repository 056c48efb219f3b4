-- 05_privileges.sql — pgTAP: the role model of README "## Privileges" (issue 11).
--
--   1. The function matrix: every function of schema sched × the job roles
--      (sched_observer, sched_scheduler, sched_worker, sched_admin), members of each, and
--      a role with no grant.  The catalog (has_function_privilege) matches the table
--      below, derived from the README; and a call, as a login-less member of exactly one
--      job role (SET ROLE), is refused with 42501 exactly where the table says so and
--      runs where it says it may.  The internal helpers (sched._*) are callable by no
--      role but the owner.
--   2. Relations: no role writes, truncates, row-locks a table or takes a sequence's
--      value (42501); only the readers SELECT; the owner has every privilege; PUBLIC
--      has nothing on any function, table, view or sequence, nor on the schema.
--   3. A worker acts only for itself: the role that registered it, that role's members
--      and sched_admin act for it; another sched_worker gets 42501 naming the worker and
--      nothing changes; a worker without owner (from 0.1.0) is sched_admin's until its
--      next registration, which adopts it.
--   4. Fenced tenants: set_tenant_owner; the owner's members and sched_admin submit,
--      cancel and complete the tenant's work, other schedulers get 42501 and nothing
--      changes; NULL removes the fence.
--   5. Bounds: the bounding settings cannot be SET by a session (42501, also through
--      set_config) unless granted SET ON PARAMETER; sched.notify_workers can.  `at` in
--      the future is 22023 for the worker and dispatch functions, except for sched_admin.
--
-- Roles are created inside the transaction (and vanish with its rollback).  Everything
-- happens in one transaction that is rolled back.  Calls of the matrix are rolled back
-- each (pg_temp.outcome), so they leave the fixture as it was.
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

SELECT plan(1022);

-- ---------------------------------------------------------------------------------
-- Test roles: login-less, each granted one job role (or a role holding one)
-- ---------------------------------------------------------------------------------
CREATE ROLE t_observer NOLOGIN IN ROLE sched_observer;
CREATE ROLE t_scheduler NOLOGIN IN ROLE sched_scheduler;
CREATE ROLE t_worker NOLOGIN IN ROLE sched_worker;
CREATE ROLE t_admin NOLOGIN IN ROLE sched_admin;
CREATE ROLE t_nobody NOLOGIN;
CREATE ROLE w_one NOLOGIN IN ROLE sched_worker;
CREATE ROLE w_one_member NOLOGIN IN ROLE w_one;
CREATE ROLE w_two NOLOGIN IN ROLE sched_worker;
CREATE ROLE app_one NOLOGIN IN ROLE sched_scheduler;
CREATE ROLE app_one_member NOLOGIN IN ROLE app_one;
CREATE ROLE app_two NOLOGIN IN ROLE sched_scheduler;

-- Whose privileges each role has (README: sched_scheduler is a member of sched_observer;
-- sched_admin of sched_scheduler and sched_worker).  t_nobody holds nothing.
CREATE TEMP TABLE holds (role name, job name);
INSERT INTO holds VALUES
  ('sched_observer', 'sched_observer'),
  ('sched_scheduler', 'sched_scheduler'), ('sched_scheduler', 'sched_observer'),
  ('sched_worker', 'sched_worker'),
  ('sched_admin', 'sched_admin'), ('sched_admin', 'sched_scheduler'),
  ('sched_admin', 'sched_worker'), ('sched_admin', 'sched_observer'),
  ('t_observer', 'sched_observer'),
  ('t_scheduler', 'sched_scheduler'), ('t_scheduler', 'sched_observer'),
  ('t_worker', 'sched_worker'),
  ('t_admin', 'sched_admin'), ('t_admin', 'sched_scheduler'),
  ('t_admin', 'sched_worker'), ('t_admin', 'sched_observer');

-- ---------------------------------------------------------------------------------
-- Helpers (pg_temp, SECURITY INVOKER: they run as the role SET ROLE chose)
-- ---------------------------------------------------------------------------------
-- What a call does, undone whatever it did: '00000', or the SQLSTATE and the message.
CREATE FUNCTION pg_temp.outcome(call text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    st text;
    msg text;
BEGIN
    BEGIN
        EXECUTE call;
        RAISE EXCEPTION 'undo' USING ERRCODE = 'ZU000';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
    END;
    RETURN CASE st WHEN 'ZU000' THEN '00000' ELSE st || ' ' || msg END;
END
$f$;

-- The error of a call that fails: SQLSTATE, message, detail (NULL when it does not fail).
CREATE FUNCTION pg_temp.failure(call text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    st text;
    msg text;
    det text;
BEGIN
    EXECUTE call;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RETURN st || ' ' || msg || ' | ' || det;
END
$f$;

-- One test: the call's outcome is `expected`, a SQLSTATE (compared with the outcome's
-- SQLSTATE) or a SQLSTATE and a message (compared with the whole outcome).
CREATE FUNCTION pg_temp.check_call(call text, expected text, description text)
RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    got text := pg_temp.outcome(call);
BEGIN
    IF length(expected) = 5 THEN
        RETURN is(left(got, 5), expected, description)
            || CASE WHEN left(got, 5) = expected THEN ''
                    ELSE E'\n' || diag('    outcome: ' || got || E'\n    call: ' || call) END;
    END IF;
    RETURN is(got, expected, description)
        || CASE WHEN got = expected THEN '' ELSE E'\n' || diag('    call: ' || call) END;
END
$f$;

-- ---------------------------------------------------------------------------------
-- Matrix fixture (a small fleet of its own): node m-a, worker MW registered by t_worker,
-- a dispatched request (attempt MA) and a pending one.
-- ---------------------------------------------------------------------------------
DO $$ BEGIN PERFORM sched.upsert_node('m-a', '{}', 4000, 8192, 0, 100); END $$;
SET ROLE t_worker;
DO $$ BEGIN PERFORM sched.register_worker('m-a', 'm-cap', ARRAY['1.0'], 3,
                                          'c1000000-0000-4000-8000-000000000001'); END $$;
RESET ROLE;
SELECT sched.submit('c1000000-0000-4000-8000-0000000000e1', 'c1000000-0000-4000-8000-000000000051',
                    'm-cap', '1.0') AS mr1,
       sched.submit('c1000000-0000-4000-8000-0000000000e2', 'c1000000-0000-4000-8000-000000000052',
                    'm-cap', '1.0') AS mr2 \gset
SELECT attempt_id AS ma, lease_version AS mlv, outcome AS m_outcome FROM sched.dispatch_attempt(:mr1) \gset
SELECT is(:'m_outcome'::text, 'DISPATCHED', 'matrix fixture: a request dispatched to MW');

-- ---------------------------------------------------------------------------------
-- The function table: every function of schema sched, the job role README grants it to
-- (NULL: the internal helpers, nobody's), a call valid enough to run, and the SQLSTATE
-- that call ends with for a role allowed to make it.
-- ---------------------------------------------------------------------------------
CREATE TEMP TABLE fn (sig regprocedure PRIMARY KEY, job name, call text, state text DEFAULT '00000');
INSERT INTO fn (sig, job, call, state) VALUES
  -- sched_observer: the readers
  ('sched.select_candidate(text,text,jsonb,jsonb,int,bigint,int,int,bigint,int,text,interval,timestamptz,text)',
   'sched_observer', $$SELECT * FROM sched.select_candidate('m-cap', '1.0')$$, '00000'),
  ('sched.rank_candidates(text,text,jsonb,jsonb,int,bigint,int,int,bigint,int,text,interval,timestamptz,text)',
   'sched_observer', $$SELECT * FROM sched.rank_candidates('m-cap', '1.0')$$, '00000'),
  ('sched.qualification_reasons(text,text,jsonb,jsonb,int,bigint,int,int,bigint,int,text,interval,timestamptz,text)',
   'sched_observer', $$SELECT * FROM sched.qualification_reasons('m-cap', '1.0')$$, '00000'),
  ('sched.qualification_reasons(bigint,timestamptz)',
   'sched_observer', format('SELECT * FROM sched.qualification_reasons(%s::bigint, now())', :mr2), '00000'),
  ('sched.explain(bigint,timestamptz)',
   'sched_observer', format('SELECT sched.explain(%s)', :mr2), '00000'),
  ('sched.execution_timeline(uuid)',
   'sched_observer', $$SELECT * FROM sched.execution_timeline('c1000000-0000-4000-8000-0000000000e1')$$, '00000'),
  ('sched.node_overview(timestamptz)', 'sched_observer', $$SELECT * FROM sched.node_overview(now())$$, '00000'),
  ('sched.pending(timestamptz)', 'sched_observer', $$SELECT * FROM sched.pending(now())$$, '00000'),
  ('sched.pending_explanations(timestamptz)', 'sched_observer', $$SELECT * FROM sched.pending_explanations(now())$$, '00000'),
  ('sched.pending_explanation(text,text,jsonb,int,bigint,int,int,bigint,int,text,timestamptz)', 'sched_observer',
   $$SELECT * FROM sched.pending_explanation('m-cap', '1.0', '{}', 0, 0, 0, 0, 0, 0, NULL, now())$$, '00000'),
  ('sched.limit_explanations(timestamptz)', 'sched_observer', $$SELECT * FROM sched.limit_explanations(now())$$, '00000'),
  ('sched.limit_reason(bigint,timestamptz)', 'sched_observer', format('SELECT sched.limit_reason(%s, now())', :mr2), '00000'),
  ('sched.gang_reason(uuid,text)', 'sched_observer', $$SELECT sched.gang_reason('c1000000-0000-4000-8000-0000000000e1', NULL)$$, '00000'),
  ('sched.queue_stats(timestamptz)', 'sched_observer', $$SELECT * FROM sched.queue_stats(now())$$, '00000'),
  ('sched.attempt_overview(timestamptz)', 'sched_observer', $$SELECT * FROM sched.attempt_overview(now())$$, '00000'),
  ('sched.dispatch_stats()', 'sched_observer', $$SELECT * FROM sched.dispatch_stats()$$, '00000'),
  ('sched.step_lock_key(uuid,int)', 'sched_observer',
   $$SELECT sched.step_lock_key('c1000000-0000-4000-8000-000000000051', 1)$$, '00000'),
  ('sched.setting_seconds(text)', 'sched_observer', $$SELECT sched.setting_seconds('sched.lease_ttl')$$, '00000'),
  ('sched.format_cpus(bigint)', 'sched_observer', $$SELECT sched.format_cpus(1500)$$, '00000'),
  ('sched.format_amount(text,text)', 'sched_observer', $$SELECT sched.format_amount('2', 'GPU')$$, '00000'),
  ('sched.labels_match(jsonb,jsonb)', 'sched_observer', $$SELECT sched.labels_match('{"a": "1"}', '{"a": {"gt": 0}}')$$, '00000'),
  ('sched.format_label_expression(text,jsonb)', 'sched_observer', $$SELECT sched.format_label_expression('a', '{"in": ["x"]}')$$, '00000'),
  ('sched.format_duration(interval)', 'sched_observer', $$SELECT sched.format_duration('90 s')$$, '00000'),
  ('sched.check_time(timestamptz,text)', 'sched_observer', $$SELECT sched.check_time(now(), 'at')$$, '00000'),
  -- sched_scheduler: queue, dispatch, close
  ('sched.submit(uuid,uuid,text,text,int,text,int,jsonb,jsonb,int,bigint,int,int,bigint,int,text,int,timestamptz,jsonb,text,text,uuid,int,boolean,boolean)',
   'sched_scheduler', $$SELECT sched.submit('c1000000-0000-4000-8000-0000000000e9', 'c1000000-0000-4000-8000-000000000059', 'm-cap', '1.0')$$, '00000'),
  ('sched.claim_requests(int,interval,text,text,timestamptz)',
   'sched_scheduler', $$SELECT * FROM sched.claim_requests()$$, '00000'),
  ('sched.dispatch_attempt(bigint,uuid,timestamptz)',
   'sched_scheduler', format('SELECT * FROM sched.dispatch_attempt(%s)', :mr2), '00000'),
  ('sched.dispatch_next(int,text,text,timestamptz)',
   'sched_scheduler', $$SELECT * FROM sched.dispatch_next()$$, '00000'),
  ('sched.cancel_execution(uuid,timestamptz)',
   'sched_scheduler', $$SELECT sched.cancel_execution('c1000000-0000-4000-8000-0000000000e1')$$, '00000'),
  -- its attempt is live: refused as 55000, after the privilege checks
  ('sched.complete_execution(uuid,timestamptz)',
   'sched_scheduler', $$SELECT sched.complete_execution('c1000000-0000-4000-8000-0000000000e1')$$, '55000'),
  ('sched.reap_expired(timestamptz)', 'sched_scheduler', $$SELECT sched.reap_expired()$$, '00000'),
  -- sched_worker: the worker protocol, on MW (t_worker's)
  ('sched.register_worker(text,text,text[],int,uuid,timestamptz)',
   'sched_worker', $$SELECT sched.register_worker('m-a', 'm-cap', ARRAY['1.0'], 3)$$, '00000'),
  ('sched.heartbeat(uuid,bigint,timestamptz,text)',
   'sched_worker', $$SELECT sched.heartbeat('c1000000-0000-4000-8000-000000000001', 1)$$, '00000'),
  ('sched.poll_commands(uuid,bigint,int,timestamptz,boolean)',
   'sched_worker', $$SELECT * FROM sched.poll_commands('c1000000-0000-4000-8000-000000000001', 1)$$, '00000'),
  -- run here from a function (EXECUTE), where it refuses to wait, after the privilege check
  ('sched.wait_commands(uuid,bigint,int,interval,boolean)',
   'sched_worker', $$SELECT * FROM sched.wait_commands('c1000000-0000-4000-8000-000000000001', 1, 10, '0')$$, '25000'),
  ('sched.start_attempt(uuid,bigint,timestamptz)',
   'sched_worker', format('SELECT sched.start_attempt(%L, %s)', :'ma', :mlv), '00000'),
  ('sched.renew_lease(uuid,bigint,timestamptz)',
   'sched_worker', format('SELECT sched.renew_lease(%L, %s)', :'ma', :mlv), '00000'),
  ('sched.finish_attempt(uuid,bigint,text,jsonb,timestamptz)',
   'sched_worker', format('SELECT sched.finish_attempt(%L, %s, %L)', :'ma', :mlv, 'SUCCEEDED'), '00000'),
  -- sched_admin: the fleet and the tenants
  ('sched.upsert_node(text,jsonb,int,bigint,int,int,text)',
   'sched_admin', $$SELECT sched.upsert_node('m-new')$$, '00000'),
  ('sched.drain_node(text)', 'sched_admin', $$SELECT sched.drain_node('m-a')$$, '00000'),
  ('sched.cordon_worker(uuid)', 'sched_admin', $$SELECT sched.cordon_worker('c1000000-0000-4000-8000-000000000001')$$, '00000'),
  ('sched.uncordon_worker(uuid)', 'sched_admin', $$SELECT sched.uncordon_worker('c1000000-0000-4000-8000-000000000001')$$, '00000'),
  ('sched.set_tenant_weight(text,int)', 'sched_admin', $$SELECT sched.set_tenant_weight('m-tenant', 2)$$, '00000'),
  ('sched.set_tenant_owner(text,regrole)', 'sched_admin', $$SELECT sched.set_tenant_owner('m-tenant', 't_scheduler')$$, '00000'),
  ('sched.set_concurrency_limit(text,int)', 'sched_admin', $$SELECT sched.set_concurrency_limit('m-key', 2)$$, '00000'),
  ('sched.set_rate_limit(text,int,interval)', 'sched_admin', $$SELECT sched.set_rate_limit('m-key', 10, '1 min')$$, '00000'),
  ('sched.set_tenant_quota(text,int,int,bigint,int)', 'sched_admin', $$SELECT sched.set_tenant_quota('m-tenant', 5, NULL, NULL, 1)$$, '00000'),
  -- internal helpers: nobody but the owner
  ('sched._attempt_live_changed()', NULL, $$SELECT sched._attempt_live_changed()$$, NULL),
  ('sched._caller()', NULL, $$SELECT sched._caller()$$, NULL),
  ('sched._check_at(timestamptz,text)', NULL, $$SELECT sched._check_at(now(), 'at')$$, NULL),
  ('sched._check_labels(jsonb,text)', NULL, $$SELECT sched._check_labels('{}'::jsonb, 'labels')$$, NULL),
  ('sched._check_required_labels(jsonb,text)', NULL, $$SELECT sched._check_required_labels('{}'::jsonb, 'required_labels')$$, NULL),
  ('sched._check_name(text,text)', NULL, $$SELECT sched._check_name('a', 'x')$$, NULL),
  ('sched._check_time(timestamptz,text)', NULL, $$SELECT sched._check_time(now(), 'at')$$, NULL),
  ('sched._check_versions(text[])', NULL, $$SELECT sched._check_versions(ARRAY['v1'])$$, NULL),
  ('sched._check_nonnegative(bigint,text)', NULL, $$SELECT sched._check_nonnegative(1::bigint, 'x')$$, NULL),
  ('sched._check_one_of(text,text,text[])', NULL, $$SELECT sched._check_one_of('a', 'x', ARRAY['a'])$$, NULL),
  ('sched._dispatch_counters()', NULL, $$SELECT * FROM sched._dispatch_counters()$$, NULL),
  ('sched._dispatch_gate()', NULL, $$SELECT * FROM sched._dispatch_gate()$$, NULL),
  ('sched._fleet_changed()', NULL, $$SELECT sched._fleet_changed()$$, NULL),
  ('sched._fleet_mirror_check(text)', NULL, $$SELECT * FROM sched._fleet_mirror_check('m-cap')$$, NULL),
  ('sched._fleet_mirror_stats()', NULL, $$SELECT * FROM sched._fleet_mirror_stats()$$, NULL),
  ('sched._queue_fetch_stats()', NULL, $$SELECT * FROM sched._queue_fetch_stats()$$, NULL),
  ('sched._queue_key(int,timestamptz)', NULL, $$SELECT sched._queue_key(0, now())$$, NULL),
  ('sched._request_shape(text,text,jsonb,int,bigint,int,int,bigint,int,text)', NULL,
   $$SELECT sched._request_shape('c', '1', '{}', 0, 0, 0, 0, 0, 0, NULL)$$, NULL),
  ('sched._request_held_elsewhere(bigint)', NULL, $$SELECT sched._request_held_elsewhere(1)$$, NULL),
  -- the row checks (a non-constant row: a strict call of a NULL constant is folded away
  -- before any privilege is checked)
  ('sched._node_valid(sched.node)', NULL, $$SELECT sched._node_valid(r) FROM (SELECT NULL::sched.node AS r OFFSET 0) s$$, NULL),
  ('sched._worker_valid(sched.worker)', NULL, $$SELECT sched._worker_valid(r) FROM (SELECT NULL::sched.worker AS r OFFSET 0) s$$, NULL),
  ('sched._request_valid(sched.request)', NULL, $$SELECT sched._request_valid(r) FROM (SELECT NULL::sched.request AS r OFFSET 0) s$$, NULL),
  ('sched._attempt_valid(sched.attempt)', NULL, $$SELECT sched._attempt_valid(r) FROM (SELECT NULL::sched.attempt AS r OFFSET 0) s$$, NULL),
  ('sched._command_valid(sched.command)', NULL, $$SELECT sched._command_valid(r) FROM (SELECT NULL::sched.command AS r OFFSET 0) s$$, NULL),
  ('sched._request_queued()', NULL, $$SELECT sched._request_queued()$$, NULL),
  ('sched._require(anyelement,text)', NULL, $$SELECT sched._require(1, 'x')$$, NULL),
  ('sched._require_tenant_access(text,regrole)', NULL, $$SELECT sched._require_tenant_access('t', NULL)$$, NULL),
  ('sched._require_text(text,text)', NULL, $$SELECT sched._require_text('a', 'x')$$, NULL),
  ('sched._require_worker_access(uuid,regrole)', NULL,
   $$SELECT sched._require_worker_access('c1000000-0000-4000-8000-000000000001', 't_worker')$$, NULL),
  ('sched._unknown(text,text)', NULL, $$SELECT sched._unknown('node', 'x')$$, NULL),
  ('sched._wake_worker(uuid)', NULL, $$SELECT sched._wake_worker('c1000000-0000-4000-8000-000000000001')$$, NULL);
GRANT SELECT ON holds, fn TO PUBLIC;

-- the table is the schema: every function, no other; public ones have a job, internal ones none
SELECT set_eq($$SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'sched'::regnamespace$$,
              $$SELECT sig::oid FROM fn$$,
              'the function table lists exactly the functions of schema sched');
SELECT is_empty($$SELECT sig::text FROM fn f JOIN pg_proc p ON p.oid = f.sig
                   WHERE (p.proname LIKE '\_%') <> (f.job IS NULL)$$,
                'a function is internal (sched._*) exactly when no job role is granted it');
SELECT results_eq($$SELECT job::text COLLATE "default", count(*)::int FROM fn WHERE job IS NOT NULL GROUP BY job ORDER BY job$$,
                  $$VALUES ('sched_admin', 9), ('sched_observer', 24), ('sched_scheduler', 7), ('sched_worker', 7)$$,
                  'README: 24 reader, 7 scheduler, 7 worker and 9 admin functions');

-- ---------------------------------------------------------------------------------
-- 1a. The catalog: has_function_privilege, per role, is exactly the table's
-- ---------------------------------------------------------------------------------
SELECT set_eq(format($$SELECT p.oid::regprocedure::text FROM pg_proc p
                        WHERE p.pronamespace = 'sched'::regnamespace
                          AND has_function_privilege(%L, p.oid, 'EXECUTE')$$, r),
              format($$SELECT f.sig::text FROM fn f JOIN holds h ON h.job = f.job WHERE h.role = %L$$, r),
              format('%s can execute exactly the functions of README''s table for its roles', r))
  FROM unnest(ARRAY['sched_observer', 'sched_scheduler', 'sched_worker', 'sched_admin', 't_nobody',
                    't_observer', 't_scheduler', 't_worker', 't_admin']) r;
SELECT is_empty($$SELECT p.oid::regprocedure::text FROM pg_proc p
                   WHERE p.pronamespace = 'sched'::regnamespace AND p.proname LIKE '\_%'
                     AND EXISTS (SELECT 1 FROM aclexplode(p.proacl) x WHERE x.grantee <> p.proowner)$$,
                'no internal function has a grant to anyone but its owner');
-- roles and memberships as README has them
SELECT is_empty($$SELECT r.rolname FROM pg_roles r
                   WHERE r.rolname IN ('sched_observer', 'sched_scheduler', 'sched_worker', 'sched_admin')
                     AND (r.rolcanlogin OR r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolbypassrls)$$,
                'the job roles are NOLOGIN and have no attribute');
SELECT set_eq($$SELECT r.rolname::text COLLATE "default" AS member, m.rolname::text COLLATE "default" AS of_role FROM pg_auth_members a
                  JOIN pg_roles r ON r.oid = a.member JOIN pg_roles m ON m.oid = a.roleid
                 WHERE r.rolname IN ('sched_observer', 'sched_scheduler', 'sched_worker', 'sched_admin')
                   AND m.rolname IN ('sched_observer', 'sched_scheduler', 'sched_worker', 'sched_admin')$$,
              $$VALUES ('sched_scheduler', 'sched_observer'), ('sched_admin', 'sched_scheduler'),
                       ('sched_admin', 'sched_worker')$$,
              'memberships: sched_scheduler in sched_observer; sched_admin in sched_scheduler and sched_worker');
SELECT results_eq($$SELECT r, has_schema_privilege(r, 'sched', 'USAGE'), has_schema_privilege(r, 'sched', 'CREATE')
                      FROM unnest(ARRAY['sched_observer', 'sched_scheduler', 'sched_worker', 'sched_admin', 't_nobody']) r$$,
                  $$VALUES ('sched_observer', true, false), ('sched_scheduler', true, false),
                           ('sched_worker', true, false), ('sched_admin', true, false), ('t_nobody', false, false)$$,
                  'schema sched: USAGE (not CREATE) for the job roles, nothing for others');

-- ---------------------------------------------------------------------------------
-- 1b. Behaviour: each function called by a member of one job role (and by t_nobody)
-- ---------------------------------------------------------------------------------
\set matrix 'SELECT pg_temp.check_call(f.call, CASE WHEN current_user = ''t_nobody'' THEN ''42501 permission denied for schema sched'' WHEN f.job IN (SELECT h.job FROM holds h WHERE h.role = current_user) THEN f.state ELSE ''42501 permission denied for function '' || p.proname END, format(''%s %s %s'', current_user, CASE WHEN f.job IN (SELECT h.job FROM holds h WHERE h.role = current_user) THEN ''may call'' ELSE ''may not call'' END, f.sig)) FROM fn f JOIN pg_proc p ON p.oid = f.sig ORDER BY f.job NULLS LAST, f.sig::text'
SET ROLE t_observer;
:matrix;
SET ROLE t_scheduler;
:matrix;
SET ROLE t_worker;
:matrix;
SET ROLE t_admin;
:matrix;
SET ROLE t_nobody;
:matrix;
RESET ROLE;

-- ---------------------------------------------------------------------------------
-- 2. Relations
-- ---------------------------------------------------------------------------------
CREATE TEMP TABLE rel_write (sql text, rel name);
INSERT INTO rel_write
SELECT format(s.tpl, c.relname, a.attname), c.relname
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = 1
 CROSS JOIN (VALUES (1, 'INSERT INTO sched.%I DEFAULT VALUES'),
                    (2, 'UPDATE sched.%1$I SET %2$I = %2$I'),
                    (3, 'DELETE FROM sched.%I'),
                    (4, 'TRUNCATE sched.%I CASCADE'),
                    (5, 'SELECT 1 FROM sched.%I FOR UPDATE'),
                    (6, 'SELECT 1 FROM sched.%I FOR KEY SHARE'),
                    (7, 'LOCK TABLE sched.%I IN SHARE MODE')) s(n, tpl)
 WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'r'
UNION ALL
SELECT format(s.tpl, c.relname), c.relname
  FROM pg_class c
 CROSS JOIN (VALUES ('SELECT nextval(''sched.%I'')'), ('SELECT setval(''sched.%I'', 1)')) s(tpl)
 WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'S';
GRANT SELECT ON rel_write TO PUBLIC;
SELECT is((SELECT count(*)::int FROM rel_write), 97,
          '13 tables x 7 writes or locks, and 3 sequences x 2 calls, to refuse');

\set refuse_writes 'SELECT throws_ok(w.sql, ''42501'', CASE WHEN current_user = ''t_nobody'' THEN ''permission denied for schema sched'' WHEN w.sql LIKE ''%val(%'' THEN ''permission denied for sequence '' || w.rel ELSE ''permission denied for table '' || w.rel END, format(''%s cannot %s'', current_user, w.sql)) FROM rel_write w ORDER BY w.sql'
SET ROLE t_observer;
:refuse_writes;
SET ROLE t_scheduler;
:refuse_writes;
SET ROLE t_worker;
:refuse_writes;
SET ROLE t_admin;
:refuse_writes;
SET ROLE t_nobody;
:refuse_writes;
RESET ROLE;

-- the catalog agrees: SELECT on every table and view for the readers, nothing else
\set rel_privs 'SELECT c.relname::text, p.priv FROM pg_class c, unnest(ARRAY[''SELECT'', ''INSERT'', ''UPDATE'', ''DELETE'', ''TRUNCATE'', ''REFERENCES'', ''TRIGGER'']) p(priv) WHERE c.relnamespace = ''sched''::regnamespace AND c.relkind IN (''r'', ''p'', ''v'', ''m'', ''f'') AND has_table_privilege(%1$L, c.oid, p.priv) UNION ALL SELECT c.relname::text, p.priv FROM pg_class c, unnest(ARRAY[''USAGE'', ''SELECT'', ''UPDATE'']) p(priv) WHERE c.relnamespace = ''sched''::regnamespace AND c.relkind = ''S'' AND CASE WHEN c.relkind = ''S'' THEN has_sequence_privilege(%1$L, c.oid, p.priv) END'
\set readers 'SELECT c.relname::text, ''SELECT'' FROM pg_class c WHERE c.relnamespace = ''sched''::regnamespace AND c.relkind IN (''r'', ''v'')'
SELECT set_eq(format(:'rel_privs', r), :'readers', format('%s: SELECT on every table and view, nothing else', r))
  FROM unnest(ARRAY['sched_observer', 'sched_scheduler', 'sched_admin', 't_observer', 't_scheduler', 't_admin']) r;
SELECT is_empty(format(:'rel_privs', r), format('%s: no privilege on any relation', r))
  FROM unnest(ARRAY['sched_worker', 't_worker', 't_nobody']) r;
SELECT is_empty(format(:'rel_privs', 'public'), 'PUBLIC: no privilege on any table, view or sequence');

-- the owner has them all
SELECT is_empty($$SELECT c.relname, p.priv FROM pg_class c,
                         unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) p(priv)
                   WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'r'
                     AND NOT has_table_privilege(c.relowner, c.oid, p.priv)
                  UNION ALL
                  SELECT c.relname, 'USAGE, UPDATE' FROM pg_class c
                   WHERE c.relnamespace = 'sched'::regnamespace AND c.relkind = 'S'
                     AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(c.relowner, c.oid, 'USAGE, UPDATE') END$$,
                'the owner may write every table and take every sequence''s values');
SELECT is((SELECT count(DISTINCT relowner)::int FROM pg_class
            WHERE relnamespace = 'sched'::regnamespace AND relkind IN ('r', 'v', 'S')), 1,
          'one owner for every relation');

-- PUBLIC
SELECT is_empty($$SELECT p.oid::regprocedure::text FROM pg_proc p
                   WHERE p.pronamespace = 'sched'::regnamespace
                     AND has_function_privilege('public', p.oid, 'EXECUTE')$$,
                'PUBLIC can execute no function of schema sched');
SELECT is_empty($$SELECT c.relname FROM pg_class c, aclexplode(c.relacl) x
                   WHERE c.relnamespace = 'sched'::regnamespace AND x.grantee = 0
                  UNION ALL
                  SELECT p.proname FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) x
                   WHERE p.pronamespace = 'sched'::regnamespace AND x.grantee = 0$$,
                'no ACL of schema sched names PUBLIC');
SELECT ok(NOT has_schema_privilege('public', 'sched', 'USAGE')
          AND NOT has_schema_privilege('public', 'sched', 'CREATE'),
          'PUBLIC has neither USAGE nor CREATE on schema sched');

-- ---------------------------------------------------------------------------------
-- 3. A worker acts only for itself
-- ---------------------------------------------------------------------------------
DO $$ BEGIN
    PERFORM sched.upsert_node('own-a', '{}', 4000, 8192, 0, 100);
    PERFORM sched.upsert_node('own-b', '{}', 4000, 8192, 0, 100);
END $$;
SET ROLE w_one;
SELECT lives_ok($$SELECT sched.register_worker('own-a', 'own-cap', ARRAY['1.0'], 2,
                                                'a1000000-0000-4000-8000-000000000001')$$,
                'w_one registers worker W1');
SET ROLE t_scheduler;
SELECT d.outcome AS w_outcome, d.attempt_id AS a1, d.lease_version AS l1, d.worker_id AS w_placed
  FROM sched.dispatch_attempt(sched.submit('a1000000-0000-4000-8000-0000000000e1',
                                           'a1000000-0000-4000-8000-000000000051', 'own-cap', '1.0')) d \gset
RESET ROLE;
SELECT is(:'w_outcome'::text || ' ' || :'w_placed', 'DISPATCHED a1000000-0000-4000-8000-000000000001',
          'a scheduler dispatched a request to W1');
SELECT is((SELECT registered_by::text FROM sched.worker WHERE worker_id = 'a1000000-0000-4000-8000-000000000001'),
          'w_one', 'W1 is registered by w_one');

-- every row of the section, with its version (ctid, xmin): an update writing the same
-- values would show too
CREATE TEMP VIEW own_state AS
SELECT string_agg(x, E'\n' ORDER BY x) AS state FROM (
    SELECT format('worker %s %s %s', w.ctid, w.xmin, w) FROM sched.worker w WHERE w.node_id IN ('own-a', 'own-b')
    UNION ALL
    SELECT format('attempt %s %s %s', a.ctid, a.xmin, a) FROM sched.attempt a WHERE a.node_id IN ('own-a', 'own-b')
    UNION ALL
    SELECT format('command %s %s %s', c.ctid, c.xmin, c) FROM sched.command c
     WHERE c.worker_id IN (SELECT worker_id FROM sched.worker WHERE node_id IN ('own-a', 'own-b'))
    UNION ALL
    SELECT format('request %s %s %s', r.ctid, r.xmin, r) FROM sched.request r WHERE r.capability = 'own-cap'
    UNION ALL
    SELECT format('execution %s %s %s', e.ctid, e.xmin, e) FROM sched.execution e
     WHERE e.execution_id = 'a1000000-0000-4000-8000-0000000000e1'
    UNION ALL
    SELECT format('timeline %s %s %s', t.ctid, t.xmin, t) FROM sched.timeline t
     WHERE t.execution_id = 'a1000000-0000-4000-8000-0000000000e1'
    UNION ALL
    SELECT format('node %s %s %s', n.ctid, n.xmin, n) FROM sched.node n WHERE n.node_id IN ('own-a', 'own-b')
) s(x);
SELECT state AS own_before FROM own_state \gset

-- w_two, another sched_worker: 42501 naming the worker, for everything
SET ROLE w_two;
SELECT throws_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000001', 1)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001', 'w_two cannot heartbeat W1');
SELECT throws_ok($$SELECT * FROM sched.poll_commands('a1000000-0000-4000-8000-000000000001', 1)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001', 'w_two cannot poll W1''s commands');
SELECT throws_ok($$SELECT * FROM sched.poll_commands('a1000000-0000-4000-8000-000000000001', 1, start => true)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001',
    'w_two cannot poll W1''s commands to start them');
SELECT throws_ok(format('SELECT sched.start_attempt(%L, %s)', :'a1', :l1), '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001', 'w_two cannot start W1''s attempt');
SELECT throws_ok(format('SELECT sched.renew_lease(%L, %s)', :'a1', :l1), '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001', 'w_two cannot renew W1''s lease');
SELECT throws_ok(format('SELECT sched.finish_attempt(%L, %s, %L)', :'a1', :l1, 'SUCCEEDED'), '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001', 'w_two cannot finish W1''s attempt');
SELECT throws_ok(format('SELECT sched.finish_attempt(%L, %s, %L)', :'a1', :l1 + 1, 'FAILED'), '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001',
    'w_two cannot finish W1''s attempt, even with a wrong lease_version (it learns nothing)');
SELECT throws_ok($$SELECT sched.register_worker('own-a', 'own-cap', ARRAY['1.0'], 2)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001',
    'w_two cannot take over W1 by registering its (node, capability)');
SELECT throws_ok($$SELECT sched.register_worker('own-a', 'own-cap', ARRAY['1.0'], 2,
                                                 'a1000000-0000-4000-8000-000000000001')$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001',
    'w_two cannot register W1 by its worker_id');
SELECT throws_ok($$SELECT sched.register_worker('own-b', 'own-cap', ARRAY['1.0'], 2,
                                                 'a1000000-0000-4000-8000-000000000001')$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001',
    'w_two cannot register W1''s worker_id on another node');
SELECT is(pg_temp.failure($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000001', 1)$$),
          '42501 permission denied for worker a1000000-0000-4000-8000-000000000001 | Worker a1000000-0000-4000-8000-000000000001 was registered by role "w_one"; role "w_two" is not a member of it.',
          'the refusal names the worker, its role and the caller');
RESET ROLE;
SELECT is((SELECT state FROM own_state), :'own_before',
          'after w_two''s refusals the worker, attempt, command, request, execution, timeline and node rows are unchanged');

-- w_one, a member of w_one, and sched_admin act for W1
SET ROLE w_one;
SELECT lives_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000001', 1)$$, 'w_one heartbeats W1');
SELECT is((SELECT count(*)::int FROM sched.poll_commands('a1000000-0000-4000-8000-000000000001', 1)), 1,
          'w_one polls W1''s START command');
SELECT lives_ok(format('SELECT sched.start_attempt(%L, %s)', :'a1', :l1), 'w_one starts W1''s attempt');
SELECT lives_ok(format('SELECT sched.renew_lease(%L, %s)', :'a1', :l1), 'w_one renews W1''s lease');
SET ROLE w_one_member;
SELECT lives_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000001', 1)$$, 'a member of w_one heartbeats W1');
SELECT lives_ok($$SELECT * FROM sched.poll_commands('a1000000-0000-4000-8000-000000000001', 1)$$,
                'a member of w_one polls W1''s commands');
SELECT lives_ok(format('SELECT sched.start_attempt(%L, %s)', :'a1', :l1), 'a member of w_one starts W1''s attempt');
SELECT lives_ok(format('SELECT sched.renew_lease(%L, %s)', :'a1', :l1), 'a member of w_one renews W1''s lease');
SET ROLE t_admin;
SELECT lives_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000001', 1)$$, 'sched_admin heartbeats W1');
SELECT lives_ok($$SELECT * FROM sched.poll_commands('a1000000-0000-4000-8000-000000000001', 1)$$,
                'sched_admin polls W1''s commands');
SELECT lives_ok(format('SELECT sched.start_attempt(%L, %s)', :'a1', :l1), 'sched_admin starts W1''s attempt');
SELECT lives_ok(format('SELECT sched.renew_lease(%L, %s)', :'a1', :l1), 'sched_admin renews W1''s lease');
SET ROLE w_one;
SELECT is(sched.finish_attempt(:'a1', :l1, 'SUCCEEDED'), 'SUCCEEDED', 'w_one finishes W1''s attempt');
SET ROLE w_one_member;
SELECT is(sched.finish_attempt(:'a1', :l1, 'SUCCEEDED'), 'SUCCEEDED', 'a member of w_one repeats the finish');
SET ROLE t_admin;
SELECT is(sched.finish_attempt(:'a1', :l1, 'SUCCEEDED'), 'SUCCEEDED', 'sched_admin repeats the finish');
SET ROLE w_one;
SELECT is((sched.register_worker('own-a', 'own-cap', ARRAY['1.0'], 2)).generation, 2::bigint,
          'w_one registers W1 again');
SET ROLE w_one_member;
SELECT is((sched.register_worker('own-a', 'own-cap', ARRAY['1.0'], 2, 'a1000000-0000-4000-8000-000000000001')).generation,
          3::bigint, 'a member of w_one registers W1 again');
SET ROLE t_admin;
SELECT is((sched.register_worker('own-a', 'own-cap', ARRAY['1.0'], 2)).generation, 4::bigint,
          'sched_admin registers W1 again');
SET ROLE w_two;
SELECT throws_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000001', 4)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000001',
    'w_two still cannot heartbeat W1 (current generation)');
RESET ROLE;
SELECT is((SELECT registered_by::text FROM sched.worker WHERE worker_id = 'a1000000-0000-4000-8000-000000000001'),
          'w_one', 'W1 is still w_one''s: registrations by its member and sched_admin take nothing over');

-- a worker without owning role (registered under 0.1.0): sched_admin's, until it registers again
DO $$ BEGIN
    PERFORM sched.register_worker('own-b', 'own-cap', ARRAY['1.0'], 2, 'a1000000-0000-4000-8000-000000000002');
END $$;
UPDATE sched.worker SET registered_by = NULL WHERE worker_id = 'a1000000-0000-4000-8000-000000000002';
SET ROLE w_two;
SELECT throws_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000002', 1)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000002',
    'w_two cannot heartbeat a worker that has no owning role');
SET ROLE w_one;
SELECT throws_ok($$SELECT * FROM sched.poll_commands('a1000000-0000-4000-8000-000000000002', 1)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000002',
    'w_one cannot poll for a worker that has no owning role');
SET ROLE t_admin;
SELECT lives_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000002', 1)$$,
                'sched_admin heartbeats a worker that has no owning role');
RESET ROLE;
SELECT ok((SELECT registered_by IS NULL FROM sched.worker WHERE worker_id = 'a1000000-0000-4000-8000-000000000002'),
          'sched_admin''s heartbeat does not give the worker an owner');
SET ROLE w_two;
SELECT is((sched.register_worker('own-b', 'own-cap', ARRAY['1.0'], 2)).worker_id,
          'a1000000-0000-4000-8000-000000000002'::uuid, 'w_two registers the ownerless worker');
RESET ROLE;
SELECT is((SELECT registered_by::text FROM sched.worker WHERE worker_id = 'a1000000-0000-4000-8000-000000000002'),
          'w_two', 'the registration adopted it: registered_by is w_two');
SET ROLE w_two;
SELECT lives_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000002', 2)$$, 'w_two now heartbeats it');
SET ROLE w_one;
SELECT throws_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000002', 2)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000002', 'and w_one cannot');
RESET ROLE;

-- a worker registered through SET ROLE belongs to the role SET ROLE chose
SET ROLE w_one_member;
SELECT lives_ok($$SELECT sched.register_worker('own-b', 'member-cap', ARRAY['1.0'], 1,
                                                'a1000000-0000-4000-8000-000000000004')$$,
                'a member of w_one registers a worker of its own');
RESET ROLE;
SELECT is((SELECT registered_by::text FROM sched.worker WHERE worker_id = 'a1000000-0000-4000-8000-000000000004'),
          'w_one_member', 'registered_by is the session''s role (SET ROLE), not the function''s owner');
SET ROLE w_one;
SELECT throws_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000004', 1)$$, '42501',
    'permission denied for worker a1000000-0000-4000-8000-000000000004',
    'w_one cannot act for its member''s worker (membership goes one way)');
RESET ROLE;

-- ---------------------------------------------------------------------------------
-- 5b. `at` may not be in the future, except for sched_admin
-- ---------------------------------------------------------------------------------
SET ROLE w_one;
SELECT lives_ok($$SELECT sched.register_worker('own-a', 'at-cap', ARRAY['1.0'], 2,
                                                'a1000000-0000-4000-8000-000000000003')$$,
                'w_one registers worker W3');
SET ROLE t_scheduler;
SELECT d.attempt_id AS a3, d.lease_version AS l3
  FROM sched.dispatch_attempt(sched.submit('a1000000-0000-4000-8000-0000000000e3',
                                           'a1000000-0000-4000-8000-000000000053', 'at-cap', '1.0')) d \gset
SELECT sched.submit('a1000000-0000-4000-8000-0000000000e3', 'a1000000-0000-4000-8000-000000000054',
                    'at-cap', '1.0') AS r3b \gset
SET ROLE w_one;
SELECT throws_ok($$SELECT sched.register_worker('own-a', 'at-cap', ARRAY['1.0'], 2, at => now() + interval '1 day')$$,
    '22023', NULL, 'w_one: register_worker at a future time is 22023');
SELECT throws_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000003', 1, at => now() + interval '1 day')$$,
    '22023', NULL, 'w_one: heartbeat at a future time is 22023');
SELECT throws_ok(format('SELECT sched.start_attempt(%L, %s, at => now() + interval %L)', :'a3', :l3, '1 day'),
    '22023', NULL, 'w_one: start_attempt at a future time is 22023');
SELECT throws_ok(format('SELECT sched.renew_lease(%L, %s, at => now() + interval %L)', :'a3', :l3, '1 day'),
    '22023', NULL, 'w_one: renew_lease at a future time is 22023');
SELECT lives_ok(format('SELECT sched.renew_lease(%L, %s, at => now() - interval %L)', :'a3', :l3, '1 s'),
    'w_one: renew_lease at a past time is fine');
SET ROLE t_scheduler;
SELECT throws_ok(format('SELECT * FROM sched.dispatch_attempt(%s, at => now() + interval %L)', :r3b, '1 day'),
    '22023', NULL, 'sched_scheduler: dispatch_attempt at a future time is 22023');
SELECT throws_ok($$SELECT * FROM sched.dispatch_next(at => now() + interval '1 day')$$,
    '22023', NULL, 'sched_scheduler: dispatch_next at a future time is 22023');
SELECT throws_ok($$SELECT sched.reap_expired(now() + interval '1 year')$$,
    '22023', NULL, 'sched_scheduler: reap_expired at a future time (every lease LOST) is 22023');
SELECT is((SELECT status FROM sched.attempt WHERE attempt_id = :'a3'), 'DISPATCHED',
    'the refused reap_expired left the attempt live');
SELECT throws_ok($$SELECT * FROM sched.claim_requests(at => now() + interval '1 day')$$,
    '22023', NULL, 'sched_scheduler: claim_requests at a future time is 22023');
SET ROLE t_admin;
SELECT lives_ok(format('SELECT sched.start_attempt(%L, %s, at => now() + interval %L)', :'a3', :l3, '1 day'),
    'sched_admin: start_attempt at a future time');
SELECT lives_ok(format('SELECT sched.renew_lease(%L, %s, at => now() + interval %L)', :'a3', :l3, '1 day'),
    'sched_admin: renew_lease at a future time');
SELECT lives_ok($$SELECT sched.heartbeat('a1000000-0000-4000-8000-000000000003', 1, at => now() + interval '1 day')$$,
    'sched_admin: heartbeat at a future time');
SELECT lives_ok($$SELECT sched.register_worker('own-a', 'at-cap', ARRAY['1.0'], 2, at => now() + interval '1 day')$$,
    'sched_admin: register_worker at a future time');
SELECT lives_ok(format('SELECT * FROM sched.dispatch_attempt(%s, at => now() + interval %L)', :r3b, '1 day'),
    'sched_admin: dispatch_attempt at a future time');
SELECT lives_ok($$SELECT * FROM sched.dispatch_next(at => now() + interval '1 day')$$,
    'sched_admin: dispatch_next at a future time');
RESET ROLE;

-- ---------------------------------------------------------------------------------
-- 4. Fenced tenants
-- ---------------------------------------------------------------------------------
DO $$ BEGIN
    PERFORM sched.upsert_node('ten-a', '{}', 4000, 8192, 0, 100);
    PERFORM sched.register_worker('ten-a', 'ten-cap', ARRAY['1.0'], 4, 'b1000000-0000-4000-8000-000000000001');
END $$;
SET ROLE app_one;
SELECT throws_ok($$SELECT sched.set_tenant_owner('fenced', 'app_one')$$, '42501',
    'permission denied for function set_tenant_owner', 'a sched_scheduler cannot set_tenant_owner');
SET ROLE t_admin;
SELECT is((sched.set_tenant_owner('fenced', 'app_one')).owner::text, 'app_one',
          'sched_admin fences tenant fenced: owner app_one');
SET ROLE app_one;
SELECT lives_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e1', 'b1000000-0000-4000-8000-000000000051',
                                       'ten-cap', '1.0', tenant => 'fenced')$$, 'app_one submits for tenant fenced');
SET ROLE app_one_member;
SELECT lives_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e2', 'b1000000-0000-4000-8000-000000000052',
                                       'ten-cap', '1.0', tenant => 'fenced')$$, 'a member of app_one submits for tenant fenced');
RESET ROLE;

CREATE TEMP VIEW ten_state AS
SELECT format('requests %s, executions %s, timeline %s, tenants %s | %s',
              (SELECT count(*) FROM sched.request), (SELECT count(*) FROM sched.execution),
              (SELECT count(*) FROM sched.timeline),
              (SELECT string_agg(t::text, ' ' ORDER BY t.tenant) FROM sched.tenant t),
              (SELECT string_agg(format('%s %s %s %s', e.execution_id, e.status, e.ctid, e.xmin), ' ' ORDER BY e.execution_id)
                 FROM sched.execution e WHERE e.tenant = 'fenced')) AS state;
SELECT state AS ten_before FROM ten_state \gset

SET ROLE app_two;
SELECT throws_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e3', 'b1000000-0000-4000-8000-000000000053',
                                        'ten-cap', '1.0', tenant => 'fenced')$$, '42501',
    'permission denied for tenant "fenced"', 'app_two cannot submit for tenant fenced');
SELECT throws_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e1', 'b1000000-0000-4000-8000-000000000054',
                                        'ten-cap', '1.0', tenant => 'open')$$, '42501',
    'permission denied for tenant "fenced"',
    'app_two cannot submit into an execution of tenant fenced by naming another tenant');
SELECT throws_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e1', 'b1000000-0000-4000-8000-000000000051',
                                        'ten-cap', '1.0', tenant => 'fenced')$$, '42501',
    'permission denied for tenant "fenced"', 'app_two cannot repeat app_one''s submit (it would learn the request_id)');
SELECT throws_ok($$SELECT sched.cancel_execution('b1000000-0000-4000-8000-0000000000e1')$$, '42501',
    'permission denied for tenant "fenced"', 'app_two cannot cancel an execution of tenant fenced');
SELECT throws_ok($$SELECT sched.complete_execution('b1000000-0000-4000-8000-0000000000e1')$$, '42501',
    'permission denied for tenant "fenced"', 'app_two cannot complete an execution of tenant fenced');
SELECT is(pg_temp.failure($$SELECT sched.cancel_execution('b1000000-0000-4000-8000-0000000000e1')$$),
          '42501 permission denied for tenant "fenced" | Tenant "fenced" is owned by role "app_one"; role "app_two" is not a member of it.',
          'the refusal names the tenant, its owner and the caller');
SELECT is((SELECT count(*)::int FROM sched.request WHERE tenant = 'fenced'), 2,
          'app_two reads the fenced tenant''s requests (readers see every tenant)');
RESET ROLE;
SELECT is((SELECT state FROM ten_state), :'ten_before',
          'after app_two''s refusals requests, executions, timeline and tenants are unchanged');

-- sched_admin may
SET ROLE t_admin;
SELECT throws_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e1', 'b1000000-0000-4000-8000-000000000055',
                                       'ten-cap', '1.0', tenant => 'open')$$, '22023', NULL,
                'not even sched_admin submits into an execution of tenant fenced naming another tenant: an execution has one tenant');
SELECT lives_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e1', 'b1000000-0000-4000-8000-000000000055',
                                       'ten-cap', '1.0', tenant => 'fenced')$$,
                'sched_admin submits into an execution of tenant fenced');
SELECT lives_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e4', 'b1000000-0000-4000-8000-000000000056',
                                       'ten-cap', '1.0', tenant => 'fenced')$$, 'sched_admin submits for tenant fenced');
SELECT is(sched.cancel_execution('b1000000-0000-4000-8000-0000000000e4'), 'CANCELLED',
          'sched_admin cancels an execution of tenant fenced');
RESET ROLE;

-- the owner's members cancel and complete (execution e2 is run to its end first)
SELECT d.attempt_id AS fa, d.lease_version AS fl FROM sched.dispatch_attempt(
    (SELECT request_id FROM sched.request WHERE step_id = 'b1000000-0000-4000-8000-000000000052')) d \gset
SELECT is(sched.finish_attempt(:'fa', :fl, 'SUCCEEDED'), 'SUCCEEDED', 'fixture: execution e2''s attempt succeeded');
SET ROLE app_one_member;
SELECT is(sched.complete_execution('b1000000-0000-4000-8000-0000000000e2'), 'SUCCEEDED',
          'a member of app_one completes an execution of tenant fenced');
SET ROLE app_one;
SELECT is(sched.complete_execution('b1000000-0000-4000-8000-0000000000e2'), 'SUCCEEDED',
          'app_one completes it (again: idempotent)');
SELECT is(sched.cancel_execution('b1000000-0000-4000-8000-0000000000e1'), 'CANCELLED',
          'app_one cancels an execution of tenant fenced');
SET ROLE app_one_member;
SELECT is(sched.cancel_execution('b1000000-0000-4000-8000-0000000000e1'), 'CANCELLED',
          'a member of app_one cancels it (again: idempotent)');
SET ROLE app_two;
SELECT throws_ok($$SELECT sched.complete_execution('b1000000-0000-4000-8000-0000000000e2')$$, '42501',
    'permission denied for tenant "fenced"', 'app_two cannot complete a closed execution of tenant fenced either');

-- NULL removes the fence
SET ROLE t_admin;
SELECT ok((sched.set_tenant_owner('fenced', NULL)).owner IS NULL, 'sched_admin removes the fence');
SET ROLE app_two;
SELECT lives_ok($$SELECT sched.submit('b1000000-0000-4000-8000-0000000000e5', 'b1000000-0000-4000-8000-000000000057',
                                       'ten-cap', '1.0', tenant => 'fenced')$$, 'app_two submits for tenant fenced now');
SELECT is(sched.cancel_execution('b1000000-0000-4000-8000-0000000000e5'), 'CANCELLED',
          'and cancels its execution');
SELECT throws_ok($$SELECT sched.set_tenant_owner('fenced', 'app_two')$$, '42501',
    'permission denied for function set_tenant_owner', 'app_two cannot fence the tenant for itself');
RESET ROLE;

-- ---------------------------------------------------------------------------------
-- 5a. Settings that bound what a caller gets: a session cannot set them
-- ---------------------------------------------------------------------------------
SET ROLE t_worker;
SELECT throws_ok($$SET sched.lease_ttl = '2147483647s'$$, '42501',
    'permission denied to set parameter "sched.lease_ttl"', 'a sched_worker cannot SET sched.lease_ttl');
SELECT throws_ok(format('SET sched.%s = %L', s, '86400s'), '42501',
    format('permission denied to set parameter "sched.%s"', s), format('a sched_worker cannot SET sched.%s', s))
  FROM unnest(ARRAY['heartbeat_ttl', 'retry_backoff_max', 'unschedulable_backoff_max', 'starvation_after',
                    'aging_interval']) s;
-- the dispatch gate's settings bound how long other sessions' calls wait
SELECT throws_ok(format('SET sched.%s = %L', s, v), '42501',
    format('permission denied to set parameter "sched.%s"', s), format('a sched_worker cannot SET sched.%s', s))
  FROM (VALUES ('dispatch_concurrency', '0'), ('dispatch_wait_max', '0'), ('dispatch_handoff_after', '-1')) g(s, v);
SELECT is((SELECT string_agg(DISTINCT context, ',') FROM pg_settings
            WHERE name IN ('sched.dispatch_concurrency', 'sched.dispatch_wait_max', 'sched.dispatch_handoff_after')),
          'superuser', 'the dispatch gate''s three settings are superuser settings (PGC_SUSET)');
SELECT throws_ok($$SET LOCAL sched.heartbeat_ttl = '86400s'$$, '42501',
    'permission denied to set parameter "sched.heartbeat_ttl"', 'nor SET LOCAL');
SELECT throws_ok($$SELECT set_config('sched.lease_ttl', '86400s', false)$$, '42501',
    'permission denied to set parameter "sched.lease_ttl"', 'nor set_config(''sched.lease_ttl'', ...)');
SELECT throws_ok($$SELECT set_config('sched.heartbeat_ttl', '86400s', true)$$, '42501',
    'permission denied to set parameter "sched.heartbeat_ttl"', 'nor set_config(..., is_local => true)');
SELECT lives_ok($$SET sched.notify_workers = off$$, 'a sched_worker may SET sched.notify_workers = off');
SELECT is(current_setting('sched.notify_workers'), 'off', 'sched.notify_workers is off for the session');
SELECT lives_ok($$SET sched.fleet_mirror_carry = off$$,
                'a sched_worker may SET sched.fleet_mirror_carry = off (its own placements only)');
SELECT is((SELECT context FROM pg_settings WHERE name = 'sched.fleet_mirror_carry'), 'user',
          'sched.fleet_mirror_carry is a user setting');
RESET sched.fleet_mirror_carry;
SELECT lives_ok($$SET sched.direct_writes = off$$,
                'a sched_worker may SET sched.direct_writes = off (its own placements only)');
SELECT is((SELECT context FROM pg_settings WHERE name = 'sched.direct_writes'), 'user',
          'sched.direct_writes is a user setting');
RESET sched.direct_writes;
RESET ROLE;
SELECT is(sched.setting_seconds('sched.lease_ttl') || ' ' || sched.setting_seconds('sched.heartbeat_ttl'),
          (SELECT string_agg(sched.setting_seconds(n)::text, ' ' ORDER BY o)
             FROM (VALUES (1, 'sched.lease_ttl'), (2, 'sched.heartbeat_ttl')) v(o, n)),
          'sanity: setting_seconds reads the settings');
SELECT is((SELECT string_agg(s.source, ',') FROM pg_settings s
            WHERE s.name IN ('sched.lease_ttl', 'sched.heartbeat_ttl', 'sched.retry_backoff_max',
                             'sched.unschedulable_backoff_max', 'sched.starvation_after', 'sched.aging_interval')
              AND s.source = 'session'), NULL, 'none of the bounding settings was set by the session');
SELECT is((SELECT string_agg(DISTINCT s.context, ',') FROM pg_settings s
            WHERE s.name IN ('sched.lease_ttl', 'sched.heartbeat_ttl', 'sched.retry_backoff_max',
                             'sched.unschedulable_backoff_max', 'sched.starvation_after', 'sched.aging_interval')),
          'superuser', 'the six bounding settings are superuser settings (PGC_SUSET)');
-- unless granted SET ON PARAMETER
GRANT SET ON PARAMETER sched.lease_ttl TO w_one;
SET ROLE w_one;
SELECT lives_ok($$SET sched.lease_ttl = '600s'$$, 'a role granted SET ON PARAMETER sched.lease_ttl may set it');
RESET ROLE;
SELECT is(sched.setting_seconds('sched.lease_ttl'), 600::double precision, 'sched.lease_ttl is 600 s now');
RESET sched.lease_ttl;
RESET sched.notify_workers;

-- ---------------------------------------------------------------------------------
-- The internal helpers, called by their owner with a NULL in each argument: an answer or
-- a clear error, never a crash (sqlsmith found _check_name(x, NULL) crashing the
-- backend).  Each call is in a subtransaction: a crash would end the whole test.
-- ---------------------------------------------------------------------------------
DO $$
DECLARE
    f record;
    i int;
    args text[];
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS sig, p.proname, p.pronargs, p.proargtypes, p.prorettype
               FROM pg_proc p
              WHERE p.pronamespace = 'sched'::regnamespace AND p.proname LIKE '\_%'
                AND p.prorettype <> 'trigger'::regtype AND p.pronargs > 0 LOOP
        FOR i IN 0 .. f.pronargs - 1 LOOP
            SELECT array_agg(CASE WHEN k = i THEN 'NULL::' || format_type(t, NULL)
                                  ELSE CASE format_type(t, NULL)
                                       WHEN 'text' THEN '''x'''
                                       WHEN 'jsonb' THEN '''{}''::jsonb'
                                       WHEN 'uuid' THEN '''00000000-0000-0000-0000-000000000000''::uuid'
                                       WHEN 'timestamp with time zone' THEN 'now()'
                                       WHEN 'regrole' THEN '''sched_admin''::regrole'
                                       WHEN 'text[]' THEN 'ARRAY[''v1'']'
                                       WHEN 'anyelement' THEN '1'
                                       ELSE '1::' || format_type(t, NULL) END END ORDER BY k)
              INTO args
              FROM unnest(f.proargtypes::oid[]) WITH ORDINALITY u(t, k0), LATERAL (SELECT k0 - 1 AS k) z;
            BEGIN
                EXECUTE format('SELECT %s(%s)', 'sched.' || quote_ident(f.proname), array_to_string(args, ', '));
            EXCEPTION WHEN OTHERS THEN
                IF SQLSTATE = 'XX000' THEN
                    RAISE EXCEPTION '% with NULL argument %: XX000 %', f.sig, i + 1, SQLERRM;
                END IF;
            END;
        END LOOP;
    END LOOP;
END
$$;
SELECT pass('every internal helper called with a NULL in each argument answered or refused (no crash, no XX000)');

SELECT * FROM finish();
ROLLBACK;
