-- sql/install/90_privileges.sql — the role model: the four roles, as whom each function
-- runs, and who may call what.  A piece of pg_sched--0.2.0.sql (the Makefile builds it
-- from sql/install/*.sql in the order of their names) and the last piece of the upgrade
-- from 0.1.0: it sets every privilege of the extension's objects from scratch, so a
-- database brought here by either path has exactly these (test/upgrade proves it).
--
-- Roles (NOLOGIN, created when missing; roles are cluster-wide and outlive the
-- extension).  A DBA grants one to a login role and nothing else is needed:
--   sched_observer   reads: every table and view, the placement and diagnostic functions
--   sched_scheduler  submits, claims, dispatches, cancels, completes, reaps; and reads
--                    (it is a member of sched_observer: a scheduler that claims ranks
--                    candidates itself)
--   sched_worker     registers its workers, heartbeats, polls, starts, renews, finishes
--                    — only for the workers its role registered (privileges.c)
--   sched_admin      the fleet (nodes, drains, cordons) and the tenants (weights,
--                    owners); a member of sched_scheduler and sched_worker, and acts
--                    for every worker and tenant
-- No role but the extension's owner writes a table.  Every function that writes runs as
-- the owner (SECURITY DEFINER) and decides what its caller may do; every function, the
-- readers too, runs with search_path pinned to pg_catalog, pg_temp (one reader pins it
-- itself, below), so nothing a caller
-- or an ALTER ROLE/DATABASE ... SET puts on the path is ever resolved (pg_temp is never
-- searched for functions and operators, and after pg_catalog for types and tables), and
-- tables and pg_sched's functions are named with their schema.  The internal helpers
-- (sched._*) are callable by no role but the owner.  PUBLIC has nothing.

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['sched_observer', 'sched_scheduler', 'sched_worker', 'sched_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$$;
GRANT sched_observer TO sched_scheduler;
GRANT sched_scheduler, sched_worker TO sched_admin;

-- Every privilege on the extension's objects, of every role but the owner, goes: the
-- grants below are then all there is (on an upgrade, too, whatever was granted before).
DO $$
DECLARE
    o record;
BEGIN
    FOR o IN
        SELECT pg_catalog.format('%s %s', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                                 c.oid::pg_catalog.regclass) AS object,
               pg_catalog.array_agg(DISTINCT x.grantee) AS grantees
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) x
         WHERE c.relnamespace = 'sched'::pg_catalog.regnamespace AND x.grantee <> c.relowner
         GROUP BY c.oid, c.relkind
        UNION ALL
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure),
               pg_catalog.array_agg(DISTINCT x.grantee)
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) x
         WHERE p.pronamespace = 'sched'::pg_catalog.regnamespace AND x.grantee <> p.proowner
         GROUP BY p.oid
        UNION ALL
        SELECT 'SCHEMA sched', pg_catalog.array_agg(DISTINCT x.grantee)
          FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) x
         WHERE n.nspname = 'sched' AND x.grantee <> n.nspowner
        HAVING pg_catalog.count(*) > 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', o.object,
            (SELECT pg_catalog.string_agg(CASE WHEN g = 0 THEN 'PUBLIC'
                                               ELSE pg_catalog.quote_ident(g::pg_catalog.regrole::text) END, ', ')
               FROM pg_catalog.unnest(o.grantees) g));
    END LOOP;
END
$$;
-- functions are executable by PUBLIC by default (a NULL ACL): not these; and every ACL
-- is explicit (owner only, before the grants below), whatever path led here
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA sched FROM PUBLIC;
REVOKE ALL ON SCHEMA sched FROM PUBLIC;

-- Every function runs with a pinned search_path.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'sched'::pg_catalog.regnamespace LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
    END LOOP;
END
$$;
-- But one: sched.pending_explanation, a reader in C that the view sched.pending calls
-- once per row, pins the same path itself wherever it runs SQL, and resolves no name
-- elsewhere (src/spi_util.c, sched_pin_search_path: a proconfig would cost each row a GUC
-- nest level, more than the rest of the call).
ALTER FUNCTION sched.pending_explanation(text, text, jsonb, int, bigint, int, int, bigint, int,
                                         text, timestamptz) RESET search_path;
-- And the two keys every request row computes (the generated column shape, sort_key at
-- submit and at each retry): C that runs no SQL and resolves no name, where a proconfig
-- would cost each row a GUC nest level.
ALTER FUNCTION sched._request_shape(text, text, jsonb, int, bigint, int, int, bigint, int, text)
    RESET search_path;
ALTER FUNCTION sched._queue_key(int, timestamptz) RESET search_path;
-- And the three called once per row by dispatch and by the end of an attempt: the queue
-- fetch's filter (for every queue entry it walks, most of them the requests concurrent
-- dispatches hold: with 32 dispatchers the GUC nest levels were 8% of the CPU) and the
-- row triggers on sched.node, sched.worker (each reservation and release) and
-- sched.request.  All are C that runs no SQL and resolves no name (a trigger reads its
-- columns through the trigger's own relation).
ALTER FUNCTION sched._request_held_elsewhere(bigint) RESET search_path;
ALTER FUNCTION sched._fleet_changed() RESET search_path;
ALTER FUNCTION sched._request_queued() RESET search_path;
-- And the five CHECK functions, called for every row written to sched.node, sched.worker,
-- sched.request, sched.attempt and sched.command (21_row_checks.sql): C that runs no SQL
-- and resolves no name.
ALTER FUNCTION sched._node_valid(sched.node) RESET search_path;
ALTER FUNCTION sched._worker_valid(sched.worker) RESET search_path;
ALTER FUNCTION sched._request_valid(sched.request) RESET search_path;
ALTER FUNCTION sched._attempt_valid(sched.attempt) RESET search_path;
ALTER FUNCTION sched._command_valid(sched.command) RESET search_path;
-- And sched.pending(at), a SQL function whose body was parsed when it was created (BEGIN
-- ATOMIC: no name in it is looked up at a call), so that the planner inlines it into its
-- caller's query (a proconfig forbids that, and the function would return all its rows
-- before any LIMIT of the caller applied).
ALTER FUNCTION sched.pending(timestamptz) RESET search_path;
-- And sched.submit, whose statements reach their rows by key, is planned without
-- sequential scans too (as the C functions' keyed statements are, src/spi_util.c): PL/pgSQL
-- keeps the plan it made for a session's first submits, and made on a queue vacuumed
-- while empty it scanned the whole of sched.request at every later submit of the session.
ALTER FUNCTION sched.submit(uuid, uuid, text, text, int, text, int, jsonb, jsonb, int, bigint,
                            int, int, bigint, int, text, int, timestamptz, jsonb, text, text, uuid,
                            int, boolean, boolean) SET enable_seqscan = off;

-- The functions that write run as the owner.  Each one checks its caller itself where
-- the role model asks for more than EXECUTE: the worker functions act only for the
-- caller's workers, the application's only on tenants it may use (privileges.c).
ALTER FUNCTION sched.upsert_node(text, jsonb, int, bigint, int, int, text) SECURITY DEFINER;
ALTER FUNCTION sched.drain_node(text) SECURITY DEFINER;
ALTER FUNCTION sched.cordon_worker(uuid) SECURITY DEFINER;
ALTER FUNCTION sched.uncordon_worker(uuid) SECURITY DEFINER;
ALTER FUNCTION sched.set_tenant_weight(text, int) SECURITY DEFINER;
ALTER FUNCTION sched.set_tenant_owner(text, regrole) SECURITY DEFINER;
ALTER FUNCTION sched.set_concurrency_limit(text, int) SECURITY DEFINER;
ALTER FUNCTION sched.set_rate_limit(text, int, interval) SECURITY DEFINER;
ALTER FUNCTION sched.set_tenant_quota(text, int, int, bigint, int) SECURITY DEFINER;
ALTER FUNCTION sched.submit(uuid, uuid, text, text, int, text, int, jsonb, jsonb, int, bigint,
                            int, int, bigint, int, text, int, timestamptz, jsonb, text, text, uuid, int,
                            boolean, boolean) SECURITY DEFINER;
ALTER FUNCTION sched.claim_requests(int, interval, text, text, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.dispatch_attempt(bigint, uuid, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.dispatch_next(int, text, text, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.cancel_execution(uuid, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.complete_execution(uuid, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.reap_expired(timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.register_worker(text, text, text[], int, uuid, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.heartbeat(uuid, bigint, timestamptz, text) SECURITY DEFINER;
ALTER FUNCTION sched.poll_commands(uuid, bigint, int, timestamptz, boolean) SECURITY DEFINER;
ALTER FUNCTION sched.wait_commands(uuid, bigint, int, interval, boolean) SECURITY DEFINER;
ALTER FUNCTION sched.start_attempt(uuid, bigint, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.renew_lease(uuid, bigint, timestamptz) SECURITY DEFINER;
ALTER FUNCTION sched.finish_attempt(uuid, bigint, text, jsonb, timestamptz) SECURITY DEFINER;
-- the internal writer (the triggers on sched.attempt: the functions above fire them,
-- already as the owner)
ALTER FUNCTION sched._attempt_live_changed() SECURITY DEFINER;

GRANT USAGE ON SCHEMA sched TO sched_observer, sched_scheduler, sched_worker, sched_admin;

-- sched_observer: reads
GRANT SELECT ON ALL TABLES IN SCHEMA sched TO sched_observer;
GRANT EXECUTE ON FUNCTION
    sched.select_candidate(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz, text),
    sched.rank_candidates(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz, text),
    sched.qualification_reasons(text, text, jsonb, jsonb, int, bigint, int, int, bigint, int, text, interval, timestamptz, text),
    sched.qualification_reasons(bigint, timestamptz),
    sched.explain(bigint, timestamptz),
    sched.execution_timeline(uuid),
    sched.node_overview(timestamptz),
    sched.pending(timestamptz),
    sched.pending_explanations(timestamptz),
    sched.pending_explanation(text, text, jsonb, int, bigint, int, int, bigint, int, text, timestamptz),
    sched.limit_explanations(timestamptz),
    sched.limit_reason(bigint, timestamptz),
    sched.gang_reason(uuid, text),
    sched.queue_stats(timestamptz),
    sched.attempt_overview(timestamptz),
    sched.dispatch_stats(),
    sched.step_lock_key(uuid, int),
    sched.setting_seconds(text),
    sched.labels_match(jsonb, jsonb),
    sched.format_label_expression(text, jsonb),
    sched.format_cpus(bigint),
    sched.format_amount(text, text),
    sched.format_duration(interval),
    sched.check_time(timestamptz, text)
TO sched_observer;

-- sched_scheduler: the queue and dispatch
GRANT EXECUTE ON FUNCTION
    sched.submit(uuid, uuid, text, text, int, text, int, jsonb, jsonb, int, bigint, int, int,
                 bigint, int, text, int, timestamptz, jsonb, text, text, uuid, int, boolean,
                 boolean),
    sched.claim_requests(int, interval, text, text, timestamptz),
    sched.dispatch_attempt(bigint, uuid, timestamptz),
    sched.dispatch_next(int, text, text, timestamptz),
    sched.cancel_execution(uuid, timestamptz),
    sched.complete_execution(uuid, timestamptz),
    sched.reap_expired(timestamptz)
TO sched_scheduler;

-- sched_worker: the worker protocol, for its own workers
GRANT EXECUTE ON FUNCTION
    sched.register_worker(text, text, text[], int, uuid, timestamptz),
    sched.heartbeat(uuid, bigint, timestamptz, text),
    sched.poll_commands(uuid, bigint, int, timestamptz, boolean),
    sched.wait_commands(uuid, bigint, int, interval, boolean),
    sched.start_attempt(uuid, bigint, timestamptz),
    sched.renew_lease(uuid, bigint, timestamptz),
    sched.finish_attempt(uuid, bigint, text, jsonb, timestamptz)
TO sched_worker;

-- sched_admin: the fleet and the tenants
GRANT EXECUTE ON FUNCTION
    sched.upsert_node(text, jsonb, int, bigint, int, int, text),
    sched.drain_node(text),
    sched.cordon_worker(uuid),
    sched.uncordon_worker(uuid),
    sched.set_tenant_weight(text, int),
    sched.set_tenant_owner(text, regrole),
    sched.set_concurrency_limit(text, int),
    sched.set_rate_limit(text, int, interval),
    sched.set_tenant_quota(text, int, int, bigint, int)
TO sched_admin;
