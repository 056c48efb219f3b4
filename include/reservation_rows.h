/*
 * reservation_rows.h — the rows of reservations written without a statement
 * (reservation_rows.c).
 */
#ifndef PG_SCHED_RESERVATION_ROWS_H
#define PG_SCHED_RESERVATION_ROWS_H

#include "utils/timestamp.h"
#include "utils/uuid.h"

struct SchedReservationWrite;

/*
 * Writes the n reservations r (attempt, START command, milestone, request DISPATCHED;
 * the workers' and nodes' counters; the tenants' sums) as batch.c's statements would,
 * at `at`, and returns true; or writes nothing and returns false when
 * sched.direct_writes is off or a table is not as pg_sched made it (row_write.c), and
 * the caller runs the statements.  Needs an SPI connection.
 */
extern bool sched_reservation_rows_write(const struct SchedReservationWrite *r, int n,
										 TimestampTz at);

/*
 * A reservation's counters moved by one attempt (+1 taken, -1 released) as batch.c's
 * statement adjust_worker_and_node moves them: the worker's live_attempts, then the
 * node's reservations and live_attempts, each row locked as UPDATE locks it (waiting),
 * a row that is not there left alone; true.  False, with nothing written, as
 * sched_reservation_rows_write.
 */
extern bool sched_counters_adjust_direct(const pg_uuid_t *worker_id, const char *node_id,
										 int sign, int32 reserve_cpu_millis,
										 int64 reserve_memory_mb, int32 reserve_gpus);

/*
 * INSERT INTO sched.timeline (...) VALUES (...) ON CONFLICT ON CONSTRAINT
 * timeline_milestone_once DO NOTHING, as lifecycle.c's statement `milestone` (step_id,
 * attempt_id NULL pointers and attempt_number 0 for NULL); true.  False, with nothing
 * written, as sched_reservation_rows_write.
 */
extern bool sched_milestone_direct(const pg_uuid_t *execution_id, const char *key,
								   const char *stage, const pg_uuid_t *step_id,
								   int32 attempt_number, const pg_uuid_t *attempt_id,
								   const char *state, const char *component,
								   const char *title, Datum detail, bool detail_null,
								   TimestampTz at);

/*
 * UPDATE sched.attempt SET status = status, finished_at = at, detail = COALESCE(detail,
 * detail) WHERE attempt_id = attempt_id, as lifecycle.c's statement `attempt_ended`,
 * with its trigger's change of the tenant's sums (no row: nothing written, as the
 * statement).  True; false, with nothing written, as sched_reservation_rows_write.
 */
extern bool sched_attempt_end_direct(const pg_uuid_t *attempt_id, const char *status,
									 TimestampTz at, Datum detail, bool detail_null);

/*
 * UPDATE sched.attempt SET status = 'RUNNING', started_at = COALESCE(started_at, at),
 * lease_expires_at = GREATEST(lease_expires_at, at + sched.lease_ttl) WHERE attempt_id =
 * attempt_id, as lifecycle.c's statement `attempt_started` (the row locked by the
 * caller), with its trigger's work; *expires: the new lease_expires_at.  True; false,
 * with nothing written, as sched_reservation_rows_write.
 */
extern bool sched_attempt_start_direct(const pg_uuid_t *attempt_id, TimestampTz at,
									   TimestampTz *expires);

/* the columns of a delivered command, as lifecycle.c's statement commands_delivered
 * returns them: command_id, kind, attempt_id, lease_version, request_id, then the
 * request's execution_id, step_id, attempt_number, capability, capability_version,
 * payload */
#define SCHED_DELIVERED_COLUMNS 11

/*
 * What lifecycle.c's statement commands_delivered does, without it: up to `max` of the
 * worker's undelivered commands made for session `generation` or an earlier one, whose
 * attempt is live (or preempted, for a CANCEL), oldest first, each locked FOR UPDATE
 * skipping those another transaction holds, marked delivered at `at` to `generation`;
 * the rows (those whose request is there) into (*values)[0..returned) and (*nulls),
 * allocated in the caller's memory.  Returns how many were returned, or -1 (nothing
 * done) when sched.direct_writes is off or sched.command is not as pg_sched made it.
 */
extern int	sched_commands_deliver_direct(const pg_uuid_t *worker_id, int64 generation,
										  int32 max, TimestampTz at,
										  Datum (**values)[SCHED_DELIVERED_COLUMNS],
										  bool (**nulls)[SCHED_DELIVERED_COLUMNS]);

#endif
