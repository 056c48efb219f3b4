-- sql/install/40_lifecycle.sql — the attempt lifecycle: the worker protocol, leases, reaping,
-- the end of attempts and the close of executions (src/lifecycle.c)
-- A piece of pg_sched--0.2.0.sql, which the Makefile builds from sql/install/*.sql in
-- the order of their names.

-- ---------------------------------------------------------------------------------
-- Attempt lifecycle: worker protocol and recovery (C, src/lifecycle.c, which states
-- the locks and guarantees of each function)
--
-- Locks, in the order of src/reservation.c: the attempt row, then the execution row,
-- then the worker row, then its node row.  Terminal transitions release the worker's
-- slot and the node's reservations in the same transaction as the status change, and
-- only from a live status, so a slot is released exactly once.
-- ---------------------------------------------------------------------------------

/* poll_commands: the worker session's commands (START, CANCEL) for its live attempts,
 * oldest first, each delivered once, with everything the worker needs.  With start, each
 * START's attempt is started as start_attempt starts it, in the same transaction as its
 * delivery (lease_expires_at: the started lease's end; NULL otherwise). */
CREATE FUNCTION sched.poll_commands(
    worker_id uuid,
    generation bigint,
    max int DEFAULT 10,
    at timestamptz DEFAULT now(),
    start boolean DEFAULT false)
RETURNS TABLE (command_id bigint, kind text, attempt_id uuid, lease_version bigint, request_id bigint,
               execution_id uuid, step_id uuid, attempt_number int, capability text,
               capability_version text, payload jsonb, lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'sched_poll_commands'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* wait_commands: what poll_commands returns, at once when there is something; otherwise it
 * sleeps, holding no snapshot, until a command for the worker commits or `timeout`
 * passes.  A statement of its own, in autocommit or a READ COMMITTED transaction that
 * has written nothing (25000 otherwise); needs pg_sched preloaded (55000); not on a
 * standby (25006).  start as for poll_commands. */
CREATE FUNCTION sched.wait_commands(
    worker_id uuid,
    generation bigint,
    max int DEFAULT 10,
    timeout interval DEFAULT '30 seconds',
    start boolean DEFAULT false)
RETURNS TABLE (command_id bigint, kind text, attempt_id uuid, lease_version bigint, request_id bigint,
               execution_id uuid, step_id uuid, attempt_number int, capability text,
               capability_version text, payload jsonb, lease_expires_at timestamptz)
AS 'MODULE_PATHNAME', 'sched_wait_commands'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* start_attempt: RUNNING, lease renewed, the execution RUNNING; returns lease_expires_at. */
CREATE FUNCTION sched.start_attempt(attempt_id uuid, lease_version bigint, at timestamptz DEFAULT now())
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'sched_start_attempt'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* renew_lease: the lease runs sched.lease_ttl from `at`; returns lease_expires_at. */
CREATE FUNCTION sched.renew_lease(attempt_id uuid, lease_version bigint, at timestamptz DEFAULT now())
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'sched_renew_lease'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* finish_attempt: SUCCEEDED, FAILED (requeued while attempts remain) or CANCELLED. */
CREATE FUNCTION sched.finish_attempt(
    attempt_id uuid,
    lease_version bigint,
    outcome text,
    detail jsonb DEFAULT NULL,
    at timestamptz DEFAULT now())
RETURNS text
AS 'MODULE_PATHNAME', 'sched_finish_attempt'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* reap_expired: live attempts whose lease expired become LOST and are requeued;
 * expired claims return to the queue.  Returns the number marked LOST. */
CREATE FUNCTION sched.reap_expired(at timestamptz DEFAULT now())
RETURNS int
AS 'MODULE_PATHNAME', 'sched_reap_expired'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* complete_execution: the application declares the execution done (refused while it
 * has pending requests or live attempts).  Idempotent on SUCCEEDED. */
CREATE FUNCTION sched.complete_execution(execution_id uuid, at timestamptz DEFAULT now())
RETURNS text
AS 'MODULE_PATHNAME', 'sched_complete_execution'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

/* cancel_execution: CANCELLED, its open requests cancelled, a CANCEL command to the
 * worker of each live attempt.  Idempotent. */
CREATE FUNCTION sched.cancel_execution(execution_id uuid, at timestamptz DEFAULT now())
RETURNS text
AS 'MODULE_PATHNAME', 'sched_cancel_execution'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;

