/*
 * test_placement.c — stand-alone unit and property tests of the pure placement core
 * (include/placement.h, src/placement.c): admission reasons, suppression, scoring,
 * ranking, the spread term, the choice of preemption victims and of the node to preempt
 * on, label maps, label expressions (operators, numbers, versions and version ranges,
 * as the header documents them) and the "why is it waiting" summary (SPEC sections 3
 * and 4).
 *
 * Built and run by `make unit`:
 *
 *     cc -std=c99 -O1 -g -Wall -Wextra -Werror -Iinclude \
 *        -o test/unit/test_placement test/unit/test_placement.c src/placement.c
 *     ./test/unit/test_placement          (add -v to list every test case)
 *
 * No external libraries.  Every test case is named; a case fails if any of its checks
 * fails (failures are reported on stderr with file:line and the values involved).  The
 * last line on stdout is "N passed, M failed"; the exit status is non-zero if M > 0.
 *
 * The property tests compare sched_admission() and sched_score() against a reference
 * implementation written in this file straight from the SPEC text (ref_admission()
 * below: raw conditions first, then the suppression rules, no binary search, own byte
 * comparison), over 200,000 (placement, candidate) pairs from a fixed-seed xorshift
 * generator, so runs are reproducible.
 *
 * The reference and the invariant checkers (everything up to the PG_SCHED_UNIT_NO_MAIN
 * guard) are shared with the libFuzzer harness fuzz_placement.c, which #includes this
 * file with PG_SCHED_UNIT_NO_MAIN defined.
 *
 * Interpretation beyond the SPEC text: a worker that has never sent a heartbeat
 * (has_heartbeat false, i.e. last_heartbeat NULL) counts as heartbeat_expired.
 */
#include "placement.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------ */
/* Reference implementation, from SPEC sections 3 and 4 (shared with the fuzzer)        */
/* ------------------------------------------------------------------------------------ */

#define REF_BIT(r) ((SchedReasonSet) 1u << (r))
#define REF_ALL_REASONS ((SchedReasonSet) ((1u << SCHED_R_COUNT) - 1u))
/* "no worker reason (worker_*, heartbeat_expired, capability_version_missing, no_free_slot)" */
#define REF_WORKER_REASONS \
	(REF_BIT(SCHED_R_WORKER_NOT_READY) | REF_BIT(SCHED_R_WORKER_NOT_ELIGIBLE) | \
	 REF_BIT(SCHED_R_HEARTBEAT_EXPIRED) | REF_BIT(SCHED_R_CAPABILITY_VERSION_MISSING) | \
	 REF_BIT(SCHED_R_NO_FREE_SLOT))
/* "The first eleven are static; the last four are transient." */
#define REF_STATIC_REASONS ((SchedReasonSet) ((1u << 11) - 1u))
#define REF_TRANSIENT_REASONS (REF_ALL_REASONS & ~REF_STATIC_REASONS)

/* The SPEC table, in its order. */
static const char *const ref_reason_names[SCHED_R_COUNT] = {
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

/* Bytewise comparison (COLLATE "C"), written out rather than strcmp. */
static int
ref_bytecmp(const char *a, const char *b)
{
	const unsigned char *x = (const unsigned char *) a;
	const unsigned char *y = (const unsigned char *) b;

	while (*x != 0 && *x == *y)
	{
		x++;
		y++;
	}
	return (int) *x - (int) *y;
}

static int
ref_streq(const char *a, const char *b)
{
	return ref_bytecmp(a, b) == 0;
}

/* Linear lookup: does not rely on the set being sorted. */
static const char *
ref_label_value(const SchedLabelSet *set, const char *key)
{
	int			i;

	for (i = 0; i < set->count; i++)
		if (ref_streq(set->items[i].key, key))
			return set->items[i].value;
	return NULL;
}

/* Entries of `wanted` that `have` holds with an equal value. */
static int
ref_label_matches(const SchedLabelSet *have, const SchedLabelSet *wanted)
{
	int			i;
	int			n = 0;

	for (i = 0; i < wanted->count; i++)
	{
		const char *v = ref_label_value(have, wanted->items[i].key);

		if (v != NULL && ref_streq(v, wanted->items[i].value))
			n++;
	}
	return n;
}

/* "every key must be present with an equal value" */
static int
ref_required_ok(const SchedLabelSet *have, const SchedLabelSet *required)
{
	int			i;

	for (i = 0; i < required->count; i++)
	{
		const char *v = ref_label_value(have, required->items[i].key);

		if (v == NULL)
			return 0;			/* absent */
		if (!ref_streq(v, required->items[i].value))
			return 0;			/* different */
	}
	return 1;
}

static int
ref_serves_version(const SchedCandidate *c, const char *version)
{
	int			i;

	for (i = 0; i < c->version_count; i++)
		if (c->versions[i] != NULL && ref_streq(c->versions[i], version))
			return 1;
	return 0;
}

/*
 * Section 3: every reason that applies, then the two suppression rules.  Worker fields
 * are only read where the node has a worker (otherwise they may be garbage).
 */
static SchedReasonSet
ref_admission(const SchedPlacement *p, const SchedCandidate *c)
{
	int			applies[SCHED_R_COUNT];
	int64_t		need;
	SchedReasonSet set = 0;
	int			i;

	for (i = 0; i < SCHED_R_COUNT; i++)
		applies[i] = 0;

	applies[SCHED_R_PINNED_TO_OTHER_NODE] =
		p->pin_node_id != NULL && !ref_streq(p->pin_node_id, c->node_id);
	applies[SCHED_R_NODE_NOT_ACTIVE] = c->management_status != SCHED_NODE_ACTIVE;
	applies[SCHED_R_CAPABILITY_MISSING] = !c->has_worker;
	if (c->has_worker)
	{
		applies[SCHED_R_WORKER_NOT_READY] = c->runtime_state != SCHED_WORKER_READY;
		applies[SCHED_R_WORKER_NOT_ELIGIBLE] = c->scheduling_status != SCHED_WORKER_ELIGIBLE;
		/* last_heartbeat < at - heartbeat_ttl; never heartbeated counts as expired */
		applies[SCHED_R_HEARTBEAT_EXPIRED] =
			!c->has_heartbeat || c->last_heartbeat < p->heartbeat_cutoff;
		applies[SCHED_R_CAPABILITY_VERSION_MISSING] =
			!ref_serves_version(c, p->capability_version);
		/* the worker's live attempts already fill its slots */
		applies[SCHED_R_NO_FREE_SLOT] = c->worker_live_attempts >= c->slots;
	}
	applies[SCHED_R_REQUIRED_LABELS_MISMATCH] = !ref_required_ok(&c->labels, &p->required_labels);

	need = p->min_cpu_millis > p->reserve_cpu_millis ? p->min_cpu_millis : p->reserve_cpu_millis;
	applies[SCHED_R_INSUFFICIENT_CPU] = c->cpu_millis < need;
	need = p->min_memory_mb > p->reserve_memory_mb ? p->min_memory_mb : p->reserve_memory_mb;
	applies[SCHED_R_INSUFFICIENT_MEMORY] = c->memory_mb < need;
	need = p->min_gpus > p->reserve_gpus ? p->min_gpus : p->reserve_gpus;
	applies[SCHED_R_INSUFFICIENT_GPUS] = c->gpus < need;

	applies[SCHED_R_CPU_EXHAUSTED] = c->cpu_millis - c->reserved_cpu_millis < p->reserve_cpu_millis;
	applies[SCHED_R_MEMORY_EXHAUSTED] = c->memory_mb - c->reserved_memory_mb < p->reserve_memory_mb;
	applies[SCHED_R_GPUS_EXHAUSTED] = c->gpus - c->reserved_gpus < p->reserve_gpus;

	/* Suppression: no worker reason where capability_missing applies ... */
	if (applies[SCHED_R_CAPABILITY_MISSING])
	{
		applies[SCHED_R_WORKER_NOT_READY] = 0;
		applies[SCHED_R_WORKER_NOT_ELIGIBLE] = 0;
		applies[SCHED_R_HEARTBEAT_EXPIRED] = 0;
		applies[SCHED_R_CAPABILITY_VERSION_MISSING] = 0;
		applies[SCHED_R_NO_FREE_SLOT] = 0;
	}
	/* ... and a *_exhausted code only where the matching insufficient_* is not. */
	if (applies[SCHED_R_INSUFFICIENT_CPU])
		applies[SCHED_R_CPU_EXHAUSTED] = 0;
	if (applies[SCHED_R_INSUFFICIENT_MEMORY])
		applies[SCHED_R_MEMORY_EXHAUSTED] = 0;
	if (applies[SCHED_R_INSUFFICIENT_GPUS])
		applies[SCHED_R_GPUS_EXHAUSTED] = 0;

	for (i = 0; i < SCHED_R_COUNT; i++)
		if (applies[i])
			set |= REF_BIT(i);
	return set;
}

/* Admission as one conjunction of "rule passes" (no reason sets involved). */
static int
ref_admitted(const SchedPlacement *p, const SchedCandidate *c)
{
	return (p->pin_node_id == NULL || ref_streq(p->pin_node_id, c->node_id))
		&& c->management_status == SCHED_NODE_ACTIVE
		&& c->has_worker
		&& c->runtime_state == SCHED_WORKER_READY
		&& c->scheduling_status == SCHED_WORKER_ELIGIBLE
		&& c->has_heartbeat && c->last_heartbeat >= p->heartbeat_cutoff
		&& ref_serves_version(c, p->capability_version)
		&& ref_required_ok(&c->labels, &p->required_labels)
		&& c->cpu_millis >= p->min_cpu_millis && c->cpu_millis >= p->reserve_cpu_millis
		&& c->memory_mb >= p->min_memory_mb && c->memory_mb >= p->reserve_memory_mb
		&& c->gpus >= p->min_gpus && c->gpus >= p->reserve_gpus
		&& c->worker_live_attempts < c->slots
		&& c->cpu_millis - c->reserved_cpu_millis >= p->reserve_cpu_millis
		&& c->memory_mb - c->reserved_memory_mb >= p->reserve_memory_mb
		&& c->gpus - c->reserved_gpus >= p->reserve_gpus;
}

static int32_t
ref_weight(int32_t w)
{
	return w <= 0 ? 100 : w;
}

/* Section 4. */
static int64_t
ref_score(const SchedPlacement *p, const SchedCandidate *c)
{
	return (int64_t) ref_label_matches(&c->labels, &p->preferred_labels) * 1000000
		+ (int64_t) ref_weight(c->weight) * 1000
		- (int64_t) c->node_live_attempts * 10000;
}

/* Higher score first, then smaller node_id bytewise. */
static int
ref_rank_before(const SchedRanked *a, const SchedRanked *b)
{
	if (a->score != b->score)
		return a->score > b->score;
	return ref_bytecmp(a->node_id, b->node_id) < 0;
}

static void
ref_format_set(SchedReasonSet s, char *buf, size_t cap)
{
	size_t		len = 0;
	int			i;
	int			first = 1;

	if (cap == 0)
		return;
	buf[0] = '\0';
	len += (size_t) snprintf(buf, cap, "{");
	for (i = 0; i < 32 && len < cap; i++)
		if (s & ((SchedReasonSet) 1u << i))
		{
			len += (size_t) snprintf(buf + len, cap - len, "%s%s", first ? "" : ",",
									 i < SCHED_R_COUNT ? ref_reason_names[i] : "?bit");
			first = 0;
		}
	if (len < cap)
		snprintf(buf + len, cap - len, "}");
}

static void
ref_dump_labels(const SchedLabelSet *s, char *buf, size_t cap)
{
	size_t		len = 0;
	int			i;

	if (cap == 0)
		return;
	buf[0] = '\0';
	for (i = 0; i < s->count && len < cap; i++)
		len += (size_t) snprintf(buf + len, cap - len, "%s\"%s\":\"%s\"", i ? "," : "",
								 s->items[i].key, s->items[i].value);
}

/* A readable dump of one (placement, candidate) pair, for counterexamples. */
static void
ref_dump_pair(FILE *f, const SchedPlacement *p, const SchedCandidate *c)
{
	char		a[512],
				b[512],
				d[512];
	int			i;

	ref_dump_labels(&p->required_labels, a, sizeof a);
	ref_dump_labels(&p->preferred_labels, b, sizeof b);
	fprintf(f, "    placement: version=\"%s\" required={%s} preferred={%s}\n"
			"      min cpu/mem/gpu=%" PRId64 "/%" PRId64 "/%" PRId64
			" reserve cpu/mem/gpu=%" PRId64 "/%" PRId64 "/%" PRId64
			" pin=%s%s%s cutoff=%" PRId64 "\n",
			p->capability_version, a, b,
			p->min_cpu_millis, p->min_memory_mb, p->min_gpus,
			p->reserve_cpu_millis, p->reserve_memory_mb, p->reserve_gpus,
			p->pin_node_id ? "\"" : "", p->pin_node_id ? p->pin_node_id : "NULL",
			p->pin_node_id ? "\"" : "", p->heartbeat_cutoff);
	ref_dump_labels(&c->labels, d, sizeof d);
	fprintf(f, "    candidate: node=\"%s\" status=%d labels={%s}\n"
			"      cap cpu/mem/gpu=%" PRId64 "/%" PRId64 "/%" PRId64
			" reserved=%" PRId64 "/%" PRId64 "/%" PRId64
			" weight=%" PRId32 " node_live=%" PRId32 "\n",
			c->node_id, (int) c->management_status, d,
			c->cpu_millis, c->memory_mb, c->gpus,
			c->reserved_cpu_millis, c->reserved_memory_mb, c->reserved_gpus,
			c->weight, c->node_live_attempts);
	fprintf(f, "      has_worker=%d runtime=%d sched=%d has_hb=%d last_hb=%" PRId64
			" slots=%" PRId32 " worker_live=%" PRId32 " versions=[",
			(int) c->has_worker, (int) c->runtime_state, (int) c->scheduling_status,
			(int) c->has_heartbeat, c->last_heartbeat, c->slots, c->worker_live_attempts);
	if (c->has_worker)
		for (i = 0; i < c->version_count; i++)
			fprintf(f, "%s%s%s%s", i ? "," : "", c->versions[i] ? "\"" : "",
					c->versions[i] ? c->versions[i] : "NULL", c->versions[i] ? "\"" : "");
	fprintf(f, "]\n");
}

/*
 * All invariants for one pair.  alt[] gives other values of the transient inputs
 * (reserved cpu, memory, gpus, worker live attempts, node live attempts): changing them
 * must not change any static reason.  Returns 1 if all hold, else 0 with a message.
 */
static int
ref_check_pair(const SchedPlacement *p, const SchedCandidate *c, const int64_t alt[5],
			   char *msg, size_t cap)
{
	SchedReasonSet got = sched_admission(p, c);
	SchedReasonSet want = ref_admission(p, c);
	SchedReasonSet got2;
	SchedCandidate c2;
	SchedRanked r;
	char		g[400],
				w[400];		/* the longest set formats to about 330 bytes */

	g[0] = w[0] = '\0';
	if (got != want)
	{
		ref_format_set(got, g, sizeof g);
		ref_format_set(want, w, sizeof w);
		snprintf(msg, cap, "sched_admission = %s, SPEC reference = %s", g, w);
		return 0;
	}
	if ((got & ~REF_ALL_REASONS) != 0)
	{
		ref_format_set(got, g, sizeof g);
		snprintf(msg, cap, "reason set has bits beyond SCHED_R_COUNT: %s", g);
		return 0;
	}
	if ((got == 0) != (ref_admitted(p, c) != 0))
	{
		ref_format_set(got, g, sizeof g);
		snprintf(msg, cap, "admitted (empty set) = %d but every rule passes = %d (%s)",
				 got == 0, ref_admitted(p, c), g);
		return 0;
	}
	if ((got & REF_BIT(SCHED_R_CAPABILITY_MISSING)) && (got & REF_WORKER_REASONS))
	{
		ref_format_set(got, g, sizeof g);
		snprintf(msg, cap, "worker reason listed with capability_missing: %s", g);
		return 0;
	}
	if (((got & REF_BIT(SCHED_R_INSUFFICIENT_CPU)) && (got & REF_BIT(SCHED_R_CPU_EXHAUSTED))) ||
		((got & REF_BIT(SCHED_R_INSUFFICIENT_MEMORY)) && (got & REF_BIT(SCHED_R_MEMORY_EXHAUSTED))) ||
		((got & REF_BIT(SCHED_R_INSUFFICIENT_GPUS)) && (got & REF_BIT(SCHED_R_GPUS_EXHAUSTED))))
	{
		ref_format_set(got, g, sizeof g);
		snprintf(msg, cap, "*_exhausted listed with the matching insufficient_*: %s", g);
		return 0;
	}
	if (sched_admission(p, c) != got)
	{
		snprintf(msg, cap, "sched_admission is not deterministic");
		return 0;
	}

	/* Static reasons do not depend on live attempts or reservations. */
	c2 = *c;
	c2.reserved_cpu_millis = alt[0];
	c2.reserved_memory_mb = alt[1];
	c2.reserved_gpus = alt[2];
	c2.worker_live_attempts = (int32_t) alt[3];
	c2.node_live_attempts = (int32_t) alt[4];
	got2 = sched_admission(p, &c2);
	if ((got2 & REF_STATIC_REASONS) != (got & REF_STATIC_REASONS))
	{
		ref_format_set(got, g, sizeof g);
		ref_format_set(got2, w, sizeof w);
		snprintf(msg, cap, "static reasons changed with transient inputs: %s -> %s", g, w);
		return 0;
	}
	/* With no static reason, the transient ones alone are the whole set (what a
	 * dispatch batch checks of a row it judged once for the shape, batch.c). */
	if ((got & ~SCHED_TRANSIENT_REASONS) == 0 && sched_admission_transient(p, c) != got)
	{
		ref_format_set(got, g, sizeof g);
		ref_format_set(sched_admission_transient(p, c), w, sizeof w);
		snprintf(msg, cap, "sched_admission = %s but sched_admission_transient = %s", g, w);
		return 0;
	}
	if ((got2 & ~SCHED_TRANSIENT_REASONS) == 0 && sched_admission_transient(p, &c2) != got2)
	{
		ref_format_set(got2, g, sizeof g);
		ref_format_set(sched_admission_transient(p, &c2), w, sizeof w);
		snprintf(msg, cap, "(transient variant) sched_admission = %s but sched_admission_transient = %s", g, w);
		return 0;
	}
	if (!sched_placement_same_shape(p, p))
	{
		snprintf(msg, cap, "sched_placement_same_shape(p, p) is false");
		return 0;
	}
	/* The clock's reason is sched_admission_clock's, and with no static reason the
	 * transient and clock reasons are the whole set (what an admission memo checks of a
	 * row it judged once for the shape, admit_memo.c). */
	if ((got & SCHED_CLOCK_REASONS) != sched_admission_clock(p, c) ||
		((got & ~(SCHED_TRANSIENT_REASONS | SCHED_CLOCK_REASONS)) == 0 &&
		 (sched_admission_transient(p, c) | sched_admission_clock(p, c)) != got))
	{
		ref_format_set(got, g, sizeof g);
		snprintf(msg, cap, "sched_admission = %s, not its transient and clock reasons", g);
		return 0;
	}
	if (got2 != ref_admission(p, &c2))
	{
		ref_format_set(ref_admission(p, &c2), w, sizeof w);
		ref_format_set(got2, g, sizeof g);
		snprintf(msg, cap, "(transient variant) sched_admission = %s, SPEC reference = %s", g, w);
		return 0;
	}

	/* Score formula, on every candidate (admitted or not). */
	memset(&r, 0, sizeof r);
	r.index = -4242;
	sched_score(p, c, &r);
	if (r.score != ref_score(p, c) ||
		r.preferred_matches != ref_label_matches(&c->labels, &p->preferred_labels) ||
		r.weight != ref_weight(c->weight) ||
		r.running_attempts != c->node_live_attempts ||
		r.node_id != c->node_id ||
		r.index != -4242 ||
		r.score != (int64_t) r.preferred_matches * 1000000 + (int64_t) r.weight * 1000
		- (int64_t) r.running_attempts * 10000)
	{
		snprintf(msg, cap, "sched_score: score=%" PRId64 " (want %" PRId64 ") matches=%" PRId32
				 " (want %d) weight=%" PRId32 " (want %" PRId32 ") running=%" PRId32
				 " (want %" PRId32 ") index=%d",
				 r.score, ref_score(p, c), r.preferred_matches,
				 ref_label_matches(&c->labels, &p->preferred_labels),
				 r.weight, ref_weight(c->weight), r.running_attempts, c->node_live_attempts,
				 r.index);
		return 0;
	}
	return 1;
}

/* Reason codes in name order, by insertion sort over the SPEC names. */
static void
ref_name_order(int order[SCHED_R_COUNT])
{
	int			i,
				j;

	for (i = 0; i < SCHED_R_COUNT; i++)
	{
		int			v = i;

		for (j = i; j > 0 && ref_bytecmp(ref_reason_names[order[j - 1]], ref_reason_names[v]) > 0; j--)
			order[j] = order[j - 1];
		order[j] = v;
	}
}

/* The summary as the SPEC describes it; returns its length. */
static size_t
ref_summary(char *buf, size_t cap, int nodes, int eligible, const int counts[SCHED_R_COUNT])
{
	int			order[SCHED_R_COUNT];
	size_t		len;
	int			i;
	int			first = 1;

	ref_name_order(order);
	len = (size_t) snprintf(buf, cap, "%d/%d nodes eligible", eligible, nodes);
	for (i = 0; i < SCHED_R_COUNT; i++)
	{
		int			k = order[i];

		if (counts[k] <= 0)
			continue;
		len += (size_t) snprintf(buf + len, cap - len, "%s%d %s", first ? ": " : ", ",
								 counts[k], ref_reason_names[k]);
		first = 0;
	}
	return len;
}

/*
 * sched_format_summary against the reference, at every buffer size from 0 to len + 2
 * (exhaustive) or at the boundary sizes only (truncation like snprintf, NUL-terminated,
 * nothing written past cap).
 */
static int
ref_check_summary(int nodes, int eligible, const int counts[SCHED_R_COUNT], char *msg, size_t cap,
				  int exhaustive)
{
	char		want[1024];
	char		got[1100];
	char		canary[1100];
	size_t		wlen = ref_summary(want, sizeof want, nodes, eligible, counts);
	size_t		c;

	memset(canary, '#', sizeof canary);
	if (wlen >= sizeof want)
	{
		snprintf(msg, cap, "reference summary too long");
		return 0;
	}
	for (c = 0; c <= wlen + 2; c++)
	{
		size_t		n;
		size_t		k;
		size_t		keep = c == 0 ? 0 : (c - 1 < wlen ? c - 1 : wlen);

		if (!exhaustive && c > 3 && c + 2 < wlen && c != wlen / 2 && c != 19 && c != 20)
			continue;
		memset(got, '#', sizeof got);
		n = sched_format_summary(got, c, nodes, eligible, counts);
		if (n != wlen)
		{
			snprintf(msg, cap, "cap %zu: returned %zu, needed length is %zu (\"%.700s\")", c, n, wlen, want);
			return 0;
		}
		if (c > 0 && (memcmp(got, want, keep) != 0 || got[keep] != '\0'))
		{
			snprintf(msg, cap, "cap %zu: buffer is not the first %zu bytes of \"%.700s\" + NUL", c, keep, want);
			return 0;
		}
		if (memcmp(got + c, canary, sizeof got - c) != 0)
		{
			for (k = c; k < sizeof got && got[k] == '#'; k++)
				;
			snprintf(msg, cap, "cap %zu: byte %zu written past the buffer", c, k);
			return 0;
		}
	}
	return 1;
}

#ifndef PG_SCHED_UNIT_NO_MAIN

/* ------------------------------------------------------------------------------------ */
/* A tiny test framework                                                                */
/* ------------------------------------------------------------------------------------ */

static const char *t_case;
static int	t_case_failures;
static int	t_passed;
static int	t_failed;
static int	t_verbose;

static void
t_fail(const char *file, int line, const char *fmt, ...)
{
	va_list		ap;

	t_case_failures++;
	if (t_case_failures > 25)
		return;
	fprintf(stderr, "FAIL %s (%s:%d): ", t_case, file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
t_run(const char *name, void (*fn) (void))
{
	t_case = name;
	t_case_failures = 0;
	fn();
	if (t_case_failures == 0)
	{
		t_passed++;
		if (t_verbose)
			printf("ok   %s\n", name);
	}
	else
	{
		t_failed++;
		fprintf(stderr, "FAILED %s (%d failed check%s)\n", name, t_case_failures,
				t_case_failures == 1 ? "" : "s");
	}
}

#define TEST(name) static void name(void)
#define RUN(name) t_run(#name, name)

#define CHECK(cond) \
	do { if (!(cond)) t_fail(__FILE__, __LINE__, "%s", #cond); } while (0)

#define CHECK_INT(a, b) \
	do { \
		long long a_ = (long long) (a), b_ = (long long) (b); \
		if (a_ != b_) \
			t_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
	} while (0)

#define CHECK_STR(a, b) \
	do { \
		const char *a_ = (a), *b_ = (b); \
		if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0) \
			t_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, \
				   a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
	} while (0)

#define CHECK_SET(a, b) \
	do { \
		SchedReasonSet a_ = (a), b_ = (b); \
		if (a_ != b_) \
		{ \
			char sa_[512], sb_[512]; \
			ref_format_set(a_, sa_, sizeof sa_); \
			ref_format_set(b_, sb_, sizeof sb_); \
			t_fail(__FILE__, __LINE__, "%s == %s: %s != %s", #a, #b, sa_, sb_); \
		} \
	} while (0)

#define BIT(r) REF_BIT(SCHED_R_##r)

/* ------------------------------------------------------------------------------------ */
/* Fixtures                                                                             */
/* ------------------------------------------------------------------------------------ */

static const char *const fx_versions_10[] = {"1.0"};
static const char *const fx_versions_multi[] = {"0.9", "1.0", "2.0"};

/* A request every fx_candidate() takes: capability version 1.0, nothing else asked. */
static void
fx_placement(SchedPlacement *p)
{
	memset(p, 0, sizeof *p);
	p->capability = "transcode";
	p->capability_version = "1.0";
	p->pin_node_id = NULL;
	p->heartbeat_cutoff = 1000000;
}

/* An ACTIVE node with a READY, ELIGIBLE, fresh worker at 1.0 and room for everything. */
static void
fx_candidate(SchedCandidate *c, const char *node_id)
{
	memset(c, 0, sizeof *c);
	sched_candidate_set_node(c, node_id);
	c->management_status = SCHED_NODE_ACTIVE;
	c->cpu_millis = 4000;
	c->memory_mb = 8192;
	c->gpus = 2;
	c->weight = 100;
	c->has_worker = true;
	c->runtime_state = SCHED_WORKER_READY;
	c->scheduling_status = SCHED_WORKER_ELIGIBLE;
	c->has_heartbeat = true;
	c->last_heartbeat = 2000000;
	c->version_count = 1;
	c->versions = fx_versions_10;
	c->slots = 2;
}

static SchedLabelSet
fx_labels(SchedLabel *items, int count)
{
	SchedLabelSet s;

	s.count = count;
	s.items = items;
	return s;
}

/* The reason's name through the public table, for messages and order checks. */
static const char *
reason_name(int r)
{
	return sched_reason_names[r];
}

/* ------------------------------------------------------------------------------------ */
/* Reason codes and their order                                                         */
/* ------------------------------------------------------------------------------------ */

TEST(reason_names_match_spec_table)
{
	int			i;

	CHECK_INT(SCHED_R_COUNT, 15);
	for (i = 0; i < SCHED_R_COUNT; i++)
		CHECK_STR(reason_name(i), ref_reason_names[i]);
	CHECK_INT(SCHED_R_PINNED_TO_OTHER_NODE, 0);
	CHECK_INT(SCHED_R_NODE_NOT_ACTIVE, 1);
	CHECK_INT(SCHED_R_CAPABILITY_MISSING, 2);
	CHECK_INT(SCHED_R_WORKER_NOT_READY, 3);
	CHECK_INT(SCHED_R_WORKER_NOT_ELIGIBLE, 4);
	CHECK_INT(SCHED_R_HEARTBEAT_EXPIRED, 5);
	CHECK_INT(SCHED_R_CAPABILITY_VERSION_MISSING, 6);
	CHECK_INT(SCHED_R_REQUIRED_LABELS_MISMATCH, 7);
	CHECK_INT(SCHED_R_INSUFFICIENT_CPU, 8);
	CHECK_INT(SCHED_R_INSUFFICIENT_MEMORY, 9);
	CHECK_INT(SCHED_R_INSUFFICIENT_GPUS, 10);
	CHECK_INT(SCHED_R_NO_FREE_SLOT, 11);
	CHECK_INT(SCHED_R_CPU_EXHAUSTED, 12);
	CHECK_INT(SCHED_R_MEMORY_EXHAUSTED, 13);
	CHECK_INT(SCHED_R_GPUS_EXHAUSTED, 14);
}

TEST(reason_bits_and_transient_mask)
{
	int			i;

	for (i = 0; i < SCHED_R_COUNT; i++)
		CHECK_INT(SCHED_REASON_BIT(i), 1u << i);
	/* "The first eleven are static; the last four are transient." */
	CHECK_INT(SCHED_TRANSIENT_REASONS, REF_TRANSIENT_REASONS);
	CHECK_INT(SCHED_TRANSIENT_REASONS,
			  BIT(NO_FREE_SLOT) | BIT(CPU_EXHAUSTED) | BIT(MEMORY_EXHAUSTED) | BIT(GPUS_EXHAUSTED));
}

TEST(admitted_baseline_is_empty_set)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	CHECK_SET(sched_admission(&p, &c), 0);
	/* all of it requested, exactly what there is */
	p.min_cpu_millis = 4000;
	p.min_memory_mb = 8192;
	p.min_gpus = 2;
	p.reserve_cpu_millis = 4000;
	p.reserve_memory_mb = 8192;
	p.reserve_gpus = 2;
	c.slots = 1;
	c.last_heartbeat = p.heartbeat_cutoff;
	CHECK_SET(sched_admission(&p, &c), 0);
}

TEST(reason_pinned_to_other_node)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.pin_node_id = "node-b";
	CHECK_SET(sched_admission(&p, &c), BIT(PINNED_TO_OTHER_NODE));
}

TEST(reason_node_not_active)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.management_status = SCHED_NODE_DRAINING;
	CHECK_SET(sched_admission(&p, &c), BIT(NODE_NOT_ACTIVE));
	c.management_status = SCHED_NODE_DISABLED;
	CHECK_SET(sched_admission(&p, &c), BIT(NODE_NOT_ACTIVE));
	c.management_status = SCHED_NODE_ACTIVE;
	CHECK_SET(sched_admission(&p, &c), 0);
}

TEST(reason_capability_missing)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_MISSING));
}

TEST(reason_worker_not_ready)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.runtime_state = SCHED_WORKER_STARTING;
	CHECK_SET(sched_admission(&p, &c), BIT(WORKER_NOT_READY));
	c.runtime_state = SCHED_WORKER_DRAINING;
	CHECK_SET(sched_admission(&p, &c), BIT(WORKER_NOT_READY));
	c.runtime_state = SCHED_WORKER_STOPPED;
	CHECK_SET(sched_admission(&p, &c), BIT(WORKER_NOT_READY));
}

TEST(reason_worker_not_eligible)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.scheduling_status = SCHED_WORKER_CORDONED;
	CHECK_SET(sched_admission(&p, &c), BIT(WORKER_NOT_ELIGIBLE));
}

TEST(reason_heartbeat_expired)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.last_heartbeat = p.heartbeat_cutoff - 90000000;
	CHECK_SET(sched_admission(&p, &c), BIT(HEARTBEAT_EXPIRED));
	/* never heartbeated (last_heartbeat NULL): not known to be alive */
	c.has_heartbeat = false;
	c.last_heartbeat = INT64_MAX;
	CHECK_SET(sched_admission(&p, &c), BIT(HEARTBEAT_EXPIRED));
}

TEST(reason_capability_version_missing)
{
	static const char *const v100[] = {"1.0.0"};
	static const char *const vcase[] = {"V1", "1.0 ", "1"};
	static const char *const vnull[] = {NULL, "2.0"};
	char		same[] = "1.0";		/* equal bytes, another pointer */
	const char *vsame[1];
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");

	c.version_count = 1;
	c.versions = v100;		/* "exact version": 1.0.0 is not 1.0 */
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_VERSION_MISSING));
	c.version_count = 3;
	c.versions = vcase;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_VERSION_MISSING));
	c.version_count = 0;
	c.versions = NULL;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_VERSION_MISSING));
	c.version_count = 2;
	c.versions = vnull;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_VERSION_MISSING));

	/* any one of several versions, compared by content */
	c.version_count = 3;
	c.versions = fx_versions_multi;
	CHECK_SET(sched_admission(&p, &c), 0);
	vsame[0] = same;
	c.version_count = 1;
	c.versions = vsame;
	CHECK_SET(sched_admission(&p, &c), 0);
	p.capability_version = "v1";
	c.versions = vcase;
	c.version_count = 3;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_VERSION_MISSING));
	p.capability_version = "V1";
	CHECK_SET(sched_admission(&p, &c), 0);
}

TEST(reason_required_labels_mismatch)
{
	SchedLabel have[] = {{"tier", "fast"}, {"zone", "eu-1"}};
	SchedLabel req[] = {{"tier", "slow"}};
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.labels = fx_labels(have, 2);
	p.required_labels = fx_labels(req, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));
}

TEST(reason_insufficient_cpu_memory_gpus)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.min_cpu_millis = 4001;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));
	fx_placement(&p);
	p.min_memory_mb = 8193;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_MEMORY));
	fx_placement(&p);
	p.min_gpus = 3;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_GPUS));
}

TEST(reason_no_free_slot)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.slots = 2;
	c.worker_live_attempts = 1;
	CHECK_SET(sched_admission(&p, &c), 0);
	c.worker_live_attempts = 2;
	CHECK_SET(sched_admission(&p, &c), BIT(NO_FREE_SLOT));
	c.slots = 0;
	c.worker_live_attempts = 0;
	CHECK_SET(sched_admission(&p, &c), BIT(NO_FREE_SLOT));
	/* node-wide attempts of other workers do not take this worker's slots */
	c.slots = 1;
	c.node_live_attempts = 7;
	CHECK_SET(sched_admission(&p, &c), 0);
}

TEST(reason_cpu_memory_gpus_exhausted)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_cpu_millis = 1000;
	c.reserved_cpu_millis = 3001;
	CHECK_SET(sched_admission(&p, &c), BIT(CPU_EXHAUSTED));

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_memory_mb = 1024;
	c.reserved_memory_mb = 8192 - 1023;
	CHECK_SET(sched_admission(&p, &c), BIT(MEMORY_EXHAUSTED));

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_gpus = 1;
	c.reserved_gpus = 2;
	CHECK_SET(sched_admission(&p, &c), BIT(GPUS_EXHAUSTED));
}

TEST(listing_order_is_spec_table_order)
{
	SchedLabel have[] = {{"tier", "fast"}};
	SchedLabel req[] = {{"tier", "slow"}};
	SchedPlacement p;
	SchedCandidate c;
	SchedReasonSet s;
	int			counts[SCHED_R_COUNT];
	int			i;
	int			prev = -1;

	/* every static reason and no_free_slot at once (all that can coexist with a worker) */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.pin_node_id = "node-b";
	c.management_status = SCHED_NODE_DISABLED;
	c.runtime_state = SCHED_WORKER_STOPPED;
	c.scheduling_status = SCHED_WORKER_CORDONED;
	c.last_heartbeat = p.heartbeat_cutoff - 1;
	p.capability_version = "9.9";
	c.labels = fx_labels(have, 1);
	p.required_labels = fx_labels(req, 1);
	p.min_cpu_millis = 5000;
	p.min_memory_mb = 9000;
	p.min_gpus = 3;
	c.worker_live_attempts = 2;
	s = sched_admission(&p, &c);
	CHECK_SET(s, BIT(PINNED_TO_OTHER_NODE) | BIT(NODE_NOT_ACTIVE) | BIT(WORKER_NOT_READY) |
			  BIT(WORKER_NOT_ELIGIBLE) | BIT(HEARTBEAT_EXPIRED) | BIT(CAPABILITY_VERSION_MISSING) |
			  BIT(REQUIRED_LABELS_MISMATCH) | BIT(INSUFFICIENT_CPU) | BIT(INSUFFICIENT_MEMORY) |
			  BIT(INSUFFICIENT_GPUS) | BIT(NO_FREE_SLOT));

	/* the listing (bit order) follows the table: names come out in SPEC order */
	for (i = 0; i < SCHED_R_COUNT; i++)
		if (s & SCHED_REASON_BIT(i))
		{
			int			pos;

			for (pos = 0; pos < SCHED_R_COUNT; pos++)
				if (strcmp(ref_reason_names[pos], reason_name(i)) == 0)
					break;
			CHECK(pos > prev);
			prev = pos;
		}

	/* the transient ones: listed after every static one */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	p.pin_node_id = "node-b";
	p.reserve_cpu_millis = 1;
	p.reserve_memory_mb = 1;
	p.reserve_gpus = 1;
	c.reserved_cpu_millis = 4000;
	c.reserved_memory_mb = 8192;
	c.reserved_gpus = 2;
	s = sched_admission(&p, &c);
	CHECK_SET(s, BIT(PINNED_TO_OTHER_NODE) | BIT(CAPABILITY_MISSING) | BIT(CPU_EXHAUSTED) |
			  BIT(MEMORY_EXHAUSTED) | BIT(GPUS_EXHAUSTED));

	memset(counts, 0, sizeof counts);
	sched_count_reasons(s, counts);
	for (i = 0; i < SCHED_R_COUNT; i++)
		CHECK_INT(counts[i], (s >> i) & 1u);
}

/* ------------------------------------------------------------------------------------ */
/* Suppression                                                                          */
/* ------------------------------------------------------------------------------------ */

TEST(suppression_capability_missing_hides_worker_reasons)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	/* every worker condition bad, but there is no worker */
	c.has_worker = false;
	c.runtime_state = SCHED_WORKER_STOPPED;
	c.scheduling_status = SCHED_WORKER_CORDONED;
	c.has_heartbeat = false;
	c.last_heartbeat = INT64_MIN;
	c.version_count = 0;
	c.versions = NULL;
	c.slots = 0;
	c.worker_live_attempts = 5;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_MISSING));

	/* same, each alone */
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	c.runtime_state = SCHED_WORKER_STARTING;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_MISSING));
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	c.scheduling_status = SCHED_WORKER_CORDONED;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_MISSING));
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	c.last_heartbeat = p.heartbeat_cutoff - 1;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_MISSING));
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	p.capability_version = "2.5";
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_MISSING));
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	c.worker_live_attempts = 2;
	CHECK_SET(sched_admission(&p, &c), BIT(CAPABILITY_MISSING));
}

TEST(suppression_capability_missing_keeps_node_reasons)
{
	SchedLabel req[] = {{"tier", "fast"}};
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.has_worker = false;
	p.pin_node_id = "node-z";
	c.management_status = SCHED_NODE_DRAINING;
	p.required_labels = fx_labels(req, 1);
	p.min_cpu_millis = 8000;
	p.reserve_memory_mb = 100;
	c.reserved_memory_mb = 8100;
	CHECK_SET(sched_admission(&p, &c),
			  BIT(PINNED_TO_OTHER_NODE) | BIT(NODE_NOT_ACTIVE) | BIT(CAPABILITY_MISSING) |
			  BIT(REQUIRED_LABELS_MISMATCH) | BIT(INSUFFICIENT_CPU) | BIT(MEMORY_EXHAUSTED));
}

TEST(suppression_insufficient_hides_matching_exhausted)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	/* reserve above capacity: insufficient and (arithmetically) exhausted; only insufficient */
	p.reserve_cpu_millis = 5000;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));
	c.reserved_cpu_millis = 4000;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_memory_mb = 9000;
	c.reserved_memory_mb = 10;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_MEMORY));

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_gpus = 3;
	c.reserved_gpus = 2;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_GPUS));

	/* insufficient via min_* while reserve fits statically but not now: both apply, only
	 * insufficient is listed */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.min_cpu_millis = 6000;
	p.reserve_cpu_millis = 1000;
	c.reserved_cpu_millis = 3500;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));

	/* only the matching one is hidden: insufficient cpu, exhausted memory and gpus */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.min_cpu_millis = 6000;
	p.reserve_cpu_millis = 1000;
	c.reserved_cpu_millis = 3500;
	p.reserve_memory_mb = 1;
	c.reserved_memory_mb = 8192;
	p.reserve_gpus = 1;
	c.reserved_gpus = 2;
	CHECK_SET(sched_admission(&p, &c),
			  BIT(INSUFFICIENT_CPU) | BIT(MEMORY_EXHAUSTED) | BIT(GPUS_EXHAUSTED));
}

/* ------------------------------------------------------------------------------------ */
/* Boundaries                                                                           */
/* ------------------------------------------------------------------------------------ */

TEST(heartbeat_boundary)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	/* last_heartbeat < at - ttl is expired; equal is not */
	c.last_heartbeat = p.heartbeat_cutoff;
	CHECK_SET(sched_admission(&p, &c), 0);
	c.last_heartbeat = p.heartbeat_cutoff - 1;
	CHECK_SET(sched_admission(&p, &c), BIT(HEARTBEAT_EXPIRED));
	c.last_heartbeat = p.heartbeat_cutoff + 1;
	CHECK_SET(sched_admission(&p, &c), 0);

	/* negative cutoffs (before the epoch) and the extremes */
	p.heartbeat_cutoff = -5;
	c.last_heartbeat = -5;
	CHECK_SET(sched_admission(&p, &c), 0);
	c.last_heartbeat = -6;
	CHECK_SET(sched_admission(&p, &c), BIT(HEARTBEAT_EXPIRED));
	p.heartbeat_cutoff = INT64_MIN;
	c.last_heartbeat = INT64_MIN;
	CHECK_SET(sched_admission(&p, &c), 0);
	p.heartbeat_cutoff = INT64_MAX;
	c.last_heartbeat = INT64_MAX;
	CHECK_SET(sched_admission(&p, &c), 0);
	c.last_heartbeat = INT64_MAX - 1;
	CHECK_SET(sched_admission(&p, &c), BIT(HEARTBEAT_EXPIRED));
}

TEST(insufficient_uses_max_of_min_and_reserve)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");		/* 4000 cpu, 8192 memory, 2 gpus */

	/* min above reserve */
	p.min_cpu_millis = 4000;
	p.reserve_cpu_millis = 10;
	CHECK_SET(sched_admission(&p, &c), 0);
	p.min_cpu_millis = 4001;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));
	/* reserve above min */
	p.min_cpu_millis = 10;
	p.reserve_cpu_millis = 4000;
	CHECK_SET(sched_admission(&p, &c), 0);
	p.reserve_cpu_millis = 4001;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));
	/* equal */
	p.min_cpu_millis = 4001;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));
	p.min_cpu_millis = p.reserve_cpu_millis = 4000;
	CHECK_SET(sched_admission(&p, &c), 0);

	fx_placement(&p);
	p.min_memory_mb = 8192;
	p.reserve_memory_mb = 8193;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_MEMORY));
	p.min_memory_mb = 8193;
	p.reserve_memory_mb = 0;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_MEMORY));
	p.min_memory_mb = 8192;
	CHECK_SET(sched_admission(&p, &c), 0);

	fx_placement(&p);
	p.min_gpus = 0;
	p.reserve_gpus = 3;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_GPUS));
	p.min_gpus = 3;
	p.reserve_gpus = 0;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_GPUS));
	p.min_gpus = 2;
	p.reserve_gpus = 2;
	CHECK_SET(sched_admission(&p, &c), 0);

	/* zero capacity, nothing asked: fine; anything asked: insufficient */
	fx_placement(&p);
	c.gpus = 0;
	CHECK_SET(sched_admission(&p, &c), 0);
	p.min_gpus = 1;
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_GPUS));

	/* a static minimum is admission, not a reservation: min_* never causes *_exhausted */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.min_cpu_millis = 4000;
	c.reserved_cpu_millis = 4000;
	p.min_memory_mb = 8192;
	c.reserved_memory_mb = 8192;
	p.min_gpus = 2;
	c.reserved_gpus = 2;
	CHECK_SET(sched_admission(&p, &c), 0);
}

TEST(exhausted_arithmetic)
{
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	/* capacity - reserved < reserve */
	p.reserve_cpu_millis = 1000;
	c.reserved_cpu_millis = 3000;		/* 4000 - 3000 = 1000, not below 1000 */
	CHECK_SET(sched_admission(&p, &c), 0);
	c.reserved_cpu_millis = 3001;
	CHECK_SET(sched_admission(&p, &c), BIT(CPU_EXHAUSTED));
	p.reserve_cpu_millis = 999;
	CHECK_SET(sched_admission(&p, &c), 0);
	/* a full node takes a request reserving nothing */
	p.reserve_cpu_millis = 0;
	c.reserved_cpu_millis = 4000;
	CHECK_SET(sched_admission(&p, &c), 0);

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_memory_mb = 192;
	c.reserved_memory_mb = 8000;
	CHECK_SET(sched_admission(&p, &c), 0);
	c.reserved_memory_mb = 8001;
	CHECK_SET(sched_admission(&p, &c), BIT(MEMORY_EXHAUSTED));

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_gpus = 1;
	c.reserved_gpus = 1;
	CHECK_SET(sched_admission(&p, &c), 0);
	c.reserved_gpus = 2;
	CHECK_SET(sched_admission(&p, &c), BIT(GPUS_EXHAUSTED));

	/* large bigint memory */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.memory_mb = INT64_C(4000000000000);
	p.reserve_memory_mb = INT64_C(1000000000000);
	c.reserved_memory_mb = INT64_C(3000000000000);
	CHECK_SET(sched_admission(&p, &c), 0);
	c.reserved_memory_mb += 1;
	CHECK_SET(sched_admission(&p, &c), BIT(MEMORY_EXHAUSTED));
}

/* ------------------------------------------------------------------------------------ */
/* Labels                                                                               */
/* ------------------------------------------------------------------------------------ */

TEST(required_labels_matching)
{
	SchedLabel have[] = {{"gpu", "a100"}, {"tier", "fast"}, {"zone", "eu-1"}};
	SchedLabel req_absent[] = {{"rack", "r1"}};
	SchedLabel req_diff[] = {{"tier", "slow"}};
	SchedLabel req_case_val[] = {{"tier", "Fast"}};
	SchedLabel req_case_key[] = {{"Tier", "fast"}};
	SchedLabel req_prefix[] = {{"tier", "fas"}};
	SchedLabel req_space[] = {{"tier", "fast "}};
	SchedLabel req_all[] = {{"gpu", "a100"}, {"zone", "eu-1"}};
	SchedLabel req_one_bad[] = {{"gpu", "a100"}, {"zone", "eu-2"}};
	char		kbuf[] = "tier";
	char		vbuf[] = "fast";
	SchedLabel req_copy[1] = {{NULL, NULL}};	/* zero past key and value: plain */
	SchedLabel have_utf8[] = {{"r\xc3\xa9gion", "\xc3\xa9t\xc3\xa9"}};
	SchedLabel req_utf8[] = {{"r\xc3\xa9gion", "\xc3\xa9t\xc3\xa9"}};
	SchedLabel req_utf8_nfd[] = {{"r\xc3\xa9gion", "e\xcc\x81t\xc3\xa9"}};	/* same text, other bytes */
	SchedLabel have_empty_val[] = {{"tier", ""}};
	SchedLabel req_empty_val[] = {{"tier", ""}};
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.labels = fx_labels(have, 3);

	/* empty required map matches everything, including a node without labels */
	p.required_labels = fx_labels(NULL, 0);
	CHECK_SET(sched_admission(&p, &c), 0);
	c.labels = fx_labels(NULL, 0);
	CHECK_SET(sched_admission(&p, &c), 0);
	c.labels = fx_labels(have, 3);

	p.required_labels = fx_labels(req_absent, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));
	p.required_labels = fx_labels(req_diff, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));
	p.required_labels = fx_labels(req_case_val, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));
	p.required_labels = fx_labels(req_case_key, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));
	p.required_labels = fx_labels(req_prefix, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));
	p.required_labels = fx_labels(req_space, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));
	p.required_labels = fx_labels(req_one_bad, 2);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));

	/* a subset of the node's labels, extra node labels are fine */
	p.required_labels = fx_labels(req_all, 2);
	CHECK_SET(sched_admission(&p, &c), 0);
	/* compared by content, not by pointer */
	req_copy[0].key = kbuf;
	req_copy[0].value = vbuf;
	p.required_labels = fx_labels(req_copy, 1);
	CHECK_SET(sched_admission(&p, &c), 0);
	/* a node without labels fails a non-empty requirement */
	c.labels = fx_labels(NULL, 0);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));

	/* bytewise: UTF-8 equal bytes match, canonically-equivalent other bytes do not */
	c.labels = fx_labels(have_utf8, 1);
	p.required_labels = fx_labels(req_utf8, 1);
	CHECK_SET(sched_admission(&p, &c), 0);
	p.required_labels = fx_labels(req_utf8_nfd, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));

	/* empty string value: present and equal, distinct from absent */
	c.labels = fx_labels(have_empty_val, 1);
	p.required_labels = fx_labels(req_empty_val, 1);
	CHECK_SET(sched_admission(&p, &c), 0);
	c.labels = fx_labels(NULL, 0);
	CHECK_SET(sched_admission(&p, &c), BIT(REQUIRED_LABELS_MISMATCH));

	/* the same checks through sched_labels_matching */
	c.labels = fx_labels(have, 3);
	p.required_labels = fx_labels(req_all, 2);
	CHECK_INT(sched_labels_matching(&c.labels, &p.required_labels), 2);
	p.required_labels = fx_labels(req_one_bad, 2);
	CHECK_INT(sched_labels_matching(&c.labels, &p.required_labels), 1);
	CHECK_INT(sched_labels_matching(&c.labels, &c.labels), 3);
}

TEST(preferred_labels_counted_not_required)
{
	SchedLabel have[] = {{"disk", "ssd"}, {"tier", "fast"}, {"zone", "eu-1"}};
	SchedLabel pref0[] = {{"rack", "r1"}, {"tier", "FAST"}};
	SchedLabel pref1[] = {{"rack", "r1"}, {"tier", "fast"}};
	SchedLabel pref2[] = {{"disk", "ssd"}, {"tier", "fast"}, {"zone", "us-1"}};
	SchedLabel pref3[] = {{"disk", "ssd"}, {"tier", "fast"}, {"zone", "eu-1"}};
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked r;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.labels = fx_labels(have, 3);

	p.preferred_labels = fx_labels(pref0, 2);
	CHECK_SET(sched_admission(&p, &c), 0);		/* a preference never excludes */
	sched_score(&p, &c, &r);
	CHECK_INT(r.preferred_matches, 0);
	CHECK_INT(r.score, 100000);

	p.preferred_labels = fx_labels(pref1, 2);
	sched_score(&p, &c, &r);
	CHECK_INT(r.preferred_matches, 1);
	CHECK_INT(r.score, 1100000);

	p.preferred_labels = fx_labels(pref2, 3);
	sched_score(&p, &c, &r);
	CHECK_INT(r.preferred_matches, 2);
	CHECK_INT(r.score, 2100000);

	p.preferred_labels = fx_labels(pref3, 3);
	sched_score(&p, &c, &r);
	CHECK_INT(r.preferred_matches, 3);
	CHECK_INT(r.score, 3100000);

	p.preferred_labels = fx_labels(NULL, 0);
	sched_score(&p, &c, &r);
	CHECK_INT(r.preferred_matches, 0);
	c.labels = fx_labels(NULL, 0);
	p.preferred_labels = fx_labels(pref3, 3);
	sched_score(&p, &c, &r);
	CHECK_INT(r.preferred_matches, 0);
	CHECK_SET(sched_admission(&p, &c), 0);
}

TEST(pin_same_node_vs_other_node)
{
	char		same[] = "node-a";	/* equal bytes, another pointer */
	SchedPlacement p;
	SchedCandidate c;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.pin_node_id = NULL;
	CHECK_SET(sched_admission(&p, &c), 0);
	p.pin_node_id = same;
	CHECK_SET(sched_admission(&p, &c), 0);
	p.pin_node_id = "node-b";
	CHECK_SET(sched_admission(&p, &c), BIT(PINNED_TO_OTHER_NODE));
	p.pin_node_id = "Node-a";		/* bytewise, case-sensitive */
	CHECK_SET(sched_admission(&p, &c), BIT(PINNED_TO_OTHER_NODE));
	p.pin_node_id = "node-a ";
	CHECK_SET(sched_admission(&p, &c), BIT(PINNED_TO_OTHER_NODE));
	p.pin_node_id = "node-";
	CHECK_SET(sched_admission(&p, &c), BIT(PINNED_TO_OTHER_NODE));
	p.pin_node_id = "";
	CHECK_SET(sched_admission(&p, &c), BIT(PINNED_TO_OTHER_NODE));

	/* pinned to this node: every other reason still applies ("wait in place") */
	p.pin_node_id = same;
	c.management_status = SCHED_NODE_DRAINING;
	c.scheduling_status = SCHED_WORKER_CORDONED;
	CHECK_SET(sched_admission(&p, &c), BIT(NODE_NOT_ACTIVE) | BIT(WORKER_NOT_ELIGIBLE));
	/* pinned elsewhere: not the only reason listed */
	p.pin_node_id = "node-b";
	CHECK_SET(sched_admission(&p, &c),
			  BIT(PINNED_TO_OTHER_NODE) | BIT(NODE_NOT_ACTIVE) | BIT(WORKER_NOT_ELIGIBLE));
}

/* ------------------------------------------------------------------------------------ */
/* Scoring and ranking                                                                  */
/* ------------------------------------------------------------------------------------ */

TEST(effective_weight)
{
	CHECK_INT(sched_effective_weight(0), 100);
	CHECK_INT(sched_effective_weight(-1), 100);
	CHECK_INT(sched_effective_weight(-100), 100);
	CHECK_INT(sched_effective_weight(INT32_MIN), 100);
	CHECK_INT(sched_effective_weight(1), 1);
	CHECK_INT(sched_effective_weight(99), 99);
	CHECK_INT(sched_effective_weight(100), 100);
	CHECK_INT(sched_effective_weight(150), 150);
	CHECK_INT(sched_effective_weight(INT32_MAX), INT32_MAX);
}

TEST(score_formula)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked r;

	fx_placement(&p);
	fx_candidate(&c, "node-a");

	memset(&r, 0, sizeof r);
	r.index = 77;
	sched_score(&p, &c, &r);
	CHECK_INT(r.index, 77);			/* index is left to the caller */
	CHECK(r.node_id == c.node_id);
	CHECK_INT(r.weight, 100);
	CHECK_INT(r.running_attempts, 0);
	CHECK_INT(r.preferred_matches, 0);
	CHECK_INT(r.score, 100000);

	c.weight = 0;					/* scores as 100 */
	c.node_live_attempts = 3;		/* the whole node, not just this worker */
	c.worker_live_attempts = 1;
	sched_score(&p, &c, &r);
	CHECK_INT(r.weight, 100);
	CHECK_INT(r.running_attempts, 3);
	CHECK_INT(r.score, 100000 - 30000);

	c.weight = -5;
	c.node_live_attempts = 20;		/* can go negative */
	sched_score(&p, &c, &r);
	CHECK_INT(r.weight, 100);
	CHECK_INT(r.score, 100000 - 200000);

	c.weight = 1;
	c.node_live_attempts = 0;
	sched_score(&p, &c, &r);
	CHECK_INT(r.score, 1000);

	/* extremes stay exact in 64 bits */
	c.weight = INT32_MAX;
	c.node_live_attempts = INT32_MAX;
	sched_score(&p, &c, &r);
	CHECK_INT(r.score, (int64_t) INT32_MAX * 1000 - (int64_t) INT32_MAX * 10000);
}

/* SPEC section 4 worked example (seed 000, interactive 03). */
TEST(worked_example_seed_000)
{
	SchedLabel a_labels[] = {{"tier", "fast"}};
	SchedLabel pref[] = {{"tier", "fast"}};
	const int64_t at = INT64_C(1700000000000000);		/* microseconds */
	const int64_t sec = 1000000;
	SchedPlacement p;
	SchedCandidate c[3];
	SchedRanked r[3];
	int			n = 0;
	int			i;
	int			counts[SCHED_R_COUNT];
	char		buf[256];

	fx_placement(&p);
	p.preferred_labels = fx_labels(pref, 1);
	p.min_cpu_millis = 2000;
	p.heartbeat_cutoff = at - 60 * sec;

	fx_candidate(&c[0], "node-a");
	c[0].labels = fx_labels(a_labels, 1);
	c[0].weight = 100;
	c[0].cpu_millis = 4000;
	c[0].node_live_attempts = 2;
	c[0].worker_live_attempts = 2;
	c[0].slots = 4;
	c[0].last_heartbeat = at - 1 * sec;

	fx_candidate(&c[1], "node-b");
	c[1].weight = 150;
	c[1].cpu_millis = 8000;
	c[1].last_heartbeat = at - 2 * sec;

	fx_candidate(&c[2], "node-c");
	c[2].weight = 100;
	c[2].cpu_millis = 16000;
	c[2].last_heartbeat = at - 90 * sec;

	CHECK_SET(sched_admission(&p, &c[0]), 0);
	CHECK_SET(sched_admission(&p, &c[1]), 0);
	CHECK_SET(sched_admission(&p, &c[2]), BIT(HEARTBEAT_EXPIRED));

	for (i = 0; i < 3; i++)
		if (sched_admission(&p, &c[i]) == 0)
		{
			sched_score(&p, &c[i], &r[n]);
			r[n].index = i;
			n++;
		}
	CHECK_INT(n, 2);
	sched_rank(r, n);
	CHECK_STR(r[0].node_id, "node-a");
	CHECK_INT(r[0].score, 1080000);
	CHECK_INT(r[0].preferred_matches, 1);
	CHECK_INT(r[0].weight, 100);
	CHECK_INT(r[0].running_attempts, 2);
	CHECK_INT(r[0].index, 0);
	CHECK_STR(r[1].node_id, "node-b");
	CHECK_INT(r[1].score, 150000);
	CHECK_INT(r[1].index, 1);

	memset(counts, 0, sizeof counts);
	for (i = 0; i < 3; i++)
		sched_count_reasons(sched_admission(&p, &c[i]), counts);
	sched_format_summary(buf, sizeof buf, 3, 2, counts);
	CHECK_STR(buf, "2/3 nodes eligible: 1 heartbeat_expired");

	/* raising the minimum to 32 CPUs leaves no eligible node */
	p.min_cpu_millis = 32000;
	memset(counts, 0, sizeof counts);
	n = 0;
	for (i = 0; i < 3; i++)
	{
		SchedReasonSet s = sched_admission(&p, &c[i]);

		CHECK(s & BIT(INSUFFICIENT_CPU));
		n += s == 0;
		sched_count_reasons(s, counts);
	}
	CHECK_INT(n, 0);
	sched_format_summary(buf, sizeof buf, 3, n, counts);
	CHECK_STR(buf, "0/3 nodes eligible: 1 heartbeat_expired, 3 insufficient_cpu");

	/* a TTL of 120 s admits node-c */
	p.min_cpu_millis = 2000;
	p.heartbeat_cutoff = at - 120 * sec;
	n = 0;
	for (i = 0; i < 3; i++)
	{
		CHECK_SET(sched_admission(&p, &c[i]), 0);
		sched_score(&p, &c[i], &r[n]);
		r[n].index = i;
		n++;
	}
	sched_rank(r, n);
	CHECK_STR(r[0].node_id, "node-a");
	CHECK_INT(r[0].score, 1080000);
	CHECK_STR(r[1].node_id, "node-b");
	CHECK_INT(r[1].score, 150000);
	CHECK_STR(r[2].node_id, "node-c");
	CHECK_INT(r[2].score, 100000);
	CHECK_INT(r[2].index, 2);
	/* the TTL boundary itself: node-c's heartbeat is exactly at - 90 s */
	p.heartbeat_cutoff = at - 90 * sec;
	CHECK_SET(sched_admission(&p, &c[2]), 0);
	p.heartbeat_cutoff = at - 90 * sec + 1;
	CHECK_SET(sched_admission(&p, &c[2]), BIT(HEARTBEAT_EXPIRED));
}

static SchedRanked
mk_ranked(const char *id, int64_t score, int index)
{
	SchedRanked r;

	memset(&r, 0, sizeof r);
	sched_ranked_set_node(&r, id);
	r.score = score;
	r.index = index;
	return r;
}

static int
sign(int v)
{
	return (v > 0) - (v < 0);
}

/* The fleet's verdict: any node that admits wins; else any node held back only by
 * transient reasons makes it wait for capacity; else it is static.  Order-independent. */
/* An attempt is live while DISPATCHED or RUNNING (SPEC: a live attempt holds its slot),
 * by the exact status names only. */
TEST(attempt_status_live)
{
	CHECK(sched_attempt_status_live("DISPATCHED"));
	CHECK(sched_attempt_status_live("RUNNING"));
	CHECK(!sched_attempt_status_live("SUCCEEDED"));
	CHECK(!sched_attempt_status_live("FAILED"));
	CHECK(!sched_attempt_status_live("LOST"));
	CHECK(!sched_attempt_status_live("PREEMPTED"));
	CHECK(!sched_attempt_status_live("CANCELLED"));
	CHECK(!sched_attempt_status_live("dispatched"));
	CHECK(!sched_attempt_status_live("RUNNING "));
	CHECK(!sched_attempt_status_live(""));
}

TEST(verdict_add)
{
	SchedReasonSet slot = SCHED_REASON_BIT(SCHED_R_NO_FREE_SLOT);
	SchedReasonSet cpu_gone = SCHED_REASON_BIT(SCHED_R_CPU_EXHAUSTED) |
		SCHED_REASON_BIT(SCHED_R_GPUS_EXHAUSTED);
	SchedReasonSet stale = SCHED_REASON_BIT(SCHED_R_HEARTBEAT_EXPIRED);
	SchedReasonSet mixed = stale | slot;	/* a static reason among transient ones */
	SchedReasonSet all[4] = {0, slot, cpu_gone, stale};
	int			i,
				j;

	CHECK_INT(sched_verdict_add(SCHED_VERDICT_STATIC, stale), SCHED_VERDICT_STATIC);
	CHECK_INT(sched_verdict_add(SCHED_VERDICT_STATIC, mixed), SCHED_VERDICT_STATIC);
	CHECK_INT(sched_verdict_add(SCHED_VERDICT_STATIC, slot), SCHED_VERDICT_WAITS);
	CHECK_INT(sched_verdict_add(SCHED_VERDICT_STATIC, cpu_gone), SCHED_VERDICT_WAITS);
	CHECK_INT(sched_verdict_add(SCHED_VERDICT_STATIC, 0), SCHED_VERDICT_FITS);
	/* a later node never lowers the verdict */
	CHECK_INT(sched_verdict_add(SCHED_VERDICT_WAITS, stale), SCHED_VERDICT_WAITS);
	CHECK_INT(sched_verdict_add(SCHED_VERDICT_FITS, slot), SCHED_VERDICT_FITS);
	CHECK_INT(sched_verdict_add(SCHED_VERDICT_FITS, stale), SCHED_VERDICT_FITS);
	/* two nodes in either order give the same verdict */
	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++)
			CHECK_INT(sched_verdict_add(sched_verdict_add(SCHED_VERDICT_STATIC, all[i]), all[j]),
					  sched_verdict_add(sched_verdict_add(SCHED_VERDICT_STATIC, all[j]), all[i]));
}

/* A tie of score is broken by node_id bytewise, as strcmp orders it, whether the ids
 * differ within their first 16 bytes (node_key) or only after (strcmp): every pair of a
 * set of ids with shared prefixes, lengths on both sides of 16, bytes above 0x7f. */
TEST(ranking_ties_by_node_id_bytes)
{
	const char *ids[] = {
		"", "a", "ab", "abc", "abd", "b", "node-0001", "node-0001a", "node-000123456789",
		"node-000123456789a", "node-000123456789b", "node-0001234567890", "node-00012345678",
		"node-00012345678\xff", "node-00012345678\x80x", "\xc3\xa9t\xc3\xa9", "\x7f", "\x80",
		"0123456789abcdef", "0123456789abcdeg", "0123456789abcdef0", "0123456789abcde"
	};
	int			n = (int) (sizeof(ids) / sizeof(ids[0]));
	int			i,
				j;

	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
		{
			SchedRanked a = mk_ranked(ids[i], 7, i);
			SchedRanked b = mk_ranked(ids[j], 7, j);

			CHECK_INT(sign(sched_ranked_cmp(&a, &b)), sign(strcmp(ids[i], ids[j])));
		}
}

/* A held candidate (concurrent reservations on its node, inflight.c) ranks after every
 * candidate that is not, whatever the scores; among held ones, the usual order. */
TEST(ranking_held_candidates_last)
{
	SchedRanked a,
				b;
	SchedRanked arr[4];

	a = mk_ranked("a", 999999, 0);
	a.held = true;
	b = mk_ranked("b", -5000000, 1);
	CHECK(sched_ranked_cmp(&a, &b) > 0);
	CHECK(sched_ranked_cmp(&b, &a) < 0);
	b.held = true;
	CHECK(sched_ranked_cmp(&a, &b) < 0);		/* both held: higher score first */

	arr[0] = mk_ranked("h-low", 100, 0);
	arr[0].held = true;
	arr[1] = mk_ranked("free-low", 50, 1);
	arr[2] = mk_ranked("h-high", 300, 2);
	arr[2].held = true;
	arr[3] = mk_ranked("free-high", 200, 3);
	sched_rank(arr, 4);
	CHECK(strcmp(arr[0].node_id, "free-high") == 0);
	CHECK(strcmp(arr[1].node_id, "free-low") == 0);
	CHECK(strcmp(arr[2].node_id, "h-high") == 0);
	CHECK(strcmp(arr[3].node_id, "h-low") == 0);
}

/* Counting running attempts that concurrent reservations will add: the score's
 * running-attempts term, nothing else. */
TEST(score_add_running)
{
	SchedRanked r = mk_ranked("n", 1080000, 0);

	r.running_attempts = 2;
	sched_score_add_running(&r, 3);
	CHECK_INT(r.running_attempts, 5);
	CHECK(r.score == 1080000 - 3 * SCHED_SCORE_PER_RUNNING_ATTEMPT);
	CHECK(!r.held);
}

TEST(ranking_ties_by_node_id_bytewise)
{
	SchedRanked a,
				b;
	SchedRanked arr[8];
	char		copy[] = "node-a";

	/* higher score first, whatever the ids */
	a = mk_ranked("z", 200, 0);
	b = mk_ranked("a", 100, 1);
	CHECK(sched_ranked_cmp(&a, &b) < 0);
	CHECK(sched_ranked_cmp(&b, &a) > 0);
	/* a one-point difference beyond 32 bits */
	a = mk_ranked("z", INT64_C(5000000000) + 1, 0);
	b = mk_ranked("a", INT64_C(5000000000), 1);
	CHECK(sched_ranked_cmp(&a, &b) < 0);
	a = mk_ranked("z", -1, 0);
	b = mk_ranked("a", INT64_MIN, 1);
	CHECK(sched_ranked_cmp(&a, &b) < 0);

	/* equal score: smaller node_id bytewise first */
	a = mk_ranked("B", 100, 0);
	b = mk_ranked("a", 100, 1);
	CHECK(sched_ranked_cmp(&a, &b) < 0);		/* 'B' 0x42 < 'a' 0x61 */
	CHECK(sched_ranked_cmp(&b, &a) > 0);
	a = mk_ranked("node-10", 100, 0);
	b = mk_ranked("node-9", 100, 1);
	CHECK(sched_ranked_cmp(&a, &b) < 0);		/* '1' < '9', not numeric */
	a = mk_ranked("z", 100, 0);
	b = mk_ranked("\xc3\xa9", 100, 1);			/* UTF-8 bytes sort after ASCII */
	CHECK(sched_ranked_cmp(&a, &b) < 0);
	CHECK(sched_ranked_cmp(&b, &a) > 0);
	a = mk_ranked("node", 100, 0);
	b = mk_ranked("node-a", 100, 1);			/* a prefix first */
	CHECK(sched_ranked_cmp(&a, &b) < 0);
	a = mk_ranked("node-a", 100, 0);
	b = mk_ranked(copy, 100, 1);
	CHECK_INT(sched_ranked_cmp(&a, &b), 0);

	/* sched_rank puts it together */
	arr[0] = mk_ranked("node-9", 100, 0);
	arr[1] = mk_ranked("\xc3\xa9t\xc3\xa9", 100, 1);
	arr[2] = mk_ranked("a", 100, 2);
	arr[3] = mk_ranked("node-10", 100, 3);
	arr[4] = mk_ranked("B", 100, 4);
	arr[5] = mk_ranked("zz", 1080000, 5);
	arr[6] = mk_ranked("A", -10000, 6);
	arr[7] = mk_ranked("Z", 100, 7);
	sched_rank(arr, 8);
	CHECK_STR(arr[0].node_id, "zz");
	CHECK_STR(arr[1].node_id, "B");
	CHECK_STR(arr[2].node_id, "Z");
	CHECK_STR(arr[3].node_id, "a");
	CHECK_STR(arr[4].node_id, "node-10");
	CHECK_STR(arr[5].node_id, "node-9");
	CHECK_STR(arr[6].node_id, "\xc3\xa9t\xc3\xa9");
	CHECK_STR(arr[7].node_id, "A");
	CHECK_INT(arr[0].index, 5);
	CHECK_INT(arr[7].index, 6);
	CHECK_INT(arr[6].index, 1);

	/* degenerate sizes */
	sched_rank(NULL, 0);
	arr[0] = mk_ranked("only", 1, 9);
	sched_rank(arr, 1);
	CHECK_STR(arr[0].node_id, "only");
	CHECK_INT(arr[0].index, 9);
	CHECK_INT(sign(sched_ranked_cmp(&arr[0], &arr[0])), 0);
}

/* ------------------------------------------------------------------------------------ */
/* Spread (the score's fourth term)                                                     */
/* ------------------------------------------------------------------------------------ */

/* A candidate scored by sched_score() into a record filled with garbage first. */
static SchedRanked
scored(const SchedPlacement *p, const SchedCandidate *c, int index)
{
	SchedRanked r;

	memset(&r, 0x5a, sizeof r);
	sched_score(p, c, &r);
	r.index = index;
	return r;
}

/* sched_score leaves the term 0; each match is -100,000 and touches nothing else. */
TEST(spread_term_score)
{
	SchedLabel labels[] = {{"tier", "fast"}, {"zone", "eu"}};
	SchedLabel pref[] = {{"tier", "fast"}, {"zone", "eu"}};
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked r,
				before;

	CHECK_INT(SCHED_SCORE_PER_SPREAD_MATCH, 100000);
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	r = scored(&p, &c, 3);
	CHECK_INT(r.spread_matches, 0);	/* set, not left as the 0x5a garbage */
	CHECK_INT(r.score, 100000);
	CHECK(!r.held);

	before = r;
	sched_score_add_spread(&r, 1);
	CHECK_INT(r.spread_matches, 1);
	CHECK_INT(r.score, 0);
	sched_score_add_spread(&r, 2);
	CHECK_INT(r.spread_matches, 3);
	CHECK_INT(r.score, -200000);
	sched_score_add_spread(&r, 0);
	CHECK_INT(r.spread_matches, 3);
	CHECK_INT(r.score, -200000);
	/* nothing else moves */
	CHECK_INT(r.index, 3);
	CHECK(r.node_id == before.node_id);
	CHECK_INT(r.preferred_matches, before.preferred_matches);
	CHECK_INT(r.weight, before.weight);
	CHECK_INT(r.running_attempts, before.running_attempts);
	CHECK(r.held == before.held);

	/* the whole formula: 2 x 1,000,000 - 2 x 100,000 + 150 x 1,000 - 3 x 10,000 */
	p.preferred_labels = fx_labels(pref, 2);
	c.labels = fx_labels(labels, 2);
	c.weight = 150;
	c.node_live_attempts = 3;
	r = scored(&p, &c, 0);
	CHECK_INT(r.spread_matches, 0);
	CHECK_INT(r.score, 2150000 - 30000);
	sched_score_add_spread(&r, 2);
	CHECK_INT(r.score, 1920000);
	CHECK_INT(r.preferred_matches, 2);
	CHECK_INT(r.weight, 150);
	CHECK_INT(r.running_attempts, 3);
	CHECK_INT(r.spread_matches, 2);

	/* large counts stay exact in 64 bits */
	fx_candidate(&c, "node-a");
	p.preferred_labels = fx_labels(pref, 0);
	r = scored(&p, &c, 0);
	sched_score_add_spread(&r, INT32_MAX);
	CHECK_INT(r.spread_matches, INT32_MAX);
	CHECK(r.score == 100000 - (int64_t) INT32_MAX * 100000);
}

/* README "Spread": n2 90000 = 0 - 0 + 100,000 - 10,000; n3 -10000 = 0 - 100,000 + 100,000
 * - 10,000.  The two additions commute and each counts only its own term. */
TEST(spread_with_add_running)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked n2,
				n3,
				x,
				y;

	fx_placement(&p);
	fx_candidate(&c, "n2");
	c.node_live_attempts = 1;
	n2 = scored(&p, &c, 0);
	fx_candidate(&c, "n3");
	c.node_live_attempts = 1;
	n3 = scored(&p, &c, 1);
	sched_score_add_spread(&n3, 1);
	CHECK_INT(n2.score, 90000);
	CHECK_INT(n3.score, -10000);
	CHECK_INT(n3.running_attempts, 1);	/* the key's attempt is one of the node's */
	CHECK_INT(n3.spread_matches, 1);

	/* add_running then add_spread, and the other way round */
	x = n2;
	sched_score_add_running(&x, 2);
	CHECK_INT(x.score, 70000);
	CHECK_INT(x.spread_matches, 0);
	sched_score_add_spread(&x, 1);
	CHECK_INT(x.score, -30000);
	y = n2;
	sched_score_add_spread(&y, 1);
	CHECK_INT(y.score, -10000);
	CHECK_INT(y.running_attempts, 1);
	sched_score_add_running(&y, 2);
	CHECK_INT(y.score, -30000);
	CHECK_INT(x.running_attempts, 3);
	CHECK_INT(y.running_attempts, 3);
	CHECK_INT(x.spread_matches, 1);
	CHECK_INT(y.spread_matches, 1);
}

/* Two candidates in ranking order: the first one's node_id, or NULL if they compare
 * equal (or the comparator is not antisymmetric). */
static const char *
first_of(const SchedRanked *a, const SchedRanked *b)
{
	int			ab = sign(sched_ranked_cmp(a, b));
	int			ba = sign(sched_ranked_cmp(b, a));

	if (ab == 0 || ab != -ba)
		return NULL;
	return ab < 0 ? a->node_id : b->node_id;
}

/* What spread changes in the order, and what outweighs it (README: a preferred label is
 * worth ten attempts of the key; one attempt of the key outweighs a weight difference
 * below 100 and ten running attempts). */
TEST(spread_changes_ranking)
{
	SchedLabel tier_fast[] = {{"tier", "fast"}};
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked a,
				b,
				arr[5];

	fx_placement(&p);

	/* equal nodes: node_id decides, unless the first has the key */
	fx_candidate(&c, "a");
	a = scored(&p, &c, 0);
	fx_candidate(&c, "b");
	b = scored(&p, &c, 1);
	CHECK_STR(first_of(&a, &b), "a");
	sched_score_add_spread(&a, 1);
	CHECK_STR(first_of(&a, &b), "b");
	sched_score_add_spread(&b, 1);
	CHECK_STR(first_of(&a, &b), "a");	/* one each: a tie again */
	sched_score_add_spread(&b, 1);
	CHECK_STR(first_of(&a, &b), "a");

	/* weight: heavier by 99 loses to one attempt of the key, by 100 ties, by 101 wins */
	fx_candidate(&c, "light");
	b = scored(&p, &c, 1);			/* 100,000 */
	fx_candidate(&c, "heavy");
	c.weight = 199;
	a = scored(&p, &c, 0);
	sched_score_add_spread(&a, 1);	/* 99,000 */
	CHECK_INT(a.score, 99000);
	CHECK_STR(first_of(&a, &b), "light");
	c.weight = 200;
	a = scored(&p, &c, 0);
	sched_score_add_spread(&a, 1);	/* 100,000: tie, "heavy" < "light" */
	CHECK_INT(a.score, 100000);
	CHECK_STR(first_of(&a, &b), "heavy");
	c.weight = 201;
	a = scored(&p, &c, 0);
	sched_score_add_spread(&a, 1);
	CHECK_STR(first_of(&a, &b), "heavy");

	/* running attempts: one attempt of the key weighs ten running attempts */
	fx_candidate(&c, "keyed");
	a = scored(&p, &c, 0);
	sched_score_add_spread(&a, 1);	/* 0 */
	fx_candidate(&c, "busy");
	c.node_live_attempts = 9;
	b = scored(&p, &c, 1);			/* 10,000 */
	CHECK_STR(first_of(&a, &b), "busy");
	c.node_live_attempts = 10;
	b = scored(&p, &c, 1);			/* 0: tie, "busy" < "keyed" */
	CHECK_STR(first_of(&a, &b), "busy");
	c.node_live_attempts = 11;
	b = scored(&p, &c, 1);
	CHECK_STR(first_of(&a, &b), "keyed");
	/* running attempts added for concurrent reservations count as the node's */
	c.node_live_attempts = 9;
	b = scored(&p, &c, 1);
	sched_score_add_running(&b, 2);	/* -10,000 */
	CHECK_STR(first_of(&a, &b), "keyed");

	/* a preferred label outweighs nine attempts of the key, ties with ten */
	p.preferred_labels = fx_labels(tier_fast, 1);
	fx_candidate(&c, "pref");
	c.labels = fx_labels(tier_fast, 1);
	a = scored(&p, &c, 0);
	sched_score_add_spread(&a, 9);	/* 1,000,000 - 900,000 + 100,000 */
	CHECK_INT(a.score, 200000);
	fx_candidate(&c, "plain");
	b = scored(&p, &c, 1);
	CHECK_STR(first_of(&a, &b), "pref");
	sched_score_add_spread(&a, 1);	/* 100,000: tie, "plain" < "pref" */
	CHECK_STR(first_of(&a, &b), "plain");
	p.preferred_labels = fx_labels(tier_fast, 0);

	/* held still goes last, whatever the spread */
	fx_candidate(&c, "free");
	a = scored(&p, &c, 0);
	sched_score_add_spread(&a, 50);
	fx_candidate(&c, "held");
	b = scored(&p, &c, 1);
	b.held = true;
	CHECK_STR(first_of(&a, &b), "free");

	/* a fleet: without the key n1 < n2 < n3 < n4 (ties by id); with it the order below */
	fx_candidate(&c, "n1");
	arr[0] = scored(&p, &c, 0);
	sched_score_add_spread(&arr[0], 2);	/* -100,000 */
	fx_candidate(&c, "n2");
	arr[1] = scored(&p, &c, 1);
	sched_score_add_spread(&arr[1], 1);	/* 0 */
	fx_candidate(&c, "n3");
	c.node_live_attempts = 3;
	arr[2] = scored(&p, &c, 2);		/* 70,000 */
	fx_candidate(&c, "n4");
	c.weight = 180;
	c.node_live_attempts = 1;
	arr[3] = scored(&p, &c, 3);
	sched_score_add_spread(&arr[3], 1);	/* 180,000 - 100,000 - 10,000 = 70,000 */
	fx_candidate(&c, "n5");
	arr[4] = scored(&p, &c, 4);		/* 100,000 */
	sched_rank(arr, 5);
	CHECK_STR(arr[0].node_id, "n5");
	CHECK_INT(arr[0].score, 100000);
	CHECK_STR(arr[1].node_id, "n3");
	CHECK_INT(arr[1].score, 70000);
	CHECK_STR(arr[2].node_id, "n4");
	CHECK_INT(arr[2].score, 70000);
	CHECK_STR(arr[3].node_id, "n2");
	CHECK_INT(arr[3].score, 0);
	CHECK_STR(arr[4].node_id, "n1");
	CHECK_INT(arr[4].score, -100000);
	CHECK_INT(arr[4].spread_matches, 2);
	CHECK_INT(arr[4].index, 0);
}

/* ------------------------------------------------------------------------------------ */
/* Preemption                                                                           */
/* ------------------------------------------------------------------------------------ */

static SchedVictim
mk_victim(int32_t priority, int64_t dispatched_at, bool on_worker, int64_t cpu, int64_t mem,
		  int64_t gpus)
{
	SchedVictim v;

	memset(&v, 0, sizeof v);
	v.priority = priority;
	v.dispatched_at = dispatched_at;
	v.on_worker = on_worker;
	v.reserve_cpu_millis = cpu;
	v.reserve_memory_mb = mem;
	v.reserve_gpus = gpus;
	return v;
}

#define T_MAX_VICTIMS 16

/*
 * sched_preemption_victims with chosen[] and order[] full of garbage first: it must
 * return want_count and choose exactly the victims of bit mask want_mask (bit i for
 * victim i; 0 when -1), as many as it returns, and change neither p, c nor the victims.
 */
static void
t_check_victims(const char *file, int line, const SchedPlacement *p, const SchedCandidate *c,
				const SchedVictim *v, int n, int want_count, unsigned want_mask)
{
	SchedPlacement p0 = *p;
	SchedCandidate c0 = *c;
	SchedVictim v0[T_MAX_VICTIMS];
	int			order[T_MAX_VICTIMS];
	bool		chosen[T_MAX_VICTIMS];
	unsigned	mask = 0;
	int			nchosen = 0;
	int			got;
	int			i;

	if (n > T_MAX_VICTIMS)
	{
		t_fail(file, line, "too many victims for the helper");
		return;
	}
	memcpy(v0, v, sizeof(SchedVictim) * (size_t) n);
	for (i = 0; i < n; i++)
	{
		chosen[i] = (i % 2) == 0;
		order[i] = -1000 - i;
	}
	got = sched_preemption_victims(p, c, v, n, order, chosen);
	for (i = 0; i < n; i++)
		if (chosen[i])
		{
			mask |= 1u << i;
			nchosen++;
		}
	if (got != want_count || mask != want_mask)
		t_fail(file, line, "sched_preemption_victims returned %d choosing 0x%x, want %d choosing 0x%x",
			   got, mask, want_count, want_mask);
	if (got >= 0 && nchosen != got)
		t_fail(file, line, "returned %d but chose %d", got, nchosen);
	if (memcmp(&p0, p, sizeof p0) != 0 || memcmp(&c0, c, sizeof c0) != 0 ||
		memcmp(v0, v, sizeof(SchedVictim) * (size_t) n) != 0)
		t_fail(file, line, "an input was changed");
}

#define CHECK_VICTIMS(p, c, v, n, want_count, want_mask) \
	t_check_victims(__FILE__, __LINE__, (p), (c), (v), (n), (want_count), (want_mask))

/* c with the victims of mask removed, as the callers' counters would be after they end. */
static SchedCandidate
t_without(const SchedCandidate *c, const SchedVictim *v, int n, unsigned mask)
{
	SchedCandidate r = *c;
	int			i;

	for (i = 0; i < n; i++)
		if (mask & (1u << i))
		{
			r.node_live_attempts--;
			r.worker_live_attempts -= v[i].on_worker ? 1 : 0;
			r.reserved_cpu_millis -= v[i].reserve_cpu_millis;
			r.reserved_memory_mb -= v[i].reserve_memory_mb;
			r.reserved_gpus -= v[i].reserve_gpus;
		}
	return r;
}

/* The reasons c has for p once the victims of mask are gone. */
static SchedReasonSet
t_admission_without(const SchedPlacement *p, const SchedCandidate *c, const SchedVictim *v, int n,
					unsigned mask)
{
	SchedCandidate w = t_without(c, v, n, mask);

	return sched_admission(p, &w);
}

/* -1, nothing chosen, when even all victims gone leave c refusing p: too little freed,
 * a static reason, a slot only other workers' victims hold, no victims at all. */
TEST(preempt_all_removed_must_admit)
{
	SchedLabel eu[] = {{"zone", "eu"}};
	SchedPlacement p;
	SchedCandidate c,
				c2;
	SchedVictim v[3];

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_cpu_millis = 3000;
	c.slots = 4;
	c.worker_live_attempts = 2;
	c.node_live_attempts = 3;
	c.reserved_cpu_millis = 4000;	/* 500 + 1000 + 1500 + 1000 of attempts not victims */
	v[0] = mk_victim(1, 100, true, 500, 0, 0);
	v[1] = mk_victim(2, 200, true, 1000, 0, 0);
	v[2] = mk_victim(3, 300, false, 1500, 0, 0);
	CHECK_SET(sched_admission(&p, &c), BIT(CPU_EXHAUSTED));

	/* two victims free 1,500 of the 3,000 asked */
	CHECK_VICTIMS(&p, &c, v, 2, -1, 0);
	/* the third makes 3,000 exactly: all three are needed */
	CHECK_VICTIMS(&p, &c, v, 3, 3, 0x7);
	c2 = t_without(&c, v, 3, 0x7);
	CHECK_SET(sched_admission(&p, &c2), 0);
	c2 = t_without(&c, v, 3, 0x3);
	CHECK_SET(sched_admission(&p, &c2), BIT(CPU_EXHAUSTED));

	/* static reasons: no victim clears them */
	p.min_cpu_millis = 4001;
	CHECK_SET(t_admission_without(&p, &c, v, 3, 0x7), BIT(INSUFFICIENT_CPU));
	CHECK_VICTIMS(&p, &c, v, 3, -1, 0);
	p.min_cpu_millis = 0;
	p.reserve_cpu_millis = 5000;	/* more than the node has, not just more than is free */
	CHECK_VICTIMS(&p, &c, v, 3, -1, 0);
	p.reserve_cpu_millis = 3000;

	c2 = c;
	c2.has_worker = false;			/* capability_missing: only other workers' attempts */
	c2.worker_live_attempts = 0;
	v[0].on_worker = v[1].on_worker = false;
	CHECK_SET(t_admission_without(&p, &c2, v, 3, 0x7), BIT(CAPABILITY_MISSING));
	CHECK_VICTIMS(&p, &c2, v, 3, -1, 0);
	v[0].on_worker = v[1].on_worker = true;

	c2 = c;
	c2.management_status = SCHED_NODE_DRAINING;
	CHECK_VICTIMS(&p, &c2, v, 3, -1, 0);
	c2 = c;
	c2.scheduling_status = SCHED_WORKER_CORDONED;
	CHECK_VICTIMS(&p, &c2, v, 3, -1, 0);
	c2 = c;
	c2.last_heartbeat = p.heartbeat_cutoff - 1;
	CHECK_VICTIMS(&p, &c2, v, 3, -1, 0);
	p.pin_node_id = "node-b";
	CHECK_VICTIMS(&p, &c, v, 3, -1, 0);
	p.pin_node_id = "node-a";
	CHECK_VICTIMS(&p, &c, v, 3, 3, 0x7);
	p.pin_node_id = NULL;
	p.capability_version = "2.0";
	CHECK_VICTIMS(&p, &c, v, 3, -1, 0);
	p.capability_version = "1.0";
	p.required_labels = fx_labels(eu, 1);
	CHECK_VICTIMS(&p, &c, v, 3, -1, 0);
	p.required_labels = fx_labels(eu, 0);

	/* a full worker: victims of other workers on the node free no slot of this one */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.slots = 2;
	c.worker_live_attempts = 2;
	c.node_live_attempts = 4;
	c.reserved_cpu_millis = 2000;
	v[0] = mk_victim(1, 100, false, 1000, 0, 0);
	v[1] = mk_victim(1, 200, false, 1000, 0, 0);
	CHECK_SET(sched_admission(&p, &c), BIT(NO_FREE_SLOT));
	CHECK_VICTIMS(&p, &c, v, 2, -1, 0);
	CHECK_SET(t_admission_without(&p, &c, v, 2, 0x3), BIT(NO_FREE_SLOT));

	/* no victims: -1 when it does not fit, 0 when it does */
	CHECK_VICTIMS(&p, &c, v, 0, -1, 0);
	c.worker_live_attempts = 1;
	CHECK_VICTIMS(&p, &c, v, 0, 0, 0);
}

/* A request that fits with no victim removed gets 0 victims, not -1: every victim is
 * reprieved (the caller, preemption.c, skips count <= 0; it only asks for requests that
 * wait for capacity). */
TEST(preempt_none_when_it_already_fits)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedVictim v[3];

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_cpu_millis = 1000;
	c.slots = 4;
	c.worker_live_attempts = 3;
	c.node_live_attempts = 3;
	c.reserved_cpu_millis = 3000;
	v[0] = mk_victim(1, 100, true, 1000, 0, 0);
	v[1] = mk_victim(1, 200, true, 1000, 0, 0);
	v[2] = mk_victim(0, 300, true, 1000, 0, 0);
	CHECK_SET(sched_admission(&p, &c), 0);
	CHECK_VICTIMS(&p, &c, v, 3, 0, 0);
	/* one millicpu more asked, and one victim goes: the one of lowest priority */
	p.reserve_cpu_millis = 1001;
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x4);
}

/* A slot is needed; all victims hold one.  Among equal priorities the youngest (largest
 * dispatched_at) goes; among equal ages too, the last index. */
TEST(preempt_youngest_goes_among_equal_priorities)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedVictim v[3];

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.slots = 3;
	c.worker_live_attempts = 3;
	c.node_live_attempts = 3;
	CHECK_SET(sched_admission(&p, &c), BIT(NO_FREE_SLOT));
	v[0] = mk_victim(5, 100, true, 0, 0, 0);
	v[1] = mk_victim(5, 300, true, 0, 0, 0);
	v[2] = mk_victim(5, 200, true, 0, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x2);
	v[1].dispatched_at = 150;		/* now v[2] is the youngest */
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x4);
	v[0].dispatched_at = 250;		/* and now v[0] */
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x1);
	/* extremes: compared, not subtracted */
	v[0] = mk_victim(5, INT64_MAX, true, 0, 0, 0);
	v[1] = mk_victim(5, INT64_MIN, true, 0, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 2, 1, 0x1);
	v[0].dispatched_at = INT64_MIN;
	v[1].dispatched_at = INT64_MAX;
	CHECK_VICTIMS(&p, &c, v, 2, 1, 0x2);
	/* equal priority and age: the later index goes */
	v[0] = mk_victim(5, 100, true, 0, 0, 0);
	v[1] = mk_victim(5, 100, true, 0, 0, 0);
	v[2] = mk_victim(5, 100, true, 0, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x4);
	CHECK_VICTIMS(&p, &c, v, 2, 1, 0x2);
}

/* The lowest priority goes first, whatever the ages. */
TEST(preempt_lowest_priority_goes_first)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedVictim v[3];

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.slots = 3;
	c.worker_live_attempts = 3;
	c.node_live_attempts = 3;
	v[0] = mk_victim(7, 100, true, 0, 0, 0);
	v[1] = mk_victim(3, 100, true, 0, 0, 0);
	v[2] = mk_victim(5, 100, true, 0, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x2);
	/* priority before age: the oldest, of the lowest priority, goes */
	v[0] = mk_victim(3, 100, true, 0, 0, 0);
	v[1] = mk_victim(5, 900, true, 0, 0, 0);
	v[2] = mk_victim(4, 500, true, 0, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x1);
	/* negative and extreme priorities */
	v[0] = mk_victim(INT32_MAX, 100, true, 0, 0, 0);
	v[1] = mk_victim(INT32_MIN, 100, true, 0, 0, 0);
	v[2] = mk_victim(-1, 100, true, 0, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x2);
	v[1].priority = 0;
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x4);
}

/* Only victims on the candidate's worker free a slot of it; every victim on the node
 * frees its cpu, memory and gpus. */
TEST(preempt_on_worker_and_off_worker_victims)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedVictim v[3];

	/* a slot: the on-worker victim goes, although the off-worker one is lower */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.slots = 2;
	c.worker_live_attempts = 2;
	c.node_live_attempts = 3;
	c.reserved_cpu_millis = 2000;
	v[0] = mk_victim(1, 100, false, 1000, 0, 0);
	v[1] = mk_victim(8, 100, true, 1000, 0, 0);
	CHECK_SET(sched_admission(&p, &c), BIT(NO_FREE_SLOT));
	CHECK_VICTIMS(&p, &c, v, 2, 1, 0x2);

	/* cpu, a slot free: the off-worker victim goes, the only one freeing enough, although
	 * of higher priority than the on-worker one */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_cpu_millis = 1500;
	c.slots = 2;
	c.worker_live_attempts = 1;
	c.node_live_attempts = 3;
	c.reserved_cpu_millis = 4000;	/* 2,000 + 100 + 1,900 of others */
	v[0] = mk_victim(5, 100, false, 2000, 0, 0);
	v[1] = mk_victim(1, 100, true, 100, 0, 0);
	CHECK_SET(sched_admission(&p, &c), BIT(CPU_EXHAUSTED));
	CHECK_VICTIMS(&p, &c, v, 2, 1, 0x1);

	/* memory and gpus, all off the worker: X alone would do, but it is reprieved first
	 * (highest priority) and the two lower ones go */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_memory_mb = 4096;
	p.reserve_gpus = 1;
	c.node_live_attempts = 3;
	c.reserved_memory_mb = 8192;
	c.reserved_gpus = 2;
	v[0] = mk_victim(1, 100, false, 0, 4096, 0);	/* M */
	v[1] = mk_victim(2, 100, false, 0, 0, 1);		/* G */
	v[2] = mk_victim(3, 100, false, 0, 4096, 1);	/* X */
	CHECK_SET(sched_admission(&p, &c), BIT(MEMORY_EXHAUSTED) | BIT(GPUS_EXHAUSTED));
	CHECK_VICTIMS(&p, &c, v, 3, 2, 0x3);
	CHECK_SET(t_admission_without(&p, &c, v, 3, 0x4), 0);
	/* G holds no gpu now, and one is free: M alone goes (X, reprieved first, stays) */
	v[1].reserve_gpus = 0;
	c.reserved_gpus = 1;
	CHECK_SET(sched_admission(&p, &c), BIT(MEMORY_EXHAUSTED));	/* a gpu is free */
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x1);
	c.reserved_gpus = 2;			/* a gpu of no victim: only X frees one, and it alone goes */
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x4);

	/* a slot and cpu: one victim for each */
	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_cpu_millis = 1000;
	c.slots = 2;
	c.worker_live_attempts = 2;
	c.node_live_attempts = 3;
	c.reserved_cpu_millis = 4000;
	v[0] = mk_victim(1, 100, false, 3000, 0, 0);
	v[1] = mk_victim(9, 100, true, 0, 0, 0);
	CHECK_SET(sched_admission(&p, &c), BIT(NO_FREE_SLOT) | BIT(CPU_EXHAUSTED));
	CHECK_VICTIMS(&p, &c, v, 2, 2, 0x3);
	/* the slot's victim also frees enough cpu: it alone goes */
	v[1].reserve_cpu_millis = 1000;
	CHECK_VICTIMS(&p, &c, v, 2, 1, 0x2);
}

/* No single victim frees enough: the two of lowest priority go. */
TEST(preempt_two_small_victims)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedVictim v[4];

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	p.reserve_cpu_millis = 1500;
	c.slots = 8;
	c.worker_live_attempts = 4;
	c.node_live_attempts = 4;
	c.reserved_cpu_millis = 4000;
	v[0] = mk_victim(4, 100, true, 1000, 0, 0);
	v[1] = mk_victim(1, 100, true, 1000, 0, 0);
	v[2] = mk_victim(3, 100, true, 1000, 0, 0);
	v[3] = mk_victim(2, 100, true, 1000, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 4, 2, 0xa);
	/* 2,000 asked: still two */
	p.reserve_cpu_millis = 2000;
	CHECK_VICTIMS(&p, &c, v, 4, 2, 0xa);
	/* 2,001: three, only the highest stays */
	p.reserve_cpu_millis = 2001;
	CHECK_VICTIMS(&p, &c, v, 4, 3, 0xe);
	/* 1,000: one */
	p.reserve_cpu_millis = 1000;
	CHECK_VICTIMS(&p, &c, v, 4, 1, 0x2);
}

/* Kubernetes' order is greedy, from the highest priority down, not the fewest victims:
 * reprieving a high-priority victim first can leave two lower ones to go where the high
 * one alone would have done, and can keep lower ones where a higher one goes. */
TEST(preempt_reprieve_order_is_kubernetes)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedVictim v[3];

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.slots = 8;
	c.worker_live_attempts = 3;
	c.node_live_attempts = 3;
	c.reserved_cpu_millis = 4000;

	/* H (2,000) alone frees the 2,000 asked, but it is reprieved first: L1 and L2 go */
	p.reserve_cpu_millis = 2000;
	v[0] = mk_victim(9, 100, true, 2000, 0, 0);	/* H */
	v[1] = mk_victim(1, 100, true, 1000, 0, 0);	/* L1 */
	v[2] = mk_victim(2, 100, true, 1000, 0, 0);	/* L2 */
	CHECK_SET(t_admission_without(&p, &c, v, 3, 0x1), 0);
	CHECK_VICTIMS(&p, &c, v, 3, 2, 0x6);

	/* 1,500 asked; H must go (M and L together free 1,100), then M and L both stay,
	 * although L is the lowest priority */
	p.reserve_cpu_millis = 1500;
	v[0] = mk_victim(9, 100, true, 2000, 0, 0);	/* H */
	v[1] = mk_victim(5, 100, true, 1000, 0, 0);	/* M */
	v[2] = mk_victim(1, 100, true, 100, 0, 0);		/* L */
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x1);

	/* ages alike: the oldest (2,000) is reprieved first, the two younger go */
	p.reserve_cpu_millis = 2000;
	v[0] = mk_victim(5, 100, true, 2000, 0, 0);	/* oldest */
	v[1] = mk_victim(5, 300, true, 1000, 0, 0);
	v[2] = mk_victim(5, 200, true, 1000, 0, 0);
	CHECK_VICTIMS(&p, &c, v, 3, 2, 0x6);
	/* the big one the youngest: reprieved last, it alone goes */
	v[0].dispatched_at = 400;
	CHECK_VICTIMS(&p, &c, v, 3, 1, 0x1);
}

static int
t_pcmp(int va, int32_t ta, const char *na, int vb, int32_t tb, const char *nb)
{
	int			ab = sign(sched_preemption_cmp(va, ta, na, vb, tb, nb));
	int			ba = sign(sched_preemption_cmp(vb, tb, nb, va, ta, na));

	return ab == -ba ? ab : 99;		/* 99: not antisymmetric */
}

typedef struct TPreemptOption
{
	int			victims;
	int32_t		top;
	const char *node;
} TPreemptOption;

static int
t_option_cmp(const void *a, const void *b)
{
	const TPreemptOption *x = (const TPreemptOption *) a;
	const TPreemptOption *y = (const TPreemptOption *) b;

	return sched_preemption_cmp(x->victims, x->top, x->node, y->victims, y->top, y->node);
}

/* Fewer victims, then a lower top priority, then the smaller node_id bytewise. */
TEST(preemption_cmp_order)
{
	char		copy[] = "node-a";
	TPreemptOption o[7] = {
		{2, 5, "b"}, {1, 9, "z"}, {2, 3, "z"}, {2, 5, "a"}, {3, INT32_MIN, "a"},
		{1, 9, "node-10"}, {2, -7, "q"}
	};
	int			i,
				j;

	CHECK_INT(t_pcmp(1, 9, "z", 2, 0, "a"), -1);		/* fewer victims, whatever else */
	CHECK_INT(t_pcmp(1, INT32_MAX, "z", 2, INT32_MIN, "a"), -1);
	CHECK_INT(t_pcmp(0, 0, "z", INT32_MAX, 0, "a"), -1);
	CHECK_INT(t_pcmp(2, 3, "z", 2, 5, "a"), -1);		/* then the lower top priority */
	CHECK_INT(t_pcmp(2, INT32_MIN, "z", 2, INT32_MAX, "a"), -1);	/* compared, not subtracted */
	CHECK_INT(t_pcmp(2, -5, "z", 2, -3, "a"), -1);
	CHECK_INT(t_pcmp(2, 5, "a", 2, 5, "b"), -1);		/* then node_id */
	CHECK_INT(t_pcmp(2, 5, "B", 2, 5, "a"), -1);		/* bytewise: 'B' < 'a' */
	CHECK_INT(t_pcmp(2, 5, "node-10", 2, 5, "node-9"), -1);
	CHECK_INT(t_pcmp(2, 5, "z", 2, 5, "\xc3\xa9"), -1);	/* UTF-8 after ASCII */
	CHECK_INT(t_pcmp(2, 5, "node", 2, 5, "node-a"), -1);
	CHECK_INT(t_pcmp(2, 5, "node-a", 2, 5, copy), 0);

	qsort(o, 7, sizeof o[0], t_option_cmp);
	CHECK_STR(o[0].node, "node-10");
	CHECK_STR(o[1].node, "z");
	CHECK_INT(o[1].victims, 1);
	CHECK_STR(o[2].node, "q");
	CHECK_STR(o[3].node, "z");
	CHECK_INT(o[3].victims, 2);
	CHECK_STR(o[4].node, "a");
	CHECK_INT(o[4].top, 5);
	CHECK_STR(o[5].node, "b");
	CHECK_STR(o[6].node, "a");
	CHECK_INT(o[6].victims, 3);
	for (i = 0; i < 7; i++)
		for (j = 0; j < 7; j++)
			CHECK_INT(t_pcmp(o[i].victims, o[i].top, o[i].node, o[j].victims, o[j].top, o[j].node),
					  i < j ? -1 : i > j ? 1 : 0);
}

/* ------------------------------------------------------------------------------------ */
/* Label sets                                                                           */
/* ------------------------------------------------------------------------------------ */

TEST(labels_sort_and_get)
{
	SchedLabel items[] = {
		{"zone", "eu-1"}, {"\xc3\xa9quipe", "infra"}, {"Tier", "T"}, {"tier", "fast"},
		{"a", "1"}, {"B", "2"}, {"", "empty-key"}, {"tier-2", "x"}
	};
	SchedLabelSet s = fx_labels(items, 8);
	SchedLabelSet empty = fx_labels(NULL, 0);
	SchedLabel one[] = {{"k", "v"}};
	SchedLabelSet s1 = fx_labels(one, 1);
	char		key[] = "tier";
	int			i;

	CHECK(sched_labels_sort(&s));
	CHECK_INT(s.count, 8);
	CHECK_STR(s.items[0].key, "");
	CHECK_STR(s.items[1].key, "B");
	CHECK_STR(s.items[2].key, "Tier");
	CHECK_STR(s.items[3].key, "a");
	CHECK_STR(s.items[4].key, "tier");
	CHECK_STR(s.items[5].key, "tier-2");
	CHECK_STR(s.items[6].key, "zone");
	CHECK_STR(s.items[7].key, "\xc3\xa9quipe");
	for (i = 1; i < s.count; i++)
		CHECK(ref_bytecmp(s.items[i - 1].key, s.items[i].key) < 0);
	/* keys keep their values */
	CHECK_STR(s.items[4].value, "fast");
	CHECK_STR(s.items[2].value, "T");
	CHECK_STR(s.items[0].value, "empty-key");

	CHECK_STR(sched_labels_get(&s, key), "fast");
	CHECK_STR(sched_labels_get(&s, "Tier"), "T");
	CHECK_STR(sched_labels_get(&s, ""), "empty-key");
	CHECK_STR(sched_labels_get(&s, "B"), "2");
	CHECK_STR(sched_labels_get(&s, "\xc3\xa9quipe"), "infra");
	CHECK_STR(sched_labels_get(&s, "zone"), "eu-1");
	CHECK(sched_labels_get(&s, "TIER") == NULL);
	CHECK(sched_labels_get(&s, "tie") == NULL);
	CHECK(sched_labels_get(&s, "tier-") == NULL);
	CHECK(sched_labels_get(&s, "b") == NULL);
	CHECK(sched_labels_get(&s, "zzz") == NULL);
	CHECK(sched_labels_get(&s, "\x01") == NULL);
	CHECK(sched_labels_get(&empty, "tier") == NULL);
	CHECK(sched_labels_get(&empty, "") == NULL);
	CHECK(sched_labels_sort(&empty));
	CHECK_INT(empty.count, 0);
	CHECK(sched_labels_sort(&s1));
	CHECK_STR(sched_labels_get(&s1, "k"), "v");
	CHECK(sched_labels_get(&s1, "j") == NULL);
	CHECK(sched_labels_get(&s1, "l") == NULL);
	/* already sorted stays sorted */
	CHECK(sched_labels_sort(&s));
	CHECK_STR(s.items[7].key, "\xc3\xa9quipe");
}

TEST(labels_sort_duplicate_key_is_false)
{
	char		dupkey[] = "tier";		/* same bytes, another pointer */
	SchedLabel items[] = {{"zone", "eu"}, {"tier", "fast"}, {"gpu", "a100"}, {dupkey, "slow"}};
	SchedLabelSet s = fx_labels(items, 4);
	SchedLabel pair[] = {{"k", "v"}, {"k", "v"}};
	SchedLabelSet s2 = fx_labels(pair, 2);
	SchedLabel near[] = {{"k", "v"}, {"K", "v"}, {"k ", "v"}};
	SchedLabelSet s3 = fx_labels(near, 3);
	int			seen_fast = 0,
				seen_slow = 0,
				seen_gpu = 0,
				seen_zone = 0;
	int			i;

	CHECK(!sched_labels_sort(&s));
	/* content unchanged (order may be) */
	CHECK_INT(s.count, 4);
	for (i = 0; i < 4; i++)
	{
		if (strcmp(s.items[i].key, "tier") == 0 && strcmp(s.items[i].value, "fast") == 0)
			seen_fast++;
		if (strcmp(s.items[i].key, "tier") == 0 && strcmp(s.items[i].value, "slow") == 0)
			seen_slow++;
		if (strcmp(s.items[i].key, "gpu") == 0 && strcmp(s.items[i].value, "a100") == 0)
			seen_gpu++;
		if (strcmp(s.items[i].key, "zone") == 0 && strcmp(s.items[i].value, "eu") == 0)
			seen_zone++;
	}
	CHECK(seen_fast == 1 && seen_slow == 1 && seen_gpu == 1 && seen_zone == 1);

	CHECK(!sched_labels_sort(&s2));
	/* differ by case or by a byte: not duplicates */
	CHECK(sched_labels_sort(&s3));
}

/* ------------------------------------------------------------------------------------ */
/* Label expressions (include/placement.h: SchedLabelOp, sched_label_number, versions)  */
/* ------------------------------------------------------------------------------------ */

/* A required label with operator op, zero past what the operator reads. */
static SchedLabel
lx_label(const char *key, SchedLabelOp op)
{
	SchedLabel	l;

	memset(&l, 0, sizeof l);
	l.key = key;
	l.op = op;
	return l;
}

static SchedLabel
lx_eq(const char *key, const char *value)
{
	SchedLabel	l = lx_label(key, SCHED_LABEL_EQ);

	l.value = value;
	return l;
}

/* IN or NOT_IN over values[0 .. n-1]. */
static SchedLabel
lx_list(const char *key, SchedLabelOp op, const char *const *values, int n)
{
	SchedLabel	l = lx_label(key, op);

	l.values = values;
	l.nvalues = n;
	return l;
}

/* GT or LT. */
static SchedLabel
lx_num(const char *key, SchedLabelOp op, double number)
{
	SchedLabel	l = lx_label(key, op);

	l.number = number;
	return l;
}

static SchedLabel
lx_ver(const char *key, const SchedVersionBound *bounds, int n)
{
	SchedLabel	l = lx_label(key, SCHED_LABEL_VERSION);

	l.bounds = bounds;
	l.nbounds = n;
	return l;
}

static bool
lx_sat(SchedLabel req, const SchedLabelSet *have)
{
	return sched_label_satisfied(&req, have);
}

static void
t_check_number(const char *file, int line, const char *s, double want)
{
	double		out = 12345.678;

	if (!sched_label_number(s, &out))
		t_fail(file, line, "sched_label_number(\"%s\") is false, want %.17g", s, want);
	else if (out != want)
		t_fail(file, line, "sched_label_number(\"%s\") = %.17g, want %.17g", s, out, want);
}

static void
t_check_not_number(const char *file, int line, const char *s)
{
	double		out = 12345.678;

	if (sched_label_number(s, &out))
		t_fail(file, line, "sched_label_number(\"%s\") is true (%.17g), want false", s, out);
}

#define CHECK_NUMBER(s, want) t_check_number(__FILE__, __LINE__, (s), (want))
#define CHECK_NOT_NUMBER(s) t_check_not_number(__FILE__, __LINE__, (s))

static void
t_check_version(const char *file, int line, const char *s, int n, const int32_t *parts)
{
	SchedVersion v;
	int			i;

	memset(&v, 0x5a, sizeof v);
	if (!sched_version_parse(s, &v))
	{
		t_fail(file, line, "sched_version_parse(\"%s\") is false, want %d parts", s, n);
		return;
	}
	if (v.nparts != n)
	{
		t_fail(file, line, "sched_version_parse(\"%s\"): %d parts, want %d", s, v.nparts, n);
		return;
	}
	for (i = 0; i < n; i++)
		if (v.parts[i] != parts[i])
			t_fail(file, line, "sched_version_parse(\"%s\"): part %d is %" PRId32 ", want %" PRId32,
				   s, i, v.parts[i], parts[i]);
}

static void
t_check_not_version(const char *file, int line, const char *s)
{
	SchedVersion v;

	if (sched_version_parse(s, &v))
		t_fail(file, line, "sched_version_parse(\"%s\") is true (%d parts), want false", s, v.nparts);
}

/* CHECK_VERSION("1.2", 1, 2): parses, into exactly these parts. */
#define CHECK_VERSION(s, ...) \
	t_check_version(__FILE__, __LINE__, (s), \
					(int) (sizeof((const int32_t[]) {__VA_ARGS__}) / sizeof(int32_t)), \
					(const int32_t[]) {__VA_ARGS__})
#define CHECK_NOT_VERSION(s) t_check_not_version(__FILE__, __LINE__, (s))

/* sched_version_range_parse into a buffer one bound larger, whose last bound must stay. */
static int
lx_range(const char *s, SchedVersionBound *bounds)
{
	SchedVersionBound buf[SCHED_MAX_VERSION_BOUNDS + 1];
	SchedVersionBound canary;
	int			n;

	memset(buf, 0x5a, sizeof buf);
	memset(&canary, 0x5a, sizeof canary);
	n = sched_version_range_parse(s, buf);
	if (memcmp(&buf[SCHED_MAX_VERSION_BOUNDS], &canary, sizeof canary) != 0)
		return -100;			/* wrote past SCHED_MAX_VERSION_BOUNDS */
	if (bounds != NULL)
		memcpy(bounds, buf, sizeof(SchedVersionBound) * SCHED_MAX_VERSION_BOUNDS);
	return n;
}

static void
t_check_range(const char *file, int line, const char *s, int n, const SchedVersionBound *want)
{
	SchedVersionBound got[SCHED_MAX_VERSION_BOUNDS];
	int			k = lx_range(s, got);
	int			i,
				j;

	if (k != n)
	{
		t_fail(file, line, "sched_version_range_parse(\"%s\") = %d, want %d", s, k, n);
		return;
	}
	for (i = 0; i < n; i++)
	{
		if (got[i].cmp != want[i].cmp)
			t_fail(file, line, "\"%s\" bound %d: cmp %d, want %d", s, i, (int) got[i].cmp,
				   (int) want[i].cmp);
		if (got[i].version.nparts != want[i].version.nparts)
		{
			t_fail(file, line, "\"%s\" bound %d: %d parts, want %d", s, i, got[i].version.nparts,
				   want[i].version.nparts);
			continue;
		}
		for (j = 0; j < want[i].version.nparts; j++)
			if (got[i].version.parts[j] != want[i].version.parts[j])
				t_fail(file, line, "\"%s\" bound %d part %d: %" PRId32 ", want %" PRId32, s, i, j,
					   got[i].version.parts[j], want[i].version.parts[j]);
	}
}

static void
t_check_not_range(const char *file, int line, const char *s)
{
	int			k = lx_range(s, NULL);

	if (k != -1)
		t_fail(file, line, "sched_version_range_parse(\"%s\") = %d, want -1%s", s, k,
			   k == -100 ? " (and it wrote past the buffer)" : "");
}

/* CHECK_RANGE(">=1.2", {SCHED_VCMP_GE, {2, {1, 2}}}): exactly these bounds. */
#define CHECK_RANGE(s, ...) \
	t_check_range(__FILE__, __LINE__, (s), \
				  (int) (sizeof((const SchedVersionBound[]) {__VA_ARGS__}) / sizeof(SchedVersionBound)), \
				  (const SchedVersionBound[]) {__VA_ARGS__})
#define CHECK_NOT_RANGE(s) t_check_not_range(__FILE__, __LINE__, (s))

/* A version parsed by sched_version_parse; a failed parse fails the case (nparts -1). */
static SchedVersion
lx_v(const char *s)
{
	SchedVersion v;

	memset(&v, 0, sizeof v);
	if (!sched_version_parse(s, &v))
	{
		t_fail(__FILE__, __LINE__, "fixture \"%s\" is not a version", s);
		v.nparts = -1;
	}
	return v;
}

/* sched_version_cmp of two version strings. */
static int
lx_vcmp(const char *a, const char *b)
{
	SchedVersion x = lx_v(a);
	SchedVersion y = lx_v(b);

	return sched_version_cmp(&x, &y);
}

/* Whether version s meets the bounds of range r (both parsed by the core). */
static int
lx_in_range(const char *s, const char *r)
{
	SchedVersionBound b[SCHED_MAX_VERSION_BOUNDS];
	SchedVersion v = lx_v(s);
	int			n = sched_version_range_parse(r, b);

	if (n < 1)
	{
		t_fail(__FILE__, __LINE__, "fixture \"%s\" is not a version range", r);
		return -1;
	}
	return sched_version_in_range(&v, b, n) ? 1 : 0;
}

TEST(label_number_grammar)
{
	char		s64[65];
	char		neg64[65];
	char		frac64[65];
	int			i;

	/* -?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)? */
	CHECK_NUMBER("0", 0.0);
	CHECK_NUMBER("7", 7.0);
	CHECK_NUMBER("-1", -1.0);
	CHECK_NUMBER("007", 7.0);
	CHECK_NUMBER("1.5", 1.5);
	CHECK_NUMBER("-2.25", -2.25);
	CHECK_NUMBER("1.0", 1.0);
	CHECK_NUMBER("10.000", 10.0);
	CHECK_NUMBER("0.5", 0.5);
	CHECK_NUMBER("-0.5", -0.5);
	CHECK_NUMBER("1e3", 1000.0);
	CHECK_NUMBER("1E3", 1000.0);
	CHECK_NUMBER("1e+3", 1000.0);
	CHECK_NUMBER("1e0003", 1000.0);
	CHECK_NUMBER("1e-3", 1e-3);
	CHECK_NUMBER("2.5E-1", 0.25);
	CHECK_NUMBER("-1.5e2", -150.0);
	CHECK_NUMBER("1e0", 1.0);
	CHECK_NUMBER("-0", 0.0);	/* -0 == 0: a number, equal to zero */
	/* the range of a double, both ends; exact zero with any exponent is no underflow */
	CHECK_NUMBER("1e308", 1e308);
	CHECK_NUMBER("1.7976931348623157e308", DBL_MAX);
	CHECK_NUMBER("-1.7976931348623157e308", -DBL_MAX);
	CHECK_NUMBER("2.2250738585072014e-308", DBL_MIN);
	CHECK_NUMBER("0e-999", 0.0);
	CHECK_NUMBER("0.000e999", 0.0);

	/* no sign "+", no spaces, digits on both sides of the dot, no hex, inf or nan */
	CHECK_NOT_NUMBER("");
	CHECK_NOT_NUMBER("-");
	CHECK_NOT_NUMBER("+1");
	CHECK_NOT_NUMBER("+0");
	CHECK_NOT_NUMBER(" 1");
	CHECK_NOT_NUMBER("1 ");
	CHECK_NOT_NUMBER("\t1");
	CHECK_NOT_NUMBER("1\n");
	CHECK_NOT_NUMBER("1.");
	CHECK_NOT_NUMBER("-1.");
	CHECK_NOT_NUMBER(".5");
	CHECK_NOT_NUMBER("-.5");
	CHECK_NOT_NUMBER("0x10");
	CHECK_NOT_NUMBER("0X10");
	CHECK_NOT_NUMBER("0x1p3");
	CHECK_NOT_NUMBER("inf");
	CHECK_NOT_NUMBER("-inf");
	CHECK_NOT_NUMBER("INF");
	CHECK_NOT_NUMBER("infinity");
	CHECK_NOT_NUMBER("nan");
	CHECK_NOT_NUMBER("NaN");
	CHECK_NOT_NUMBER("-nan");
	CHECK_NOT_NUMBER("1e");
	CHECK_NOT_NUMBER("1e+");
	CHECK_NOT_NUMBER("1e-");
	CHECK_NOT_NUMBER("e3");
	CHECK_NOT_NUMBER("1ee3");
	CHECK_NOT_NUMBER("1e3.5");
	CHECK_NOT_NUMBER("1e3e3");
	CHECK_NOT_NUMBER("1.2.3");
	CHECK_NOT_NUMBER("1,5");
	CHECK_NOT_NUMBER("--1");
	CHECK_NOT_NUMBER("-+1");
	CHECK_NOT_NUMBER("1-");
	CHECK_NOT_NUMBER("1_000");
	CHECK_NOT_NUMBER("eight");
	CHECK_NOT_NUMBER("\xd9\xa1");		/* ARABIC-INDIC DIGIT ONE */
	CHECK_NOT_NUMBER("\xef\xbc\x91");	/* FULLWIDTH DIGIT ONE */
	CHECK_NOT_NUMBER("1\xc2\xa0");		/* trailing no-break space */
	/* out of the range of a double: overflow, or underflow to zero */
	CHECK_NOT_NUMBER("1e999");
	CHECK_NOT_NUMBER("-1e999");
	CHECK_NOT_NUMBER("1e309");
	CHECK_NOT_NUMBER("1.8e308");
	CHECK_NOT_NUMBER("1e-999");
	CHECK_NOT_NUMBER("-1e-999");
	CHECK_NOT_NUMBER("1e-400");

	/* at most 64 bytes */
	s64[0] = '1';
	neg64[0] = '-';
	neg64[1] = '1';
	frac64[0] = '0';
	frac64[1] = '.';
	for (i = 1; i < 64; i++)
		s64[i] = '0';
	for (i = 2; i < 64; i++)
		neg64[i] = '0', frac64[i] = '0';
	frac64[63] = '5';
	s64[64] = neg64[64] = frac64[64] = '\0';
	CHECK_INT(strlen(s64), 64);
	CHECK_NUMBER(s64, 1e63);
	CHECK_NUMBER(neg64, -1e62);
	CHECK_NUMBER(frac64, 5e-62);
	/* no length limit: 65 bytes are a number too */
	{
		char		s65[66];
		char		frac65[66];

		memcpy(s65, s64, 64);
		s65[64] = '0';
		s65[65] = '\0';
		memcpy(frac65, frac64, 63);
		frac65[63] = '0';
		frac65[64] = '5';
		frac65[65] = '\0';
		CHECK_NUMBER(s65, 1e64);
		CHECK_NUMBER(frac65, 5e-63);
	}
}

TEST(label_expr_eq_in_not_in)
{
	SchedLabel	items[] = {{"gpu", "a100"}, {"tier", "fast"}, {"void", ""}, {"zone", "eu-1"}};
	SchedLabelSet have = fx_labels(items, 4);
	SchedLabelSet none = fx_labels(NULL, 0);
	static const char *const eu12[] = {"eu-1", "eu-2"};
	static const char *const eu23[] = {"eu-2", "eu-3"};
	static const char *const eu21[] = {"eu-2", "eu-1"};
	static const char *const eu1[] = {"eu-1"};
	static const char *const eu2[] = {"eu-2"};
	static const char *const near[] = {"EU-1", "eu", "eu-1 ", "eu-10", ""};
	static const char *const empty[] = {""};
	static const char *const r1[] = {"r1"};
	char		eu1_copy[] = "eu-1";
	const char *copied[1];

	CHECK(sched_labels_sort(&have));

	/* EQ: present with that value (the plain label) */
	CHECK(lx_sat(lx_eq("tier", "fast"), &have));
	CHECK(!lx_sat(lx_eq("tier", "slow"), &have));
	CHECK(!lx_sat(lx_eq("tier", "Fast"), &have));
	CHECK(!lx_sat(lx_eq("rack", "r1"), &have));
	CHECK(!lx_sat(lx_eq("rack", ""), &have));
	CHECK(lx_sat(lx_eq("void", ""), &have));
	CHECK(!lx_sat(lx_eq("tier", "fast"), &none));

	/* IN: present, its value one of the list */
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_IN, eu12, 2), &have));
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_IN, eu21, 2), &have));		/* last of the list */
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_IN, eu1, 1), &have));
	CHECK(!lx_sat(lx_list("zone", SCHED_LABEL_IN, eu23, 2), &have));
	CHECK(!lx_sat(lx_list("zone", SCHED_LABEL_IN, near, 5), &have));		/* bytewise, whole value */
	CHECK(!lx_sat(lx_list("rack", SCHED_LABEL_IN, r1, 1), &have));		/* absent */
	CHECK(!lx_sat(lx_list("rack", SCHED_LABEL_IN, empty, 1), &have));	/* absent is not "" */
	CHECK(lx_sat(lx_list("void", SCHED_LABEL_IN, empty, 1), &have));
	CHECK(lx_sat(lx_list("void", SCHED_LABEL_IN, near, 5), &have));		/* "" is listed last */
	CHECK(!lx_sat(lx_list("zone", SCHED_LABEL_IN, eu1, 1), &none));
	copied[0] = eu1_copy;												/* by content */
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_IN, copied, 1), &have));

	/* NOT_IN: absent, or present with a value none of the list */
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, eu2, 1), &have));
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, eu23, 2), &have));
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, near, 4), &have));
	CHECK(!lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, eu1, 1), &have));
	CHECK(!lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, eu12, 2), &have));
	CHECK(!lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, eu21, 2), &have));
	CHECK(!lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, copied, 1), &have));
	CHECK(lx_sat(lx_list("rack", SCHED_LABEL_NOT_IN, r1, 1), &have));		/* absent key matches */
	CHECK(lx_sat(lx_list("rack", SCHED_LABEL_NOT_IN, empty, 1), &have));
	CHECK(lx_sat(lx_list("zone", SCHED_LABEL_NOT_IN, eu1, 1), &none));
	CHECK(!lx_sat(lx_list("void", SCHED_LABEL_NOT_IN, empty, 1), &have));
	CHECK(lx_sat(lx_list("void", SCHED_LABEL_NOT_IN, eu1, 1), &have));
}

TEST(label_expr_exists)
{
	SchedLabel	items[] = {{"tier", "fast"}, {"void", ""}};
	SchedLabelSet have = fx_labels(items, 2);
	SchedLabelSet none = fx_labels(NULL, 0);

	CHECK(sched_labels_sort(&have));
	CHECK(lx_sat(lx_label("tier", SCHED_LABEL_EXISTS), &have));
	CHECK(lx_sat(lx_label("void", SCHED_LABEL_EXISTS), &have));		/* "" is present */
	CHECK(!lx_sat(lx_label("rack", SCHED_LABEL_EXISTS), &have));
	CHECK(!lx_sat(lx_label("Tier", SCHED_LABEL_EXISTS), &have));
	CHECK(!lx_sat(lx_label("tier", SCHED_LABEL_EXISTS), &none));
	CHECK(!lx_sat(lx_label("tier", SCHED_LABEL_NOT_EXISTS), &have));
	CHECK(!lx_sat(lx_label("void", SCHED_LABEL_NOT_EXISTS), &have));
	CHECK(lx_sat(lx_label("rack", SCHED_LABEL_NOT_EXISTS), &have));
	CHECK(lx_sat(lx_label("tie", SCHED_LABEL_NOT_EXISTS), &have));
	CHECK(lx_sat(lx_label("tier", SCHED_LABEL_NOT_EXISTS), &none));
}

TEST(label_expr_gt_lt)
{
	SchedLabel	items[] = {
		{"cores", "8"}, {"mem", "-2.5"}, {"ratio", "1e3"}, {"quarter", "2.5E-1"}, {"neg0", "-0"},
		{"zero", "0"}, {"big", "1.7976931348623157e308"},
		/* not numbers */
		{"name", "eight"}, {"hex", "0x10"}, {"plus", "+9"}, {"space", " 9"}, {"dot", "9."},
		{"lead", ".5"}, {"inf", "inf"}, {"nan", "nan"}, {"over", "1e999"}, {"under", "1e-999"},
		{"empty", ""}, {"ver", "1.2.3"}
	};
	SchedLabelSet have = fx_labels(items, (int) (sizeof items / sizeof items[0]));
	static const char *const junk[] = {"name", "hex", "plus", "space", "dot", "lead", "inf", "nan",
		"over", "under", "empty", "ver", "absent"};
	size_t		i;

	CHECK(sched_labels_sort(&have));

	/* strictly greater / less: equality is neither */
	CHECK(lx_sat(lx_num("cores", SCHED_LABEL_GT, 7), &have));
	CHECK(lx_sat(lx_num("cores", SCHED_LABEL_GT, 7.999), &have));
	CHECK(!lx_sat(lx_num("cores", SCHED_LABEL_GT, 8), &have));
	CHECK(!lx_sat(lx_num("cores", SCHED_LABEL_GT, 8.5), &have));
	CHECK(!lx_sat(lx_num("cores", SCHED_LABEL_LT, 8), &have));
	CHECK(!lx_sat(lx_num("cores", SCHED_LABEL_LT, 7.5), &have));
	CHECK(lx_sat(lx_num("cores", SCHED_LABEL_LT, 8.001), &have));
	CHECK(lx_sat(lx_num("cores", SCHED_LABEL_LT, 100), &have));
	CHECK(lx_sat(lx_num("cores", SCHED_LABEL_GT, -8), &have));
	/* as numbers, not strings: "8" < "10" */
	CHECK(lx_sat(lx_num("cores", SCHED_LABEL_LT, 10), &have));
	/* negative */
	CHECK(lx_sat(lx_num("mem", SCHED_LABEL_GT, -3), &have));
	CHECK(lx_sat(lx_num("mem", SCHED_LABEL_LT, -2), &have));
	CHECK(!lx_sat(lx_num("mem", SCHED_LABEL_GT, -2.5), &have));
	CHECK(!lx_sat(lx_num("mem", SCHED_LABEL_LT, -2.5), &have));
	CHECK(!lx_sat(lx_num("mem", SCHED_LABEL_GT, 0), &have));
	/* exponent forms */
	CHECK(lx_sat(lx_num("ratio", SCHED_LABEL_GT, 999), &have));
	CHECK(!lx_sat(lx_num("ratio", SCHED_LABEL_GT, 1000), &have));
	CHECK(!lx_sat(lx_num("ratio", SCHED_LABEL_LT, 1000), &have));
	CHECK(lx_sat(lx_num("ratio", SCHED_LABEL_LT, 1000.5), &have));
	CHECK(lx_sat(lx_num("quarter", SCHED_LABEL_GT, 0.2499), &have));
	CHECK(!lx_sat(lx_num("quarter", SCHED_LABEL_GT, 0.25), &have));
	CHECK(!lx_sat(lx_num("quarter", SCHED_LABEL_LT, 0.25), &have));
	CHECK(lx_sat(lx_num("quarter", SCHED_LABEL_LT, 0.2501), &have));
	/* "-0" is the number 0: neither greater nor less than 0 (or -0) */
	CHECK(!lx_sat(lx_num("neg0", SCHED_LABEL_GT, 0), &have));
	CHECK(!lx_sat(lx_num("neg0", SCHED_LABEL_LT, 0), &have));
	CHECK(!lx_sat(lx_num("neg0", SCHED_LABEL_GT, -0.0), &have));
	CHECK(!lx_sat(lx_num("neg0", SCHED_LABEL_LT, -0.0), &have));
	CHECK(!lx_sat(lx_num("zero", SCHED_LABEL_GT, -0.0), &have));
	CHECK(!lx_sat(lx_num("zero", SCHED_LABEL_LT, -0.0), &have));
	CHECK(lx_sat(lx_num("neg0", SCHED_LABEL_GT, -1e-300), &have));
	CHECK(lx_sat(lx_num("neg0", SCHED_LABEL_LT, 1e-300), &have));
	/* the largest double */
	CHECK(lx_sat(lx_num("big", SCHED_LABEL_GT, 1e308), &have));
	CHECK(!lx_sat(lx_num("big", SCHED_LABEL_GT, DBL_MAX), &have));
	CHECK(!lx_sat(lx_num("big", SCHED_LABEL_LT, DBL_MAX), &have));

	/* a value that is not a number, or no value, fails both, whatever the bound */
	for (i = 0; i < sizeof junk / sizeof junk[0]; i++)
	{
		if (lx_sat(lx_num(junk[i], SCHED_LABEL_GT, -DBL_MAX), &have))
			t_fail(__FILE__, __LINE__, "\"%s\" (%s) is greater than -DBL_MAX", junk[i],
				   sched_labels_get(&have, junk[i]) ? sched_labels_get(&have, junk[i]) : "absent");
		if (lx_sat(lx_num(junk[i], SCHED_LABEL_LT, DBL_MAX), &have))
			t_fail(__FILE__, __LINE__, "\"%s\" (%s) is less than DBL_MAX", junk[i],
				   sched_labels_get(&have, junk[i]) ? sched_labels_get(&have, junk[i]) : "absent");
		if (lx_sat(lx_num(junk[i], SCHED_LABEL_GT, 0), &have) ||
			lx_sat(lx_num(junk[i], SCHED_LABEL_LT, 0), &have))
			t_fail(__FILE__, __LINE__, "\"%s\" compares with 0", junk[i]);
	}
}

TEST(version_parse)
{
	CHECK_VERSION("1", 1);
	CHECK_VERSION("0", 0);
	CHECK_VERSION("1.2", 1, 2);
	CHECK_VERSION("1.2.10", 1, 2, 10);
	CHECK_VERSION("10.0.3", 10, 0, 3);
	CHECK_VERSION("1.2.0", 1, 2, 0);
	CHECK_VERSION("007.08", 7, 8);
	CHECK_VERSION("535.104.05", 535, 104, 5);
	/* 1 to 9 digits, at most SCHED_MAX_VERSION_PART */
	CHECK_VERSION("999999999", 999999999);
	CHECK_VERSION("000000001.123456789", 1, 123456789);
	CHECK_INT(SCHED_MAX_VERSION_PART, 999999999);
	CHECK_NOT_VERSION("1000000000");
	CHECK_NOT_VERSION("9999999999");
	CHECK_NOT_VERSION("0000000001");
	CHECK_NOT_VERSION("1.1000000000");
	/* 1 to SCHED_MAX_VERSION_PARTS numbers */
	CHECK_INT(SCHED_MAX_VERSION_PARTS, 8);
	CHECK_VERSION("1.2.3.4.5.6.7.8", 1, 2, 3, 4, 5, 6, 7, 8);
	CHECK_VERSION("0.0.0.0.0.0.0.0", 0, 0, 0, 0, 0, 0, 0, 0);
	CHECK_NOT_VERSION("1.2.3.4.5.6.7.8.9");
	CHECK_NOT_VERSION("0.0.0.0.0.0.0.0.0");
	/* single dots between numbers, nothing else */
	CHECK_NOT_VERSION("");
	CHECK_NOT_VERSION("v1");
	CHECK_NOT_VERSION("V1.0");
	CHECK_NOT_VERSION("1.");
	CHECK_NOT_VERSION(".1");
	CHECK_NOT_VERSION(".");
	CHECK_NOT_VERSION("1..2");
	CHECK_NOT_VERSION("1.2.");
	CHECK_NOT_VERSION("1.2-rc1");
	CHECK_NOT_VERSION("1.2rc1");
	CHECK_NOT_VERSION("1.2+build");
	CHECK_NOT_VERSION(" 1");
	CHECK_NOT_VERSION("1 ");
	CHECK_NOT_VERSION("1 .2");
	CHECK_NOT_VERSION("-1");
	CHECK_NOT_VERSION("+1");
	CHECK_NOT_VERSION("1,2");
	CHECK_NOT_VERSION("1.a");
	CHECK_NOT_VERSION("1e3");
	CHECK_NOT_VERSION("0x10");
	CHECK_NOT_VERSION(">=1");
	CHECK_NOT_VERSION("\xd9\xa1");
}

TEST(version_cmp)
{
	SchedVersion a,
				b;

	/* part by part as numbers: 1.2.10 < 1.10 and 1.10 > 1.9 */
	CHECK_INT(lx_vcmp("1.2.10", "1.10"), -1);
	CHECK_INT(lx_vcmp("1.10", "1.2.10"), 1);
	CHECK_INT(lx_vcmp("1.10", "1.9"), 1);
	CHECK_INT(lx_vcmp("1.9", "1.10"), -1);
	CHECK_INT(lx_vcmp("2", "1.999999999"), 1);
	CHECK_INT(lx_vcmp("1.999999999", "2"), -1);
	CHECK_INT(lx_vcmp("999999999", "0"), 1);
	CHECK_INT(lx_vcmp("1.2.3", "1.2.3"), 0);
	CHECK_INT(lx_vcmp("01.2", "1.02"), 0);		/* numbers, not strings */
	/* missing parts count as 0 */
	CHECK_INT(lx_vcmp("1.2", "1.2.0"), 0);
	CHECK_INT(lx_vcmp("1.2.0", "1.2"), 0);
	CHECK_INT(lx_vcmp("1.2.0.0.0.0.0.0", "1.2"), 0);
	CHECK_INT(lx_vcmp("0", "0.0.0.0.0.0.0.0"), 0);
	CHECK_INT(lx_vcmp("1", "1.0.0.1"), -1);
	CHECK_INT(lx_vcmp("1.0.0.1", "1"), 1);
	CHECK_INT(lx_vcmp("1.2", "1.2.0.0.0.0.0.1"), -1);
	CHECK_INT(lx_vcmp("2", "1.9.9.9"), 1);
	CHECK_INT(lx_vcmp("1.9.9.9", "2"), -1);
	/* exactly -1, 0 or 1, whatever the distance */
	CHECK_INT(lx_vcmp("0", "999999999"), -1);
	CHECK_INT(lx_vcmp("999999999.999999999", "0"), 1);
	/* built by hand: parts past nparts are not read */
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	a.nparts = 1;
	a.parts[0] = 3;
	a.parts[1] = 7;				/* garbage past nparts */
	b.nparts = 2;
	b.parts[0] = 3;
	b.parts[1] = 0;
	CHECK_INT(sched_version_cmp(&a, &b), 0);
	CHECK_INT(sched_version_cmp(&b, &a), 0);
}

#define VB(c, ...) {SCHED_VCMP_##c, {(int) (sizeof((int32_t[]) {__VA_ARGS__}) / sizeof(int32_t)), {__VA_ARGS__}}}

TEST(version_range_parse)
{
	CHECK_RANGE(">=1.2,<2", VB(GE, 1, 2), VB(LT, 2));
	CHECK_RANGE(" >= 1.2 , < 2 ", VB(GE, 1, 2), VB(LT, 2));
	CHECK_RANGE("1.2", VB(EQ, 1, 2));						/* bare: = */
	CHECK_RANGE("=1.2", VB(EQ, 1, 2));
	CHECK_RANGE("= 1.2", VB(EQ, 1, 2));
	CHECK_RANGE("  1.2  ", VB(EQ, 1, 2));
	CHECK_RANGE("!=1.2", VB(NE, 1, 2));
	CHECK_RANGE(">1", VB(GT, 1));
	CHECK_RANGE(">=1", VB(GE, 1));
	CHECK_RANGE("<3", VB(LT, 3));
	CHECK_RANGE("<=3.0.1", VB(LE, 3, 0, 1));
	CHECK_RANGE("1.2,1.3", VB(EQ, 1, 2), VB(EQ, 1, 3));
	CHECK_RANGE("<1.2.3.4.5.6.7.8", VB(LT, 1, 2, 3, 4, 5, 6, 7, 8));
	CHECK_RANGE(">=999999999", VB(GE, 999999999));
	/* SCHED_MAX_VERSION_BOUNDS comparisons */
	CHECK_INT(SCHED_MAX_VERSION_BOUNDS, 8);
	CHECK_RANGE(">0,>=0,<9,<=9,!=5,=1,1,!=2",
				VB(GT, 0), VB(GE, 0), VB(LT, 9), VB(LE, 9), VB(NE, 5), VB(EQ, 1), VB(EQ, 1), VB(NE, 2));
	CHECK_RANGE("1,1,1,1,1,1,1,1", VB(EQ, 1), VB(EQ, 1), VB(EQ, 1), VB(EQ, 1), VB(EQ, 1), VB(EQ, 1),
				VB(EQ, 1), VB(EQ, 1));
	CHECK_NOT_RANGE(">0,>=0,<9,<=9,!=5,=1,1,!=2,<10");
	CHECK_NOT_RANGE("1,1,1,1,1,1,1,1,1");

	CHECK_NOT_RANGE("");
	CHECK_NOT_RANGE("   ");
	CHECK_NOT_RANGE(",");
	CHECK_NOT_RANGE(">=1.2,");					/* trailing comma */
	CHECK_NOT_RANGE(">=1.2, ");
	CHECK_NOT_RANGE(",>=1.2");
	CHECK_NOT_RANGE(">=1.2,,<2");
	CHECK_NOT_RANGE(">=1.2 <2");					/* no comma */
	CHECK_NOT_RANGE("=>1.2");					/* unknown operators */
	CHECK_NOT_RANGE("~1");
	CHECK_NOT_RANGE("^1.2");
	CHECK_NOT_RANGE("==1");
	CHECK_NOT_RANGE("!1");
	CHECK_NOT_RANGE("<>1");
	CHECK_NOT_RANGE("> =1");					/* an operator is not split */
	CHECK_NOT_RANGE(">=");						/* no version */
	CHECK_NOT_RANGE(">= ");
	CHECK_NOT_RANGE("!=");
	CHECK_NOT_RANGE(">=v1");					/* not versions */
	CHECK_NOT_RANGE(">=1.");
	CHECK_NOT_RANGE(">=1..2");
	CHECK_NOT_RANGE(">=1.2-rc1");
	CHECK_NOT_RANGE("1 .2");
	CHECK_NOT_RANGE(">=1000000000");
	CHECK_NOT_RANGE("<1.2.3.4.5.6.7.8.9");
	CHECK_NOT_RANGE(">=1.2;<2");
	CHECK_NOT_RANGE("\t>=1");					/* spaces are ' ' */
}

TEST(version_in_range)
{
	static const SchedVersionBound none[1] = {VB(EQ, 0)};

	CHECK_INT(lx_in_range("1.5", ">=1.2,<2"), 1);
	CHECK_INT(lx_in_range("1.2", ">=1.2,<2"), 1);		/* boundaries */
	CHECK_INT(lx_in_range("1.2.0", ">=1.2,<2"), 1);
	CHECK_INT(lx_in_range("1.10", ">=1.2,<2"), 1);
	CHECK_INT(lx_in_range("1.999999999", ">=1.2,<2"), 1);
	CHECK_INT(lx_in_range("2", ">=1.2,<2"), 0);
	CHECK_INT(lx_in_range("2.0.0", ">=1.2,<2"), 0);
	CHECK_INT(lx_in_range("1.1.9", ">=1.2,<2"), 0);
	CHECK_INT(lx_in_range("1.2.0.0.1", ">1.2"), 1);
	CHECK_INT(lx_in_range("1.2.0", ">1.2"), 0);
	CHECK_INT(lx_in_range("1.2.0", "<=1.2"), 1);
	CHECK_INT(lx_in_range("1.2.0.0.1", "<=1.2"), 0);
	CHECK_INT(lx_in_range("1.2", "<1.2.0.0.1"), 1);
	CHECK_INT(lx_in_range("1.2", "<1.2.0"), 0);
	CHECK_INT(lx_in_range("1.2.0.0", "1.2"), 1);
	CHECK_INT(lx_in_range("1.2.0.0", "=1.2"), 1);
	CHECK_INT(lx_in_range("1.2.1", "1.2"), 0);
	CHECK_INT(lx_in_range("1.2.0", "!=1.2"), 0);
	CHECK_INT(lx_in_range("1.3", "!=1.2"), 1);
	CHECK_INT(lx_in_range("1.3", "!=1.2,!=1.3"), 0);
	CHECK_INT(lx_in_range("1.3", ">=1,<=1"), 0);		/* every bound */
	CHECK_INT(lx_in_range("1", ">=1,<=1"), 1);
	CHECK_INT(lx_in_range("3", ">1,>2,>3"), 0);
	CHECK_INT(lx_in_range("3", ">1,>2,<4"), 1);
	{
		SchedVersion v = lx_v("7");

		CHECK(sched_version_in_range(&v, none, 0));		/* no bound: met */
		CHECK(!sched_version_in_range(&v, none, 1));
	}
}

TEST(label_expr_version)
{
	SchedLabel	items[] = {
		{"driver", "535.104.05"}, {"fw", "v2"}, {"os", "1.2-rc1"}, {"void", ""}, {"ten", "1.10"},
		{"k", "1.2.0"}, {"num", "1e3"}, {"big", "1000000000"}, {"long", "1.2.3.4.5.6.7.8.9"}
	};
	SchedLabelSet have = fx_labels(items, 9);
	static const SchedVersionBound r535[] = {VB(GE, 535), VB(LT, 536)};
	static const SchedVersionBound ge536[] = {VB(GE, 536)};
	static const SchedVersionBound ge12lt2[] = {VB(GE, 1, 2), VB(LT, 2)};
	static const SchedVersionBound eq12[] = {VB(EQ, 1, 2)};
	static const SchedVersionBound ne12[] = {VB(NE, 1, 2)};
	static const SchedVersionBound ge0[] = {VB(GE, 0)};
	static const char *const junk[] = {"fw", "os", "void", "num", "big", "long", "absent"};
	size_t		i;

	CHECK(sched_labels_sort(&have));
	CHECK(lx_sat(lx_ver("driver", r535, 2), &have));
	CHECK(!lx_sat(lx_ver("driver", ge536, 1), &have));
	CHECK(lx_sat(lx_ver("ten", ge12lt2, 2), &have));		/* 1.10 > 1.2 */
	CHECK(!lx_sat(lx_ver("ten", eq12, 1), &have));
	CHECK(lx_sat(lx_ver("k", eq12, 1), &have));			/* 1.2.0 = 1.2 */
	CHECK(!lx_sat(lx_ver("k", ne12, 1), &have));
	CHECK(lx_sat(lx_ver("k", ge12lt2, 2), &have));
	/* a value that is not a version, or no value, fails every range */
	for (i = 0; i < sizeof junk / sizeof junk[0]; i++)
	{
		if (lx_sat(lx_ver(junk[i], ge0, 1), &have))
			t_fail(__FILE__, __LINE__, "\"%s\" is a version >= 0", junk[i]);
		if (lx_sat(lx_ver(junk[i], ne12, 1), &have))
			t_fail(__FILE__, __LINE__, "\"%s\" is a version != 1.2", junk[i]);
	}
}

TEST(labels_first_unmet_in_key_order)
{
	SchedLabel	items[] = {{"gpu", "a100"}, {"tier", "fast"}, {"zone", "eu-1"}};
	SchedLabelSet have = fx_labels(items, 3);
	SchedLabelSet none = fx_labels(NULL, 0);
	static const char *const gpus[] = {"a100", "h100"};
	static const char *const eu1[] = {"eu-1"};
	static const char *const eu2[] = {"eu-2"};
	static const char *const x[] = {"x"};
	SchedLabel	req[5];
	SchedLabel	req3[3];
	SchedLabel	shuffled[3];
	SchedLabelSet r = fx_labels(req, 5);
	SchedLabelSet r3 = fx_labels(req3, 3);
	SchedLabelSet s = fx_labels(shuffled, 3);

	CHECK(sched_labels_sort(&have));
	/* in key order: disk ok, gpu ok, rack fails, tier fails, zone fails */
	req[0] = lx_label("disk", SCHED_LABEL_NOT_EXISTS);
	req[1] = lx_list("gpu", SCHED_LABEL_IN, gpus, 2);
	req[2] = lx_label("rack", SCHED_LABEL_EXISTS);
	req[3] = lx_eq("tier", "slow");
	req[4] = lx_list("zone", SCHED_LABEL_NOT_IN, eu1, 1);
	CHECK_INT(sched_labels_first_unmet(&have, &r), 2);
	req[2] = lx_label("rack", SCHED_LABEL_NOT_EXISTS);
	CHECK_INT(sched_labels_first_unmet(&have, &r), 3);
	req[3] = lx_eq("tier", "fast");
	CHECK_INT(sched_labels_first_unmet(&have, &r), 4);
	req[4] = lx_list("zone", SCHED_LABEL_NOT_IN, eu2, 1);
	CHECK_INT(sched_labels_first_unmet(&have, &r), -1);
	req[0] = lx_label("disk", SCHED_LABEL_EXISTS);		/* only the first fails */
	CHECK_INT(sched_labels_first_unmet(&have, &r), 0);
	req[0] = lx_label("disk", SCHED_LABEL_NOT_EXISTS);
	req[1] = lx_list("gpu", SCHED_LABEL_NOT_IN, gpus, 2);	/* only the second */
	CHECK_INT(sched_labels_first_unmet(&have, &r), 1);
	CHECK_INT(sched_labels_first_unmet(&have, &none), -1);
	CHECK_INT(sched_labels_first_unmet(&none, &none), -1);
	CHECK_INT(sched_labels_first_unmet(&none, &r), 3);		/* absent: only tier = fast fails */

	/* a node without labels: absent passes NOT_EXISTS and NOT_IN only */
	req3[0] = lx_label("a", SCHED_LABEL_NOT_EXISTS);
	req3[1] = lx_list("b", SCHED_LABEL_NOT_IN, x, 1);
	req3[2] = lx_label("c", SCHED_LABEL_EXISTS);
	CHECK_INT(sched_labels_first_unmet(&none, &r3), 2);
	req3[2] = lx_num("c", SCHED_LABEL_LT, 1e308);
	CHECK_INT(sched_labels_first_unmet(&none, &r3), 2);
	req3[2] = lx_label("c", SCHED_LABEL_NOT_EXISTS);
	CHECK_INT(sched_labels_first_unmet(&none, &r3), -1);

	/* the index is into the sorted map: sorting keeps each key with its expression */
	shuffled[0] = lx_list("zone", SCHED_LABEL_NOT_IN, eu1, 1);		/* fails */
	shuffled[1] = lx_label("apple", SCHED_LABEL_EXISTS);			/* fails */
	shuffled[2] = lx_eq("tier", "fast");
	CHECK(sched_labels_sort(&s));
	CHECK_STR(shuffled[0].key, "apple");
	CHECK_INT(shuffled[0].op, SCHED_LABEL_EXISTS);
	CHECK_INT(shuffled[2].op, SCHED_LABEL_NOT_IN);
	CHECK(shuffled[2].values == eu1);
	CHECK_INT(sched_labels_first_unmet(&have, &s), 0);
	shuffled[0].op = SCHED_LABEL_NOT_EXISTS;
	CHECK_INT(sched_labels_first_unmet(&have, &s), 2);
}

TEST(admission_label_expressions)
{
	SchedLabel	items[] = {{"arch", "x86_64"}, {"cores", "16"}, {"driver", "535.104.05"}, {"zone", "eu-1"}};
	static const char *const arches[] = {"arm64", "x86_64"};
	static const char *const arm[] = {"arm64"};
	static const char *const us1[] = {"us-1"};
	static const char *const eu1[] = {"eu-1"};
	static const SchedVersionBound r535[] = {VB(GE, 535), VB(LT, 536)};
	static const SchedVersionBound ge536[] = {VB(GE, 536)};
	SchedLabel	all[5];
	SchedLabel	one[1];
	SchedPlacement p;
	SchedCandidate c;
	SchedReasonSet mismatch = BIT(REQUIRED_LABELS_MISMATCH);
	struct
	{
		SchedLabel	req;
		bool		node_ok;		/* with the node's labels */
		bool		bare_ok;		/* on a node without labels */
	}			exprs[14];
	int			n = 0;
	int			i;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.labels = fx_labels(items, 4);
	CHECK(sched_labels_sort(&c.labels));
	CHECK_SET(sched_admission(&p, &c), 0);

	exprs[n].req = lx_eq("arch", "x86_64"), exprs[n].node_ok = true, exprs[n++].bare_ok = false;
	exprs[n].req = lx_list("arch", SCHED_LABEL_IN, arches, 2), exprs[n].node_ok = true, exprs[n++].bare_ok = false;
	exprs[n].req = lx_list("arch", SCHED_LABEL_IN, arm, 1), exprs[n].node_ok = false, exprs[n++].bare_ok = false;
	exprs[n].req = lx_list("arch", SCHED_LABEL_NOT_IN, arm, 1), exprs[n].node_ok = true, exprs[n++].bare_ok = true;
	exprs[n].req = lx_list("zone", SCHED_LABEL_NOT_IN, eu1, 1), exprs[n].node_ok = false, exprs[n++].bare_ok = true;
	exprs[n].req = lx_list("rack", SCHED_LABEL_NOT_IN, us1, 1), exprs[n].node_ok = true, exprs[n++].bare_ok = true;
	exprs[n].req = lx_label("zone", SCHED_LABEL_EXISTS), exprs[n].node_ok = true, exprs[n++].bare_ok = false;
	exprs[n].req = lx_label("gpu", SCHED_LABEL_NOT_EXISTS), exprs[n].node_ok = true, exprs[n++].bare_ok = true;
	exprs[n].req = lx_label("zone", SCHED_LABEL_NOT_EXISTS), exprs[n].node_ok = false, exprs[n++].bare_ok = true;
	exprs[n].req = lx_num("cores", SCHED_LABEL_GT, 8), exprs[n].node_ok = true, exprs[n++].bare_ok = false;
	exprs[n].req = lx_num("cores", SCHED_LABEL_GT, 16), exprs[n].node_ok = false, exprs[n++].bare_ok = false;
	exprs[n].req = lx_num("zone", SCHED_LABEL_LT, 5), exprs[n].node_ok = false, exprs[n++].bare_ok = false;
	exprs[n].req = lx_ver("driver", r535, 2), exprs[n].node_ok = true, exprs[n++].bare_ok = false;
	exprs[n].req = lx_ver("driver", ge536, 1), exprs[n].node_ok = false, exprs[n++].bare_ok = false;

	/* one expression at a time: only required_labels_mismatch, exactly when it fails */
	p.required_labels = fx_labels(one, 1);
	for (i = 0; i < n; i++)
	{
		one[0] = exprs[i].req;
		c.labels = fx_labels(items, 4);
		if (sched_admission(&p, &c) != (exprs[i].node_ok ? 0 : mismatch))
			t_fail(__FILE__, __LINE__, "expression %d on \"%s\": reasons 0x%x, want %s", i,
				   one[0].key, (unsigned) sched_admission(&p, &c), exprs[i].node_ok ? "none" : "mismatch");
		CHECK_INT(sched_labels_first_unmet(&c.labels, &p.required_labels), exprs[i].node_ok ? -1 : 0);
		c.labels = fx_labels(NULL, 0);
		if (sched_admission(&p, &c) != (exprs[i].bare_ok ? 0 : mismatch))
			t_fail(__FILE__, __LINE__, "expression %d on \"%s\", no labels: reasons 0x%x, want %s", i,
				   one[0].key, (unsigned) sched_admission(&p, &c), exprs[i].bare_ok ? "none" : "mismatch");
	}

	/* together, in key order: all pass, then each failing one alone fails the node */
	c.labels = fx_labels(items, 4);
	all[0] = lx_list("arch", SCHED_LABEL_IN, arches, 2);
	all[1] = lx_num("cores", SCHED_LABEL_GT, 8);
	all[2] = lx_ver("driver", r535, 2);
	all[3] = lx_label("gpu", SCHED_LABEL_NOT_EXISTS);
	all[4] = lx_list("zone", SCHED_LABEL_NOT_IN, us1, 1);
	p.required_labels = fx_labels(all, 5);
	CHECK_SET(sched_admission(&p, &c), 0);
	all[1] = lx_num("cores", SCHED_LABEL_GT, 16);		/* boundary: 16 is not > 16 */
	CHECK_SET(sched_admission(&p, &c), mismatch);
	CHECK_INT(sched_labels_first_unmet(&c.labels, &p.required_labels), 1);
	all[1] = lx_num("cores", SCHED_LABEL_LT, 16.5);
	CHECK_SET(sched_admission(&p, &c), 0);
	all[2] = lx_ver("driver", ge536, 1);
	CHECK_SET(sched_admission(&p, &c), mismatch);
	all[2] = lx_ver("driver", r535, 2);
	all[4] = lx_list("zone", SCHED_LABEL_NOT_IN, eu1, 1);
	CHECK_SET(sched_admission(&p, &c), mismatch);
	CHECK_INT(sched_labels_first_unmet(&c.labels, &p.required_labels), 4);
	/* with another reason: both, nothing else */
	c.cpu_millis = 0;
	p.min_cpu_millis = 1;
	CHECK_SET(sched_admission(&p, &c), mismatch | BIT(INSUFFICIENT_CPU));
	all[4] = lx_list("zone", SCHED_LABEL_NOT_IN, us1, 1);
	CHECK_SET(sched_admission(&p, &c), BIT(INSUFFICIENT_CPU));
}

TEST(preferred_labels_stay_plain)
{
	SchedLabel	items[] = {{"tier", "fast"}, {"zone", "eu-1"}};
	SchedLabel	pref[2] = {{NULL, NULL}};
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked r;

	fx_placement(&p);
	fx_candidate(&c, "node-a");
	c.labels = fx_labels(items, 2);
	/* equal values count, whatever op holds: preferences are plain labels */
	pref[0] = lx_eq("tier", "fast");
	pref[0].op = SCHED_LABEL_NOT_EXISTS;
	pref[1] = lx_eq("zone", "us-1");
	pref[1].op = SCHED_LABEL_NOT_IN;
	p.preferred_labels = fx_labels(pref, 2);
	CHECK_INT(sched_labels_matching(&c.labels, &p.preferred_labels), 1);
	sched_score(&p, &c, &r);
	CHECK_INT(r.preferred_matches, 1);
	CHECK_SET(sched_admission(&p, &c), 0);
}

/* ------------------------------------------------------------------------------------ */
/* Summary                                                                              */
/* ------------------------------------------------------------------------------------ */

TEST(count_reasons)
{
	int			counts[SCHED_R_COUNT];
	int			i;

	memset(counts, 0, sizeof counts);
	sched_count_reasons(0, counts);
	for (i = 0; i < SCHED_R_COUNT; i++)
		CHECK_INT(counts[i], 0);
	sched_count_reasons(BIT(HEARTBEAT_EXPIRED) | BIT(INSUFFICIENT_CPU), counts);
	sched_count_reasons(BIT(INSUFFICIENT_CPU), counts);
	sched_count_reasons(REF_ALL_REASONS, counts);
	for (i = 0; i < SCHED_R_COUNT; i++)
	{
		int			want = 1;

		if (i == SCHED_R_HEARTBEAT_EXPIRED)
			want = 2;
		if (i == SCHED_R_INSUFFICIENT_CPU)
			want = 3;
		CHECK_INT(counts[i], want);
	}
}

TEST(format_summary_exact_strings)
{
	int			counts[SCHED_R_COUNT];
	char		buf[1024];
	size_t		n;

	memset(counts, 0, sizeof counts);
	counts[SCHED_R_INSUFFICIENT_CPU] = 2;
	counts[SCHED_R_HEARTBEAT_EXPIRED] = 1;
	n = sched_format_summary(buf, sizeof buf, 3, 0, counts);
	CHECK_STR(buf, "0/3 nodes eligible: 1 heartbeat_expired, 2 insufficient_cpu");
	CHECK_INT(n, strlen("0/3 nodes eligible: 1 heartbeat_expired, 2 insufficient_cpu"));

	/* nothing counted: no colon */
	memset(counts, 0, sizeof counts);
	n = sched_format_summary(buf, sizeof buf, 3, 3, counts);
	CHECK_STR(buf, "3/3 nodes eligible");
	CHECK_INT(n, 18);
	n = sched_format_summary(buf, sizeof buf, 0, 0, counts);
	CHECK_STR(buf, "0/0 nodes eligible");

	/* sorted by name, not by table order: pinned_to_other_node (table 0) comes late,
	 * gpus_exhausted (table 14) early, capability_version_missing after capability_missing */
	counts[SCHED_R_PINNED_TO_OTHER_NODE] = 4;
	counts[SCHED_R_GPUS_EXHAUSTED] = 1;
	counts[SCHED_R_CAPABILITY_VERSION_MISSING] = 2;
	counts[SCHED_R_CAPABILITY_MISSING] = 1;
	counts[SCHED_R_NO_FREE_SLOT] = 0;
	counts[SCHED_R_NODE_NOT_ACTIVE] = 3;
	sched_format_summary(buf, sizeof buf, 10, 0, counts);
	CHECK_STR(buf, "0/10 nodes eligible: 1 capability_missing, 2 capability_version_missing, "
			  "1 gpus_exhausted, 3 node_not_active, 4 pinned_to_other_node");

	/* all fifteen, in name order */
	{
		int			i;

		for (i = 0; i < SCHED_R_COUNT; i++)
			counts[i] = i + 1;
	}
	sched_format_summary(buf, sizeof buf, 1000, 12, counts);
	CHECK_STR(buf, "12/1000 nodes eligible: "
			  "3 capability_missing, 7 capability_version_missing, 13 cpu_exhausted, "
			  "15 gpus_exhausted, 6 heartbeat_expired, 9 insufficient_cpu, "
			  "11 insufficient_gpus, 10 insufficient_memory, 14 memory_exhausted, "
			  "12 no_free_slot, 2 node_not_active, 1 pinned_to_other_node, "
			  "8 required_labels_mismatch, 5 worker_not_eligible, 4 worker_not_ready");

	/* zero counts are left out wherever they are */
	memset(counts, 0, sizeof counts);
	counts[SCHED_R_WORKER_NOT_READY] = 7;
	sched_format_summary(buf, sizeof buf, 7, 0, counts);
	CHECK_STR(buf, "0/7 nodes eligible: 7 worker_not_ready");
}

TEST(format_summary_truncation_like_snprintf)
{
	const char *full = "0/3 nodes eligible: 1 heartbeat_expired, 2 insufficient_cpu";
	size_t		len = strlen(full);
	int			counts[SCHED_R_COUNT];
	char		buf[128];
	size_t		n;
	size_t		cap;

	memset(counts, 0, sizeof counts);
	counts[SCHED_R_INSUFFICIENT_CPU] = 2;
	counts[SCHED_R_HEARTBEAT_EXPIRED] = 1;

	/* cap 0: writes nothing, still reports the length */
	memset(buf, 'X', sizeof buf);
	n = sched_format_summary(buf, 0, 3, 0, counts);
	CHECK_INT(n, len);
	CHECK_INT(buf[0], 'X');

	/* cap 1: just the NUL */
	memset(buf, 'X', sizeof buf);
	n = sched_format_summary(buf, 1, 3, 0, counts);
	CHECK_INT(n, len);
	CHECK_INT(buf[0], '\0');
	CHECK_INT(buf[1], 'X');

	/* small buffer: cut inside the prefix */
	memset(buf, 'X', sizeof buf);
	n = sched_format_summary(buf, 5, 3, 0, counts);
	CHECK_INT(n, len);
	CHECK_STR(buf, "0/3 ");
	CHECK_INT(buf[5], 'X');

	/* cut inside the reason list, and exactly at its boundaries */
	memset(buf, 'X', sizeof buf);
	n = sched_format_summary(buf, 25, 3, 0, counts);
	CHECK_INT(n, len);
	CHECK_STR(buf, "0/3 nodes eligible: 1 he");
	CHECK_INT(buf[25], 'X');
	memset(buf, 'X', sizeof buf);
	sched_format_summary(buf, 19, 3, 0, counts);
	CHECK_STR(buf, "0/3 nodes eligible");
	memset(buf, 'X', sizeof buf);
	sched_format_summary(buf, 20, 3, 0, counts);
	CHECK_STR(buf, "0/3 nodes eligible:");

	/* one short, exact, and roomy */
	memset(buf, 'X', sizeof buf);
	n = sched_format_summary(buf, len, 3, 0, counts);
	CHECK_INT(n, len);
	CHECK_INT(strlen(buf), len - 1);
	CHECK(strncmp(buf, full, len - 1) == 0);
	CHECK_INT(buf[len], 'X');
	memset(buf, 'X', sizeof buf);
	n = sched_format_summary(buf, len + 1, 3, 0, counts);
	CHECK_INT(n, len);
	CHECK_STR(buf, full);
	CHECK_INT(buf[len + 1], 'X');

	/* every size from 0 up: always a NUL-terminated prefix, never past cap */
	for (cap = 0; cap < sizeof buf; cap++)
	{
		size_t		k;
		size_t		keep = cap == 0 ? 0 : (cap - 1 < len ? cap - 1 : len);

		memset(buf, 'X', sizeof buf);
		n = sched_format_summary(buf, cap, 3, 0, counts);
		CHECK_INT(n, len);
		if (cap > 0)
		{
			CHECK(strncmp(buf, full, keep) == 0);
			CHECK_INT(buf[keep], '\0');
		}
		for (k = cap; k < sizeof buf; k++)
			if (buf[k] != 'X')
			{
				t_fail(__FILE__, __LINE__, "cap %zu: byte %zu written", cap, k);
				break;
			}
	}
}

TEST(format_summary_null_buffer_measures)
{
	int			counts[SCHED_R_COUNT];

	/* snprintf(NULL, 0, ...) is the usual way to measure first */
	memset(counts, 0, sizeof counts);
	counts[SCHED_R_NO_FREE_SLOT] = 2;
	CHECK_INT(sched_format_summary(NULL, 0, 2, 0, counts),
			  strlen("0/2 nodes eligible: 2 no_free_slot"));
}

/* ------------------------------------------------------------------------------------ */
/* Property tests                                                                       */
/* ------------------------------------------------------------------------------------ */

static uint64_t rng_state;

static void
rng_seed(uint64_t s)
{
	rng_state = s ? s : 1;
}

/* xorshift64* */
static uint64_t
rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

static uint32_t
rng_below(uint32_t n)
{
	return (uint32_t) ((rng_next() >> 32) % n);
}

static int
rng_chance(uint32_t num, uint32_t den)
{
	return rng_below(den) < num;
}

/* Label keys in bytewise order (checked), so any in-order subset is a sorted set. */
static const char *const g_keys[] = {
	"", "Tier", "a", "gpu", "tier", "tier-2", "zone", "zon\xc3\xa9"
};
#define G_NKEYS ((int) (sizeof g_keys / sizeof g_keys[0]))
static const char *const g_values[] = {
	"", "EU", "FAST", "eu", "fast", "fast ", "fas", "\xc3\xa9t\xc3\xa9", "e\xcc\x81t\xc3\xa9"
};
#define G_NVALUES ((int) (sizeof g_values / sizeof g_values[0]))
static const char *const g_node_ids[] = {
	"node-a", "node-b", "B", "a", "node-10", "node-9", "n\303\266de", "node-a ", ""
};
#define G_NNODES ((int) (sizeof g_node_ids / sizeof g_node_ids[0]))
static const char *const g_versions[] = {"1.0", "1.0.0", "2.0", "V1", "v1", "", "1.0 "};
#define G_NVERSIONS ((int) (sizeof g_versions / sizeof g_versions[0]))

#define G_STR 24

typedef struct GenCase
{
	SchedPlacement p;
	SchedCandidate c;
	SchedLabel	have[G_NKEYS];
	SchedLabel	req[G_NKEYS];
	SchedLabel	pref[G_NKEYS];
	char		have_v[G_NKEYS][G_STR];
	char		req_v[G_NKEYS][G_STR];
	char		pref_v[G_NKEYS][G_STR];
	char		node_id[G_STR];
	char		pin[G_STR];
	char		want_version[G_STR];
	char		version_buf[4][G_STR];
	const char *versions[4];
	int64_t		alt[5];
} GenCase;

static void
g_copy(char *dst, const char *src)
{
	size_t		n = strlen(src);

	if (n >= G_STR)
		n = G_STR - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static const char *
g_pick(const char *const *pool, int n)
{
	return pool[rng_below((uint32_t) n)];
}

/* Amounts >= 0 with many small values and boundary hits, sometimes large. */
static int64_t
g_amount(void)
{
	switch (rng_below(10))
	{
		case 0:
			return 0;
		case 1:
		case 2:
		case 3:
		case 4:
			return (int64_t) rng_below(6);
		case 5:
		case 6:
			return (int64_t) rng_below(5000);
		case 7:
			return (int64_t) rng_below(INT32_MAX);
		case 8:
			return (int64_t) (rng_next() >> 2);		/* up to 2^62 */
		default:
			return 1;
	}
}

/* A requirement near the capacity, to hit the boundary. */
static int64_t
g_near(int64_t cap)
{
	switch (rng_below(6))
	{
		case 0:
			return cap;
		case 1:
			return cap > 0 ? cap - 1 : 0;
		case 2:
			return cap < INT64_MAX ? cap + 1 : cap;
		case 3:
			return 0;
		default:
			return g_amount();
	}
}

/* Reserved amounts: within capacity (the SPEC invariant), sometimes at it or past it. */
static int64_t
g_reserved(int64_t cap)
{
	switch (rng_below(6))
	{
		case 0:
			return 0;
		case 1:
			return cap;
		case 2:
			return cap < INT64_MAX ? cap + (int64_t) rng_below(3) : cap;
		default:
			return cap > 0 ? (int64_t) (rng_next() % (uint64_t) (cap + 1)) : 0;
	}
}

static int32_t
g_weight(void)
{
	static const int32_t w[] = {INT32_MIN, -100, -1, 0, 1, 99, 100, 150, INT32_MAX};

	if (rng_chance(1, 4))
		return (int32_t) rng_next();
	return w[rng_below(sizeof w / sizeof w[0])];
}

static int32_t
g_attempts(void)
{
	if (rng_chance(1, 20))
		return (int32_t) rng_below(INT32_MAX);
	return (int32_t) rng_below(6);
}

/* A label set: an in-order subset of g_keys, values from the pool. */
static int
g_labels(SchedLabel *items, char vals[][G_STR], uint32_t density)
{
	int			i;
	int			n = 0;

	for (i = 0; i < G_NKEYS; i++)
		if (rng_below(8) < density)
		{
			g_copy(vals[n], g_pick(g_values, G_NVALUES));
			items[n].key = g_keys[i];
			items[n].value = vals[n];
			n++;
		}
	return n;
}

/* Labels derived from `have` (a subset, some values changed, some keys added). */
static int
g_labels_from(const SchedLabel *have, int nhave, SchedLabel *items, char vals[][G_STR])
{
	int			i,
				j = 0;
	int			n = 0;

	for (i = 0; i < G_NKEYS; i++)
	{
		const char *v = NULL;

		while (j < nhave && ref_bytecmp(have[j].key, g_keys[i]) < 0)
			j++;
		if (j < nhave && ref_bytecmp(have[j].key, g_keys[i]) == 0)
			v = have[j].value;
		if (v != NULL && rng_chance(2, 3))
		{
			g_copy(vals[n], rng_chance(7, 8) ? v : g_pick(g_values, G_NVALUES));
			items[n].key = g_keys[i];
			items[n].value = vals[n];
			n++;
		}
		else if (v == NULL && rng_chance(1, 16))
		{
			g_copy(vals[n], g_pick(g_values, G_NVALUES));
			items[n].key = g_keys[i];
			items[n].value = vals[n];
			n++;
		}
	}
	return n;
}

/*
 * One random pair.  About half the fields are "good" with high probability, so that
 * admitted pairs and every single reason are common; worker fields are filled even
 * without a worker (suppression must hide them).
 */
static void
g_case(GenCase *g)
{
	SchedPlacement *p = &g->p;
	SchedCandidate *c = &g->c;
	int			good = rng_chance(1, 2);
	uint32_t	bad = good ? 1 : 4;		/* chance of a bad field, in 16ths */
	int			i;

	memset(p, 0, sizeof *p);
	memset(c, 0, sizeof *c);

	g_copy(g->node_id, g_pick(g_node_ids, G_NNODES));
	sched_candidate_set_node(c, g->node_id);
	c->management_status = rng_below(16) < bad ? (SchedNodeStatus) (1 + rng_below(2))
		: SCHED_NODE_ACTIVE;
	c->labels.items = g->have;
	c->labels.count = g_labels(g->have, g->have_v, 3);
	c->cpu_millis = g_amount();
	c->memory_mb = g_amount();
	c->gpus = g_amount();
	c->weight = g_weight();
	c->reserved_cpu_millis = g_reserved(c->cpu_millis);
	c->reserved_memory_mb = g_reserved(c->memory_mb);
	c->reserved_gpus = g_reserved(c->gpus);
	c->node_live_attempts = g_attempts();

	c->has_worker = rng_below(16) >= bad;
	c->runtime_state = rng_below(16) < bad ? (SchedRuntimeState) rng_below(4) : SCHED_WORKER_READY;
	c->scheduling_status = rng_below(16) < bad ? SCHED_WORKER_CORDONED : SCHED_WORKER_ELIGIBLE;
	c->has_heartbeat = rng_below(32) >= bad;
	c->slots = (int32_t) rng_below(5) - (rng_chance(1, 50) ? 2 : 0);
	c->worker_live_attempts = rng_below(16) < bad ? (int32_t) rng_below(7)
		: (c->slots > 0 ? (int32_t) rng_below((uint32_t) c->slots) : 0);
	c->version_count = (int) rng_below(4);
	for (i = 0; i < c->version_count; i++)
	{
		if (rng_chance(1, 30))
			g->versions[i] = NULL;
		else
		{
			g_copy(g->version_buf[i], g_pick(g_versions, G_NVERSIONS));
			g->versions[i] = g->version_buf[i];
		}
	}
	c->versions = c->version_count > 0 || rng_chance(1, 2) ? g->versions : NULL;

	p->capability = "transcode";
	if (c->version_count > 0 && rng_below(16) >= bad)
	{
		const char *v = g->versions[rng_below((uint32_t) c->version_count)];

		g_copy(g->want_version, v != NULL ? v : "1.0");
	}
	else
		g_copy(g->want_version, g_pick(g_versions, G_NVERSIONS));
	p->capability_version = g->want_version;

	p->required_labels.items = g->req;
	p->required_labels.count = rng_below(16) < bad
		? g_labels(g->req, g->req_v, 1)
		: (rng_chance(1, 2) ? 0 : g_labels_from(g->have, c->labels.count, g->req, g->req_v));
	p->preferred_labels.items = g->pref;
	p->preferred_labels.count = rng_chance(1, 2)
		? g_labels(g->pref, g->pref_v, 2)
		: g_labels_from(g->have, c->labels.count, g->pref, g->pref_v);

	if (good || rng_chance(1, 2))
	{
		p->min_cpu_millis = rng_below(16) < bad ? g_near(c->cpu_millis) : 0;
		p->min_memory_mb = rng_below(16) < bad ? g_near(c->memory_mb) : 0;
		p->min_gpus = rng_below(16) < bad ? g_near(c->gpus) : 0;
	}
	else
	{
		p->min_cpu_millis = g_amount();
		p->min_memory_mb = g_amount();
		p->min_gpus = g_amount();
	}
	p->reserve_cpu_millis = rng_chance(1, 3) ? 0 : g_near(c->cpu_millis - c->reserved_cpu_millis);
	p->reserve_memory_mb = rng_chance(1, 3) ? 0 : g_near(c->memory_mb - c->reserved_memory_mb);
	p->reserve_gpus = rng_chance(1, 3) ? 0 : g_near(c->gpus - c->reserved_gpus);
	if (p->reserve_cpu_millis < 0)
		p->reserve_cpu_millis = 0;
	if (p->reserve_memory_mb < 0)
		p->reserve_memory_mb = 0;
	if (p->reserve_gpus < 0)
		p->reserve_gpus = 0;

	if (rng_chance(1, 2))
		p->pin_node_id = NULL;
	else
	{
		g_copy(g->pin, rng_below(16) < bad ? g_pick(g_node_ids, G_NNODES) : c->node_id);
		p->pin_node_id = g->pin;
	}

	switch (rng_below(5))
	{
		case 0:
			p->heartbeat_cutoff = (int64_t) rng_next();
			break;
		case 1:
			p->heartbeat_cutoff = rng_chance(1, 2) ? INT64_MIN : INT64_MAX;
			break;
		default:
			p->heartbeat_cutoff = (int64_t) (rng_next() >> 20) - (INT64_C(1) << 43);
			break;
	}
	if (rng_below(16) < bad)
		c->last_heartbeat = (int64_t) rng_next();
	else
	{
		int64_t		d = (int64_t) rng_below(4) - (rng_below(16) < bad ? 2 : 0);

		if (d < 0 && p->heartbeat_cutoff < INT64_MIN - d)
			d = 0;
		if (d > 0 && p->heartbeat_cutoff > INT64_MAX - d)
			d = 0;
		c->last_heartbeat = p->heartbeat_cutoff + d;
	}

	g->alt[0] = g_reserved(c->cpu_millis);
	g->alt[1] = g_reserved(c->memory_mb);
	g->alt[2] = g_reserved(c->gpus);
	g->alt[3] = (int64_t) rng_below(8);
	g->alt[4] = (int64_t) g_attempts();
}

#define PROPERTY_CASES 200000
#define PROPERTY_SEED UINT64_C(0x5eed0f9c5c4ed001)

TEST(property_admission_matches_spec_reference)
{
	static GenCase g;
	long		hits[SCHED_R_COUNT];
	long		admitted = 0;
	long		alone[SCHED_R_COUNT];
	long		suppressed_worker = 0;
	long		suppressed_exhausted = 0;
	int			shown = 0;
	long		bad = 0;
	long		i;
	int			r;
	char		msg[1024];

	for (r = 0; r < G_NKEYS - 1; r++)
		CHECK(ref_bytecmp(g_keys[r], g_keys[r + 1]) < 0);	/* pool must be sorted */

	memset(hits, 0, sizeof hits);
	memset(alone, 0, sizeof alone);
	rng_seed(PROPERTY_SEED);
	for (i = 0; i < PROPERTY_CASES; i++)
	{
		SchedReasonSet s;

		g_case(&g);
		if (!ref_check_pair(&g.p, &g.c, g.alt, msg, sizeof msg))
		{
			bad++;
			if (shown++ < 5)
			{
				t_fail(__FILE__, __LINE__, "case %ld (seed 0x%016" PRIx64 "): %s", i,
					   PROPERTY_SEED, msg);
				ref_dump_pair(stderr, &g.p, &g.c);
			}
			continue;
		}
		s = sched_admission(&g.p, &g.c);
		admitted += s == 0;
		for (r = 0; r < SCHED_R_COUNT; r++)
		{
			hits[r] += (s >> r) & 1u;
			alone[r] += s == REF_BIT(r);
		}
		if (!g.c.has_worker &&
			(g.c.runtime_state != SCHED_WORKER_READY || g.c.scheduling_status != SCHED_WORKER_ELIGIBLE ||
			 g.c.worker_live_attempts >= g.c.slots))
			suppressed_worker++;
		if ((s & BIT(INSUFFICIENT_CPU)) && g.c.cpu_millis - g.c.reserved_cpu_millis < g.p.reserve_cpu_millis)
			suppressed_exhausted++;
	}
	if (bad > 0)
		t_fail(__FILE__, __LINE__, "%ld of %d random pairs disagree with the SPEC", bad, PROPERTY_CASES);

	/* the generator must actually exercise everything */
	CHECK(admitted >= PROPERTY_CASES / 50);
	CHECK(suppressed_worker >= 1000);
	CHECK(suppressed_exhausted >= 100);
	for (r = 0; r < SCHED_R_COUNT; r++)
	{
		if (hits[r] < 1000)
			t_fail(__FILE__, __LINE__, "reason %s hit only %ld times", ref_reason_names[r], hits[r]);
		if (alone[r] < 20)
			t_fail(__FILE__, __LINE__, "reason %s alone only %ld times", ref_reason_names[r], alone[r]);
	}
	if (t_verbose)
	{
		printf("     %d pairs, %ld admitted; per reason (hits/alone):", PROPERTY_CASES, admitted);
		for (r = 0; r < SCHED_R_COUNT; r++)
			printf(" %ld/%ld", hits[r], alone[r]);
		printf("\n");
	}
}

TEST(property_ranking_matches_reference)
{
	static const char *const ids[] = {
		"node-a", "node-b", "B", "a", "A", "node-10", "node-9", "node-1", "n\303\266de",
		"\xc3\xa9", "z", "node", ""
	};
	const int	nids = (int) (sizeof ids / sizeof ids[0]);
	SchedRanked arr[16];
	int			it;
	int			shown = 0;

	rng_seed(PROPERTY_SEED ^ 0xabcdef);
	for (it = 0; it < 20000; it++)
	{
		int			n = (int) rng_below(14);
		int			used[16];
		int			seen[16];
		int			i,
					j;
		int			ok = 1;

		/* distinct ids (node_id is a key), a few distinct scores so ties are common */
		for (i = 0; i < n; i++)
		{
			int			k;

			do
			{
				k = (int) rng_below((uint32_t) nids);
				for (j = 0; j < i; j++)
					if (used[j] == k)
						break;
			} while (j < i);
			used[i] = k;
			arr[i] = mk_ranked(ids[k], rng_chance(1, 8) ? (int64_t) rng_next()
							   : (int64_t) rng_below(3) * 10000 - 10000, i);
		}
		sched_rank(arr, n);
		memset(seen, 0, sizeof seen);
		for (i = 0; i < n; i++)
		{
			if (arr[i].index < 0 || arr[i].index >= n || seen[arr[i].index]++ ||
				arr[i].node_id != ids[used[arr[i].index]])
				ok = 0;
			if (i > 0 && !ref_rank_before(&arr[i - 1], &arr[i]))
				ok = 0;
			for (j = 0; j < n; j++)
				if (sign(sched_ranked_cmp(&arr[i], &arr[j])) != (i < j ? -1 : i > j ? 1 : 0))
					ok = 0;
		}
		if (!ok && shown++ < 5)
			t_fail(__FILE__, __LINE__, "iteration %d: ranking of %d candidates is wrong", it, n);
	}
}

TEST(property_summary_matches_reference)
{
	int			counts[SCHED_R_COUNT];
	int			it;
	int			shown = 0;
	char		msg[512];

	rng_seed(PROPERTY_SEED ^ 0x5a5a);
	for (it = 0; it < 3000; it++)
	{
		int			r;
		int			nodes = (int) rng_below(2000);
		int			eligible = nodes ? (int) rng_below((uint32_t) nodes + 1) : 0;

		for (r = 0; r < SCHED_R_COUNT; r++)
			counts[r] = rng_chance(1, 3) ? (int) rng_below((uint32_t) nodes + 1) : 0;
		if (rng_chance(1, 100))
			counts[rng_below(SCHED_R_COUNT)] = INT32_MAX;
		if (!ref_check_summary(nodes, eligible, counts, msg, sizeof msg, 1) && shown++ < 5)
			t_fail(__FILE__, __LINE__, "iteration %d: %s", it, msg);
	}
}

/* The per-node reasons and the summary are one computation: counts add up. */
TEST(property_summary_counts_from_admission)
{
	static GenCase g;
	int			counts[SCHED_R_COUNT];
	int			want[SCHED_R_COUNT];
	int			it;
	char		msg[512];

	rng_seed(PROPERTY_SEED ^ 0x77);
	for (it = 0; it < 2000; it++)
	{
		int			nodes = 1 + (int) rng_below(12);
		int			eligible = 0;
		int			i,
					r;

		memset(counts, 0, sizeof counts);
		memset(want, 0, sizeof want);
		for (i = 0; i < nodes; i++)
		{
			SchedReasonSet s;

			g_case(&g);
			s = sched_admission(&g.p, &g.c);
			eligible += s == 0;
			sched_count_reasons(s, counts);
			for (r = 0; r < SCHED_R_COUNT; r++)
				want[r] += (ref_admission(&g.p, &g.c) >> r) & 1u;
		}
		for (r = 0; r < SCHED_R_COUNT; r++)
			CHECK_INT(counts[r], want[r]);
		if (!ref_check_summary(nodes, eligible, counts, msg, sizeof msg, 1))
			t_fail(__FILE__, __LINE__, "iteration %d: %s", it, msg);
	}
}

/* ------------------------------------------------------------------------------------ */


/* sched_placement_same_shape: true for equal placements in different memory and for
 * placements that differ only in the heartbeat cutoff (the clock), false when any static
 * input differs; the transient inputs are the candidate's, not p's. */
TEST(placement_same_shape)
{
	SchedLabel req1[] = {{.key = "zone", .value = "a"}};
	SchedLabel req2[] = {{.key = "zone", .value = "a"}};
	SchedLabel req3[] = {{.key = "zone", .value = "b"}};
	const char *const in1[] = {"a", "b"};
	const char *const in2[] = {"a", "b"};
	const char *const in3[] = {"a", "c"};
	SchedLabel ex1[] = {{.key = "zone", .op = SCHED_LABEL_IN, .nvalues = 2, .values = in1}};
	SchedLabel ex2[] = {{.key = "zone", .op = SCHED_LABEL_IN, .nvalues = 2, .values = in2}};
	SchedLabel ex3[] = {{.key = "zone", .op = SCHED_LABEL_IN, .nvalues = 2, .values = in3}};
	SchedVersionBound b1[] = {{SCHED_VCMP_GE, {2, {1, 2}}}};
	SchedVersionBound b2[] = {{SCHED_VCMP_GE, {2, {1, 3}}}};
	SchedLabel v1[] = {{.key = "os", .op = SCHED_LABEL_VERSION, .nbounds = 1, .bounds = b1}};
	SchedLabel v2[] = {{.key = "os", .op = SCHED_LABEL_VERSION, .nbounds = 1, .bounds = b2}};
	SchedLabel pref[] = {{.key = "tier", .value = "fast"}};
	char		version_a[] = "1.0";
	char		version_b[] = "1.0";
	SchedPlacement a = {.capability = "build", .capability_version = version_a,
		.required_labels = {1, req1}, .min_cpu_millis = 100, .reserve_memory_mb = 512,
		.heartbeat_cutoff = 1000};
	SchedPlacement b = a;
	SchedPlacement x;

	b.capability_version = version_b;
	b.required_labels.items = req2;
	CHECK(sched_placement_same_shape(&a, &b));
	x = b; x.required_labels.items = req3;
	CHECK(!sched_placement_same_shape(&a, &x));
	x = b; x.capability_version = "2.0";
	CHECK(!sched_placement_same_shape(&a, &x));
	x = b; x.min_cpu_millis = 101;
	CHECK(!sched_placement_same_shape(&a, &x));
	x = b; x.reserve_memory_mb = 513;
	CHECK(!sched_placement_same_shape(&a, &x));
	x = b; x.reserve_gpus = 1;
	CHECK(!sched_placement_same_shape(&a, &x));
	x = b; x.heartbeat_cutoff = 1001;
	CHECK(sched_placement_same_shape(&a, &x));
	x = b; x.pin_node_id = "n1";
	CHECK(!sched_placement_same_shape(&a, &x));
	x = b; x.preferred_labels = (SchedLabelSet) {1, pref};
	CHECK(!sched_placement_same_shape(&a, &x));
	x = b; x.required_labels = (SchedLabelSet) {0, NULL};
	CHECK(!sched_placement_same_shape(&a, &x));
	a.required_labels = (SchedLabelSet) {1, ex1};
	b.required_labels = (SchedLabelSet) {1, ex2};
	CHECK(sched_placement_same_shape(&a, &b));
	b.required_labels = (SchedLabelSet) {1, ex3};
	CHECK(!sched_placement_same_shape(&a, &b));
	a.required_labels = (SchedLabelSet) {1, v1};
	b.required_labels = (SchedLabelSet) {1, v1};
	CHECK(sched_placement_same_shape(&a, &b));
	b.required_labels = (SchedLabelSet) {1, v2};
	CHECK(!sched_placement_same_shape(&a, &b));
}


int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "-v") == 0)
		t_verbose = 1;

	RUN(reason_names_match_spec_table);
	RUN(reason_bits_and_transient_mask);
	RUN(admitted_baseline_is_empty_set);
	RUN(reason_pinned_to_other_node);
	RUN(reason_node_not_active);
	RUN(reason_capability_missing);
	RUN(reason_worker_not_ready);
	RUN(reason_worker_not_eligible);
	RUN(reason_heartbeat_expired);
	RUN(reason_capability_version_missing);
	RUN(reason_required_labels_mismatch);
	RUN(reason_insufficient_cpu_memory_gpus);
	RUN(reason_no_free_slot);
	RUN(reason_cpu_memory_gpus_exhausted);
	RUN(listing_order_is_spec_table_order);
	RUN(suppression_capability_missing_hides_worker_reasons);
	RUN(suppression_capability_missing_keeps_node_reasons);
	RUN(suppression_insufficient_hides_matching_exhausted);
	RUN(heartbeat_boundary);
	RUN(insufficient_uses_max_of_min_and_reserve);
	RUN(exhausted_arithmetic);
	RUN(required_labels_matching);
	RUN(preferred_labels_counted_not_required);
	RUN(pin_same_node_vs_other_node);
	RUN(effective_weight);
	RUN(score_formula);
	RUN(worked_example_seed_000);
	RUN(ranking_ties_by_node_id_bytewise);
	RUN(verdict_add);
	RUN(attempt_status_live);
	RUN(ranking_ties_by_node_id_bytes);
	RUN(ranking_held_candidates_last);
	RUN(score_add_running);
	RUN(spread_term_score);
	RUN(spread_with_add_running);
	RUN(spread_changes_ranking);
	RUN(preempt_all_removed_must_admit);
	RUN(preempt_none_when_it_already_fits);
	RUN(preempt_youngest_goes_among_equal_priorities);
	RUN(preempt_lowest_priority_goes_first);
	RUN(preempt_on_worker_and_off_worker_victims);
	RUN(preempt_two_small_victims);
	RUN(preempt_reprieve_order_is_kubernetes);
	RUN(preemption_cmp_order);
	RUN(labels_sort_and_get);
	RUN(labels_sort_duplicate_key_is_false);
	RUN(label_number_grammar);
	RUN(label_expr_eq_in_not_in);
	RUN(label_expr_exists);
	RUN(label_expr_gt_lt);
	RUN(version_parse);
	RUN(version_cmp);
	RUN(version_range_parse);
	RUN(version_in_range);
	RUN(label_expr_version);
	RUN(labels_first_unmet_in_key_order);
	RUN(admission_label_expressions);
	RUN(preferred_labels_stay_plain);
	RUN(count_reasons);
	RUN(format_summary_exact_strings);
	RUN(format_summary_truncation_like_snprintf);
	RUN(format_summary_null_buffer_measures);
	RUN(placement_same_shape);
	RUN(property_admission_matches_spec_reference);
	RUN(property_ranking_matches_reference);
	RUN(property_summary_matches_reference);
	RUN(property_summary_counts_from_admission);

	printf("%d passed, %d failed\n", t_passed, t_failed);
	return t_failed == 0 ? 0 : 1;
}

#endif							/* PG_SCHED_UNIT_NO_MAIN */
