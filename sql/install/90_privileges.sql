-- sql/install/90_privileges.sql — privileges: nothing to PUBLIC, the role sched_observer
-- A piece of pg_sched--0.2.0.sql, which the Makefile builds from sql/install/*.sql in
-- the order of their names.

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
