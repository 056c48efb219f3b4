--
-- spread: submit(..., spread_key) (issue 15, src/spread.c).  Among eligible nodes, each
-- live attempt of the same spread key on a node scores it 100,000 lower (the fourth
-- term of the score), so the steps of one service spread out: in one dispatch_next
-- batch too, across dispatch_attempt calls, and in the what-if functions (spread_key is
-- their last parameter).  Ended attempts stop counting; other keys and no key never
-- count; retries keep the key; explain shows the term.  Bad keys: 22023 / 54000.
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

-- n1 weighs 150 (score 150,000 empty), n2 and n3 100: without spreading, n1 takes the
-- first five attempts (150,000 - 10,000 x running stays above 100,000)
SELECT count(*) FROM (SELECT sched.upsert_node('n' || i, weight => CASE WHEN i = 1 THEN 150 ELSE 100 END,
                                               cpu_millis => 8000, memory_mb => 8192)
                        FROM generate_series(1, 3) i) x;
SELECT count(*) FROM (SELECT sched.register_worker('n' || i, 'cap', ARRAY['1'], 8,
                                                   ('aaaaaaaa-0000-4000-8000-00000000000' || i)::uuid,
                                                   '2024-05-01 10:00:00+00')
                        FROM generate_series(1, 3) i) x;

CREATE FUNCTION pg_temp.submit(n int, key text, spread text) RETURNS bigint LANGUAGE sql AS $$
SELECT sched.submit(('bbbbbbbb-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
                    ('cccccccc-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
                    'cap', '1', concurrency_key => key, spread_key => spread,
                    available_at => '2024-05-01 10:00:00+00')
$$;

-- four steps of service "svc", placed one batch: n1, n2, n3, then n1 again
SELECT count(pg_temp.submit(i, NULL, 'svc')) FROM generate_series(1, 4) i;
SELECT outcome, node_id, score FROM sched.dispatch_next(10, at => '2024-05-01 10:00:01+00') ORDER BY request_id;
SELECT node_id, count(*) FROM sched.attempt WHERE spread_key = 'svc' GROUP BY node_id ORDER BY node_id;

-- the same four without a spread key, and four of another key: n1 takes the unspread
-- ones (the running term alone), and "svc" does not count for "web"
SELECT count(pg_temp.submit(i, NULL, NULL)) FROM generate_series(5, 8) i;
SELECT outcome, node_id, score FROM sched.dispatch_next(10, at => '2024-05-01 10:00:02+00') ORDER BY request_id;
SELECT count(pg_temp.submit(i, NULL, 'web')) FROM generate_series(9, 10) i;
SELECT d.outcome, d.node_id, d.score
  FROM (SELECT request_id AS r FROM sched.request WHERE spread_key = 'web' ORDER BY request_id) x,
       LATERAL sched.dispatch_attempt(x.r, NULL, '2024-05-01 10:00:03+00') d;

-- what-if: the term in rank_candidates, qualification_reasons and select_candidate
SELECT rank, node_id, score, preferred_matches, weight, running_attempts, spread_matches
  FROM sched.rank_candidates('cap', '1', at => '2024-05-01 10:00:04+00', spread_key => 'svc');
SELECT node_id, score FROM sched.qualification_reasons('cap', '1', at => '2024-05-01 10:00:04+00', spread_key => 'svc');
SELECT node_id, score FROM sched.select_candidate('cap', '1', at => '2024-05-01 10:00:04+00', spread_key => 'web');
-- without the key (the default): no term
SELECT rank, node_id, score, spread_matches FROM sched.rank_candidates('cap', '1', at => '2024-05-01 10:00:04+00');

-- an ended attempt stops counting; a failed one's retry keeps the key
SELECT a.attempt_id AS a1, a.step_id AS s1 FROM sched.attempt a JOIN sched.request r ON r.request_id = a.request_id
 WHERE r.spread_key = 'svc' AND a.node_id = 'n2' \gset
SELECT sched.start_attempt(:'a1', 1, '2024-05-01 10:00:05+00') IS NOT NULL AS started;
SELECT sched.finish_attempt(:'a1', 1, 'FAILED', NULL, '2024-05-01 10:00:06+00') AS finished;
SELECT node_id, spread_matches FROM sched.rank_candidates('cap', '1', at => '2024-05-01 10:00:07+00', spread_key => 'svc')
 ORDER BY node_id;
SELECT attempt_number, state, spread_key, avoid_node_id FROM sched.request WHERE step_id = :'s1' ORDER BY attempt_number;

-- explain: the key and the term, node by node
SELECT line FROM regexp_split_to_table(sched.explain(
           (SELECT request_id FROM sched.request WHERE spread_key = 'svc' AND attempt_number = 2),
           '2024-05-01 10:00:08+00'), E'\n') line
 WHERE line ~ '(requires|ranking|x 1,000,000)';

-- bad keys, nothing written
SELECT count(*) AS requests_before FROM sched.request;
SELECT pg_temp.err($$SELECT pg_temp.submit(99, NULL, '')$$) AS empty,
       pg_temp.err($$SELECT pg_temp.submit(99, NULL, repeat('k', 257))$$) AS too_long,
       pg_temp.err($$SELECT * FROM sched.rank_candidates('cap', '1', spread_key => '')$$) AS rank_empty,
       pg_temp.err($$SELECT * FROM sched.select_candidate('cap', '1', spread_key => repeat('k', 257))$$) AS select_too_long;
SELECT count(*) AS requests_after FROM sched.request;
