--
-- label_expressions: required_labels as expressions (issue 15): in, not_in, exists, gt,
-- lt, version, next to plain strings.  Placement (the C core, placement.c) decides; the
-- reference sched.labels_match (plpgsql, written apart) must agree on every pair of a
-- grid of nodes and expressions; sched.explain names the expression a node fails; bad
-- expressions are 22023 (54000 beyond the limits) naming the key, with nothing written.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_sched CASCADE;
CREATE EXTENSION pg_sched;
RESET client_min_messages;
SET TIME ZONE 'UTC';

CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || coalesce(E'\n  ' || nullif(detail, ''), '');
END $$;

-- nodes whose labels exercise every operator: numbers, versions, junk, absent keys
SELECT count(*) FROM (VALUES
    ('n1', '{"zone": "a", "gpu_mem": "40", "cuda": "12.1.0", "tier": "fast"}'),
    ('n2', '{"zone": "b", "gpu_mem": "80", "cuda": "11.8", "tier": "slow"}'),
    ('n3', '{"zone": "c", "gpu_mem": "8e1", "cuda": "v12"}'),
    ('n4', '{"zone": "a", "gpu_mem": "-0.5", "cuda": "12", "tier": ""}'),
    ('n5', '{"gpu_mem": "lots", "cuda": "12.0.0.1"}'),
    ('n6', '{}')) AS f(id, labels),
  LATERAL sched.upsert_node(f.id, f.labels::jsonb, cpu_millis => 4000, memory_mb => 4096) x;
SELECT count(*) FROM (SELECT sched.register_worker('n' || i, 'cap', ARRAY['1'], 4,
                                                   ('aaaaaaaa-0000-4000-8000-00000000000' || i)::uuid,
                                                   '2024-05-01 10:00:00+00')
                        FROM generate_series(1, 6) i) x;

-- which nodes each expression admits, and how ranking orders them (scores unchanged by
-- expressions: only preferred labels, weight and running attempts count)
CREATE FUNCTION pg_temp.admits(req text) RETURNS text LANGUAGE sql AS $$
SELECT coalesce(string_agg(node_id, ' ' ORDER BY node_id), '(none)')
  FROM sched.qualification_reasons('cap', '1', req::jsonb, '{}', 0, 0, 0, 0, 0, 0, NULL, NULL,
                                   '2024-05-01 10:00:00+00')
 WHERE eligible
$$;
SELECT e AS required_labels, pg_temp.admits(e) AS admitted FROM (VALUES
    ('{}'),
    ('{"zone": "a"}'),
    ('{"tier": ""}'),
    ('{"zone": {"in": ["a", "b"]}}'),
    ('{"zone": {"in": ["A"]}}'),
    ('{"zone": {"not_in": ["a"]}}'),
    ('{"tier": {"not_in": ["fast", "slow"]}}'),
    ('{"tier": {"exists": true}}'),
    ('{"tier": {"exists": false}}'),
    ('{"gpu_mem": {"gt": 40}}'),
    ('{"gpu_mem": {"gt": 39.5}}'),
    ('{"gpu_mem": {"lt": 0}}'),
    ('{"gpu_mem": {"lt": 1e2}}'),
    ('{"gpu_mem": {"gt": -1}, "zone": {"in": ["a", "c"]}}'),
    ('{"cuda": {"version": ">=12"}}'),
    ('{"cuda": {"version": ">=12,<12.1"}}'),
    ('{"cuda": {"version": "12"}}'),
    ('{"cuda": {"version": "!= 12.0, > 11.8"}}'),
    ('{"cuda": {"version": "<=11.8"}}'),
    ('{"zone": {"exists": true}, "cuda": {"version": ">11"}, "gpu_mem": {"lt": 100}}')) AS g(e);

SELECT rank, node_id, score, preferred_matches
  FROM sched.rank_candidates('cap', '1', '{"cuda": {"version": ">=12"}}', '{"tier": "fast"}', 0, 0, 0,
                             0, 0, 0, NULL, NULL, '2024-05-01 10:00:00+00');
SELECT node_id FROM sched.select_candidate('cap', '1', '{"gpu_mem": {"gt": 50}}', '{}', 0, 0, 0, 0, 0, 0,
                                           NULL, NULL, '2024-05-01 10:00:00+00');

-- the C core and the reference agree on every node x expression of a grid (labels of the
-- nodes above, values of every kind), and the grid has both outcomes many times
CREATE TEMP TABLE grid AS
SELECT jsonb_build_object(k, e) AS req
  FROM unnest(ARRAY['zone', 'gpu_mem', 'cuda', 'tier', 'none']) k,
       unnest(ARRAY['"a"', '""', '"40"', '"12"', '{"in": ["a", "b"]}', '{"in": ["", "12"]}',
                    '{"not_in": ["a", "80"]}', '{"exists": true}', '{"exists": false}',
                    '{"gt": 40}', '{"gt": -0.5}', '{"lt": 80}', '{"lt": 80.0001}', '{"gt": 0}',
                    '{"lt": -1e-3}', '{"version": "12"}', '{"version": ">=11.8"}',
                    '{"version": ">11.8, <12.1"}', '{"version": "!=12.0.0"}',
                    '{"version": "<=12.1.0.0"}', '{"version": ">0"}']::jsonb[]) e
UNION ALL
SELECT jsonb_build_object('zone', z, 'cuda', c)
  FROM unnest(ARRAY['"a"', '{"not_in": ["b"]}', '{"exists": true}']::jsonb[]) z,
       unnest(ARRAY['{"version": ">=12"}', '{"exists": false}', '"11.8"']::jsonb[]) c;
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE core) AS core_admits,
       count(*) FILTER (WHERE core IS DISTINCT FROM ref) AS disagreements
  FROM (SELECT g.req, q.node_id, q.eligible AS core, sched.labels_match(n.labels, g.req) AS ref
          FROM grid g,
               LATERAL sched.qualification_reasons('cap', '1', g.req, '{}', 0, 0, 0, 0, 0, 0, NULL,
                                                   NULL, '2024-05-01 10:00:00+00') q
          JOIN sched.node n ON n.node_id = q.node_id) x;
-- the reference on its own
SELECT sched.labels_match('{"a": "1"}', '{"a": {"gt": 0.5}}') AS string_number,
       sched.labels_match('{"a": "1.2"}', '{"a": {"version": "1.2.0"}}') AS trailing_zero,
       sched.labels_match('{"a": "1.10"}', '{"a": {"version": ">1.9"}}') AS numeric_parts;

-- a request with expressions: dispatched where they hold, and only there
SELECT sched.submit('bbbbbbbb-0000-4000-8000-000000000001', 'cccccccc-0000-4000-8000-000000000001',
                    'cap', '1', required_labels => '{"cuda": {"version": ">=11.8,<12"}, "zone": {"not_in": ["a"]}}',
                    available_at => '2024-05-01 10:00:00+00') AS r1 \gset
SELECT outcome, node_id FROM sched.dispatch_next(10, at => '2024-05-01 10:00:01+00');

-- a request no node meets: explain names the first expression (key order) each node fails
SELECT sched.submit('bbbbbbbb-0000-4000-8000-000000000002', 'cccccccc-0000-4000-8000-000000000002',
                    'cap', '1', required_labels => '{"zone": {"in": ["b", "c"]}, "gpu_mem": {"gt": 100}, "tier": {"exists": true}}',
                    available_at => '2024-05-01 10:00:00+00') AS r2 \gset
SELECT outcome, detail FROM sched.dispatch_attempt(:r2, NULL, '2024-05-01 10:00:02+00');
SELECT line FROM regexp_split_to_table(sched.explain(:r2, '2024-05-01 10:00:03+00'), E'\n') line
 WHERE line ~ '(requires|closest|would qualify)';
SELECT blocked, left(explanation, 60) AS explanation FROM sched.pending('2024-05-01 10:00:03+00')
 WHERE request_id = :r2;

-- bad expressions: 22023 or 54000 naming the parameter and the key, nothing written;
-- the what-if functions refuse them alike
SELECT count(*) AS requests_before FROM sched.request;
SELECT e, pg_temp.err(format($q$SELECT sched.submit('bbbbbbbb-0000-4000-8000-000000000009',
                                 'cccccccc-0000-4000-8000-000000000009', 'cap', '1', required_labels => %L)$q$, e)) AS submit
  FROM (VALUES ('{"zone": {"like": "a%"}}'), ('{"zone": {}}'), ('{"zone": {"in": ["a"], "exists": true}}'),
               ('{"zone": {"in": []}}'), ('{"zone": {"in": "a"}}'), ('{"zone": {"not_in": ["a", 1]}}'),
               ('{"zone": {"exists": "yes"}}'), ('{"zone": {"gt": "5"}}'), ('{"zone": {"lt": null}}'),
               ('{"zone": {"gt": 1e400}}'), ('{"zone": {"version": ""}}'), ('{"zone": {"version": ">=1.2,"}}'),
               ('{"zone": {"version": "~1.2"}}'), ('{"zone": {"version": "1.2.3.4.5.6.7.8.9"}}'),
               ('{"zone": {"version": "1,2,3,4,5,6,7,8,9"}}'), ('{"zone": {"version": "1234567890"}}'),
               ('{"zone": {"version": 12}}'), ('{"zone": 5}'), ('{"zone": null}'), ('{"zone": ["a"]}'),
               ('["a"]')) AS b(e);
SELECT pg_temp.err(format($q$SELECT sched.submit('bbbbbbbb-0000-4000-8000-000000000009',
           'cccccccc-0000-4000-8000-000000000009', 'cap', '1', required_labels => %L)$q$,
           jsonb_build_object('zone', jsonb_build_object('in', (SELECT jsonb_agg(i::text) FROM generate_series(1, 65) i))))) AS too_many_values;
SELECT pg_temp.err(format($q$SELECT sched.submit('bbbbbbbb-0000-4000-8000-000000000009',
           'cccccccc-0000-4000-8000-000000000009', 'cap', '1', required_labels => %L)$q$,
           jsonb_build_object('zone', jsonb_build_object('not_in', jsonb_build_array(repeat('x', 1025)))))) AS value_too_long;
SELECT count(*) AS requests_after FROM sched.request;
SELECT pg_temp.err($q$SELECT * FROM sched.rank_candidates('cap', '1', '{"zone": {"in": []}}', '{}', 0, 0, 0, 0, 0, 0, NULL, NULL, now())$q$) AS rank_candidates,
       pg_temp.err($q$SELECT * FROM sched.qualification_reasons('cap', '1', '{"zone": {"gt": "x"}}', '{}', 0, 0, 0, 0, 0, 0, NULL, NULL, now())$q$) AS qualification_reasons,
       pg_temp.err($q$SELECT * FROM sched.select_candidate('cap', '1', '{"zone": {"version": "x"}}', '{}', 0, 0, 0, 0, 0, 0, NULL, NULL, now())$q$) AS select_candidate;
-- preferred labels stay plain strings
SELECT pg_temp.err($q$SELECT * FROM sched.rank_candidates('cap', '1', '{}', '{"zone": {"in": ["a"]}}', 0, 0, 0, 0, 0, 0, NULL, NULL, now())$q$) AS preferred_expression;
-- the reference reads every key before it answers, and checks the limits, as the C core
SELECT pg_temp.err($q$SELECT sched.labels_match('{}', '{"a": "x", "b": {"bogus": 1}}')$q$) AS ref_later_bad_key,
       pg_temp.err(format('SELECT sched.labels_match(%L, %L)', '{}',
                          jsonb_build_object('a', jsonb_build_object('in', (SELECT jsonb_agg(i::text) FROM generate_series(1, 65) i))))) AS ref_65_values;
-- the reference refuses what it cannot evaluate, and NULL
SELECT pg_temp.err($q$SELECT sched.labels_match('{}', '{"zone": {"in": []}}')$q$) AS ref_bad,
       pg_temp.err($q$SELECT sched.labels_match(NULL, '{}')$q$) AS ref_null,
       pg_temp.err($q$SELECT sched.labels_match('{"a": 1}', '{}')$q$) AS ref_not_strings;
SELECT sched.format_label_expression(k, e::jsonb) FROM (VALUES
    ('zone', '"a"'), ('zone', '{"in": ["a", "b"]}'), ('zone', '{"not_in": ["a"]}'), ('tier', '{"exists": true}'),
    ('tier', '{"exists": false}'), ('mem', '{"gt": 4.5}'), ('mem', '{"lt": -1}'), ('cuda', '{"version": ">=12,<13"}')) v(k, e);
