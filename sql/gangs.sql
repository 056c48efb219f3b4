--
-- gangs: submit(..., gang_id, gang_size, distinct_nodes) (issue 15, reservation.c
-- "Gangs", gang.c).  A gang is placed whole in one transaction or not at all: until
-- every member is submitted it waits (gang_incomplete: 2 of 3 submitted); when one
-- member cannot be placed nothing is reserved and every member waits with "k/n
-- placeable" and the first member's reason; distinct_nodes puts each on its own node.
-- dispatch_next returns a row per member; dispatch_attempt of one member places all.
-- Bad input: the usual SQLSTATEs, nothing written.  Concurrency: isolation spec gangs.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- three nodes of 2 slots and 4 CPUs each
SELECT count(*) FROM (SELECT sched.upsert_node('n' || i, cpu_millis => 4000, memory_mb => 4096)
                        FROM generate_series(1, 3) i) x;
SELECT count(*) FROM (SELECT sched.register_worker('n' || i, 'cap', ARRAY['1'], 2,
                                                   ('aaaaaaaa-0000-4000-8000-00000000000' || i)::uuid,
                                                   '2024-05-01 10:00:00+00')
                        FROM generate_series(1, 3) i) x;

-- member m of gang g (gang ids dddddddd-...-00000000000g), one execution per gang
CREATE FUNCTION pg_temp.member(g int, m int, size int, dist boolean, cpu int DEFAULT 1000,
                               cap text DEFAULT 'cap', key text DEFAULT NULL) RETURNS bigint LANGUAGE sql AS $$
SELECT sched.submit(('bbbbbbbb-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
                    ('cccccccc-0000-4000-8' || lpad(g::text, 3, '0') || '-' || lpad(m::text, 12, '0'))::uuid,
                    cap, '1', reserve_cpu_millis => cpu, concurrency_key => key,
                    available_at => '2024-05-01 10:00:00+00',
                    gang_id => ('dddddddd-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid,
                    gang_size => size, distinct_nodes => dist)
$$;
CREATE FUNCTION pg_temp.gang_state(g int) RETURNS TABLE (request_id bigint, state text, tries int, node_id text, last_reason text)
LANGUAGE sql AS $$
SELECT r.request_id, r.state, r.tries, a.node_id, r.last_reason
  FROM sched.request r LEFT JOIN sched.attempt a ON a.attempt_id = r.attempt_id
 WHERE r.gang_id = ('dddddddd-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid
 ORDER BY r.request_id
$$;
CREATE FUNCTION pg_temp.reserved() RETURNS text LANGUAGE sql AS $$
SELECT string_agg(format('%s:%s/%s', n.node_id, n.live_attempts, n.reserved_cpu_millis), ' ' ORDER BY n.node_id) FROM sched.node n
$$;

-- 1. gang 1 (3 members, distinct nodes): with 2 of 3 submitted it waits, untried
SELECT pg_temp.member(1, 1, 3, true), pg_temp.member(1, 2, 3, true);
SELECT outcome, request_id, detail FROM sched.dispatch_next(10, at => '2024-05-01 10:00:01+00');
SELECT * FROM pg_temp.gang_state(1);
-- the third member: the gang goes whole, one row per member, each on its own node
SELECT pg_temp.member(1, 3, 3, true);
SELECT outcome, request_id, node_id, detail FROM sched.dispatch_next(10, at => '2024-05-01 10:00:02+00') ORDER BY request_id;
SELECT request_id, state, tries, node_id FROM pg_temp.gang_state(1);
SELECT gang_size, distinct_nodes, placed_at FROM sched.gang WHERE gang_id = 'dddddddd-0000-4000-8000-000000000001';
SELECT pg_temp.reserved() AS reserved;

-- 2. gang 2: 4 members on distinct nodes, 3 nodes: 3/4 placeable, nothing reserved,
--    no try counted (the fleet could take it if it had a fourth node)
SELECT count(pg_temp.member(2, i, 4, true)) FROM generate_series(1, 4) i;
SELECT outcome, request_id, detail FROM sched.dispatch_next(10, at => '2024-05-01 10:00:03+00');
SELECT request_id, state, tries, node_id, last_reason FROM pg_temp.gang_state(2);
SELECT pg_temp.reserved() AS reserved;
SELECT count(*) AS gang2_attempts, (SELECT count(*) FROM sched.command) AS commands,
       (SELECT count(*) FROM sched.timeline WHERE milestone_key LIKE 'step.worker.selected:%') AS selected
  FROM sched.attempt a JOIN sched.request r ON r.request_id = a.request_id
 WHERE r.gang_id = 'dddddddd-0000-4000-8000-000000000002';
-- a fourth node: dispatch_attempt of one member places the whole gang
SELECT count(*) FROM (SELECT sched.upsert_node('n4', cpu_millis => 4000, memory_mb => 4096),
                             sched.register_worker('n4', 'cap', ARRAY['1'], 2, 'aaaaaaaa-0000-4000-8000-000000000004',
                                                   '2024-05-01 10:00:00+00')) x;
SELECT outcome, node_id, detail FROM sched.dispatch_attempt(
           (SELECT max(request_id) FROM sched.request WHERE gang_id = 'dddddddd-0000-4000-8000-000000000002'),
           NULL, '2024-05-01 10:00:04+00');
SELECT request_id, state, node_id FROM pg_temp.gang_state(2);
-- a member of a gang placed already: EXISTING, nothing changed
SELECT outcome, node_id FROM sched.dispatch_attempt(
           (SELECT min(request_id) FROM sched.request WHERE gang_id = 'dddddddd-0000-4000-8000-000000000002'),
           NULL, '2024-05-01 10:00:04+00');
SELECT count(*) FILTER (WHERE state = 'DISPATCHED') AS still_dispatched FROM pg_temp.gang_state(2);

-- 3. gang 3 without distinct_nodes: 2 members of 3 CPUs, one node has room for one:
--    1/2 placeable and nothing reserved; once there is room, both go (here on one node)
SELECT count(*) AS drained FROM (VALUES ('n1'), ('n2'), ('n3')) v(n), LATERAL sched.drain_node(v.n) d;
SELECT pg_temp.member(3, 1, 2, false, 3000), pg_temp.member(3, 2, 2, false, 3000);
SELECT outcome, detail FROM sched.dispatch_next(10, at => '2024-05-01 10:00:05+00');
SELECT pg_temp.reserved() AS reserved;
-- n4 grows to 8 CPUs and 3 slots: room for both, and both go, in one call
SELECT sched.upsert_node('n4', cpu_millis => 8000) IS NOT NULL AS n4_grown,
       sched.register_worker('n4', 'cap', ARRAY['1'], 3, 'aaaaaaaa-0000-4000-8000-000000000004',
                             '2024-05-01 10:00:00+00') IS NOT NULL AS n4_three_slots;
SELECT outcome, node_id, detail FROM sched.dispatch_next(10, at => '2024-05-01 10:00:06+00') ORDER BY request_id;
SELECT pg_temp.reserved() AS reserved;

-- 4. a member that fits nowhere (no worker serves its capability): static, every member
--    backs off with one try counted
SELECT pg_temp.member(4, 1, 2, false), pg_temp.member(4, 2, 2, false, 1000, 'other');
SELECT outcome, detail FROM sched.dispatch_next(10, at => '2024-05-01 10:00:07+00');
SELECT request_id, state, tries, (SELECT available_at FROM sched.request x WHERE x.request_id = s.request_id) AS available_at
  FROM pg_temp.gang_state(4) s;

-- 5. a limit holds a member back: the gang waits with the limit's reason
SELECT sched.set_concurrency_limit('k5', 1);
SELECT pg_temp.member(5, 1, 2, false, 100, 'cap', 'k5'), pg_temp.member(5, 2, 2, false, 100, 'cap', 'k5');
SELECT outcome, detail FROM sched.dispatch_next(10, at => '2024-05-01 10:00:08+00');

-- 6. diagnostics: pending and explain show the gang's reason
SELECT request_id, blocked, explanation FROM sched.pending('2024-05-01 10:00:09+00')
 WHERE request_id IN (SELECT request_id FROM sched.request WHERE gang_id IS NOT NULL) ORDER BY request_id;
SELECT line FROM regexp_split_to_table(sched.explain(
           (SELECT min(request_id) FROM sched.request WHERE gang_id = 'dddddddd-0000-4000-8000-000000000005'),
           '2024-05-01 10:00:09+00'), E'\n') line
 WHERE line ~ '(gang|last dispatch)';

-- 6a. a gang claimed whole by one scheduler is placed with its claim (members claimed
--     by this call's claim_id are ready); n5 has room for it (and for 6b)
SELECT count(*) FROM (SELECT sched.upsert_node('n5', cpu_millis => 8000, memory_mb => 4096),
                             sched.register_worker('n5', 'cap', ARRAY['1'], 8, 'aaaaaaaa-0000-4000-8000-000000000005',
                                                   '2024-05-01 10:00:00+00')) x;
SELECT pg_temp.member(6, 1, 2, false, 100), pg_temp.member(6, 2, 2, false, 100);
SELECT count(*) AS claimed FROM sched.claim_requests(50, '1 min', 'cap', NULL, '2024-05-01 10:00:10+00')
 WHERE request_id IN (SELECT request_id FROM sched.request WHERE gang_id = 'dddddddd-0000-4000-8000-000000000006');
SELECT outcome, detail FROM sched.dispatch_attempt(
           (SELECT min(request_id) FROM sched.request WHERE gang_id = 'dddddddd-0000-4000-8000-000000000006'),
           (SELECT claim_id FROM sched.request WHERE gang_id = 'dddddddd-0000-4000-8000-000000000006' ORDER BY request_id LIMIT 1),
           '2024-05-01 10:00:11+00');
SELECT request_id, state, node_id FROM pg_temp.gang_state(6);

-- 6b. an error inside a gang's placement rolls back only the gang's subtransaction: a
--     caller's EXCEPTION block catches it with its own work undone, as it must be
CREATE FUNCTION public.refuse_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON sched.attempt FOR EACH ROW EXECUTE FUNCTION public.refuse_attempt();
SELECT pg_temp.member(7, 1, 2, false, 100), pg_temp.member(7, 2, 2, false, 100);
CREATE TEMP TABLE block_work (x int);
DO $$
BEGIN
    BEGIN
        INSERT INTO block_work VALUES (1);
        PERFORM sched.dispatch_attempt(
            (SELECT min(request_id) FROM sched.request WHERE gang_id = 'dddddddd-0000-4000-8000-000000000007'),
            NULL, '2024-05-01 10:00:12+00');
    EXCEPTION WHEN check_violation THEN
        RAISE NOTICE 'caught: %', SQLERRM;
    END;
END $$;
SELECT count(*) AS block_rows_left FROM block_work;
DROP TRIGGER refuse ON sched.attempt;
DROP FUNCTION public.refuse_attempt();
SELECT request_id, state, tries FROM pg_temp.gang_state(7);

-- 7. bad input: nothing written
SELECT count(*) AS requests_before, (SELECT count(*) FROM sched.gang) AS gangs_before FROM sched.request;
SELECT pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', gang_size => 2)$$) AS size_without_id,
       pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', gang_id => gen_random_uuid())$$) AS id_without_size;
SELECT pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', gang_id => gen_random_uuid(), gang_size => 1)$$) AS size_1,
       pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', gang_id => gen_random_uuid(), gang_size => 65)$$) AS size_65;
SELECT pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', distinct_nodes => true)$$) AS distinct_alone,
       pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', distinct_nodes => NULL)$$) AS distinct_null;
SELECT pg_temp.err($$SELECT pg_temp.member(4, 9, 3, false)$$) AS other_size,
       pg_temp.err($$SELECT pg_temp.member(4, 9, 2, true)$$) AS other_distinct,
       pg_temp.err($$SELECT pg_temp.member(4, 9, 2, false)$$) AS full_gang,
       pg_temp.err($$SELECT pg_temp.member(1, 9, 3, true)$$) AS placed_gang;
SELECT pg_temp.err($$SELECT sched.submit(gen_random_uuid(), gen_random_uuid(), 'cap', '1', tenant => 'other',
                                         gang_id => 'dddddddd-0000-4000-8000-000000000004', gang_size => 2)$$) AS other_tenant;
SELECT count(*) AS requests_after, (SELECT count(*) FROM sched.gang) AS gangs_after FROM sched.request;
