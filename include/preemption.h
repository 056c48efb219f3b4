/*
 * preemption.h — making room for a request by ending preemptible attempts of lower
 * priority, and the hold that keeps the room for it (preemption.c).
 */
#ifndef PG_SCHED_PREEMPTION_H
#define PG_SCHED_PREEMPTION_H

#include "validate.h"

/*
 * For request `req` (locked by the caller, not a gang member), which no pair admits and
 * some node refuses only for transient reasons: when sched.preemption is on, chooses the
 * node where the fewest victims make room (then the lowest-priority ones), ends them
 * PREEMPTED and holds the room for req (request.held_*, counted in the node's and the
 * worker's counters until req is dispatched or sched.preemption_hold passes).  All or
 * nothing, in a subtransaction; never waits.  Returns the words of what it did
 * ("preempting: ..."), or NULL when it did nothing (no victims that make room, or
 * another transaction holds one of the rows).  Inside SPI.
 */
extern char *sched_preempt_for(const SchedRequestRow *req, const SchedPlacementArgs *args,
							   TimestampTz at);

/*
 * Releases the hold of req (its preemption's room) so that its dispatch can use it:
 * the worker and node rows are taken without waiting (false: another transaction holds
 * them, nothing changed).  The rows stay locked by this transaction, so no other
 * dispatch takes the room before req's.  True when there was no hold.
 */
extern bool sched_release_hold(const SchedRequestRow *req, const SchedPlacementArgs *args);

#endif							/* PG_SCHED_PREEMPTION_H */
