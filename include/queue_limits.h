/*
 * queue_limits.h — concurrency keys, rate limits and tenant quotas, checked exactly in the
 * reservation transaction (queue_limits.c).
 */
#ifndef PG_SCHED_QUEUE_LIMITS_H
#define PG_SCHED_QUEUE_LIMITS_H

#include "batch.h"
#include "placement.h"
#include "reservation.h"
#include "validate.h"

typedef enum SchedLimitsVerdict
{
	SCHED_LIMITS_OK = 0,		/* no limit applies, or each has room: dispatch may go on */
	SCHED_LIMITS_BUSY,			/* another transaction is checking the same key or tenant */
	SCHED_LIMITS_REACHED		/* a limit is reached: the request waits */
} SchedLimitsVerdict;

typedef struct SchedLimitsResult
{
	SchedLimitsVerdict verdict;
	SchedWait	waits;			/* REACHED: SCHED_WAIT_CONCURRENCY, _RATE or _QUOTA */
	char	   *detail;			/* BUSY, REACHED: the reason, as last_reason shows it */
	TimestampTz eligible_at;	/* REACHED by a rate limit: when it may be tried again */
	bool		tenant_full;	/* REACHED by the quota's live attempts: the whole tenant waits */
} SchedLimitsResult;

/*
 * Checks the limits that apply to the request (its concurrency_key's concurrency and
 * rate limits, its tenant's quota), inside SPI, after the request's row lock and before
 * any worker/node pair is locked.  Takes, without waiting, a transaction-scoped lock on
 * each limited key and tenant (a lock space of pg_sched's own: no role can take it), so
 * that dispatchers of one key or tenant check one after another, and counts with the
 * latest snapshot plus this transaction's own reservations (a deferred batch is written
 * first).  OK leaves the locks held until the transaction ends: the reservation that
 * follows is counted by the next holder.  REACHED and BUSY release the locks the check
 * took (nothing is reserved under them), not those held from an earlier reservation.
 */
extern void sched_limits_check(const SchedRequestRow *req, const SchedPlacement *p,
							   TimestampTz at, SchedBatch *cache, SchedLimitsResult *out);

#endif							/* PG_SCHED_QUEUE_LIMITS_H */
