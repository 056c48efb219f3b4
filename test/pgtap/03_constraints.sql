-- 03_constraints.sql — pgTAP: the CHECK constraints that keep reservations within
-- capacity and slots (SPEC.md section 2: at all times live attempts <= slots and
-- reserved <= capacity), and DROP EXTENSION leaving nothing behind (issue 2, item 1).
--
--   1. On an idle fleet, direct UPDATEs that push a counter above capacity/slots or below
--      zero are refused with SQLSTATE 23514 (check_violation).
--   2. Legitimate dispatches pass the constraints, including one that reserves a node's
--      whole capacity (the boundary is inclusive) and one that fills a worker's last slot;
--      the counters then equal the sums over live attempts.
--   3. On the full node/worker, one unit more is refused (23514), capacity or slots may not
--      be lowered below what is reserved (23514), and a dispatch that cannot fit is an
--      UNSCHEDULABLE row, not an error, and changes no counter.
--   4. DROP EXTENSION pg_sched (with fleet, requests and attempts present) leaves no
--      catalog object behind: schema gone, every catalog back to its count before CREATE
--      EXTENSION, nothing depending on the extension; CREATE EXTENSION works again.
-- Everything happens in one transaction that is rolled back.
--
-- Run: pg_prove -h $PGHOST -p $PGPORT -U postgres -d postgres --failures test/pgtap/*.sql
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;

-- Fingerprint of the catalogs (row counts outside temporary schemas), taken before
-- CREATE EXTENSION pg_sched and compared after DROP EXTENSION in section 4.
\set catalog_fingerprint 'SELECT string_agg(format(''%s=%s'', cat, n), '' '' ORDER BY cat) FROM (SELECT ''pg_namespace'' AS cat, count(*) AS n FROM pg_namespace WHERE nspname !~ ''^pg_(toast_)?temp_'' UNION ALL SELECT ''pg_class'', count(*) FROM pg_class WHERE relnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname ~ ''^pg_(toast_)?temp_'') UNION ALL SELECT ''pg_type'', count(*) FROM pg_type WHERE typnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname ~ ''^pg_(toast_)?temp_'') UNION ALL SELECT ''pg_proc'', count(*) FROM pg_proc WHERE pronamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname ~ ''^pg_(toast_)?temp_'') UNION ALL SELECT ''pg_constraint'', count(*) FROM pg_constraint WHERE connamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname ~ ''^pg_(toast_)?temp_'') UNION ALL SELECT ''pg_trigger'', count(*) FROM pg_trigger UNION ALL SELECT ''pg_event_trigger'', count(*) FROM pg_event_trigger UNION ALL SELECT ''pg_operator'', count(*) FROM pg_operator UNION ALL SELECT ''pg_cast'', count(*) FROM pg_cast UNION ALL SELECT ''pg_description'', count(*) FROM pg_description UNION ALL SELECT ''pg_init_privs'', count(*) FROM pg_init_privs UNION ALL SELECT ''pg_extension'', count(*) FROM pg_extension UNION ALL SELECT ''pg_policy'', count(*) FROM pg_policy UNION ALL SELECT ''pg_publication_rel'', count(*) FROM pg_publication_rel) AS counts'
:catalog_fingerprint \gset catalog_before_

CREATE EXTENSION pg_sched;

SELECT plan(45);

-- ---------------------------------------------------------------------------------
-- Fleet: n1 (2000 mcpu, 4096 MB, 1 GPU; worker with 2 slots),
--        n2 (1000 mcpu, 1024 MB, 0 GPU; worker with 1 slot).  All at a fixed time.
-- ---------------------------------------------------------------------------------
SELECT sched.upsert_node('n1', '{"zone":"a"}', 2000, 4096, 1) \gset ignore_
SELECT sched.upsert_node('n2', '{"zone":"b"}', 1000, 1024, 0) \gset ignore_
SELECT sched.register_worker('n1', 'build', '{1}', 2, '00000000-0000-4000-8000-0000000000a1',
                             '2030-01-01 00:00:00+00') \gset ignore_
SELECT sched.register_worker('n2', 'build', '{1}', 1, '00000000-0000-4000-8000-0000000000a2',
                             '2030-01-01 00:00:00+00') \gset ignore_

-- ---------------------------------------------------------------------------------
-- 1. Idle fleet: every counter is guarded (SQLSTATE 23514)
-- ---------------------------------------------------------------------------------
SELECT throws_ok($$ UPDATE sched.node SET reserved_cpu_millis = cpu_millis + 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'node: reserved_cpu_millis > cpu_millis is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_memory_mb = memory_mb + 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'node: reserved_memory_mb > memory_mb is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_gpus = gpus + 1 WHERE node_id = 'n2' $$,
                 '23514', NULL, 'node: reserved_gpus > gpus (a node without GPUs) is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_cpu_millis = -1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'node: negative reserved_cpu_millis is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_memory_mb = -1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'node: negative reserved_memory_mb is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_gpus = -1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'node: negative reserved_gpus is refused');
SELECT throws_ok($$ UPDATE sched.node SET live_attempts = -1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'node: negative live_attempts is refused');
SELECT throws_ok($$ UPDATE sched.node SET cpu_millis = -1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'node: negative cpu_millis is refused');
SELECT throws_ok($$ UPDATE sched.worker SET live_attempts = slots + 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'worker: live_attempts > slots is refused');
SELECT throws_ok($$ UPDATE sched.worker SET live_attempts = -1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'worker: negative live_attempts is refused');
SELECT throws_ok($$ UPDATE sched.worker SET slots = -1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'worker: negative slots is refused');
SELECT results_eq(
    $$ SELECT node_id COLLATE "default", reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts
         FROM sched.node ORDER BY node_id $$,
    $$ VALUES ('n1'::text, 0, 0::bigint, 0, 0), ('n2', 0, 0, 0, 0) $$,
    'the refused updates changed nothing');

-- ---------------------------------------------------------------------------------
-- 2. Legitimate dispatches pass the constraints
-- ---------------------------------------------------------------------------------
-- r_full takes all of n1 (the only node with a GPU): reserved = capacity exactly
SELECT sched.submit('00000000-0000-4000-8000-00000000e001', '00000000-0000-4000-8000-00000000c001',
                    'build', '1', reserve_cpu_millis => 2000, reserve_memory_mb => 4096, reserve_gpus => 1,
                    available_at => '2030-01-01 00:00:00+00') AS r_full \gset
SELECT results_eq(
    format($$ SELECT outcome, node_id COLLATE "default" FROM sched.dispatch_attempt(%s, NULL, '2030-01-01 00:00:01+00') $$, :r_full),
    $$ VALUES ('DISPATCHED'::text, 'n1'::text) $$,
    'a dispatch reserving a node''s whole capacity passes (DISPATCHED on n1)');
SELECT results_eq(
    $$ SELECT reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts
         FROM sched.node WHERE node_id = 'n1' $$,
    $$ VALUES (2000, 4096::bigint, 1, 1) $$,
    'n1 reserved = capacity: 2000 mcpu, 4096 MB, 1 GPU, 1 live attempt');

-- r_slot fills n1's second (last) slot: pinned, reserves nothing
SELECT sched.submit('00000000-0000-4000-8000-00000000e001', '00000000-0000-4000-8000-00000000c002',
                    'build', '1', node_id => 'n1',
                    available_at => '2030-01-01 00:00:00+00') AS r_slot \gset
SELECT results_eq(
    format($$ SELECT outcome, node_id COLLATE "default" FROM sched.dispatch_attempt(%s, NULL, '2030-01-01 00:00:02+00') $$, :r_slot),
    $$ VALUES ('DISPATCHED'::text, 'n1'::text) $$,
    'a dispatch taking a worker''s last slot passes (DISPATCHED on n1)');
SELECT is((SELECT live_attempts FROM sched.worker WHERE node_id = 'n1'), 2,
          'n1''s worker: live_attempts = slots = 2');

-- r_n2 takes all of n2
SELECT sched.submit('00000000-0000-4000-8000-00000000e001', '00000000-0000-4000-8000-00000000c003',
                    'build', '1', reserve_cpu_millis => 1000, reserve_memory_mb => 1024,
                    available_at => '2030-01-01 00:00:00+00') AS r_n2 \gset
SELECT results_eq(
    format($$ SELECT outcome, node_id COLLATE "default" FROM sched.dispatch_attempt(%s, NULL, '2030-01-01 00:00:03+00') $$, :r_n2),
    $$ VALUES ('DISPATCHED'::text, 'n2'::text) $$,
    'a dispatch reserving all of n2 passes (DISPATCHED on n2)');

-- ---------------------------------------------------------------------------------
-- 3. Full fleet: one unit more is refused, capacity cannot shrink under reservations,
--    and a dispatch that does not fit is a row, not an error
-- ---------------------------------------------------------------------------------
SELECT throws_ok($$ UPDATE sched.node SET reserved_cpu_millis = reserved_cpu_millis + 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'full n1: one more reserved mcpu is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_memory_mb = reserved_memory_mb + 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'full n1: one more reserved MB is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_gpus = reserved_gpus + 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'full n1: one more reserved GPU is refused');
SELECT throws_ok($$ UPDATE sched.worker SET live_attempts = live_attempts + 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'full n1 worker: a third live attempt on 2 slots is refused');
SELECT throws_ok($$ UPDATE sched.worker SET live_attempts = live_attempts + 1 WHERE node_id = 'n2' $$,
                 '23514', NULL, 'full n2 worker: a second live attempt on 1 slot is refused');
SELECT throws_ok($$ UPDATE sched.node SET cpu_millis = 1999 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'n1: cpu_millis below the reserved 2000 is refused');
SELECT throws_ok($$ UPDATE sched.node SET memory_mb = 4095 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'n1: memory_mb below the reserved 4096 is refused');
SELECT throws_ok($$ UPDATE sched.node SET gpus = 0 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'n1: gpus below the reserved 1 is refused');
SELECT throws_ok($$ UPDATE sched.worker SET slots = 1 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'n1 worker: slots below its 2 live attempts is refused');
SELECT throws_ok($$ UPDATE sched.node SET reserved_cpu_millis = reserved_cpu_millis - 2001 WHERE node_id = 'n1' $$,
                 '23514', NULL, 'n1: releasing more than reserved (negative) is refused');

-- a GPU request now fits nowhere: UNSCHEDULABLE, no error, no counter moves
SELECT sched.submit('00000000-0000-4000-8000-00000000e001', '00000000-0000-4000-8000-00000000c004',
                    'build', '1', reserve_gpus => 1,
                    available_at => '2030-01-01 00:00:00+00') AS r_gpu \gset
SELECT results_eq(
    format($$ SELECT outcome, attempt_id IS NULL FROM sched.dispatch_attempt(%s, NULL, '2030-01-01 00:00:04+00') $$, :r_gpu),
    $$ VALUES ('UNSCHEDULABLE'::text, true) $$,
    'a GPU request on a full fleet is UNSCHEDULABLE (a row, not an error)');
-- a request pinned to n1 with no resources finds no free slot
SELECT sched.submit('00000000-0000-4000-8000-00000000e001', '00000000-0000-4000-8000-00000000c005',
                    'build', '1', node_id => 'n1',
                    available_at => '2030-01-01 00:00:00+00') AS r_pin \gset
SELECT results_eq(
    format($$ SELECT outcome, attempt_id IS NULL FROM sched.dispatch_attempt(%s, NULL, '2030-01-01 00:00:05+00') $$, :r_pin),
    $$ VALUES ('UNSCHEDULABLE'::text, true) $$,
    'a request pinned to n1 with both slots taken is UNSCHEDULABLE');
SELECT is((SELECT state FROM sched.request WHERE request_id = :r_pin), 'PENDING',
          'the unschedulable request stays PENDING');

-- counters = sums over live attempts, for every node and worker
SELECT results_eq(
    $$ SELECT node_id COLLATE "default", reserved_cpu_millis, reserved_memory_mb, reserved_gpus, live_attempts
         FROM sched.node ORDER BY node_id $$,
    $$ VALUES ('n1'::text, 2000, 4096::bigint, 1, 2), ('n2', 1000, 1024, 0, 1) $$,
    'node counters after the dispatches: n1 full with 2 attempts, n2 full with 1');
SELECT results_eq(
    $$ SELECT n.node_id, n.reserved_cpu_millis::bigint, n.reserved_memory_mb::numeric,
              n.reserved_gpus::bigint, n.live_attempts::bigint
         FROM sched.node n ORDER BY n.node_id $$,
    $$ SELECT n.node_id, coalesce(sum(a.reserve_cpu_millis), 0)::bigint,
              coalesce(sum(a.reserve_memory_mb), 0)::numeric,
              coalesce(sum(a.reserve_gpus), 0)::bigint, count(a.attempt_id)
         FROM sched.node n
         LEFT JOIN sched.attempt a ON a.node_id = n.node_id AND a.status IN ('DISPATCHED', 'RUNNING')
        GROUP BY n.node_id ORDER BY n.node_id $$,
    'node counters equal the sums over live attempts');
SELECT results_eq(
    $$ SELECT w.worker_id, w.live_attempts::bigint FROM sched.worker w ORDER BY w.worker_id $$,
    $$ SELECT w.worker_id, count(a.attempt_id)
         FROM sched.worker w
         LEFT JOIN sched.attempt a ON a.worker_id = w.worker_id AND a.status IN ('DISPATCHED', 'RUNNING')
        GROUP BY w.worker_id ORDER BY w.worker_id $$,
    'worker live_attempts equal the counts of live attempts');
SELECT is((SELECT count(*)::int FROM sched.attempt), 3, 'three attempts exist');
-- a command records the session it was delivered to: both or neither, never an earlier
-- session than the one it was made for (issue 13)
SELECT throws_ok($$UPDATE sched.command SET delivered_at = now() WHERE command_id = (SELECT min(command_id) FROM sched.command)$$,
                 '23514', NULL, 'delivered_at without delivered_generation is refused');
SELECT throws_ok($$UPDATE sched.command SET delivered_at = now(), delivered_generation = worker_generation - 1
                    WHERE command_id = (SELECT min(command_id) FROM sched.command)$$,
                 '23514', NULL, 'delivery to an earlier session than the command was made for is refused');

-- ---------------------------------------------------------------------------------
-- 4. DROP EXTENSION removes everything (with data present)
-- ---------------------------------------------------------------------------------
SELECT oid AS ext_oid FROM pg_extension WHERE extname = 'pg_sched' \gset
SELECT lives_ok('DROP EXTENSION pg_sched', 'DROP EXTENSION pg_sched (no CASCADE) succeeds with data present');
SELECT hasnt_schema('sched', 'schema sched is gone');
SELECT hasnt_extension('pg_sched', 'extension pg_sched is gone');
SELECT is((SELECT count(*)::int FROM pg_depend
            WHERE refclassid = 'pg_extension'::regclass AND refobjid = :ext_oid), 0,
          'nothing depends on the dropped extension any more');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE probin LIKE '%pg_sched%'), 0,
          'no C function of the pg_sched module is left, in any schema');
SELECT is((SELECT count(*)::int FROM pg_type t
            WHERE t.typname IN ('candidate', 'ranked_candidate', 'qualification', 'dispatch_result',
                                'registration', 'claim', 'node', 'worker', 'request', 'attempt')
              AND t.typnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname ~ '^pg_(toast_)?temp_')), 0,
          'no type of the extension is left, in any schema');
SELECT is((:catalog_fingerprint), :'catalog_before_string_agg',
          'every catalog is back to its row count before CREATE EXTENSION pg_sched');
SELECT lives_ok('CREATE EXTENSION pg_sched', 'CREATE EXTENSION pg_sched works again after the drop');
SELECT is((SELECT count(*)::int FROM sched.node) + (SELECT count(*)::int FROM sched.request)
          + (SELECT count(*)::int FROM sched.attempt), 0,
          'the re-created extension starts empty');

SELECT * FROM finish();
ROLLBACK;
