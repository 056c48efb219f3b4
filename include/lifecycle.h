/*
 * lifecycle.h — what the reservation side needs of the lifecycle (lifecycle.c).
 */
#ifndef PG_SCHED_LIFECYCLE_H
#define PG_SCHED_LIFECYCLE_H

#include "utils/timestamp.h"
#include "utils/uuid.h"

/*
 * Preempts live attempt attempt_id for request preemptor_request_id (preemption.c):
 * ends it PREEMPTED (its reservation released, its step requeued at once without using
 * up an attempt, the milestone recording the preemptor) and sends its worker a CANCEL.
 * Takes the attempt, execution, worker and node rows without waiting: false, with
 * nothing written, when another transaction holds one or the attempt is no longer live
 * (it ended first: one end state, released once).  Inside SPI.
 */
extern bool sched_preempt_attempt(const pg_uuid_t *attempt_id, int64 preemptor_request_id,
								  TimestampTz at);

#endif							/* PG_SCHED_LIFECYCLE_H */
