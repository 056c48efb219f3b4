/*
 * xact_end.h — the one test the transaction callbacks of the modules that keep state for
 * the current transaction share (dispatch_gate.c, inflight.c, queue_held.c,
 * limit_claims.c, wakeup.c).
 */
#ifndef PG_SCHED_XACT_END_H
#define PG_SCHED_XACT_END_H

#include "access/xact.h"

/* Whether `event` ends this backend's part in its top-level transaction: committed
 * (PARALLEL_COMMIT in a parallel worker), aborted, or prepared (a prepared transaction
 * lives on without this backend).  What the transaction held here is over. */
static inline bool
sched_xact_event_ends(XactEvent event)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			return true;
		default:
			return false;
	}
}

#endif							/* PG_SCHED_XACT_END_H */
