/*
 * fleet.h — reading the fleet from the tables, locking a (worker, node) pair, and admission and ranking over a fleet (fleet.c).
 */
#ifndef PG_SCHED_FLEET_H
#define PG_SCHED_FLEET_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "storage/itemptr.h"
#include "utils/uuid.h"
#include "placement.h"

/* One (node, worker-for-the-capability) pair of the fleet snapshot. */
typedef struct SchedFleetRow
{
	SchedCandidate c;
	pg_uuid_t	worker_id;		/* valid when c.has_worker */
	int64		generation;
	ItemPointerData worker_tid;	/* the row versions read, for sched_fleet_pair_locker */
	ItemPointerData node_tid;
	void	   *owned;			/* the fleet mirror's chunk holding the row's strings */
	bool		busy;			/* batches only: held by another running transaction
								 * when tried; passed over for the rest of the call */
	uint32		node_hash;		/* sched_node_hash(c.node_id) */
} SchedFleetRow;

typedef struct SchedFleet
{
	int			count;
	SchedFleetRow *rows;
	int			busy_count;		/* rows marked busy */
	int32	   *busy_rows;		/* [busy_count] their indexes (batches only, in the
								 * batch's memory; NULL while none is) */
	int			busy_allocated;
} SchedFleet;

/* How sched_fleet_load (and sched_fleet_read, fleet_mirror.h) read (flags). */
#define SCHED_FLEET_ALL_NODES	0x01	/* every node (LEFT JOIN), sorted by node_id bytewise;
										 * otherwise only nodes with a worker for the
										 * capability (sorted too, by sched_fleet_load) */
#define SCHED_FLEET_FRESH		0x02	/* a new snapshot that sees this transaction's own
										 * earlier writes (dispatch); otherwise the calling
										 * statement's snapshot (STABLE functions) */
#define SCHED_FLEET_LABELS		0x04	/* parse node labels (else left empty) */
#define SCHED_FLEET_COPY		0x08	/* the caller will modify the rows (not their
										 * strings): never hand out the mirror's */
#define SCHED_FLEET_NO_WORKERS	0x10	/* sched_fleet_load: every node, sorted by node_id
										 * bytewise, none with a worker (the capability is
										 * not read): to be merged, below */
#define SCHED_FLEET_WORKERS_ONLY 0x20	/* sched_fleet_load: the capability's workers,
										 * sorted by node_id bytewise, their nodes not
										 * read (node_id apart): to be merged, below */

/* The columns of a fleet row (fleet.c decodes them; fleet_mirror.c reads them too). */
#define SCHED_FLEET_COLUMNS_WITH(worker_tid) \
	"SELECT n.node_id, n.management_status, n.labels, n.cpu_millis, n.memory_mb, n.gpus, " \
	"       n.weight, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus, " \
	"       n.live_attempts, w.worker_id, w.runtime_state, w.scheduling_status, " \
	"       w.last_heartbeat, w.capability_versions, w.slots, w.live_attempts, w.generation, " \
	"       " worker_tid ", n.ctid "
#define SCHED_FLEET_COLUMNS SCHED_FLEET_COLUMNS_WITH("w.ctid")
#define SCHED_FLEET_COLUMN_COUNT 21

/* The 32-bit hash of a node_id (SchedFleetRow.node_hash; inflight.c keys nodes by it). */
extern uint32 sched_node_hash(const char *node_id);

/* Decodes one fleet row with its labels, its strings in one chunk allocated in pack
 * (row.owned, laid out as the fleet mirror keeps a row); see fleet.c. */
extern void sched_fleet_decode_packed(HeapTuple tup, TupleDesc desc, SchedFleetRow *r,
									  MemoryContext pack);

/* Reads the fleet for one capability from the tables, in CurrentMemoryContext, inside
 * SPI.  With keys_of (and SCHED_FLEET_LABELS), a node's labels hold only the keys that
 * placement requires or prefers; without, all of them.  Placement reads through
 * sched_fleet_read (fleet_mirror.h), which answers from the mirror where it can. */
extern void sched_fleet_load(const char *capability, int flags, const SchedPlacement *keys_of,
							 SchedFleet *fleet);

/* As sched_fleet_load, with fleet->rows allocated in rows_cxt: a caller that keeps the
 * rows takes the array as it is, without a copy.  With pack (keys_of NULL), each row's
 * strings are one chunk allocated in rows_cxt too (row.owned, laid out as the fleet
 * mirror keeps a row); else they are in CurrentMemoryContext.  An error leaves what was
 * read in rows_cxt: pass a context the error frees (the fleet mirror loads into one under
 * its statement's, and adopts it once the load has completed). */
extern void sched_fleet_load_into(const char *capability, int flags,
								  const SchedPlacement *keys_of, SchedFleet *fleet,
								  MemoryContext rows_cxt, bool pack);

/* The candidates of a fleet by reference, in fleet order (sched_fleet_merge). */
typedef struct SchedFleetRefs
{
	int			count;
	const SchedCandidate **cands;
} SchedFleetRefs;

/*
 * Into *out, the candidates sched_fleet_load(capability, SCHED_FLEET_ALL_NODES |
 * SCHED_FLEET_LABELS) reads, in its order, from two reads of one snapshot: `nodes`
 * (SCHED_FLEET_NO_WORKERS | SCHED_FLEET_LABELS, which serves every capability) and
 * `capable` (the capability's, SCHED_FLEET_WORKERS_ONLY: each of its rows is given, in
 * place, the columns of its node in `nodes`; a worker whose node is not there is left
 * out, as the join of the other reads leaves it out).  *out points into both fleets,
 * which must outlive it; no row is copied (a copy of 10,000 rows per capability was most
 * of the memory an operator's view touched).
 */
extern void sched_fleet_merge(const SchedFleet *nodes, SchedFleet *capable, SchedFleetRefs *out);

/* SCHED_FLEET_LABELS when placement p needs node labels (for eligibility alone, only
 * required labels matter; for scores, preferred ones too). */
extern int	sched_fleet_flags_for(const SchedPlacement *p, bool for_eligibility_only);

/* Where the newest versions of a pair's rows were seen a moment ago (invalid: unknown):
 * where sched_fleet_lock_pair looks first, instead of the rows' primary keys. */
typedef struct SchedPairHint
{
	ItemPointerData worker_tid;
	ItemPointerData node_tid;
} SchedPairHint;

/*
 * Locks worker `worker_id` and its node (FOR UPDATE OF both; with skip_locked, SKIP
 * LOCKED) and reads them fresh.  Returns false when the rows are locked by another
 * transaction (skip_locked) or the worker no longer exists.  hint: NULL, or where the
 * rows' newest versions were seen (sched_fleet_pair_locker).
 */
extern bool sched_fleet_lock_pair(pg_uuid_t *worker_id, bool skip_locked,
								  const SchedPairHint *hint, SchedFleetRow *row);

/* Another in-progress transaction holding the worker or node row of `row` (as read),
 * or InvalidTransactionId.  Takes no lock.  hint (unless NULL): where the walk found
 * the rows' newest versions, when no other transaction holds them. */
extern TransactionId sched_fleet_pair_locker(const SchedFleetRow *row, SchedPairHint *hint);

/* Admitted pairs of the fleet that are not busy, scored, in fleet order, into out
 * (fleet->count room); returns how many. */
extern int	sched_fleet_admit(const SchedPlacement *p, const SchedFleet *fleet, SchedRanked *out);

/*
 * The aggregated summary over every node of the fleet ("0/3 nodes eligible: ..."), and
 * (when verdict is not NULL) the fleet's verdict on the request (placement.h).
 */
extern char *sched_fleet_summary(const SchedPlacement *p, const SchedFleet *fleet,
								 SchedVerdict *verdict);

/* sched_fleet_summary() over candidates by reference. */
extern char *sched_fleet_refs_summary(const SchedPlacement *p, const SchedFleetRefs *fleet,
									  SchedVerdict *verdict);

/*
 * The nodes of a fleet in classes of nodes alike for admission at one heartbeat cutoff:
 * sched_admission() of an unpinned request gives every node of a class the same reasons
 * (fleet.c says which fields make a class).  For the operators' views, which explain
 * every shape of the queue over the whole fleet: a real fleet has a few kinds of nodes.
 */
typedef struct SchedFleetClasses
{
	int			count;			/* classes */
	const SchedCandidate **members;	/* the first node of each class, in fleet order */
	int		   *sizes;			/* how many nodes each class has */
	int			nodes;			/* of the fleet */
	int64_t		heartbeat_cutoff;
} SchedFleetClasses;

/* Classifies the fleet's nodes (the classes point into fleet, which must outlive them). */
extern void sched_fleet_classify(const SchedFleetRefs *fleet, int64_t heartbeat_cutoff,
								 SchedFleetClasses *out);

/* sched_fleet_summary() of an unpinned request whose heartbeat cutoff is the classes',
 * from one node of each class. */
extern char *sched_fleet_classes_summary(const SchedPlacement *p, const SchedFleetClasses *classes,
										 SchedVerdict *verdict);

#endif							/* PG_SCHED_FLEET_H */
