-- sched.notify_workers: a dispatch wakes its worker with NOTIFY sched_worker_<worker_id>
-- at commit (on, the default); with it off, nothing is sent (workers poll instead).
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

LISTEN "sched_worker_00000000-0000-0000-0000-0000000000b1";
-- off: the dispatch commits, and no notification is printed after it
SET sched.notify_workers = off;
\o | sed -e 's/PID [0-9]*/PID <pid>/'
SELECT outcome, node_id FROM sched.dispatch_attempt(:r1, at => '2024-05-01 10:00:01+00');
\o
SELECT count(*) AS start_commands FROM sched.command WHERE kind = 'START';
-- on again: the worker is woken at commit, with an empty payload
RESET sched.notify_workers;
BEGIN;
SELECT outcome, node_id FROM sched.dispatch_attempt(:r2, at => '2024-05-01 10:00:02+00');
SELECT attempt_id AS a2 FROM sched.attempt WHERE request_id = :r2 \gset
\setenv ATTEMPT :a2
\o | sed -e "s/$ATTEMPT/<attempt r2>/g" -e 's/PID [0-9]*/PID <pid>/'
COMMIT;
\o
UNLISTEN *;
