/*
 * pg_sched.h — declarations shared by the server-side C files of pg_sched.
 *
 * Layout: settings.c (GUCs, _PG_init), spi_util.c (prepared plans kept across calls),
 * validate.c (parameters → SchedPlacement, label maps), fleet.c (reading the fleet
 * snapshot), fleet_mirror.c (the per-backend copy of the fleet), selection.c (select/rank/qualification SRFs), reservation.c (the
 * reservation transaction, dispatch_attempt).  The pure core is placement.h.
 */
#ifndef PG_SCHED_H
#define PG_SCHED_H

#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
#include "catalog/pg_type.h"
#include "storage/itemptr.h"

#include "placement.h"

/* ---- settings.c ---- */
extern int	sched_heartbeat_ttl_s;
extern int	sched_lease_ttl_s;
extern int	sched_unschedulable_backoff_max_s;
extern int	sched_starvation_after_s;
extern int	sched_aging_interval_s;
extern int	sched_maintenance_interval_s;
extern int	sched_retry_backoff_max_s;
extern bool sched_notify_workers;
extern char *sched_databases;

/* ---- maintenance.c ---- */
extern void sched_register_maintenance_workers(void);

/* ---- spi_util.c ---- */

/*
 * A statement prepared on first use and kept for the life of the backend
 * (SPI_keepplan).  The plan cache re-plans it after invalidation, including after the
 * extension is dropped and created again.
 */
typedef struct SchedStatement
{
	const char *sql;
	int			nargs;
	Oid			argtypes[16];
	SPIPlanPtr	plan;
	bool		custom_plan;	/* plan for each call's values (CURSOR_OPT_CUSTOM_PLAN):
								 * for statements whose best plan depends on them */
	bool		generic_plan;	/* never plan for the values (CURSOR_OPT_GENERIC_PLAN):
								 * for statements whose values the planner would only
								 * look at to arrive at the same plan */
} SchedStatement;

/* The kept plan of a statement, prepared on first use. */
extern SPIPlanPtr sched_spi_plan(SchedStatement *stmt);

/* Runs a kept statement; fails loudly unless SPI returns `expected`.  Returns in the
 * caller's memory context (SPI itself returns in its procedure context). */
extern void sched_spi_exec(SchedStatement *stmt, Datum *values, const char *nulls,
						   bool read_only, long count, int expected);

/* Column accessors on SPI_tuptable row `row` (1-based column numbers). */
extern Datum sched_spi_get(int row, int col, bool *isnull);
extern char *sched_spi_text(int row, int col);	/* NULL when SQL NULL */
extern int64 sched_spi_int64(int row, int col); /* 0 when SQL NULL */

/* ---- validate.c ---- */

/*
 * Parses a label map (a JSON object of strings) into a sorted SchedLabelSet allocated in
 * CurrentMemoryContext.  With `parameter` set, anything but an object of strings is an
 * ERROR (22023) naming it; with parameter NULL (stored node labels), non-string values
 * are ignored.
 */
extern void sched_labels_from_jsonb(Jsonb *labels, const char *parameter, SchedLabelSet *out);

/*
 * The labels of `labels` whose keys appear in a or b (sorted label sets), sorted: all a
 * placement needs of a node's labels, looked up without parsing the whole map.  Keys
 * point into a and b; values are copied.  Non-string values are left out.
 */
extern void sched_labels_pick(Jsonb *labels, const SchedLabelSet *a, const SchedLabelSet *b,
							  SchedLabelSet *out);

/* The request of a placement function call: the parsed placement and its raw inputs. */
typedef struct SchedPlacementArgs
{
	SchedPlacement p;
	TimestampTz at;
} SchedPlacementArgs;

/*
 * Validates and parses the 13 placement parameters of select_candidate, rank_candidates
 * and qualification_reasons (SPEC section 3), in that order, from fcinfo.  ERROR with
 * 22004 or 22023 naming the parameter on bad input.
 */
extern void sched_placement_from_args(FunctionCallInfo fcinfo, SchedPlacementArgs *out);

/* heartbeat cutoff = at - ttl (ttl NULL: sched.heartbeat_ttl).  Checks ttl > 0. */
extern void sched_placement_set_clock(SchedPlacementArgs *args, TimestampTz at, Interval *ttl);

/*
 * Loads request `request_id` into *out (labels parsed, heartbeat TTL from the setting),
 * reading it as `lock` says.  Returns false if there is no such request, or (SKIP) it
 * is locked by another transaction.
 * Must be called inside SPI.  Fills the extra fields below when given.
 */
typedef struct SchedRequestRow
{
	int64		request_id;
	pg_uuid_t	execution_id;
	pg_uuid_t	step_id;
	int32		attempt_number;
	char	   *tenant;
	char	   *state;
	bool		has_claim;
	pg_uuid_t	claim_id;
	TimestampTz claimed_until;
	int32		tries;
	TimestampTz available_at;
	char	   *avoid_node_id;	/* NULL: none */
	char	   *last_reason;	/* NULL: none */
} SchedRequestRow;

/* How a row is read: no lock, FOR UPDATE, or FOR UPDATE SKIP LOCKED. */
typedef enum SchedRowLock
{
	SCHED_LOCK_NONE,
	SCHED_LOCK_WAIT,
	SCHED_LOCK_SKIP
} SchedRowLock;

extern bool sched_request_load(int64 request_id, SchedRowLock lock, TimestampTz at,
							   SchedPlacementArgs *out, SchedRequestRow *row);

extern void sched_check_not_null(FunctionCallInfo fcinfo, int argno, const char *parameter);

/* ---- fleet.c ---- */

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
} SchedFleet;

/* How sched_fleet_load reads (flags). */
#define SCHED_FLEET_ALL_NODES	0x01	/* every node (LEFT JOIN), sorted by node_id bytewise;
										 * otherwise only nodes with a worker for the
										 * capability, in no particular order */
#define SCHED_FLEET_FRESH		0x02	/* a new snapshot that sees this transaction's own
										 * earlier writes (dispatch); otherwise the calling
										 * statement's snapshot (STABLE functions) */
#define SCHED_FLEET_LABELS		0x04	/* parse node labels (else left empty) */
#define SCHED_FLEET_COPY		0x08	/* the caller will modify the rows (not their
										 * strings): never hand out the mirror's */
#define SCHED_FLEET_TABLES		0x10	/* read the tables, never the fleet mirror (the
										 * mirror itself loads through this) */

/* The columns of a fleet row (fleet.c decodes them; fleet_mirror.c reads them too). */
#define SCHED_FLEET_COLUMNS \
	"SELECT n.node_id, n.management_status, n.labels, n.cpu_millis, n.memory_mb, n.gpus, " \
	"       n.weight, n.reserved_cpu_millis, n.reserved_memory_mb, n.reserved_gpus, " \
	"       n.live_attempts, w.worker_id, w.runtime_state, w.scheduling_status, " \
	"       w.last_heartbeat, w.capability_versions, w.slots, w.live_attempts, w.generation, " \
	"       w.ctid, n.ctid "
#define SCHED_FLEET_COLUMN_COUNT 21

/* Decodes one fleet row (strings palloc'd in CurrentMemoryContext); see fleet.c. */
extern void sched_fleet_decode(HeapTuple tup, TupleDesc desc, SchedFleetRow *r,
							   bool with_labels, const SchedPlacement *keys_of);

/* Reads the fleet for one capability, in CurrentMemoryContext, inside SPI.  With
 * keys_of (and SCHED_FLEET_LABELS), a node's labels hold only the keys that placement
 * requires or prefers; without, all of them. */
extern void sched_fleet_load(const char *capability, int flags, const SchedPlacement *keys_of,
							 SchedFleet *fleet);

/* SCHED_FLEET_LABELS when placement p needs node labels (for eligibility alone, only
 * required labels matter; for scores, preferred ones too). */
extern int	sched_fleet_flags_for(const SchedPlacement *p, bool for_eligibility_only);

/*
 * Fleets read once per batch (dispatch_next) and kept up to date in memory: after every
 * locked re-read of a pair its counters and states are copied into every cached row of
 * that node and worker.  The cached values only steer ranking; admission is always
 * re-checked on the locked rows.
 */
typedef struct SchedFleetCacheEntry
{
	char	   *capability;
	bool		all_nodes;
	SchedFleet	fleet;
	int		   *by_node;		/* row indexes sorted by node_id */
} SchedFleetCacheEntry;

/* A reservation made in a batch whose rows are not written yet (see reservation.c). */
typedef struct SchedPendingReservation
{
	int64		request_id;
	pg_uuid_t	execution_id;
	pg_uuid_t	step_id;
	int32		attempt_number;
	char	   *tenant;
	char	   *node_id;
	pg_uuid_t	worker_id;
	int64		generation;
	int32		reserve_cpu_millis;
	int64		reserve_memory_mb;
	int32		reserve_gpus;
	int64		score;
	pg_uuid_t	attempt_id;
} SchedPendingReservation;

#define SCHED_PENDING_MAX 64

typedef struct SchedFleetCache
{
	MemoryContext cxt;			/* lives as long as the batch */
	int			count;
	int			allocated;
	SchedFleetCacheEntry *entries;
	SchedRanked *ranked;		/* scratch for ranking, as large as the largest fleet */
	int			ranked_size;

	/*
	 * Deferred writes: with `defer`, reservations are kept here (at most
	 * SCHED_PENDING_MAX, then flushed) and written together by
	 * sched_flush_reservations(), which the batch must call before it ends.
	 */
	bool		defer;
	TimestampTz at;
	int			npending;
	SchedPendingReservation pending[SCHED_PENDING_MAX];
} SchedFleetCache;

extern SchedFleet *sched_fleet_cached(SchedFleetCache *cache, const char *capability,
									  bool all_nodes);
extern void sched_fleet_cache_update(SchedFleetCache *cache, const SchedFleetRow *fresh);

/*
 * Locks worker `worker_id` and its node (FOR UPDATE OF both; with skip_locked, SKIP
 * LOCKED) and reads them fresh.  Returns false when the rows are locked by another
 * transaction (skip_locked) or the worker no longer exists.
 */
extern bool sched_fleet_lock_pair(pg_uuid_t *worker_id, bool skip_locked, SchedFleetRow *row);

/* Another in-progress transaction holding the worker or node row of `row` (as read),
 * or InvalidTransactionId.  Takes no lock. */
extern TransactionId sched_fleet_pair_locker(const SchedFleetRow *row);

/* Admitted pairs of the fleet that are not busy, scored, in fleet order, into out
 * (fleet->count room); returns how many. */
extern int	sched_fleet_admit(const SchedPlacement *p, const SchedFleet *fleet, SchedRanked *out);

/* Admitted pairs of the fleet, scored and ranked best first (palloc'd; *count set). */
extern SchedRanked *sched_fleet_rank(const SchedPlacement *p, const SchedFleet *fleet, int *count);

/*
 * The aggregated summary over every node of the fleet ("0/3 nodes eligible: ..."), with
 * (each optional) the number of eligible nodes and whether some node fails only on
 * transient reasons (no_free_slot, *_exhausted).
 */
extern char *sched_fleet_summary(const SchedPlacement *p, const SchedFleet *fleet,
								 int *eligible, bool *transient);

/* ---- fleet_mirror.c ---- */
extern int	sched_fleet_change_log_size;
extern bool sched_fleet_mirror;

/* Installs the shared memory hooks of the change log (from _PG_init when preloading). */
extern void sched_fleet_mirror_preload(void);

/* Whether this backend may answer fleet reads from its mirror now. */
extern bool sched_fleet_mirror_usable(void);

/*
 * The fleet of `capability` (nodes with a worker for it) from the mirror, brought up to
 * the active snapshot (fresh: a new snapshot that sees this transaction's writes).  The
 * rows are borrowed (valid until the transaction ends; not to be modified).  Returns
 * false when the mirror cannot answer: read the tables instead.  Inside SPI.
 */
extern bool sched_fleet_mirror_read(const char *capability, bool fresh, SchedFleet *fleet);

/* ---- reservation.c ---- */

/* Why an UNSCHEDULABLE request was left queued (see leave_queued in reservation.c). */
typedef enum SchedWait
{
	SCHED_WAIT_NONE = 0,		/* not left queued */
	SCHED_WAIT_CAPACITY,		/* only transient reasons: keeps its place, no backoff */
	SCHED_WAIT_STATIC,			/* the fleet as it is cannot run it: backs off */
	SCHED_WAIT_CONTENTION		/* eligible pairs held or taken by concurrent dispatches */
} SchedWait;

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
} SchedDispatchResult;

/*
 * The reservation transaction for one request, inside SPI, in the caller's transaction
 * (see the locking protocol in reservation.c).  from_queue: the request came from a
 * queue scan: it is skipped (false returned, nothing written) when another transaction
 * holds its step, row or execution, or when it is no longer ready; nothing is waited
 * for.  cache: the batch's fleet cache, or NULL to read the fleet afresh.  key: the
 * request's (step_id, attempt_number) when the caller read them already, else NULL.
 */
typedef struct SchedStepKey
{
	pg_uuid_t	step_id;
	int32		attempt_number;
} SchedStepKey;

extern bool sched_dispatch_request(int64 request_id, const SchedStepKey *key,
								   const pg_uuid_t *claim_id, TimestampTz at,
								   bool from_queue, SchedFleetCache *cache,
								   SchedDispatchResult *res);

/* Writes the batch's pending reservations (one statement), if any. */
extern void sched_flush_reservations(SchedFleetCache *cache);

/* ---- inflight.c ---- */
extern void sched_inflight_preload(void);
extern uint32 sched_node_hash(const char *node_id);

/* Records a reservation this transaction is making on the node (until it ends), and
 * withdraws one that did not happen. */
extern void sched_inflight_add(uint32 node_hash);
extern void sched_inflight_remove(uint32 node_hash);

/* Lowers the scores of admitted candidates by the attempts other running transactions
 * are reserving on their nodes, and ranks those nodes after all others (their rows are
 * locked until those transactions end): score - SCHED_INFLIGHT_DEMOTION.  Returns how
 * many it changed. */
#define SCHED_INFLIGHT_DEMOTION (INT64CONST(1) << 52)
extern int	sched_inflight_project(SchedRanked *ranked, int n, const SchedFleet *fleet);

/* ---- counters.c ---- */
extern void sched_counters_preload(void);

/* Adds a finished dispatch call's outcome and conflicts to the shared counters. */
extern void sched_counters_add(const SchedDispatchResult *res);

/* Fills a sched.dispatch_result row (values/nulls of 8) from res. */
extern void sched_dispatch_result_values(const SchedDispatchResult *res, Datum *values, bool *nulls);

/* The uuid of an array of 16 bytes, formatted. */
extern char *sched_uuid_out(const pg_uuid_t *u);

#endif							/* PG_SCHED_H */
