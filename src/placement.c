/*
 * placement.c — the pure placement core: admission reasons, scores, ranking and the
 * aggregated summary (see include/placement.h).  No PostgreSQL headers, no SPI, no
 * allocation: unit tested and fuzzed on its own in test/unit.
 */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sched_reason_names[SCHED_R_COUNT] = {
	"pinned_to_other_node",
	"node_not_active",
	"capability_missing",
	"worker_not_ready",
	"worker_not_eligible",
	"heartbeat_expired",
	"capability_version_missing",
	"required_labels_mismatch",
	"insufficient_cpu",
	"insufficient_memory",
	"insufficient_gpus",
	"no_free_slot",
	"cpu_exhausted",
	"memory_exhausted",
	"gpus_exhausted",
};

static int
label_cmp(const void *a, const void *b)
{
	return strcmp(((const SchedLabel *) a)->key, ((const SchedLabel *) b)->key);
}

bool
sched_labels_sort(SchedLabelSet *set)
{
	int			i;

	if (set->count > 1)
		qsort(set->items, (size_t) set->count, sizeof(SchedLabel), label_cmp);
	for (i = 1; i < set->count; i++)
		if (strcmp(set->items[i - 1].key, set->items[i].key) == 0)
			return false;
	return true;
}

const char *
sched_labels_get(const SchedLabelSet *set, const char *key)
{
	int			lo = 0;
	int			hi = set->count - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		int			c = strcmp(set->items[mid].key, key);

		if (c == 0)
			return set->items[mid].value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

int
sched_labels_matching(const SchedLabelSet *have, const SchedLabelSet *wanted)
{
	int			matches = 0;
	int			i;

	for (i = 0; i < wanted->count; i++)
	{
		const char *v = sched_labels_get(have, wanted->items[i].key);

		if (v != NULL && strcmp(v, wanted->items[i].value) == 0)
			matches++;
	}
	return matches;
}

static bool
serves_version(const SchedCandidate *c, const char *version)
{
	int			i;

	for (i = 0; i < c->version_count; i++)
		if (c->versions[i] != NULL && strcmp(c->versions[i], version) == 0)
			return true;
	return false;
}

static int64_t
max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

SchedReasonSet
sched_admission(const SchedPlacement *p, const SchedCandidate *c)
{
	SchedReasonSet r = 0;

	if (p->pin_node_id != NULL && strcmp(p->pin_node_id, c->node_id) != 0)
		r |= SCHED_REASON_BIT(SCHED_R_PINNED_TO_OTHER_NODE);
	if (c->management_status != SCHED_NODE_ACTIVE)
		r |= SCHED_REASON_BIT(SCHED_R_NODE_NOT_ACTIVE);
	if (!c->has_worker)
		r |= SCHED_REASON_BIT(SCHED_R_CAPABILITY_MISSING);
	else
	{
		if (c->runtime_state != SCHED_WORKER_READY)
			r |= SCHED_REASON_BIT(SCHED_R_WORKER_NOT_READY);
		if (c->scheduling_status != SCHED_WORKER_ELIGIBLE)
			r |= SCHED_REASON_BIT(SCHED_R_WORKER_NOT_ELIGIBLE);
		if (!c->has_heartbeat || c->last_heartbeat < p->heartbeat_cutoff)
			r |= SCHED_REASON_BIT(SCHED_R_HEARTBEAT_EXPIRED);
		if (!serves_version(c, p->capability_version))
			r |= SCHED_REASON_BIT(SCHED_R_CAPABILITY_VERSION_MISSING);
	}
	if (sched_labels_matching(&c->labels, &p->required_labels) != p->required_labels.count)
		r |= SCHED_REASON_BIT(SCHED_R_REQUIRED_LABELS_MISMATCH);
	if (c->cpu_millis < max64(p->min_cpu_millis, p->reserve_cpu_millis))
		r |= SCHED_REASON_BIT(SCHED_R_INSUFFICIENT_CPU);
	if (c->memory_mb < max64(p->min_memory_mb, p->reserve_memory_mb))
		r |= SCHED_REASON_BIT(SCHED_R_INSUFFICIENT_MEMORY);
	if (c->gpus < max64(p->min_gpus, p->reserve_gpus))
		r |= SCHED_REASON_BIT(SCHED_R_INSUFFICIENT_GPUS);
	if (c->has_worker && c->worker_live_attempts >= c->slots)
		r |= SCHED_REASON_BIT(SCHED_R_NO_FREE_SLOT);
	if (!(r & SCHED_REASON_BIT(SCHED_R_INSUFFICIENT_CPU)) &&
		c->cpu_millis - c->reserved_cpu_millis < p->reserve_cpu_millis)
		r |= SCHED_REASON_BIT(SCHED_R_CPU_EXHAUSTED);
	if (!(r & SCHED_REASON_BIT(SCHED_R_INSUFFICIENT_MEMORY)) &&
		c->memory_mb - c->reserved_memory_mb < p->reserve_memory_mb)
		r |= SCHED_REASON_BIT(SCHED_R_MEMORY_EXHAUSTED);
	if (!(r & SCHED_REASON_BIT(SCHED_R_INSUFFICIENT_GPUS)) &&
		c->gpus - c->reserved_gpus < p->reserve_gpus)
		r |= SCHED_REASON_BIT(SCHED_R_GPUS_EXHAUSTED);
	return r;
}

int32_t
sched_effective_weight(int32_t weight)
{
	return weight <= 0 ? 100 : weight;
}

void
sched_score(const SchedPlacement *p, const SchedCandidate *c, SchedRanked *out)
{
	out->node_id = c->node_id;
	out->preferred_matches = sched_labels_matching(&c->labels, &p->preferred_labels);
	out->weight = sched_effective_weight(c->weight);
	out->running_attempts = c->node_live_attempts;
	out->held = false;
	out->score = (int64_t) out->preferred_matches * 1000000
		+ (int64_t) out->weight * 1000
		- (int64_t) out->running_attempts * SCHED_SCORE_PER_RUNNING_ATTEMPT;
}

SchedVerdict
sched_verdict_add(SchedVerdict verdict, SchedReasonSet reasons)
{
	SchedVerdict node = reasons == 0 ? SCHED_VERDICT_FITS
		: (reasons & ~SCHED_TRANSIENT_REASONS) == 0 ? SCHED_VERDICT_WAITS
		: SCHED_VERDICT_STATIC;

	return node > verdict ? node : verdict;
}

void
sched_score_add_running(SchedRanked *r, int attempts)
{
	r->running_attempts += attempts;
	r->score -= (int64_t) attempts * SCHED_SCORE_PER_RUNNING_ATTEMPT;
}

int
sched_ranked_cmp(const void *a, const void *b)
{
	const SchedRanked *x = (const SchedRanked *) a;
	const SchedRanked *y = (const SchedRanked *) b;

	if (x->held != y->held)
		return x->held ? 1 : -1;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return strcmp(x->node_id, y->node_id);
}

void
sched_rank(SchedRanked *ranked, int count)
{
	if (count > 1)
		qsort(ranked, (size_t) count, sizeof(SchedRanked), sched_ranked_cmp);
}

void
sched_count_reasons(SchedReasonSet reasons, int counts[SCHED_R_COUNT])
{
	int			i;

	for (i = 0; i < SCHED_R_COUNT; i++)
		if (reasons & SCHED_REASON_BIT(i))
			counts[i]++;
}

static int
reason_name_cmp(const void *a, const void *b)
{
	return strcmp(sched_reason_names[*(const int *) a], sched_reason_names[*(const int *) b]);
}

size_t
sched_format_summary(char *buf, size_t cap, int nodes, int eligible,
					 const int counts[SCHED_R_COUNT])
{
	int			order[SCHED_R_COUNT];
	int			n = 0;
	int			i;
	size_t		len = 0;
	int			w;

	for (i = 0; i < SCHED_R_COUNT; i++)
		if (counts[i] > 0)
			order[n++] = i;
	qsort(order, (size_t) n, sizeof(int), reason_name_cmp);

#define APPEND(...) \
	do { \
		w = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, __VA_ARGS__); \
		if (w > 0) len += (size_t) w; \
	} while (0)

	if (cap > 0)
		buf[0] = '\0';
	APPEND("%d/%d nodes eligible", eligible, nodes);
	for (i = 0; i < n; i++)
		APPEND("%s%d %s", i == 0 ? ": " : ", ", counts[order[i]],
			   sched_reason_names[order[i]]);
#undef APPEND
	return len;
}
