/*
 * queue_fetch.h — dispatch_next's batches of the queue, read and locked in C
 * (queue_fetch.c).
 */
#ifndef PG_SCHED_QUEUE_FETCH_H
#define PG_SCHED_QUEUE_FETCH_H

#include "executor/tuptable.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"

#include "reservation.h"

/* What one fetch reads: a range of the queue after a keyset position, and its filters. */
typedef struct SchedQueueFetch
{
	/* starving: request_age_idx, the requests queued before starving_cutoff, by
	 * (queued_at, request_id); else request_queue_idx, tenant's range by (sort_key,
	 * queued_at, request_id), the requests queued at or after starving_cutoff */
	bool		starving;
	const char *tenant;			/* the range (not starving); a filter or NULL (starving) */
	const char *capability;		/* NULL: any */
	TimestampTz at;				/* ready at */
	TimestampTz starving_cutoff;
	/* the keyset position: only rows after it (sort_key only when not starving) */
	double		sort_key;
	TimestampTz queued_at;
	int64		request_id;
	/* left out: these shapes, concurrency keys and tenants */
	const int64 *excluded_shapes;
	int			nexcluded_shapes;
	char	  **excluded_keys;
	int			nexcluded_keys;
	char	  **excluded_tenants;
	int			nexcluded_tenants;
	int			limit;			/* rows to lock at most */
	/*
	 * Asked of each row that passes the filters, before it is locked, unless NULL (in
	 * the caller's memory context; rel and slot hold the version read): false ends the
	 * fetch there, that row neither locked nor returned.
	 */
	bool		(*before_lock) (void *arg, Relation rel, TupleTableSlot *slot, int64 shape);
	void	   *before_lock_arg;
} SchedQueueFetch;

/* One request a fetch locked. */
typedef struct SchedQueueRow
{
	int64		request_id;
	char	   *tenant;
	double		sort_key;
	TimestampTz queued_at;
	SchedStepKey key;
	int64		shape;
	char	   *concurrency_key;	/* NULL: none */
	ItemPointerData tid;		/* the version locked (invalid: read by a statement) */
} SchedQueueRow;

/*
 * The first `limit` ready requests of the range after the keyset position that pass the
 * filters and are not held elsewhere (queue_held.c, collected by the caller), each
 * locked FOR UPDATE, skipping those another transaction holds: what the batch
 * statements of queue.c (STARVING_BATCH, TENANT_BATCH with their shape and limit
 * filters) return, in their order.  Returns how many were locked, into rows; *stopped
 * tells whether f->before_lock ended the fetch (the range may go on after it).
 */
extern int	sched_queue_fetch(const SchedQueueFetch *f, SchedQueueRow *rows, bool *stopped);

#endif
