-- sched.notify_workers: with it on, a command for a worker (a dispatch's START, a cancel's
-- CANCEL) also sends NOTIFY sched_worker_<worker_id> at commit, for workers that LISTEN;
-- off (the default in 0.2.0: NOTIFY serializes commits cluster-wide), nothing is sent and
-- workers wait with sched.wait_commands.
-- psql prints a received notification with the sender's PID and the attempt id, both
-- replaced through sed by fixed text (as in lifecycle.sql).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

SHOW sched.notify_workers;
SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 4000, memory_mb => 4096);
SELECT generation FROM sched.register_worker('n1', 'build', ARRAY['1'], 4,
    '00000000-0000-0000-0000-0000000000b1', '2024-05-01 10:00:00+00');
SELECT sched.submit('ec000000-0000-0000-0000-0000000000b1', '5e000000-0000-0000-0000-0000000000b1',
                    'build', '1', available_at => '2024-05-01 10:00:00+00') AS r1 \gset
SELECT sched.submit('ec000000-0000-0000-0000-0000000000b1', '5e000000-0000-0000-0000-0000000000b2',
                    'build', '1', available_at => '2024-05-01 10:00:00+00') AS r2 \gset
SELECT sched.submit('ec000000-0000-0000-0000-0000000000b2', '5e000000-0000-0000-0000-0000000000b3',
                    'build', '1', available_at => '2024-05-01 10:00:00+00') AS r3 \gset

LISTEN "sched_worker_00000000-0000-0000-0000-0000000000b1";
-- off (the default): the dispatch commits, and no notification is printed after it
\o | sed -e 's/PID [0-9]*/PID <pid>/'
SELECT outcome, node_id FROM sched.dispatch_attempt(:r1, at => '2024-05-01 10:00:01+00');
\o
SELECT count(*) AS start_commands FROM sched.command WHERE kind = 'START';
-- on: the worker is woken at commit, with an empty payload
SET sched.notify_workers = on;
BEGIN;
SELECT outcome, node_id FROM sched.dispatch_attempt(:r2, at => '2024-05-01 10:00:02+00');
SELECT attempt_id AS a2 FROM sched.attempt WHERE request_id = :r2 \gset
\setenv ATTEMPT :a2
\o | sed -e "s/$ATTEMPT/<attempt r2>/g" -e 's/PID [0-9]*/PID <pid>/'
COMMIT;
\o
-- on: a cancel's CANCEL commands notify too (one notification per worker and transaction)
\o | sed -e 's/PID [0-9]*/PID <pid>/'
SELECT sched.cancel_execution('ec000000-0000-0000-0000-0000000000b1', '2024-05-01 10:00:03+00');
\o
SELECT count(*) AS cancel_commands FROM sched.command WHERE kind = 'CANCEL';
-- off again: neither a dispatch nor a cancel notifies
RESET sched.notify_workers;
\o | sed -e 's/PID [0-9]*/PID <pid>/'
SELECT outcome, node_id FROM sched.dispatch_attempt(:r3, at => '2024-05-01 10:00:04+00');
SELECT sched.cancel_execution('ec000000-0000-0000-0000-0000000000b2', '2024-05-01 10:00:05+00');
\o
SELECT kind, count(*) FROM sched.command GROUP BY kind ORDER BY kind;
UNLISTEN *;
