--
-- reads_by_key: the statements a session keeps one plan of reach their rows by key,
-- even with the plan made while the tables were empty and just vacuumed, however the
-- tables have grown since:
--   - poll_commands and wait_commands reach a worker's next command, its attempt and
--     its request by key, however many commands other workers have had delivered
--     (src/lifecycle.c, commands_delivered);
--   - submit reads the queue by key (it is planned without sequential scans: PL/pgSQL
--     keeps its plans, and one made on an empty queue scanned all of it at every later
--     submit of the session).
-- Measured by what a call reads (pg_stat_xact_user_tables, before and after the call in
-- one transaction: those counters also hold earlier transactions not yet reported), not
-- by time.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

-- the three tables' counters, into psql variables (nothing written: wait_commands may
-- not follow a write in its transaction)
\set mark 'SELECT sum(seq_scan) FILTER (WHERE relname = ''attempt'') AS a_seq, sum(idx_tup_fetch) FILTER (WHERE relname = ''attempt'') AS a_idx, sum(seq_scan) FILTER (WHERE relname = ''command'') AS c_seq, sum(idx_tup_fetch) FILTER (WHERE relname = ''command'') AS c_idx, sum(seq_scan) FILTER (WHERE relname = ''request'') AS r_seq, sum(idx_tup_fetch) FILTER (WHERE relname = ''request'') AS r_idx FROM pg_stat_xact_user_tables WHERE schemaname = ''sched'''
-- what each table had read of it since :mark, by sequential scans and through indexes
\set reads 'SELECT t.relname, t.seq_scan - b.seq AS seq_scans, t.idx_tup_fetch - b.idx <= 3 AS by_key FROM pg_stat_xact_user_tables t JOIN (VALUES (''attempt'', :a_seq, :a_idx), (''command'', :c_seq, :c_idx), (''request'', :r_seq, :r_idx)) b (relname, seq, idx) ON b.relname = t.relname WHERE t.schemaname = ''sched'' ORDER BY t.relname;'

SELECT node_id FROM sched.upsert_node('n1', cpu_millis => 4000, memory_mb => 4096);
SELECT node_id FROM sched.upsert_node('n2', cpu_millis => 4000, memory_mb => 4096);
SELECT generation FROM sched.register_worker('n1', 'a', ARRAY['1'], 1000,
    '00000000-0000-0000-0000-0000000000a1');
SELECT generation FROM sched.register_worker('n2', 'b', ARRAY['1'], 10,
    '00000000-0000-0000-0000-0000000000b1');

-- the plan of this session is made now, on empty tables that vacuum has just measured
VACUUM ANALYZE sched.command, sched.attempt, sched.request;
SELECT count(*) AS commands FROM sched.poll_commands('00000000-0000-0000-0000-0000000000b1', 1, 10);

-- 400 commands for worker a, all delivered; then one for worker b.  The first submits
-- of the session make its plans, on the empty queue.
SELECT count(sched.submit(md5('e' || g)::uuid, md5('s' || g)::uuid, 'a', '1')) AS submitted
  FROM generate_series(1, 400) g;

-- a later submit reads the 400 requests by key, none by a scan
BEGIN;
:mark \gset
SELECT sched.submit(md5('e401')::uuid, md5('s401')::uuid, 'a', '1') > 0 AS submitted;
:reads
COMMIT;
SELECT count(*) AS placed FROM sched.dispatch_next(500);
SELECT count(*) AS delivered FROM sched.poll_commands('00000000-0000-0000-0000-0000000000a1', 1, 1000);
SELECT sched.submit('00000000-0000-0000-0000-00000000e0b1', '00000000-0000-0000-0000-00000000a0b1', 'b', '1') > 0 AS submitted;
SELECT count(*) AS placed FROM sched.dispatch_next(10);

-- worker b's next command: a few rows read by key from each table, no table scanned
BEGIN;
:mark \gset
SELECT kind, attempt_number, capability FROM sched.poll_commands('00000000-0000-0000-0000-0000000000b1', 1, 10);
:reads
COMMIT;

-- and so does wait_commands, which runs the same statement (a command is there: it
-- returns at once)
SELECT sched.submit('00000000-0000-0000-0000-00000000e0b2', '00000000-0000-0000-0000-00000000a0b2', 'b', '1') > 0 AS submitted;
SELECT count(*) AS placed FROM sched.dispatch_next(10);
BEGIN;
:mark \gset
SELECT kind, attempt_number, capability FROM sched.wait_commands('00000000-0000-0000-0000-0000000000b1', 1, 10, '0 s');
:reads
COMMIT;
