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

SELECT plan(53);

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
-- 3b. The five tables' checks (sched._node_valid and the others, 21_row_checks.sql):
--     each condition refused under its own constraint name, and, over every combination
--     of edge values (NULLs included), exactly the rows the SQL conditions refuse, the
--     first broken condition by name reported
-- ---------------------------------------------------------------------------------
-- the SQLSTATE and the error's schema, table and constraint fields, or 'passes'
CREATE FUNCTION pg_temp.violation(call text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    st text; sch text; tab text; con text; msg text;
BEGIN
    EXECUTE call;
    RETURN 'passes';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, sch = SCHEMA_NAME, tab = TABLE_NAME,
                            con = CONSTRAINT_NAME, msg = MESSAGE_TEXT;
    RETURN format('%s %s.%s.%s: %s', st, sch, tab, con, msg);
END
$f$;
SELECT results_eq($$
    SELECT pg_temp.violation(c.call) FROM (VALUES
      (1, $c$UPDATE sched.node SET node_id = '' WHERE node_id = 'n2'$c$),
      (2, $c$UPDATE sched.node SET management_status = 'GONE' WHERE node_id = 'n2'$c$),
      (3, $c$UPDATE sched.node SET labels = '[]' WHERE node_id = 'n2'$c$),
      (4, $c$UPDATE sched.node SET memory_mb = -1, reserved_memory_mb = -1 WHERE node_id = 'n2'$c$),
      (5, $c$UPDATE sched.node SET gpus = -1, reserved_gpus = -2 WHERE node_id = 'n2'$c$),
      (6, $c$UPDATE sched.worker SET capability = '' WHERE node_id = 'n2'$c$),
      (7, $c$UPDATE sched.worker SET capability_versions = '{}' WHERE node_id = 'n2'$c$),
      (8, $c$UPDATE sched.worker SET runtime_state = 'GONE' WHERE node_id = 'n2'$c$),
      (9, $c$UPDATE sched.worker SET scheduling_status = 'GONE' WHERE node_id = 'n2'$c$),
      (10, $c$UPDATE sched.worker SET slots = -1, live_attempts = -1 WHERE node_id = 'n2'$c$),
      (11, $c$UPDATE sched.request SET attempt_number = 0 WHERE request_id = (SELECT min(request_id) FROM sched.request)$c$),
      (12, $c$UPDATE sched.request SET state = 'GONE' WHERE request_id = (SELECT min(request_id) FROM sched.request)$c$),
      (13, $c$UPDATE sched.request SET held_until = now() WHERE request_id = (SELECT min(request_id) FROM sched.request)$c$),
      (14, $c$UPDATE sched.request SET reserve_gpus = -1 WHERE request_id = (SELECT min(request_id) FROM sched.request)$c$),
      (15, $c$UPDATE sched.request SET state = 'CLAIMED' WHERE request_id = (SELECT min(request_id) FROM sched.request)$c$),
      (16, $c$UPDATE sched.attempt SET status = 'GONE', finished_at = now() WHERE attempt_id = (SELECT min(attempt_id::text)::uuid FROM sched.attempt)$c$),
      (17, $c$UPDATE sched.attempt SET status = 'SUCCEEDED' WHERE attempt_id = (SELECT min(attempt_id::text)::uuid FROM sched.attempt)$c$),
      (18, $c$UPDATE sched.command SET kind = 'GONE' WHERE command_id = (SELECT min(command_id) FROM sched.command)$c$),
      (19, $c$UPDATE sched.node SET weight = 7 WHERE node_id = 'n2'$c$)) c(n, call) ORDER BY c.n
$$, $$ VALUES
      ('23514 sched.node.node_id_not_empty: new row for relation "node" violates check constraint "node_id_not_empty"'),
      ('23514 sched.node.node_management_status_valid: new row for relation "node" violates check constraint "node_management_status_valid"'),
      ('23514 sched.node.node_labels_object: new row for relation "node" violates check constraint "node_labels_object"'),
      ('23514 sched.node.node_memory_nonnegative: new row for relation "node" violates check constraint "node_memory_nonnegative"'),
      ('23514 sched.node.node_gpus_nonnegative: new row for relation "node" violates check constraint "node_gpus_nonnegative"'),
      ('23514 sched.worker.worker_capability_not_empty: new row for relation "worker" violates check constraint "worker_capability_not_empty"'),
      ('23514 sched.worker.worker_versions_not_empty: new row for relation "worker" violates check constraint "worker_versions_not_empty"'),
      ('23514 sched.worker.worker_runtime_state_valid: new row for relation "worker" violates check constraint "worker_runtime_state_valid"'),
      ('23514 sched.worker.worker_scheduling_status_valid: new row for relation "worker" violates check constraint "worker_scheduling_status_valid"'),
      ('23514 sched.worker.worker_live_attempts_within_slots: new row for relation "worker" violates check constraint "worker_live_attempts_within_slots"'),
      ('23514 sched.request.request_attempt_number_positive: new row for relation "request" violates check constraint "request_attempt_number_positive"'),
      ('23514 sched.request.request_state_valid: new row for relation "request" violates check constraint "request_state_valid"'),
      ('23514 sched.request.request_hold_consistent: new row for relation "request" violates check constraint "request_hold_consistent"'),
      ('23514 sched.request.request_amounts_nonnegative: new row for relation "request" violates check constraint "request_amounts_nonnegative"'),
      ('23514 sched.request.request_claim_consistent: new row for relation "request" violates check constraint "request_claim_consistent"'),
      ('23514 sched.attempt.attempt_status_valid: new row for relation "attempt" violates check constraint "attempt_status_valid"'),
      ('23514 sched.attempt.attempt_finished_when_terminal: new row for relation "attempt" violates check constraint "attempt_finished_when_terminal"'),
      ('23514 sched.command.command_kind_valid: new row for relation "command" violates check constraint "command_kind_valid"'),
      ('passes')
$$, 'each condition of the five tables is refused with 23514 under its own name (schema, table and constraint fields set); the first broken by name is named');

-- every combination of edge values: the function refuses exactly what the SQL conditions
-- refuse (NULL passes), naming the first broken one by name
SELECT setseed(0.16) \gset ignore_
-- (5% of the 194,400 combinations, drawn per row: OFFSET 0 keeps the draw above the
-- joins; and every one whose node_id, management_status and labels are valid)
CREATE TEMP TABLE cand_node AS
SELECT * FROM (
SELECT id, mg, lb, cpu, mem, g, rc, rm, rg, la
  FROM (VALUES (''), ('n'), (NULL)) a(id), (VALUES ('ACTIVE'), ('DRAINING'), ('DISABLED'), ('GONE'), (NULL)) b(mg),
       (VALUES ('{}'::jsonb), ('[]'), ('1'), (NULL)) c(lb), (VALUES (-1), (0), (10), (NULL)) d(cpu),
       (VALUES (-1::bigint), (5), (NULL)) e(mem), (VALUES (-1), (1)) f(g),
       (VALUES (-1), (0), (10), (11), (NULL)) h(rc), (VALUES (-1::bigint), (5), (6)) i(rm),
       (VALUES (-1), (1), (2)) j(rg), (VALUES (-1), (0), (NULL)) k(la)
OFFSET 0) x
 WHERE random() < 0.05 OR (id = 'n' AND mg = 'ACTIVE' AND lb = '{}');
SELECT cmp_ok((SELECT count(*)::int FROM cand_node WHERE id = 'n' AND mg = 'ACTIVE' AND lb = '{}'
                AND cpu >= 0 AND mem >= 0 AND g >= 0 AND rc BETWEEN 0 AND cpu AND rm BETWEEN 0 AND mem
                AND rg BETWEEN 0 AND g AND la >= 0), '>', 0, 'the node rows drawn include some that pass');
SELECT is((SELECT count(*)::int FROM cand_node c
            WHERE pg_temp.violation(format('SELECT sched._node_valid(ROW(%L, %L, %L::jsonb, %s, %s, %s, 100, %s, %s, %s, %s, now(), now())::sched.node)',
                                           c.id, c.mg, c.lb, coalesce(c.cpu::text, 'NULL'), coalesce(c.mem::text, 'NULL'), c.g,
                                           coalesce(c.rc::text, 'NULL'), c.rm, c.rg, coalesce(c.la::text, 'NULL')))
                  IS DISTINCT FROM
                  coalesce((SELECT format('23514 sched.node.%s: new row for relation "node" violates check constraint "%s"', min(v.name COLLATE "C"), min(v.name COLLATE "C"))
                              FROM (VALUES ('node_id_not_empty', c.id <> ''),
                                           ('node_management_status_valid', c.mg IN ('ACTIVE', 'DRAINING', 'DISABLED')),
                                           ('node_labels_object', jsonb_typeof(c.lb) = 'object'),
                                           ('node_cpu_nonnegative', c.cpu >= 0), ('node_memory_nonnegative', c.mem >= 0),
                                           ('node_gpus_nonnegative', c.g >= 0),
                                           ('node_cpu_reserved_within_capacity', c.rc BETWEEN 0 AND c.cpu),
                                           ('node_memory_reserved_within_capacity', c.rm BETWEEN 0 AND c.mem),
                                           ('node_gpus_reserved_within_capacity', c.rg BETWEEN 0 AND c.g),
                                           ('node_live_attempts_nonnegative', c.la >= 0)) v(name, ok)
                             WHERE NOT coalesce(v.ok, true) HAVING count(*) > 0), 'passes')),
          0, 'sched._node_valid refuses exactly the node rows the ten SQL conditions refuse, the first by name');

-- the other four through real UPDATEs (the constraint as the executor runs it), NULLs in
-- the nullable columns
SELECT is((SELECT count(*)::int
             FROM (VALUES (''), ('build')) a(cap), (VALUES ('{}'::text[]), ('{1}')) b(vers),
                  (VALUES ('STARTING'), ('READY'), ('DRAINING'), ('STOPPED'), ('GONE')) c(rs),
                  (VALUES ('ELIGIBLE'), ('CORDONED'), ('GONE')) d(ss),
                  (VALUES (-1), (0), (2)) e(slots), (VALUES (-1), (0), (2), (3)) f(la)
            WHERE pg_temp.violation(format($u$UPDATE sched.worker SET capability = %L, capability_versions = %L,
                                              runtime_state = %L, scheduling_status = %L, slots = %s, live_attempts = %s
                                        WHERE node_id = 'n2'$u$, cap, vers, rs, ss, slots, la))
                  IS DISTINCT FROM
                  coalesce((SELECT format('23514 sched.worker.%s: new row for relation "worker" violates check constraint "%s"', min(v.name COLLATE "C"), min(v.name COLLATE "C"))
                              FROM (VALUES ('worker_capability_not_empty', cap <> ''),
                                           ('worker_versions_not_empty', cardinality(vers) > 0),
                                           ('worker_runtime_state_valid', rs IN ('STARTING', 'READY', 'DRAINING', 'STOPPED')),
                                           ('worker_scheduling_status_valid', ss IN ('ELIGIBLE', 'CORDONED')),
                                           ('worker_slots_nonnegative', slots >= 0),
                                           ('worker_live_attempts_within_slots', la BETWEEN 0 AND slots)) v(name, ok)
                             WHERE NOT coalesce(v.ok, true) HAVING count(*) > 0), 'passes')),
          0, 'worker rows: refused exactly as the six SQL conditions refuse, the first by name');
SELECT is((SELECT count(*)::int
             FROM (VALUES (0), (1)) a(an), (VALUES ('PENDING'), ('CLAIMED'), ('DISPATCHED'), ('CANCELLED'), ('GONE')) b(st),
                  (VALUES (NULL::uuid), ('00000000-0000-4000-8000-0000000000c1')) c(claim),
                  (VALUES (NULL::text, NULL::uuid, NULL::timestamptz), ('n1', '00000000-0000-4000-8000-0000000000a1', now()),
                          ('n1', NULL, NULL), ('n1', NULL, now())) d(hn, hw, hu),
                  (VALUES (-1), (0)) e(rg), (VALUES (-1::bigint), (0)) f(mm)
            WHERE pg_temp.violation(format($u$UPDATE sched.request SET attempt_number = %s, state = %L, claim_id = %L,
                                              held_node_id = %L, held_worker_id = %L, held_until = %L,
                                              reserve_gpus = %s, min_memory_mb = %s
                                        WHERE request_id = (SELECT min(request_id) FROM sched.request)$u$,
                                           an, st, claim, hn, hw, hu, rg, mm))
                  IS DISTINCT FROM
                  coalesce((SELECT format('23514 sched.request.%s: new row for relation "request" violates check constraint "%s"', min(v.name COLLATE "C"), min(v.name COLLATE "C"))
                              FROM (VALUES ('request_attempt_number_positive', an >= 1),
                                           ('request_state_valid', st IN ('PENDING', 'CLAIMED', 'DISPATCHED', 'CANCELLED')),
                                           ('request_hold_consistent', (hn IS NULL) = (hw IS NULL) AND (hn IS NULL) = (hu IS NULL)),
                                           ('request_amounts_nonnegative', rg >= 0 AND mm >= 0),
                                           ('request_claim_consistent', (st = 'CLAIMED') = (claim IS NOT NULL))) v(name, ok)
                             WHERE NOT coalesce(v.ok, true) HAVING count(*) > 0), 'passes')),
          0, 'request rows: refused exactly as the five SQL conditions refuse, the first by name');
SELECT is((SELECT count(*)::int
             FROM (VALUES ('DISPATCHED'), ('RUNNING'), ('SUCCEEDED'), ('FAILED'), ('CANCELLED'), ('LOST'),
                          ('PREEMPTED'), ('GONE')) a(st),
                  (VALUES (NULL::timestamptz), (now())) b(fin)
            WHERE pg_temp.violation(format($u$UPDATE sched.attempt SET status = %L, finished_at = %L
                                        WHERE attempt_id = (SELECT min(attempt_id::text)::uuid FROM sched.attempt)$u$, st, fin))
                  IS DISTINCT FROM
                  coalesce((SELECT format('23514 sched.attempt.%s: new row for relation "attempt" violates check constraint "%s"', min(v.name COLLATE "C"), min(v.name COLLATE "C"))
                              FROM (VALUES ('attempt_status_valid', st IN ('DISPATCHED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'LOST', 'PREEMPTED')),
                                           ('attempt_finished_when_terminal', (st IN ('DISPATCHED', 'RUNNING')) = (fin IS NULL))) v(name, ok)
                             WHERE NOT coalesce(v.ok, true) HAVING count(*) > 0), 'passes')),
          0, 'attempt rows: refused exactly as the two SQL conditions refuse, the first by name');
SELECT is((SELECT count(*)::int
             FROM (VALUES ('START'), ('CANCEL'), ('GONE')) a(k), (VALUES (NULL::timestamptz), (now())) b(dat),
                  (VALUES (NULL::int), (-1), (0)) c(dg)
            WHERE pg_temp.violation(format($u$UPDATE sched.command SET kind = %L, delivered_at = %L,
                                              delivered_generation = worker_generation + %s
                                        WHERE command_id = (SELECT min(command_id) FROM sched.command)$u$,
                                           k, dat, coalesce(dg::text, 'NULL')))
                  IS DISTINCT FROM
                  coalesce((SELECT format('23514 sched.command.%s: new row for relation "command" violates check constraint "%s"', min(v.name COLLATE "C"), min(v.name COLLATE "C"))
                              FROM (VALUES ('command_kind_valid', k IN ('START', 'CANCEL')),
                                           ('command_delivered_whole', (dat IS NULL) = (dg IS NULL)),
                                           ('command_delivered_no_earlier', dg >= 0)) v(name, ok)
                             WHERE NOT coalesce(v.ok, true) HAVING count(*) > 0), 'passes')),
          0, 'command rows: refused exactly as the three SQL conditions refuse, the first by name');
SELECT is((SELECT string_agg(format('%s %s', conrelid::regclass, pg_get_constraintdef(oid)), '; ' ORDER BY conrelid::regclass::text)
             FROM pg_constraint
            WHERE contype = 'c' AND conrelid IN ('sched.node'::regclass, 'sched.worker'::regclass, 'sched.request'::regclass,
                                                 'sched.attempt'::regclass, 'sched.command'::regclass)),
          'sched.attempt CHECK (sched._attempt_valid(attempt.*)); sched.command CHECK (sched._command_valid(command.*)); '
          'sched.node CHECK (sched._node_valid(node.*)); sched.request CHECK (sched._request_valid(request.*)); '
          'sched.worker CHECK (sched._worker_valid(worker.*))',
          'each of the five tables has one CHECK constraint, its row''s function');

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
