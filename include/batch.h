/*
 * batch.h — what one dispatch call keeps between its reservations, and the writes of a reservation (batch.c).
 */
#ifndef PG_SCHED_BATCH_H
#define PG_SCHED_BATCH_H

#include "utils/timestamp.h"
#include "admit_memo.h"

/* One fleet a batch read (once per capability and kind) and keeps current. */
typedef struct SchedBatchFleet
{
	char	   *capability;
	bool		all_nodes;
	SchedFleet	fleet;
	int		   *by_node;		/* row indexes sorted by node_id (own rows only) */
	SchedAdmitMemos memos;		/* judged again for a row the batch updates */

	/*
	 * borrowed: fleet.rows are the fleet mirror's, as it returned them (not to be
	 * modified; admission uses the mirror's memos).  The batch copies them at its first
	 * use of the fleet after a change it made to it (`updates`, applied then), when it
	 * marks a row busy, and before it reads another fleet (which may refresh the
	 * mirror).  A call that places one request never copies the fleet.
	 */
	bool		borrowed;
	int			nupdates;
	int			updates_size;
	SchedFleetRow *updates;		/* fresh rows to apply at the copy (their scalars) */
} SchedBatchFleet;

/* The rows one reservation writes (worker and node counters, attempt, START command,
 * milestone, request), as sched_write_reservation and sched_batch_flush write them. */
typedef struct SchedReservationWrite
{
	int64		request_id;
	pg_uuid_t	execution_id;
	pg_uuid_t	step_id;
	int32		attempt_number;
	const char *tenant;
	const char *concurrency_key;	/* the request's (NULL: none): counted by the limits
									 * while the write is deferred (queue_limits.c) */
	const char *node_id;
	pg_uuid_t	worker_id;
	int64		generation;
	int32		reserve_cpu_millis;
	int64		reserve_memory_mb;
	int32		reserve_gpus;
	int64		score;
	pg_uuid_t	attempt_id;
	/* the versions of the request, worker and node rows this transaction locked
	 * (invalid: unknown): updated in place while still the ones held
	 * (sched_row_lock_held), else found by key */
	ItemPointerData request_tid;
	ItemPointerData worker_tid;
	ItemPointerData node_tid;
} SchedReservationWrite;

#define SCHED_BATCH_MAX 64

typedef struct SchedBatch
{
	MemoryContext cxt;			/* lives as long as the batch */
	int			count;
	int			allocated;
	SchedBatchFleet *entries;
	SchedRanked *ranked;		/* scratch for ranking, as large as the largest fleet */
	int			ranked_size;
	SchedRanked *ranked_all;	/* scratch for ranking every row after the carried ones */
	int			ranked_all_size;

	/*
	 * Deferred writes: with `defer`, reservations are kept here (at most
	 * SCHED_BATCH_MAX, then flushed) and written together by sched_batch_flush(),
	 * which the call must call before it returns.
	 */
	bool		defer;
	TimestampTz at;

	/* the limit tables with rows (queue_limits.c): 0 not yet read, else LIMIT_KNOWN and
	 * a bit for each; read once per call, so a limit set during a call applies from the
	 * next one */
	int			limit_tables;
	/* the limits of each key and tenant met (queue_limits.c), read once per call too */
	struct HTAB *limits_of;

	/* gangs this call tried already (reservation.c): their other members are passed over */
	int			ngangs_tried;
	int			gangs_tried_size;
	pg_uuid_t  *gangs_tried;

	int			npending;
	SchedReservationWrite pending[SCHED_BATCH_MAX];
} SchedBatch;


/* The batch's fleet of `capability` (every node with all_nodes, else the nodes with a
 * worker of it), read on first use (the batch's reservations are written first). */
extern SchedFleet *sched_batch_fleet(SchedBatch *batch, const char *capability,
									 bool all_nodes);
/* Marks row `index` of the batch's fleet `fleet` busy (held by another transaction):
 * passed over for the rest of the call. */
extern void sched_batch_mark_busy(SchedBatch *batch, SchedFleet *fleet, int index);

/*
 * sched_fleet_admit (fleet.h) on a fleet of the batch, judging each row once per shape
 * (admit_memo.h), or on a fleet of the mirror (sched_fleet_mirror_admit): the admitted
 * rows, scored, into out; the same result.
 */
extern int	sched_batch_admit(SchedBatch *batch, SchedFleet *fleet, const SchedPlacement *p,
							  SchedRanked *out);
/*
 * sched_batch_admit, but only the rows that may rank first (sched_admit_memos_best, on
 * the batch's memos or the mirror's): *bound NULL when out holds every admitted row,
 * else every admitted row not in out ranks after *bound.
 */
extern int	sched_batch_admit_best(SchedBatch *batch, SchedFleet *fleet,
								   const SchedPlacement *p, SchedRanked *out,
								   const SchedRanked **bound);
/* Forgets the fleets read so far: the next use reads them again (after a gang, whose
 * members were placed without the batch). */
extern void sched_batch_forget_fleets(SchedBatch *batch);
/* Whether the call tried gang gang_id already; notes it as tried.  batch may be NULL. */
extern bool sched_batch_gang_tried(SchedBatch *batch, const pg_uuid_t *gang_id);
/* Copies the node and worker state of `fresh` into every fleet row of the batch for
 * that node (and worker).  batch may be NULL. */
extern void sched_batch_update_rows(SchedBatch *batch, const SchedFleetRow *fresh);
/* Adds the batch's unwritten reservations on row's worker and node to row's counters. */
extern void sched_batch_count_pending(const SchedBatch *batch, SchedFleetRow *row);
/* Keeps r to be written with the batch (flushing first when the batch is full). */
extern void sched_batch_defer(SchedBatch *batch, const SchedReservationWrite *r);
/* Writes the batch's unwritten reservations, in one statement; none: nothing. */
extern void sched_batch_flush(SchedBatch *batch);
/* Writes one reservation now, in one statement. */
extern void sched_write_reservation(const SchedReservationWrite *r, TimestampTz at);
/* Takes a reservation without an attempt: one slot of the worker, the resources of the
 * node (a preemption's hold, preemption.c); released by sched_release_reservation. */
extern void sched_hold_reservation(const pg_uuid_t *worker_id, const char *node_id,
								   int32 reserve_cpu_millis, int64 reserve_memory_mb,
								   int32 reserve_gpus);
/* Releases the hold of request request_id (its worker slot and node resources) and
 * clears request.held_*: what a hold took, given back exactly once.  The caller holds
 * the request row and the pair's rows. */
extern void sched_release_hold_reservation(int64 request_id, const pg_uuid_t *worker_id,
										   const char *node_id, int32 reserve_cpu_millis,
										   int64 reserve_memory_mb, int32 reserve_gpus);
/* Releases an ended attempt's reservation (worker slot, node resources). */
extern void sched_release_reservation(const pg_uuid_t *worker_id, const char *node_id,
									  int32 reserve_cpu_millis, int64 reserve_memory_mb,
									  int32 reserve_gpus);

#endif							/* PG_SCHED_BATCH_H */
