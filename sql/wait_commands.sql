--
-- wait_commands: poll_commands that sleeps until a command for the worker commits
-- (shared-memory wake-up, no NOTIFY) or its timeout passes, holding no snapshot while it
-- sleeps.  Here: bad parameters (22004, 22023, 42704, 55000, 42501, before anything is
-- read), where it refuses to wait (25000: its snapshot could be read again after the
-- wait), what it returns (at once when there is a command, each command once, nothing
-- at the timeout).  That a commit wakes it and a rollback does not: isolation spec
-- wait_commands_wakeup; backend_xmin, vacuum, cancel, statement_timeout, standby and no
-- preloading: TAP test 009.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
DROP ROLE IF EXISTS sched_regress_other_worker;
CREATE ROLE sched_regress_other_worker NOLOGIN IN ROLE sched_worker;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- runs q; returns 'no error' or 'SQLSTATE: message'
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 4000, memory_mb => 4096);
SELECT generation FROM sched.register_worker('n1', 'build', ARRAY['1'], 4,
    '00000000-0000-0000-0000-0000000000c1');
\set w '''00000000-0000-0000-0000-0000000000c1'''

-- bad parameters: errors naming the parameter, before anything is read or waited for
SELECT p, pg_temp.err(q) FROM (VALUES
    ('worker_id NULL',     'SELECT * FROM sched.wait_commands(NULL, 1, 10, ''1 s'')'),
    ('generation NULL',    'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', NULL, 10, ''1 s'')'),
    ('max NULL',           'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, NULL, ''1 s'')'),
    ('max 0',              'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 0, ''1 s'')'),
    ('timeout NULL',       'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 10, NULL)'),
    ('timeout negative',   'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 10, ''-1 s'')'),
    ('timeout > 1 hour',   'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 10, ''1 hour 1 s'')'),
    ('timeout in months',  'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 10, ''1 mon'')'),
    ('timeout of 2 days',  'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 10, ''-1 day 49 hours'')')
) AS t(p, q);

-- unknown worker, stale generation, another role's worker: as poll_commands
SELECT * FROM sched.wait_commands('00000000-0000-0000-0000-0000000000ff', 1, 10, '1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM sched.wait_commands(:w, 2, 10, '1 s');
\echo :LAST_ERROR_SQLSTATE
SET ROLE sched_regress_other_worker;
SELECT * FROM sched.wait_commands(:w, 1, 10, '1 s');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- where it refuses to wait (25000), even when it would not have to sleep
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM sched.wait_commands(:w, 1, 10, '0');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT sched.heartbeat(:w, 1) IS NOT NULL AS wrote;
SELECT * FROM sched.wait_commands(:w, 1, 10, '0');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- from a function's query (PL/pgSQL here)
SELECT pg_temp.err('SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 10, ''0'')');
SELECT c.kind, n.node_id FROM sched.wait_commands(:w, 1, 10, '0') c, sched.node n;
\echo :LAST_ERROR_SQLSTATE
SELECT (SELECT count(*) FROM sched.node) AS nodes, c.* FROM sched.wait_commands(:w, 1, 10, '0') c;
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION pg_temp.nodes_now() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT count(*) FROM sched.node';
SELECT pg_temp.nodes_now(), c.kind FROM sched.wait_commands(:w, 1, 10, '0') c;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
DECLARE cur CURSOR FOR SELECT node_id FROM sched.node;
SELECT * FROM sched.wait_commands(:w, 1, 10, '0');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- where it may wait: autocommit, or a READ COMMITTED transaction that has only read;
-- IMMUTABLE and built-in expressions over its rows are fine
SELECT count(*) AS nothing_yet FROM sched.wait_commands(:w, 1, 10, '0');
BEGIN;
SELECT count(*) AS nodes FROM sched.node;
SELECT count(*) AS nothing_yet FROM sched.wait_commands(:w, 1, 10, '0.2 s');
COMMIT;
SELECT upper(kind), now() IS NOT NULL AS t FROM sched.wait_commands(:w, 1, 10, '0');

-- a command already there is returned at once (the 30 s timeout would show as no rows)
SELECT sched.submit('ec000000-0000-0000-0000-0000000000c1', '5e000000-0000-0000-0000-0000000000c1',
                    'build', '1', payload => '{"task": 1}') AS r1 \gset
SELECT outcome FROM sched.dispatch_attempt(:r1);
SELECT c.kind, c.request_id = :r1 AS same_request, c.attempt_number, c.capability, c.payload
  FROM sched.wait_commands(:w, 1, 10, '30 s') c;
-- delivered once, marked at the moment it was read
SELECT count(*) AS again FROM sched.wait_commands(:w, 1, 10, '0');
SELECT delivered_at IS NOT NULL AND delivered_at >= created_at AS delivered FROM sched.command;
-- max: at most that many, oldest first; the rest on the next call
SELECT sched.submit('ec000000-0000-0000-0000-0000000000c1', ('5e000000-0000-0000-0000-0000000000c' || i)::uuid,
                    'build', '1', payload => jsonb_build_object('task', i))
  FROM generate_series(2, 4) i \g /dev/null
SELECT count(*) AS dispatched FROM sched.dispatch_next(10) WHERE outcome = 'DISPATCHED';
SELECT c.payload FROM sched.wait_commands(:w, 1, 2, '30 s') c;
SELECT c.payload FROM sched.wait_commands(:w, 1, 2, '30 s') c;

-- the dispatch counters behind sched.dispatch_stats count by outcome
SELECT outcome, reason, calls > 0 AS counted FROM sched.dispatch_stats WHERE outcome = 'DISPATCHED';

DROP EXTENSION pg_sched CASCADE;
DROP ROLE sched_regress_other_worker;
