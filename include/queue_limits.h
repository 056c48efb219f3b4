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

typedef struct SchedLimitClaim
{
	uint16		space;
	uint64		scope;
	int64		asks[4];
} SchedLimitClaim;

typedef struct SchedLimitsResult
{
	SchedLimitsVerdict verdict;
	SchedWait	waits;			/* REACHED: SCHED_WAIT_CONCURRENCY, _RATE or _QUOTA */
	char	   *detail;			/* BUSY, REACHED: the reason, as last_reason shows it */
	TimestampTz eligible_at;	/* REACHED by a rate limit: when it may be tried again */
	bool		tenant_full;	/* REACHED by the quota's live attempts: the whole tenant waits */
	bool		tenant_busy;	/* BUSY on the tenant's lock (else on the key's) */
	/* OK: the claims this check published (limit_claims.c), withdrawn by
	 * sched_limits_withdraw when the reservation does not happen */
	int			nclaims;
	SchedLimitClaim claims[2];	/* the key's, the tenant's */
} SchedLimitsResult;

/*
 * Checks the limits that apply to the request (its concurrency_key's concurrency and
 * rate limits, its tenant's quota), inside SPI, after the request's row lock and before
 * any worker/node pair is locked, under a lock of each limited key and tenant (a lock
 * space of pg_sched's own: no role can take it), so that dispatchers of one key or
 * tenant check one after another; counts with the latest snapshot plus this
 * transaction's own reservations (those a batch defers too).  Preloaded, a tenant's lock
 * and a key's without a rate limit are held for the check alone, and OK publishes the
 * reservation as a claim (limit_claims.c), noted in out; otherwise the locks are taken
 * without waiting and OK leaves them held until the transaction ends.  REACHED and BUSY
 * give back the locks and claims the check took (nothing is reserved under them), not
 * those of an earlier reservation.
 */
extern void sched_limits_check(const SchedRequestRow *req, const SchedPlacement *p,
							   TimestampTz at, SchedBatch *cache, SchedLimitsResult *out);

/* After an OK check whose reservation did not happen: withdraws its quota claim. */
extern void sched_limits_withdraw(const SchedLimitsResult *limits);

#endif							/* PG_SCHED_QUEUE_LIMITS_H */
