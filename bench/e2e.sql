-- bench/e2e.sql — workload 7 of bench/run.sh (issue 16, target 4): tasks through their
-- whole life, and the plain job queue beside them.  Loaded into the end-to-end benchmark
-- database only, after bench/load.sql and bench/baselines.sql; never installed.
--
-- pg_sched side: bench.e2e_fleet registers the workers as a worker process does
-- (upsert_node, then register_worker: READY, a heartbeat, generation 1, registered by
-- the session's role); the pgbench scripts w7_scheduler.pgbench (submit a batch, then
-- dispatch_next of a batch) and w7_worker.pgbench (wait_commands of the client's own
-- worker with start => true, which starts what it delivers, then finish_attempt) do the
-- rest.
--
-- Plain job queue: bench.job, a table of jobs as the PostgreSQL job queues keep them
-- (que, good_job, river, pg-boss ...): w7_job_insert.pgbench inserts a batch,
-- w7_job_worker.pgbench claims the oldest ready job FOR UPDATE SKIP LOCKED (marking it
-- running) and then marks it done.  No placement, no lease, no history.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

-- batch numbers of the submitting clients: batch b submits steps b * size .. b * size + size - 1
CREATE SEQUENCE bench.e2e_batch_seq;

/*
 * e2e_fleet(n, slots): nodes e2e-1 .. e2e-n (capacity that never runs out), each with
 * one worker of capability 'build' (version 1.0, `slots` slots), registered through the
 * worker protocol with the id bench.worker_uuid('e2e', i, 'build').  Returns the
 * generation of each worker's session (1 for a new worker).
 */
CREATE FUNCTION bench.e2e_fleet(n int, slots int)
RETURNS TABLE (node_id text, worker_id uuid, generation bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    i int;
BEGIN
    FOR i IN 1 .. n LOOP
        PERFORM sched.upsert_node('e2e-' || i, labels => '{}', cpu_millis => 1000000000,
                                  memory_mb => 1000000000);
        node_id := 'e2e-' || i;
        SELECT r.worker_id, r.generation INTO worker_id, generation
          FROM sched.register_worker('e2e-' || i, 'build', ARRAY['1.0'], slots => e2e_fleet.slots,
                                     worker_id => bench.worker_uuid('e2e', i, 'build')) r;
        RETURN NEXT;
    END LOOP;
END
$$;

-- the plain job queue
CREATE TABLE bench.job (
    job_id      bigserial PRIMARY KEY,
    payload     jsonb NOT NULL,
    state       text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running', 'done')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
);
-- the ready jobs in order: what the claim reads, and what the inserters count to keep the
-- backlog bounded (the one index a job queue needs besides its key)
CREATE INDEX job_ready_idx ON bench.job (job_id) WHERE state = 'ready';
