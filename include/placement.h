/*
 * placement.h — the pure placement core of pg_sched: admission (stage 2), scoring and
 * ranking (stage 3), and the aggregated "why is it waiting" summary.
 *
 * Everything declared here is plain C99 with no PostgreSQL headers and no SPI, so it is
 * compiled both into the extension and into the stand-alone unit tests and fuzzer
 * (test/unit).  Admission and diagnosis share sched_admission(): the reasons a node is
 * filtered out and the decision to filter it are one computation and cannot drift.
 *
 * Strings are NUL-terminated and compared bytewise (strcmp compares as unsigned char),
 * which is the COLLATE "C" order the SPEC requires for node_id, whatever the database
 * collation.  Nothing here allocates except sched_labels_sort() (in place) and nothing
 * keeps state between calls.
 */
#ifndef PG_SCHED_PLACEMENT_H
#define PG_SCHED_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Reason codes, in the order diagnostics list them (SPEC section 3). */
typedef enum SchedReason
{
	SCHED_R_PINNED_TO_OTHER_NODE = 0,
	SCHED_R_NODE_NOT_ACTIVE,
	SCHED_R_CAPABILITY_MISSING,
	SCHED_R_WORKER_NOT_READY,
	SCHED_R_WORKER_NOT_ELIGIBLE,
	SCHED_R_HEARTBEAT_EXPIRED,
	SCHED_R_CAPABILITY_VERSION_MISSING,
	SCHED_R_REQUIRED_LABELS_MISMATCH,
	SCHED_R_INSUFFICIENT_CPU,
	SCHED_R_INSUFFICIENT_MEMORY,
	SCHED_R_INSUFFICIENT_GPUS,
	SCHED_R_NO_FREE_SLOT,
	SCHED_R_CPU_EXHAUSTED,
	SCHED_R_MEMORY_EXHAUSTED,
	SCHED_R_GPUS_EXHAUSTED,
	SCHED_R_COUNT
} SchedReason;

/* A set of reasons, bit i for SchedReason i.  Empty means admitted. */
typedef uint32_t SchedReasonSet;

#define SCHED_REASON_BIT(r) ((SchedReasonSet) 1u << (r))

/* Reasons that clear when attempts end (no_free_slot and the *_exhausted codes). */
#define SCHED_TRANSIENT_REASONS \
	(SCHED_REASON_BIT(SCHED_R_NO_FREE_SLOT) | SCHED_REASON_BIT(SCHED_R_CPU_EXHAUSTED) | \
	 SCHED_REASON_BIT(SCHED_R_MEMORY_EXHAUSTED) | SCHED_REASON_BIT(SCHED_R_GPUS_EXHAUSTED))

extern const char *const sched_reason_names[SCHED_R_COUNT];

/*
 * What one required label asks of a node's label `key` (README, "Label expressions").
 * A node's own labels, and preferred labels, are always SCHED_LABEL_EQ.
 *   EQ          the node has the label, with value `value` (a plain string in JSON)
 *   IN          the node has the label, its value one of `values`
 *   NOT_IN      the node lacks the label, or its value is none of `values`
 *   EXISTS      the node has the label ({"exists": true})
 *   NOT_EXISTS  the node lacks the label ({"exists": false})
 *   GT, LT      the node's value is a number (sched_label_number) greater / less than
 *               `number`
 *   VERSION     the node's value is a version (sched_version_parse) meeting every one of
 *               `bounds` (the comma-separated comparisons of {"version": ">=1.2,<2"})
 * A label that is absent fails every operator except NOT_IN and NOT_EXISTS.
 */
typedef enum SchedLabelOp
{
	SCHED_LABEL_EQ = 0,
	SCHED_LABEL_IN,
	SCHED_LABEL_NOT_IN,
	SCHED_LABEL_EXISTS,
	SCHED_LABEL_NOT_EXISTS,
	SCHED_LABEL_GT,
	SCHED_LABEL_LT,
	SCHED_LABEL_VERSION
} SchedLabelOp;

/* The documented limits of expressions (README, "Limits"). */
#define SCHED_MAX_LABEL_VALUES		64	/* strings of one in / not_in */
#define SCHED_MAX_VERSION_PARTS		8	/* numbers of one dotted version */
#define SCHED_MAX_VERSION_BOUNDS	8	/* comparisons of one version expression */
#define SCHED_MAX_VERSION_PART		999999999	/* largest number of one part */

/* A dotted version "1.2.10": up to SCHED_MAX_VERSION_PARTS numbers; missing parts are 0. */
typedef struct SchedVersion
{
	int			nparts;
	int32_t		parts[SCHED_MAX_VERSION_PARTS];
} SchedVersion;

typedef enum SchedVersionCmp
{
	SCHED_VCMP_EQ = 0,			/* "=" (also a bare version) */
	SCHED_VCMP_NE,				/* "!=" */
	SCHED_VCMP_GT,				/* ">" */
	SCHED_VCMP_GE,				/* ">=" */
	SCHED_VCMP_LT,				/* "<" */
	SCHED_VCMP_LE				/* "<=" */
} SchedVersionCmp;

typedef struct SchedVersionBound
{
	SchedVersionCmp cmp;
	SchedVersion version;
} SchedVersionBound;

/*
 * One label: a key and what is asked of it.  Zero-initialized past key and value, it is
 * the plain label {key: value}, which is what label maps hold.
 */
typedef struct SchedLabel
{
	const char *key;
	const char *value;			/* EQ */
	SchedLabelOp op;
	int			nvalues;		/* IN, NOT_IN: 1 .. SCHED_MAX_LABEL_VALUES */
	const char *const *values;
	double		number;			/* GT, LT: finite */
	int			nbounds;		/* VERSION: 1 .. SCHED_MAX_VERSION_BOUNDS */
	const SchedVersionBound *bounds;
} SchedLabel;

/* A label map.  Invariant after sched_labels_sort(): sorted by key bytewise, keys unique. */
typedef struct SchedLabelSet
{
	int			count;
	SchedLabel *items;
} SchedLabelSet;

typedef enum SchedNodeStatus
{
	SCHED_NODE_ACTIVE = 0,
	SCHED_NODE_DRAINING,
	SCHED_NODE_DISABLED
} SchedNodeStatus;

typedef enum SchedRuntimeState
{
	SCHED_WORKER_STARTING = 0,
	SCHED_WORKER_READY,
	SCHED_WORKER_DRAINING,
	SCHED_WORKER_STOPPED
} SchedRuntimeState;

typedef enum SchedSchedulingStatus
{
	SCHED_WORKER_ELIGIBLE = 0,
	SCHED_WORKER_CORDONED
} SchedSchedulingStatus;

/*
 * What a request asks for (SPEC section 3), with `at - heartbeat_ttl` already computed
 * as heartbeat_cutoff (microseconds on the caller's clock; a heartbeat strictly older is
 * expired).  Amounts are >= 0 (the callers validate input before building this).
 */
typedef struct SchedPlacement
{
	const char *capability;
	const char *capability_version;
	SchedLabelSet required_labels;
	SchedLabelSet preferred_labels;
	int64_t		min_cpu_millis;
	int64_t		min_memory_mb;
	int64_t		min_gpus;
	int64_t		reserve_cpu_millis;
	int64_t		reserve_memory_mb;
	int64_t		reserve_gpus;
	const char *pin_node_id;	/* NULL: not pinned */
	int64_t		heartbeat_cutoff;
} SchedPlacement;

/*
 * One node as seen by one request: the node's row and, if the node has one, its worker
 * for the requested capability (at most one per node and capability).
 */
typedef struct SchedCandidate
{
	/* node */
	const char *node_id;
	uint64_t	node_key[2];	/* sched_candidate_set_node: node_id's first 16 bytes */
	SchedNodeStatus management_status;
	SchedLabelSet labels;
	int64_t		cpu_millis;
	int64_t		memory_mb;
	int64_t		gpus;
	int32_t		weight;
	int64_t		reserved_cpu_millis;
	int64_t		reserved_memory_mb;
	int64_t		reserved_gpus;
	int32_t		node_live_attempts;

	/* the node's worker for the capability */
	bool		has_worker;
	SchedRuntimeState runtime_state;
	SchedSchedulingStatus scheduling_status;
	bool		has_heartbeat;
	int64_t		last_heartbeat;
	int			version_count;
	const char *const *versions;
	int32_t		slots;
	int32_t		worker_live_attempts;
} SchedCandidate;

/* A scored, admitted candidate: what ranking orders. */
typedef struct SchedRanked
{
	int			index;			/* into the caller's candidate array */
	const char *node_id;
	uint64_t	node_key[2];	/* sched_ranked_set_node: node_id's first 16 bytes */
	int64_t		score;
	int32_t		preferred_matches;
	int32_t		weight;			/* effective weight used in the score */
	int32_t		running_attempts;
	int32_t		spread_matches;
	bool		held;			/* another running transaction is reserving on the node
								 * (inflight.c): ranked after every node that is not */
} SchedRanked;

/* The score's running-attempts term: this much less per live attempt on the node. */
#define SCHED_SCORE_PER_RUNNING_ATTEMPT 10000

/* The score's spread term: this much less per live attempt of the request's spread_key
 * on the node: as much as 100 of weight or ten running attempts, a tenth of one
 * preferred label. */
#define SCHED_SCORE_PER_SPREAD_MATCH 100000

/*
 * What a fleet, taken whole, says of a request: some node admits it (FITS); none does,
 * but some node refuses it only for transient reasons, so it waits for capacity (WAITS);
 * every node has a static reason (STATIC).  Ordered: a later value dominates.
 */
typedef enum SchedVerdict
{
	SCHED_VERDICT_STATIC = 0,
	SCHED_VERDICT_WAITS,
	SCHED_VERDICT_FITS
} SchedVerdict;

/* The verdict with one more node's reasons counted; start from SCHED_VERDICT_STATIC. */
extern SchedVerdict sched_verdict_add(SchedVerdict verdict, SchedReasonSet reasons);

/* Whether an attempt in `status` is live: DISPATCHED or RUNNING.  A live attempt holds
 * its worker slot and node reservations, and counts in its key's and tenant's limits and
 * in its tenant's sums (sched.tenant_live). */
extern bool sched_attempt_status_live(const char *status);

/* Sorts a label set by key; returns false (set unchanged in content) on a duplicate key. */
extern bool sched_labels_sort(SchedLabelSet *set);

/* Value of key in a sorted set, or NULL. */
extern const char *sched_labels_get(const SchedLabelSet *set, const char *key);

/* Number of entries of `wanted` that `have` holds with an equal value (plain labels:
 * the op of `wanted` is not read; preferred labels are counted with it). */
extern int	sched_labels_matching(const SchedLabelSet *have, const SchedLabelSet *wanted);

/* Whether the node labels `have` (sorted) meet the one required label `req`. */
extern bool sched_label_satisfied(const SchedLabel *req, const SchedLabelSet *have);

/* Index in `required` of the first label (in key order) that `have` does not meet, or
 * -1 when it meets them all. */
extern int	sched_labels_first_unmet(const SchedLabelSet *have, const SchedLabelSet *required);

/*
 * A label value as a number, for GT and LT: the whole string must be a decimal number,
 * -?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)? (no spaces, no sign "+", no hex, no inf or nan),
 * of any length, within the range of a double: a result that overflows to infinity or
 * underflows to zero is not a number (as for PostgreSQL's float8 input, which reads it
 * the same way; a subnormal result is a number).  Returns false when it is not.
 */
extern bool sched_label_number(const char *s, double *out);

/*
 * A dotted version: 1 to SCHED_MAX_VERSION_PARTS numbers of 1 to 9 digits, each at most
 * SCHED_MAX_VERSION_PART, separated by single dots, nothing else ("1", "1.2", "10.0.3";
 * not "v1", "1.", "1..2", "1.2-rc1").  Returns false when s is not one.
 */
extern bool sched_version_parse(const char *s, SchedVersion *out);

/* -1, 0 or 1 as a is older, the same as or newer than b (missing parts count as 0). */
extern int	sched_version_cmp(const SchedVersion *a, const SchedVersion *b);

/*
 * A version expression: 1 to SCHED_MAX_VERSION_BOUNDS comparisons separated by commas,
 * each an optional operator (= != > >= < <=; none means =) and a version, spaces allowed
 * around each part (">= 1.2, < 2").  Fills bounds[0 .. n-1] and returns n, or -1 when s
 * is not one.  bounds has room for SCHED_MAX_VERSION_BOUNDS.
 */
extern int	sched_version_range_parse(const char *s, SchedVersionBound *bounds);

/* Whether version v meets every bound. */
extern bool sched_version_in_range(const SchedVersion *v, const SchedVersionBound *bounds,
								   int nbounds);

/*
 * Every reason that keeps candidate c from taking request p, in SPEC order, with the
 * SPEC's suppression rules: no worker reason where capability_missing applies, and a
 * *_exhausted reason only where the matching insufficient_* does not apply.
 */
extern SchedReasonSet sched_admission(const SchedPlacement *p, const SchedCandidate *c);

/*
 * The reasons of sched_admission that change as attempts come and go (no_free_slot and
 * the *_exhausted codes), for a candidate that has no other reason: then
 * sched_admission(p, c) == sched_admission_transient(p, c).
 */
static inline SchedReasonSet
sched_admission_transient(const SchedPlacement *p, const SchedCandidate *c)
{
	SchedReasonSet r = 0;

	if (c->worker_live_attempts >= c->slots)
		r |= SCHED_REASON_BIT(SCHED_R_NO_FREE_SLOT);
	if (c->cpu_millis - c->reserved_cpu_millis < p->reserve_cpu_millis)
		r |= SCHED_REASON_BIT(SCHED_R_CPU_EXHAUSTED);
	if (c->memory_mb - c->reserved_memory_mb < p->reserve_memory_mb)
		r |= SCHED_REASON_BIT(SCHED_R_MEMORY_EXHAUSTED);
	if (c->gpus - c->reserved_gpus < p->reserve_gpus)
		r |= SCHED_REASON_BIT(SCHED_R_GPUS_EXHAUSTED);
	return r;
}

/*
 * The reason of sched_admission that moves with the clock, not with the candidate
 * (heartbeat_expired: the cutoff is the call's clock less the heartbeat timeout).
 */
#define SCHED_CLOCK_REASONS SCHED_REASON_BIT(SCHED_R_HEARTBEAT_EXPIRED)

/* sched_admission's SCHED_CLOCK_REASONS for candidate c. */
static inline SchedReasonSet
sched_admission_clock(const SchedPlacement *p, const SchedCandidate *c)
{
	if (c->has_worker && (!c->has_heartbeat || c->last_heartbeat < p->heartbeat_cutoff))
		return SCHED_REASON_BIT(SCHED_R_HEARTBEAT_EXPIRED);
	return 0;
}

/*
 * Whether a and b are one shape: they ask the same of every node in all but what changes
 * as attempts come and go and what moves with the clock.  Then, for any candidate,
 * sched_admission(a, c) and sched_admission(b, c) have the same reasons outside
 * SCHED_TRANSIENT_REASONS and SCHED_CLOCK_REASONS, and the score's preferred_matches are
 * the same.  (The capability is the caller's: it picks the fleet.)
 */
extern bool sched_placement_same_shape(const SchedPlacement *a, const SchedPlacement *b);

/* A weight <= 0 scores as 100. */
static inline int32_t
sched_effective_weight(int32_t weight)
{
	return weight <= 0 ? 100 : weight;
}

/*
 * score = preferred_matches * 1,000,000 - spread_matches * 100,000 + weight * 1,000
 *         - running_attempts * 10,000,
 * running_attempts being the live attempts on the whole node, spread_matches those of
 * them with the request's spread_key, which the caller counts (fleet rows do not know
 * keys) and adds with sched_score_add_spread: sched_score leaves it 0.  Fills *out
 * (index left to the caller).
 */
extern void sched_score(const SchedPlacement *p, const SchedCandidate *c, SchedRanked *out);

/* sched_score with the preferred labels' matches already counted
 * (sched_labels_matching(&c->labels, &p->preferred_labels)). */
static inline void
sched_score_matched(const SchedCandidate *c, int32_t preferred_matches, SchedRanked *out)
{
	out->node_id = c->node_id;
	out->node_key[0] = c->node_key[0];
	out->node_key[1] = c->node_key[1];
	out->preferred_matches = preferred_matches;
	out->weight = sched_effective_weight(c->weight);
	out->running_attempts = c->node_live_attempts;
	out->spread_matches = 0;
	out->held = false;
	out->score = (int64_t) out->preferred_matches * 1000000
		+ (int64_t) out->weight * 1000
		- (int64_t) out->running_attempts * SCHED_SCORE_PER_RUNNING_ATTEMPT;
}

/*
 * Counts `attempts` more running attempts on the node of r: what r will score once
 * concurrent reservations on it commit.
 */
extern void sched_score_add_running(SchedRanked *r, int attempts);

/* Counts `matches` live attempts of the request's spread_key on the node of r. */
extern void sched_score_add_spread(SchedRanked *r, int matches);

/*
 * The first 16 bytes of node_id (NUL-padded) as two big-endian numbers, which order as
 * strcmp orders those bytes: ranking breaks a tie of score by them, without reading
 * the strings unless they share 16 bytes.
 */
extern void sched_node_key(const char *node_id, uint64_t key[2]);

/* Sets c's node_id and node_key (once per row read: a fleet row is ranked at every
 * call).  Every candidate that is scored must be set through it. */
extern void sched_candidate_set_node(SchedCandidate *c, const char *node_id);

/* Copies into c the node's fields of `node` (another candidate of the same node): its
 * status, capacity, reservations, weight and live attempts; not its labels (whose
 * memory may be the caller's) and not node_id. */
extern void sched_candidate_take_node(SchedCandidate *c, const SchedCandidate *node);

/* Sets r's node_id and node_key, for an entry not scored from a candidate (sched_score
 * copies the candidate's). */
extern void sched_ranked_set_node(SchedRanked *r, const char *node_id);

/* Ranking order: held candidates last, then higher score first, then smaller node_id
 * bytewise. */
static inline int
sched_ranked_order(const SchedRanked *x, const SchedRanked *y)
{
	if (x->held != y->held)
		return x->held ? 1 : -1;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->node_key[0] != y->node_key[0])
		return x->node_key[0] < y->node_key[0] ? -1 : 1;
	if (x->node_key[1] != y->node_key[1])
		return x->node_key[1] < y->node_key[1] ? -1 : 1;
	return strcmp(x->node_id, y->node_id);
}

/* sched_ranked_order as a qsort comparator. */
extern int	sched_ranked_cmp(const void *a, const void *b);

/* Sorts ranked candidates best first (a total order: node_ids are unique). */
extern void sched_rank(SchedRanked *ranked, int count);

/*
 * The aggregated explanation "0/3 nodes eligible: 1 heartbeat_expired, 2 insufficient_cpu":
 * counts per reason code over all nodes (a node counts once under each reason it has),
 * codes sorted by name, zero counts left out.  Writes at most cap bytes including the
 * NUL; returns the length it needed (like snprintf).
 */
extern size_t sched_format_summary(char *buf, size_t cap, int nodes, int eligible,
								   const int counts[SCHED_R_COUNT]);

/* Adds the reasons of one node to per-code counts. */
extern void sched_count_reasons(SchedReasonSet reasons, int counts[SCHED_R_COUNT]);

/*
 * Preemption (README, "Preemption").  A victim is a live attempt, of a preemptible request
 * of lower priority than the preemptor's, on the node of a candidate.
 */
typedef struct SchedVictim
{
	int32_t		priority;		/* its request's */
	int64_t		dispatched_at;	/* its age: among equal priorities the youngest goes */
	bool		on_worker;		/* it holds a slot of the candidate's worker */
	int64_t		reserve_cpu_millis;
	int64_t		reserve_memory_mb;
	int64_t		reserve_gpus;
} SchedVictim;

/*
 * The victims to end on candidate c so that it admits p (Kubernetes' order): with all n
 * victims removed, c must admit p, else -1 (nothing chosen).  Then the victims are
 * reprieved one by one, the highest priority first (then the oldest, then the lower
 * index), each kept when c still admits p without removing it.  Sets chosen[i] for the
 * victims that go and returns how many: 0 when c admits p as it is.  `order` is the
 * caller's scratch of n ints.  No allocation.
 */
extern int	sched_preemption_victims(const SchedPlacement *p, const SchedCandidate *c,
									 const SchedVictim *victims, int n, int *order,
									 bool *chosen);

/*
 * Which of two nodes a preemption takes (negative: a): the one with fewer victims, then
 * the one whose highest victim priority is lower, then the smaller node_id bytewise.
 */
extern int	sched_preemption_cmp(int victims_a, int32_t top_priority_a, const char *node_a,
								 int victims_b, int32_t top_priority_b, const char *node_b);

#endif							/* PG_SCHED_PLACEMENT_H */
