/*
 * reservation.h — stage 4, the reservation transaction: dispatch of one request (reservation.c).
 */
#ifndef PG_SCHED_RESERVATION_H
#define PG_SCHED_RESERVATION_H

#include "utils/timestamp.h"
#include "utils/uuid.h"
#include "batch.h"

/* Why an UNSCHEDULABLE request was left queued (see leave_queued in reservation.c). */
typedef enum SchedWait
{
	SCHED_WAIT_NONE = 0,		/* not left queued */
	SCHED_WAIT_CAPACITY,		/* only transient reasons: keeps its place, no backoff */
	SCHED_WAIT_STATIC,			/* the fleet as it is cannot run it: backs off */
	SCHED_WAIT_CONTENTION,		/* eligible pairs held or taken by concurrent dispatches */
	SCHED_WAIT_CONCURRENCY,		/* its concurrency key has its limit of live attempts */
	SCHED_WAIT_RATE,			/* its concurrency key has its limit of dispatches in the window */
	SCHED_WAIT_QUOTA,			/* its tenant's quota has no room for it */
	SCHED_WAIT_GANG,			/* its gang cannot be placed whole now */
	SCHED_WAIT_PREEMPTION		/* it preempted attempts: the room is held for its next try */
} SchedWait;

typedef enum SchedLimitBusy
{
	SCHED_LIMIT_NOT_BUSY = 0,
	SCHED_LIMIT_KEY_BUSY,
	SCHED_LIMIT_TENANT_BUSY
} SchedLimitBusy;

typedef struct SchedDispatchResult
{
	const char *outcome;
	int64		request_id;
	bool		has_attempt;
	pg_uuid_t	attempt_id;
	char	   *node_id;
	pg_uuid_t	worker_id;
	int64		lease_version;
	bool		has_score;
	int64		score;
	char	   *detail;
	int			conflicts;		/* candidates skipped or refused by the re-check */
	int			held_passed;	/* better candidates not tried: concurrent dispatches
								 * were reserving them (inflight.c) */
	SchedWait	waits;			/* UNSCHEDULABLE: why it was left queued */
	bool		tenant_full;	/* SCHED_WAIT_QUOTA on the live attempts: no request of the
								 * tenant can go until one of its attempts ends */
	SchedLimitBusy limit_busy;	/* another transaction holds the lock of the request's
								 * key or tenant until it ends (set also when a queue
								 * dispatch passes the request over) */
	int			ngang;			/* DISPATCHED with a gang: the other members' results */
	struct SchedDispatchResult *gang;
} SchedDispatchResult;

/*
 * The reservation transaction for one request, inside SPI, in the caller's transaction
 * (see the locking protocol in reservation.c).  from_queue: the request came from a
 * queue scan: it is skipped (false returned, nothing written) when another transaction
 * holds its step, row or execution, or when it is no longer ready; nothing is waited
 * for.  batch: the dispatch_next call's batch (batch.h), or NULL to read the fleet
 * afresh and write at once.  key: the
 * request's (step_id, attempt_number) when the caller read them already, else NULL.
 * locked: the version of the request the caller's queue scan locked, else NULL (or
 * invalid): read in place of locking the row again while this transaction has not
 * changed it since (sched_request_read_locked).
 */
typedef struct SchedStepKey
{
	pg_uuid_t	step_id;
	int32		attempt_number;
} SchedStepKey;

extern bool sched_dispatch_request(int64 request_id, const SchedStepKey *key,
								   const ItemPointerData *locked, const pg_uuid_t *claim_id,
								   TimestampTz at, bool from_queue, SchedBatch *batch,
								   SchedDispatchResult *res);

/* Fills a sched.dispatch_result row (values/nulls of 8) from res. */
extern void sched_dispatch_result_values(const SchedDispatchResult *res, Datum *values, bool *nulls);

#endif							/* PG_SCHED_RESERVATION_H */
