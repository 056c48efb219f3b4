/*
 * placement.c — the pure placement core: admission reasons, scores, ranking and the
 * aggregated summary (see include/placement.h).  No PostgreSQL headers, no SPI, no
 * allocation: unit tested and fuzzed on its own in test/unit.
 */
#include "placement.h"

#include <errno.h>
#include <math.h>
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

bool
sched_label_number(const char *s, double *out)
{
	const char *q = s;
	char	   *end;
	double		v;

	/* the grammar first: strtod alone would take spaces, "+", hex, "inf" and "nan" */
	if (*q == '-')
		q++;
	if (!(*q >= '0' && *q <= '9'))
		return false;
	while (*q >= '0' && *q <= '9')
		q++;
	if (*q == '.')
	{
		q++;
		if (!(*q >= '0' && *q <= '9'))
			return false;
		while (*q >= '0' && *q <= '9')
			q++;
	}
	if (*q == 'e' || *q == 'E')
	{
		q++;
		if (*q == '+' || *q == '-')
			q++;
		if (!(*q >= '0' && *q <= '9'))
			return false;
		while (*q >= '0' && *q <= '9')
			q++;
	}
	if (*q != '\0')
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (end != q || (errno == ERANGE && (v == 0.0 || isinf(v))))
		return false;
	*out = v;
	return true;
}

/* Reads one version at *s (advancing it); false when there is none there. */
static bool
read_version(const char **s, SchedVersion *out)
{
	const char *q = *s;

	out->nparts = 0;
	for (;;)
	{
		int32_t		part = 0;
		int			digits = 0;

		while (*q >= '0' && *q <= '9')
		{
			if (++digits > 9)
				return false;
			part = part * 10 + (*q - '0');
			q++;
		}
		if (digits == 0 || out->nparts == SCHED_MAX_VERSION_PARTS)
			return false;
		out->parts[out->nparts++] = part;
		if (*q != '.')
			break;
		q++;
	}
	*s = q;
	return true;
}

bool
sched_version_parse(const char *s, SchedVersion *out)
{
	return read_version(&s, out) && *s == '\0';
}

int
sched_version_cmp(const SchedVersion *a, const SchedVersion *b)
{
	int			n = a->nparts > b->nparts ? a->nparts : b->nparts;
	int			i;

	for (i = 0; i < n; i++)
	{
		int32_t		x = i < a->nparts ? a->parts[i] : 0;
		int32_t		y = i < b->nparts ? b->parts[i] : 0;

		if (x != y)
			return x < y ? -1 : 1;
	}
	return 0;
}

static const char *
skip_spaces(const char *q)
{
	while (*q == ' ')
		q++;
	return q;
}

int
sched_version_range_parse(const char *s, SchedVersionBound *bounds)
{
	const char *q = s;
	int			n = 0;

	for (;;)
	{
		SchedVersionCmp cmp = SCHED_VCMP_EQ;

		if (n == SCHED_MAX_VERSION_BOUNDS)
			return -1;
		q = skip_spaces(q);
		if (q[0] == '!' && q[1] == '=')
			cmp = SCHED_VCMP_NE, q += 2;
		else if (q[0] == '>' && q[1] == '=')
			cmp = SCHED_VCMP_GE, q += 2;
		else if (q[0] == '<' && q[1] == '=')
			cmp = SCHED_VCMP_LE, q += 2;
		else if (q[0] == '>')
			cmp = SCHED_VCMP_GT, q++;
		else if (q[0] == '<')
			cmp = SCHED_VCMP_LT, q++;
		else if (q[0] == '=')
			q++;
		q = skip_spaces(q);
		if (!read_version(&q, &bounds[n].version))
			return -1;
		bounds[n++].cmp = cmp;
		q = skip_spaces(q);
		if (*q == '\0')
			return n;
		if (*q != ',')
			return -1;
		q++;
	}
}

bool
sched_version_in_range(const SchedVersion *v, const SchedVersionBound *bounds, int nbounds)
{
	int			i;

	for (i = 0; i < nbounds; i++)
	{
		int			c = sched_version_cmp(v, &bounds[i].version);
		bool		ok;

		switch (bounds[i].cmp)
		{
			case SCHED_VCMP_EQ:
				ok = c == 0;
				break;
			case SCHED_VCMP_NE:
				ok = c != 0;
				break;
			case SCHED_VCMP_GT:
				ok = c > 0;
				break;
			case SCHED_VCMP_GE:
				ok = c >= 0;
				break;
			case SCHED_VCMP_LT:
				ok = c < 0;
				break;
			default:
				ok = c <= 0;
				break;
		}
		if (!ok)
			return false;
	}
	return true;
}

static bool
value_listed(const char *v, const SchedLabel *req)
{
	int			i;

	for (i = 0; i < req->nvalues; i++)
		if (strcmp(v, req->values[i]) == 0)
			return true;
	return false;
}

bool
sched_label_satisfied(const SchedLabel *req, const SchedLabelSet *have)
{
	const char *v = sched_labels_get(have, req->key);
	double		number;
	SchedVersion version;

	switch (req->op)
	{
		case SCHED_LABEL_EQ:
			return v != NULL && strcmp(v, req->value) == 0;
		case SCHED_LABEL_IN:
			return v != NULL && value_listed(v, req);
		case SCHED_LABEL_NOT_IN:
			return v == NULL || !value_listed(v, req);
		case SCHED_LABEL_EXISTS:
			return v != NULL;
		case SCHED_LABEL_NOT_EXISTS:
			return v == NULL;
		case SCHED_LABEL_GT:
			return v != NULL && sched_label_number(v, &number) && number > req->number;
		case SCHED_LABEL_LT:
			return v != NULL && sched_label_number(v, &number) && number < req->number;
		case SCHED_LABEL_VERSION:
			return v != NULL && sched_version_parse(v, &version) &&
				sched_version_in_range(&version, req->bounds, req->nbounds);
	}
	return false;
}

int
sched_labels_first_unmet(const SchedLabelSet *have, const SchedLabelSet *required)
{
	int			i;

	for (i = 0; i < required->count; i++)
		if (!sched_label_satisfied(&required->items[i], have))
			return i;
	return -1;
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

/* (every field of the candidate read here but node_id is in the class key of fleet.c,
 * class_key: nodes alike in those are explained together) */
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
	if (sched_labels_first_unmet(&c->labels, &p->required_labels) >= 0)
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

static bool
same_text(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static bool
same_label(const SchedLabel *a, const SchedLabel *b)
{
	int			i;

	if (a->op != b->op || strcmp(a->key, b->key) != 0)
		return false;
	switch (a->op)
	{
		case SCHED_LABEL_EQ:
			return same_text(a->value, b->value);
		case SCHED_LABEL_IN:
		case SCHED_LABEL_NOT_IN:
			if (a->nvalues != b->nvalues)
				return false;
			for (i = 0; i < a->nvalues; i++)
				if (!same_text(a->values[i], b->values[i]))
					return false;
			return true;
		case SCHED_LABEL_EXISTS:
		case SCHED_LABEL_NOT_EXISTS:
			return true;
		case SCHED_LABEL_GT:
		case SCHED_LABEL_LT:
			return a->number == b->number;
		case SCHED_LABEL_VERSION:
			if (a->nbounds != b->nbounds)
				return false;
			for (i = 0; i < a->nbounds; i++)
			{
				const SchedVersionBound *x = &a->bounds[i];
				const SchedVersionBound *y = &b->bounds[i];
				int			k;

				if (x->cmp != y->cmp || x->version.nparts != y->version.nparts)
					return false;
				for (k = 0; k < x->version.nparts; k++)
					if (x->version.parts[k] != y->version.parts[k])
						return false;
			}
			return true;
	}
	return false;
}

static bool
same_labels(const SchedLabelSet *a, const SchedLabelSet *b)
{
	int			i;

	if (a->count != b->count)
		return false;
	for (i = 0; i < a->count; i++)
		if (!same_label(&a->items[i], &b->items[i]))
			return false;
	return true;
}

bool
sched_placement_same_shape(const SchedPlacement *a, const SchedPlacement *b)
{
	return a->min_cpu_millis == b->min_cpu_millis && a->min_memory_mb == b->min_memory_mb &&
		a->min_gpus == b->min_gpus && a->reserve_cpu_millis == b->reserve_cpu_millis &&
		a->reserve_memory_mb == b->reserve_memory_mb && a->reserve_gpus == b->reserve_gpus &&
		same_text(a->capability_version, b->capability_version) &&
		same_text(a->pin_node_id, b->pin_node_id) &&
		same_labels(&a->required_labels, &b->required_labels) &&
		same_labels(&a->preferred_labels, &b->preferred_labels);
}

void
sched_score(const SchedPlacement *p, const SchedCandidate *c, SchedRanked *out)
{
	sched_score_matched(c, sched_labels_matching(&c->labels, &p->preferred_labels), out);
}

bool
sched_attempt_status_live(const char *status)
{
	return strcmp(status, "DISPATCHED") == 0 || strcmp(status, "RUNNING") == 0;
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
sched_score_add_spread(SchedRanked *r, int matches)
{
	r->spread_matches += matches;
	r->score -= (int64_t) matches * SCHED_SCORE_PER_SPREAD_MATCH;
}

void
sched_score_add_running(SchedRanked *r, int attempts)
{
	r->running_attempts += attempts;
	r->score -= (int64_t) attempts * SCHED_SCORE_PER_RUNNING_ATTEMPT;
}

/* The 8 bytes at b as a big-endian number (compilers make it one load and a swap). */
static inline uint64_t
big_endian_64(const unsigned char *b)
{
	return (uint64_t) b[0] << 56 | (uint64_t) b[1] << 48 | (uint64_t) b[2] << 40 |
		(uint64_t) b[3] << 32 | (uint64_t) b[4] << 24 | (uint64_t) b[5] << 16 |
		(uint64_t) b[6] << 8 | (uint64_t) b[7];
}

void
sched_node_key(const char *node_id, uint64_t key[2])
{
	unsigned char b[16] = {0};
	size_t		len = 0;

	while (len < 16 && node_id[len] != '\0')
		len++;
	memcpy(b, node_id, len);
	key[0] = big_endian_64(b);
	key[1] = big_endian_64(b + 8);
}

void
sched_candidate_set_node(SchedCandidate *c, const char *node_id)
{
	c->node_id = node_id;
	sched_node_key(node_id, c->node_key);
}

void
sched_candidate_take_node(SchedCandidate *c, const SchedCandidate *node)
{
	c->management_status = node->management_status;
	c->cpu_millis = node->cpu_millis;
	c->memory_mb = node->memory_mb;
	c->gpus = node->gpus;
	c->weight = node->weight;
	c->reserved_cpu_millis = node->reserved_cpu_millis;
	c->reserved_memory_mb = node->reserved_memory_mb;
	c->reserved_gpus = node->reserved_gpus;
	c->node_live_attempts = node->node_live_attempts;
}

void
sched_ranked_set_node(SchedRanked *r, const char *node_id)
{
	r->node_id = node_id;
	sched_node_key(node_id, r->node_key);
}

int
sched_ranked_cmp(const void *a, const void *b)
{
	return sched_ranked_order((const SchedRanked *) a, (const SchedRanked *) b);
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

/* c with the victims marked in `removed` gone */
static SchedCandidate
without_victims(const SchedCandidate *c, const SchedVictim *v, int n, const bool *removed)
{
	SchedCandidate r = *c;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (!removed[i])
			continue;
		r.node_live_attempts--;
		if (v[i].on_worker)
			r.worker_live_attempts--;
		r.reserved_cpu_millis -= v[i].reserve_cpu_millis;
		r.reserved_memory_mb -= v[i].reserve_memory_mb;
		r.reserved_gpus -= v[i].reserve_gpus;
	}
	return r;
}

/* Sorts victim indexes into reprieve order: the highest priority first, then the oldest
 * (smallest dispatched_at), then the index (insertion sort: stable, no allocation). */
static void
sort_reprieve(const SchedVictim *victims, int *order, int n)
{
	int			i;
	int			j;

	for (i = 1; i < n; i++)
	{
		int			x = order[i];

		for (j = i - 1; j >= 0; j--)
		{
			const SchedVictim *a = &victims[order[j]];
			const SchedVictim *b = &victims[x];
			bool		after = a->priority < b->priority ||
				(a->priority == b->priority && a->dispatched_at > b->dispatched_at) ||
				(a->priority == b->priority && a->dispatched_at == b->dispatched_at && order[j] > x);

			if (!after)
				break;
			order[j + 1] = order[j];
		}
		order[j + 1] = x;
	}
}

int
sched_preemption_victims(const SchedPlacement *p, const SchedCandidate *c,
						 const SchedVictim *victims, int n, int *order, bool *chosen)
{
	SchedCandidate without;
	int			count = n;
	int			i;

	for (i = 0; i < n; i++)
	{
		chosen[i] = true;
		order[i] = i;
	}
	without = without_victims(c, victims, n, chosen);
	if (sched_admission(p, &without) != 0)
	{
		for (i = 0; i < n; i++)
			chosen[i] = false;
		return -1;
	}
	sort_reprieve(victims, order, n);
	for (i = 0; i < n; i++)
	{
		chosen[order[i]] = false;
		without = without_victims(c, victims, n, chosen);
		if (sched_admission(p, &without) != 0)
			chosen[order[i]] = true;	/* needed: it goes */
		else
			count--;
	}
	return count;
}

int
sched_preemption_cmp(int victims_a, int32_t top_priority_a, const char *node_a,
					 int victims_b, int32_t top_priority_b, const char *node_b)
{
	if (victims_a != victims_b)
		return victims_a < victims_b ? -1 : 1;
	if (top_priority_a != top_priority_b)
		return top_priority_a < top_priority_b ? -1 : 1;
	return strcmp(node_a, node_b);
}
