--
-- start_on_delivery: poll_commands and wait_commands with start => true: a worker
-- receives an attempt and begins it in one transaction (one call fewer per task).
--   1. bad input: start NULL (22004), an `at` in the future from a worker's role
--      (22023, as start_attempt refuses it), nothing delivered;
--   2. start => false (the default) leaves the attempt DISPATCHED, lease_expires_at NULL;
--   3. start => true: the attempt RUNNING with its lease from `at`, the execution
--      RUNNING, the milestone; what start_attempt writes, row for row; the row's
--      lease_expires_at is the attempt's;
--   4. CANCEL rows are returned as before (lease_expires_at NULL), max is kept, the rest
--      comes on the next call; start_attempt and finish_attempt after it work as usual;
--   5. a rollback undoes delivery and start together;
--   6. wait_commands does the same.
-- A START whose attempt ends between the delivery's snapshot and its lock:
-- isolation spec start_on_delivery_race.
--
-- T0 = 2024-05-01 10:00:00 UTC; sched.lease_ttl is 300 s (default).
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
DROP ROLE IF EXISTS sched_regress_sod_worker;
CREATE ROLE sched_regress_sod_worker NOLOGIN IN ROLE sched_worker;
RESET client_min_messages;
SET TIME ZONE 'UTC';
SET sched.heartbeat_ttl = '100000d';

-- runs q; returns 'no error' or 'SQLSTATE: message'
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 8000, memory_mb => 16384);
-- the worker is the worker role's own (a worker's role may not pass an `at` to come)
SET ROLE sched_regress_sod_worker;
SELECT generation FROM sched.register_worker('n1', 'build', ARRAY['1'], 8,
    '00000000-0000-0000-0000-0000000000d1', '2024-05-01 10:00:00+00');
RESET ROLE;
\set w '''00000000-0000-0000-0000-0000000000d1'''

-- two executions of two steps each, dispatched at T0
SELECT count(sched.submit(('ec000000-0000-0000-0000-00000000000' || (i / 2 + 1))::uuid,
                          ('5e000000-0000-0000-0000-00000000000' || i)::uuid, 'build', '1',
                          payload => jsonb_build_object('task', i),
                          available_at => '2024-05-01 10:00:00+00'))
  FROM generate_series(0, 3) i;
SELECT count(*) AS dispatched FROM sched.dispatch_next(10, at => '2024-05-01 10:00:00+00')
 WHERE outcome = 'DISPATCHED';

-- 1. bad input: the parameter named, nothing delivered
SELECT p, pg_temp.err(q) FROM (VALUES
    ('poll start NULL', 'SELECT * FROM sched.poll_commands(' || quote_literal(:w) || ', 1, 10, now(), NULL)'),
    ('wait start NULL', 'SELECT * FROM sched.wait_commands(' || quote_literal(:w) || ', 1, 10, ''0'', NULL)')
) AS t(p, q);
SET ROLE sched_regress_sod_worker;
SELECT regexp_replace(pg_temp.err('SELECT * FROM sched.poll_commands(' || quote_literal(:w) ||
                       ', 1, 10, now() + interval ''1 hour'', start => true)'),
                      'future: .*$', 'future: <at>') AS future_at;
RESET ROLE;
-- nothing was delivered
SELECT count(*) AS delivered, count(*) FILTER (WHERE a.status <> 'DISPATCHED') AS not_dispatched
  FROM sched.command c JOIN sched.attempt a USING (attempt_id) WHERE c.delivered_at IS NOT NULL;

-- what each call returned, to be read in statements of their own (a statement's snapshot
-- is taken before the call writes)
CREATE TEMP TABLE got AS SELECT 0 AS call, c.* FROM sched.poll_commands(:w, 1) c WITH NO DATA;
GRANT ALL ON got TO sched_regress_sod_worker;
CREATE VIEW pg_temp.got_now AS
SELECT g.call, g.kind, g.payload, g.lease_expires_at, a.status, a.started_at,
       a.lease_expires_at = g.lease_expires_at AS same_lease, e.status AS execution
  FROM got g JOIN sched.attempt a USING (attempt_id)
  JOIN sched.execution e ON e.execution_id = a.execution_id;

-- 2. start => false (the default): delivered, not started
INSERT INTO got SELECT 2, c.* FROM sched.poll_commands(:w, 1, 1, '2024-05-01 10:00:01+00') c;
SELECT * FROM got_now WHERE call = 2;

-- 3. start => true: started at `at`, as start_attempt starts it; its execution, which
-- nothing had started, RUNNING
SET ROLE sched_regress_sod_worker;
INSERT INTO got
SELECT 3, c.* FROM sched.poll_commands(:w, 1, 1, '2024-05-01 10:00:02+00', start => true) c;
RESET ROLE;
SELECT * FROM got_now WHERE call = 3;
-- the milestone, as start_attempt writes it
SELECT t.stage, t.state, t.component, t.title, t.detail, t.at
  FROM sched.timeline t JOIN got g ON t.attempt_id = g.attempt_id
 WHERE g.call = 3 AND t.milestone_key LIKE 'step.attempt.started:%';
-- the attempt delivered in 2 started by start_attempt: the same rows
SELECT g.attempt_id AS first, g.lease_version AS first_lv FROM got g WHERE g.call = 2 \gset
SELECT sched.start_attempt(:'first', :first_lv, '2024-05-01 10:00:02+00');
SELECT count(DISTINCT (a.status, a.started_at, a.lease_expires_at)) AS attempt_rows_alike,
       count(DISTINCT (t.stage, t.state, t.component, t.title, t.at, t.detail)) AS milestones_alike,
       count(*) AS started
  FROM sched.attempt a JOIN sched.timeline t ON t.attempt_id = a.attempt_id
 WHERE t.milestone_key LIKE 'step.attempt.started:%';

-- 4. CANCELs are returned as before (nothing started); max holds, the rest comes next
SELECT sched.cancel_execution('ec000000-0000-0000-0000-000000000001',
                              '2024-05-01 10:00:03+00') AS cancelled;
INSERT INTO got
SELECT 4, c.* FROM sched.poll_commands(:w, 1, 2, '2024-05-01 10:00:04+00', start => true) c;
SELECT * FROM got_now WHERE call = 4 ORDER BY payload;
INSERT INTO got
SELECT 5, c.* FROM sched.poll_commands(:w, 1, 10, '2024-05-01 10:00:05+00', start => true) c;
SELECT * FROM got_now WHERE call = 5 ORDER BY payload;
-- start_attempt on an attempt so started renews its lease; finish_attempt ends it
SELECT g.attempt_id AS third, g.lease_version AS third_lv FROM got g
 WHERE g.call = 4 ORDER BY g.command_id LIMIT 1 \gset
SELECT sched.start_attempt(:'third', :third_lv, '2024-05-01 10:00:06+00') AS renewed;
SELECT sched.finish_attempt(:'third', :third_lv, 'SUCCEEDED', at => '2024-05-01 10:00:07+00');
SELECT w.live_attempts FROM sched.worker w WHERE w.worker_id = :w;

-- 5. a rollback undoes the delivery and the start together
SELECT sched.submit('ec000000-0000-0000-0000-000000000003', '5e000000-0000-0000-0000-000000000009',
                    'build', '1', available_at => '2024-05-01 10:00:08+00') AS r5 \gset
SELECT outcome FROM sched.dispatch_attempt(:r5, at => '2024-05-01 10:00:08+00');
CREATE VIEW pg_temp.r5_now AS
SELECT c.delivered_at IS NOT NULL AS delivered, a.status, a.started_at, e.status AS execution,
       (SELECT count(*) FROM sched.timeline t WHERE t.attempt_id = a.attempt_id
           AND t.milestone_key LIKE 'step.attempt.started:%') AS started_milestones
  FROM sched.attempt a JOIN sched.command c USING (attempt_id)
  JOIN sched.execution e ON e.execution_id = a.execution_id
 WHERE a.request_id = :r5;
BEGIN;
SELECT c.kind FROM sched.poll_commands(:w, 1, 10, '2024-05-01 10:00:09+00', start => true) c;
SELECT * FROM r5_now;
ROLLBACK;
SELECT * FROM r5_now;

-- 6. wait_commands, start => true: returns at once, the attempt started at the moment
-- it was read, its lease from then
SELECT c.kind, c.lease_expires_at AS w_expires FROM sched.wait_commands(:w, 1, 10, '30 s', start => true) c \gset
SELECT :'w_expires'::timestamptz = a.lease_expires_at AS same_lease,
       a.started_at = :'w_expires'::timestamptz - interval '300 s' AS lease_from_start,
       a.started_at > '2024-05-01 10:00:09+00' AS started_then,
       r.delivered, r.status, r.execution, r.started_milestones
  FROM sched.attempt a, r5_now r WHERE a.request_id = :r5;

DROP VIEW r5_now;
DROP VIEW got_now;
DROP TABLE got;
DROP EXTENSION pg_sched CASCADE;
DROP ROLE sched_regress_sod_worker;
