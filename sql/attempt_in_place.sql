--
-- attempt_in_place: a start and a lease's renewal rewrite the attempt's row in place
-- (HOT), because no index of sched.attempt has a column they change in its key,
-- expressions or predicate (20_work.sql); an end is not HOT (finished_at, in the live
-- indexes' predicate, changes), and the live attempts stay reachable through those
-- indexes.
--   1. the catalog: no index of sched.attempt depends on status, started_at or
--      lease_expires_at; the live indexes' predicate is finished_at IS NULL; the
--      table's pages keep room for those updates (fillfactor 85);
--   2. in one transaction: dispatch, start, renew, finish: the table's counters, read
--      before and after within the transaction (no flush of statistics falls inside a
--      transaction), say 3 updates, 2 of them HOT;
--   3. the same through wait_commands(start => true);
--   4. the live indexes find the live attempts and only them (index scans forced);
--      the reaper ends an expired one.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- 1. the columns every index of sched.attempt depends on (keys, expressions, predicates;
-- a constraint's index through its constraint)
SELECT c.relname AS index, string_agg(DISTINCT a.attname::text, ', ') AS columns
  FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
  LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid
  JOIN pg_depend d ON d.classid IN ('pg_class'::regclass, 'pg_constraint'::regclass)
                  AND d.objid IN (i.indexrelid, k.oid)
                  AND d.refclassid = 'pg_class'::regclass AND d.refobjid = i.indrelid
                  AND d.refobjsubid > 0
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = d.refobjsubid
 WHERE i.indrelid = 'sched.attempt'::regclass
 GROUP BY c.relname ORDER BY c.relname;
SELECT reloptions FROM pg_class WHERE oid = 'sched.attempt'::regclass;
SELECT c.relname AS index, pg_get_expr(i.indpred, i.indrelid) AS predicate
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'sched.attempt'::regclass AND c.relname LIKE 'attempt_live%'
 ORDER BY 1;

SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 8000, memory_mb => 16384);
SELECT generation FROM sched.register_worker('n1', 'build', ARRAY['1'], 8,
    '00000000-0000-0000-0000-0000000000a1', now());
\set w '''00000000-0000-0000-0000-0000000000a1'''
SELECT count(sched.submit(('e1000000-0000-0000-0000-00000000000' || i)::uuid,
                          ('51000000-0000-0000-0000-00000000000' || i)::uuid, 'build', '1',
                          available_at => now() - interval '1 min'))
  FROM generate_series(1, 4) i;

-- 2. dispatch, start, renew, finish in one transaction
BEGIN;
SELECT pg_stat_get_xact_tuples_updated('sched.attempt'::regclass) AS u0,
       pg_stat_get_xact_tuples_hot_updated('sched.attempt'::regclass) AS h0 \gset
SELECT outcome FROM sched.dispatch_next(1);
SELECT a.attempt_id AS aid, a.lease_version AS lv FROM sched.attempt a \gset
SELECT sched.start_attempt(:'aid', :lv, now()) IS NOT NULL AS started;
SELECT sched.renew_lease(:'aid', :lv, now()) IS NOT NULL AS renewed;
SELECT pg_stat_get_xact_tuples_updated('sched.attempt'::regclass) - :u0 AS updated,
       pg_stat_get_xact_tuples_hot_updated('sched.attempt'::regclass) - :h0 AS hot_updated;
SELECT sched.finish_attempt(:'aid', :lv, 'SUCCEEDED');
SELECT pg_stat_get_xact_tuples_updated('sched.attempt'::regclass) - :u0 AS updated,
       pg_stat_get_xact_tuples_hot_updated('sched.attempt'::regclass) - :h0 AS hot_updated;
COMMIT;

-- 3. delivered and started in one call (a transaction that has written nothing before
-- it): the start is HOT too
SELECT outcome FROM sched.dispatch_next(1);
BEGIN;
SELECT pg_stat_get_xact_tuples_updated('sched.attempt'::regclass) AS u0,
       pg_stat_get_xact_tuples_hot_updated('sched.attempt'::regclass) AS h0 \gset
SELECT kind, lease_expires_at IS NOT NULL AS started
  FROM sched.wait_commands(:w, 1, 10, '0 s', start => true);
SELECT pg_stat_get_xact_tuples_updated('sched.attempt'::regclass) - :u0 AS updated,
       pg_stat_get_xact_tuples_hot_updated('sched.attempt'::regclass) - :h0 AS hot_updated;
COMMIT;

-- 4. two more dispatched (one of them started): three live, one ended
SELECT count(*) AS dispatched FROM sched.dispatch_next(2);
SELECT sched.start_attempt(a.attempt_id, a.lease_version, now()) IS NOT NULL AS started
  FROM sched.attempt a WHERE a.status = 'DISPATCHED' ORDER BY a.attempt_id LIMIT 1;
SELECT status, count(*) FROM sched.attempt GROUP BY status ORDER BY status;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*) AS live_of_worker FROM sched.attempt a
 WHERE a.worker_id = :w AND a.finished_at IS NULL;
EXPLAIN (COSTS OFF) SELECT count(*) FROM sched.attempt a
 WHERE a.node_id = 'n1' AND a.finished_at IS NULL;
SELECT count(*) AS live_of_node FROM sched.attempt a
 WHERE a.node_id = 'n1' AND a.finished_at IS NULL;
RESET enable_seqscan;
RESET enable_bitmapscan;
-- the reaper, 10 minutes on: the three live attempts' leases (5 min) have run out
SELECT sched.reap_expired(now() + interval '10 min') AS reaped;
SELECT status, count(*) FROM sched.attempt GROUP BY status ORDER BY status;
SELECT count(*) AS live FROM sched.attempt a WHERE a.finished_at IS NULL;
