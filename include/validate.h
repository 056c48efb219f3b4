/*
 * validate.h — parameter checks and parsing: placement arguments, label maps, the request row (validate.c).
 */
#ifndef PG_SCHED_VALIDATE_H
#define PG_SCHED_VALIDATE_H

#include "fmgr.h"
#include "executor/tuptable.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
#include "placement.h"

/*
 * Parses a label map (a JSON object of strings) into a sorted SchedLabelSet allocated in
 * CurrentMemoryContext.  With `parameter` set, anything but an object of strings is an
 * ERROR (22023) naming it; with parameter NULL (stored node labels), non-string values
 * are ignored.
 */
extern void sched_labels_from_jsonb(Jsonb *labels, const char *parameter, SchedLabelSet *out);

/*
 * Parses required labels: per key a string (the plain label) or an object of one
 * operator, {"in": [...]}, {"not_in": [...]}, {"exists": bool}, {"gt": n}, {"lt": n},
 * {"version": "..."} (placement.h, SchedLabelOp).  Anything else is an ERROR naming the
 * parameter and the key: 22023, or 54000 beyond the limits.
 */
extern void sched_required_labels_from_jsonb(Jsonb *labels, const char *parameter,
											 SchedLabelSet *out);

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
	char	   *spread_key;		/* NULL: not spread (spread.c fills the candidates) */
} SchedPlacementArgs;

/*
 * Validates and parses the 13 placement parameters of select_candidate, rank_candidates
 * and qualification_reasons (SPEC section 3), in that order, from fcinfo, and the 14th,
 * spread_key, where the function has it (0.2.0).  ERROR with 22004 or 22023 naming the
 * parameter on bad input.
 */
extern void sched_placement_from_args(FunctionCallInfo fcinfo, SchedPlacementArgs *out);

/* The same for sched.pending_explanation's arguments (capability, capability_version,
 * required_labels, the six amounts, node_id, at), checked as the what-if functions
 * check theirs. */
extern void sched_placement_from_pending_args(FunctionCallInfo fcinfo, SchedPlacementArgs *out);

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
	bool		in_gang;		/* a member of gang gang_id (0.2.0) */
	pg_uuid_t	gang_id;
	int32		priority;		/* 0.2.0 (0 at 0.1.0) */
	bool		preemptible;
	char	   *held_node_id;	/* capacity held for it by its preemption (NULL: none) */
	pg_uuid_t	held_worker_id;
	TimestampTz held_until;
	char	   *concurrency_key;	/* NULL: none (and at 0.1.0) */
	ItemPointerData tid;		/* the version this transaction locked (invalid: read by a
								 * statement, or not locked) */
} SchedRequestRow;

/* How a row is read: no lock, FOR UPDATE, or FOR UPDATE SKIP LOCKED. */
typedef enum SchedRowLock
{
	SCHED_LOCK_NONE,
	SCHED_LOCK_WAIT,
	SCHED_LOCK_SKIP
} SchedRowLock;

/*
 * The request columns a placement is made of, in the order sched_placement_decode reads
 * them (of the request row `alias`).
 */
#define SCHED_PLACEMENT_COLUMNS(alias) \
	alias ".capability, " alias ".capability_version, " alias ".required_labels, " \
	alias ".preferred_labels, " alias ".min_cpu_millis, " alias ".min_memory_mb, " \
	alias ".min_gpus, " alias ".reserve_cpu_millis, " alias ".reserve_memory_mb, " \
	alias ".reserve_gpus, " alias ".node_id"
#define SCHED_PLACEMENT_COLUMN_COUNT 11

/*
 * The placement (clock from `at`) of SPI result row `row`, whose columns from `first` on
 * are SCHED_PLACEMENT_COLUMNS, and whose column spread_key_column (0: none) is the
 * spread_key.  ERROR as sched_placement_from_args on labels that do not parse.
 */
extern void sched_placement_decode(int row, int first, int spread_key_column, TimestampTz at,
								   SchedPlacementArgs *out);

/* The placement of the sched.request version in slot (rel: sched.request), as
 * sched_request_load gives it. */
extern void sched_request_placement_of_slot(Relation rel, TupleTableSlot *slot, TimestampTz at,
											SchedPlacementArgs *out);

extern bool sched_request_load(int64 request_id, SchedRowLock lock, TimestampTz at,
							   SchedPlacementArgs *out, SchedRequestRow *row);

/*
 * The request at `tid` as sched_request_load reads it with a lock, when that version is
 * one this transaction locked FOR UPDATE (queue_fetch.c) and has neither updated nor
 * deleted since: the newest version, which stays so until the transaction ends.  False
 * otherwise, and for tid NULL or invalid (the caller then reads or locks the request by
 * its key).  Saves finding and
 * locking again a row the queue scan of the same call locked.
 */
extern bool sched_request_read_locked(ItemPointer tid, TimestampTz at, SchedPlacementArgs *out,
									  SchedRequestRow *row);

/*
 * Whether any request holds capacity from a preemption (held_until set), with a
 * statement's snapshot: request_held_idx's first visible entry, in C.
 */
extern bool sched_request_any_held(void);

extern void sched_check_not_null(FunctionCallInfo fcinfo, int argno, const char *parameter);

/* The documented limits (README, "Limits"): checked before anything is written, 54000. */
#define SCHED_MAX_NAME_BYTES		256		/* node_id, capability, version, tenant, ... */
#define SCHED_MAX_LABELS			64		/* keys of one label map */
#define SCHED_MAX_LABEL_KEY_BYTES	256
#define SCHED_MAX_LABEL_VALUE_BYTES 1024
#define SCHED_MAX_VERSIONS			64		/* capability_versions of a worker */

/* ERROR 54000 naming the parameter when value is longer than SCHED_MAX_NAME_BYTES. */
extern void sched_check_name_length(const char *value, const char *parameter);

/* ERROR 22008 naming the parameter unless t is finite and within 1900-01-01 ..
 * 9999-12-31 UTC (far enough from the ends of timestamptz that no lease, backoff or
 * cutoff computed from it overflows, and every dump restores). */
extern void sched_check_time(TimestampTz t, const char *parameter);

#endif							/* PG_SCHED_VALIDATE_H */
