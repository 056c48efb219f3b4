/*
 * fuzz_score.c — libFuzzer target: sched_score(), sched_effective_weight(),
 * sched_score_add_running() and sched_score_add_spread() (placement.c), on any int32
 * weight and live-attempt count, and sched_rank() on scores with the spread term.
 *
 * Properties:
 *   - the score is exactly preferred_matches * 1,000,000 - spread_matches * 100,000
 *     + effective_weight * 1,000 - running_attempts * 10,000, computed here in 128 bits:
 *     it fits int64 and was not wrapped (no silent overflow); preferred_matches is the
 *     label match count; sched_score() sets spread_matches to 0 (the caller adds it)
 *   - effective weight: the weight when > 0, else 100; always in [1, INT32_MAX]
 *   - the other fields: node_id is the candidate's, running_attempts its node's live
 *     attempts, held false, index untouched
 *   - one more unit of weight is +1,000, one more live attempt -10,000, one more
 *     preferred match +1,000,000 (where the inputs leave room)
 *   - sched_score_add_running(r, a) leaves r as sched_score() would score the node with
 *     a more live attempts; adding a then -a is the identity; a chain of additions
 *     equals one addition of the sum.  Counts stay within int32, as the callers' do (a
 *     node's live attempts plus attempts held in shared memory); -DFUZZ_OUT_OF_CONTRACT
 *     lifts that bound, and UBSan then reports the int32 overflow of running_attempts
 *   - score and admission are independent: scoring never reads the request's amounts
 *   - sched_score_add_spread(r, m), in chains interleaved with sched_score_add_running:
 *     spread_matches is the sum of the matches added, the score the formula above with
 *     it (exact), the two additions commute, one more match is -100,000
 *     (SCHED_SCORE_PER_SPREAD_MATCH), nothing else moves; counts stay within int32 as
 *     above (matches >= 0: live attempts of the key)
 *   - ranking with spread: up to FS_NODES nodes (0 to 2 preferred matches, weights and
 *     live attempts that tie often, spread matches, some held), scored with sched_score +
 *     sched_score_add_spread (+ sched_score_add_running for held ones), sorted by
 *     sched_rank: the same order as an insertion sort on scores computed here from the
 *     raw inputs by the formula (held last, higher score, smaller node_id bytewise)
 */
#include "fuzz_common.h"

#define FS_LABELS 12
#define FS_NODES 8

static SchedLabel fs_have[FS_LABELS],
			fs_pref[FS_LABELS];
static char fs_have_kv[FS_LABELS][2][FZ_STR],
			fs_pref_kv[FS_LABELS][2][FZ_STR];

static __int128
fs_formula(int32_t matches, int32_t weight, int64_t running)
{
	int32_t		w = weight <= 0 ? 100 : weight;

	return (__int128) matches * 1000000 + (__int128) w * 1000 - (__int128) running * 10000;
}

/* the documented score, spread term included, in 128 bits */
static __int128
fs_formula4(int32_t matches, int32_t weight, int64_t running, int64_t spread)
{
	return fs_formula(matches, weight, running) - (__int128) spread * 100000;
}

static void
fs_check_ranked(const SchedRanked *out, const SchedCandidate *c, int32_t matches, const char *what)
{
	__int128	want = fs_formula(matches, c->weight, c->node_live_attempts);

	FZ_CHECK(want >= INT64_MIN && want <= INT64_MAX, "%s: the exact score does not fit int64", what);
	FZ_CHECK((__int128) out->score == want, "%s: score %lld, exact %lld (matches %d weight %d running %d)",
			 what, (long long) out->score, (long long) want, (int) matches, (int) c->weight,
			 (int) c->node_live_attempts);
	FZ_CHECK(out->preferred_matches == matches, "%s: preferred_matches %d, want %d", what,
			 (int) out->preferred_matches, (int) matches);
	FZ_CHECK(out->weight == sched_effective_weight(c->weight) && out->weight >= 1,
			 "%s: weight %d for node weight %d", what, (int) out->weight, (int) c->weight);
	FZ_CHECK(out->running_attempts == c->node_live_attempts, "%s: running_attempts %d, want %d", what,
			 (int) out->running_attempts, (int) c->node_live_attempts);
	FZ_CHECK(out->node_id == c->node_id && !out->held && out->index == -77,
			 "%s: node_id, held or index not as expected", what);
	FZ_CHECK(out->spread_matches == 0, "%s: spread_matches %d, want 0 (sched_score leaves the term to the caller)",
			 what, (int) out->spread_matches);
}

/* ids in no particular order, distinct: ties in score are broken by them */
static const char *const fs_ids[FS_NODES] = {
	"node-9", "B", "node-10", "a", "\xc3\xa9", "A", "z", "node"
};
static SchedLabel fs_node_labels[FS_NODES][2];
static const SchedLabel fs_want[2] = {{"tier", "fast"}, {"zone", "eu"}};

typedef struct FsNode
{
	int			index;
	const char *id;
	bool		held;
	int64_t		score;			/* from the formula, not from the core */
} FsNode;

static bool
fs_node_before(const FsNode *x, const FsNode *y)
{
	if (x->held != y->held)
		return !x->held;
	if (x->score != y->score)
		return x->score > y->score;
	return ref_bytecmp(x->id, y->id) < 0;
}

/* Ranking with the spread term: sched_rank against the formula and an insertion sort. */
static void
fs_rank_with_spread(FzReader *r)
{
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked ranked[FS_NODES];
	FsNode		ref[FS_NODES];
	uint8_t		mode = fz_u8(r);
	int			n = fz_u8(r) % (FS_NODES + 1);
	int			rot = fz_u8(r) % FS_NODES;
	int			i,
				j;

	fz_placement_base(&p);
	p.preferred_labels.count = 2;
	p.preferred_labels.items = (SchedLabel *) fs_want;
	for (i = 0; i < n; i++)
	{
		uint8_t		b = fz_u8(r);
		int			nl = 0;
		int32_t		spread,
					held_more = 0;
		__int128	want;

		fz_candidate_base(&c, fs_ids[(i + rot) % FS_NODES]);
		if (b & 1)
			fs_node_labels[i][nl++] = fs_want[0];
		if (b & 2)
		{
			fs_node_labels[i][nl].key = "zone";
			fs_node_labels[i][nl++].value = (b & 4) ? "eu" : "us";
		}
		c.labels.count = nl;
		c.labels.items = fs_node_labels[i];
		switch ((b >> 3) & 7)
		{
			case 0:
				c.weight = 0;
				break;
			case 1:
				c.weight = 100;
				break;
			case 2:
				c.weight = 199;
				break;
			case 3:
				c.weight = 200;
				break;
			case 4:
				c.weight = 201;
				break;
			default:
				c.weight = (mode & 1) ? fz_i32(r) : (int32_t) fz_u8(r);
				break;
		}
		c.node_live_attempts = (mode & 2) ? fz_count(r) : fz_u8(r) % 24;
		spread = (mode & 4) ? fz_count(r) : fz_u8(r) % 12;
		memset(&ranked[i], 0x5a, sizeof ranked[i]);
		sched_score(&p, &c, &ranked[i]);
		ranked[i].index = i;
		sched_score_add_spread(&ranked[i], spread);
		ranked[i].held = (mode & 8) ? fz_bool(r) : false;
		if (ranked[i].held)
		{
			held_more = fz_u8(r) % 4;
			if (ranked[i].running_attempts > INT32_MAX - held_more)
				held_more = 0;
			sched_score_add_running(&ranked[i], held_more);
		}
		want = fs_formula4(ref_label_matches(&c.labels, &p.preferred_labels), c.weight,
						   (int64_t) c.node_live_attempts + held_more, spread);
		FZ_CHECK((__int128) ranked[i].score == want && ranked[i].spread_matches == spread,
				 "node %s: score %lld spread %d, want %lld spread %d", c.node_id,
				 (long long) ranked[i].score, (int) ranked[i].spread_matches, (long long) want,
				 (int) spread);
		ref[i].index = i;
		ref[i].id = c.node_id;
		ref[i].held = ranked[i].held;
		ref[i].score = (int64_t) want;
	}
	for (i = 1; i < n; i++)
	{
		FsNode		v = ref[i];

		for (j = i; j > 0 && fs_node_before(&v, &ref[j - 1]); j--)
			ref[j] = ref[j - 1];
		ref[j] = v;
	}
	sched_rank(ranked, n);
	for (i = 0; i < n; i++)
		FZ_CHECK(ranked[i].index == ref[i].index,
				 "position %d: sched_rank has %s (score %lld), the formula's order %s (score %lld)",
				 i, ranked[i].node_id, (long long) ranked[i].score, ref[i].id, (long long) ref[i].score);
}

static void
fs_score(const SchedPlacement *p, const SchedCandidate *c, SchedRanked *out)
{
	memset(out, 0x5a, sizeof *out);
	out->index = -77;
	sched_score(p, c, out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzReader	r;
	SchedPlacement p,
				p2;
	SchedCandidate c,
				c2;
	SchedRanked out,
				out2,
				chain;
	int32_t		matches;
	int64_t		total;
	int			i,
				n,
				k;

	fz_target_name = "fuzz_score";
	fz_init(&r, data, size);
	fz_placement_base(&p);
	fz_candidate_base(&c, "node-a");
	c.weight = fz_i32(&r);
	c.node_live_attempts = fz_i32(&r);
#ifndef FUZZ_OUT_OF_CONTRACT
	if (c.node_live_attempts < 0 && fz_bool(&r))
		c.node_live_attempts = -(c.node_live_attempts + 1);	/* mostly >= 0, as in the table */
#endif
	n = fz_u8(&r) % (FS_LABELS + 1);
	for (i = 0; i < n; i++)
	{
		fz_str(&r, fs_have_kv[i][0], 8);
		fz_str(&r, fs_have_kv[i][1], 2);
		fs_have[i].key = fs_have_kv[i][0];
		fs_have[i].value = fs_have_kv[i][1];
	}
	c.labels.count = fz_dedupe_sort(fs_have, n);
	c.labels.items = fs_have;
	n = fz_u8(&r) % (FS_LABELS + 1);
	for (i = 0; i < n; i++)
	{
		fz_str(&r, fs_pref_kv[i][0], 8);
		fz_str(&r, fs_pref_kv[i][1], 2);
		fs_pref[i].key = fs_pref_kv[i][0];
		fs_pref[i].value = fs_pref_kv[i][1];
	}
	p.preferred_labels.count = fz_dedupe_sort(fs_pref, n);
	p.preferred_labels.items = fs_pref;
	matches = ref_label_matches(&c.labels, &p.preferred_labels);

	FZ_CHECK(sched_effective_weight(c.weight) == (c.weight <= 0 ? 100 : c.weight),
			 "effective weight %d for %d", (int) sched_effective_weight(c.weight), (int) c.weight);
	fs_score(&p, &c, &out);
	fs_check_ranked(&out, &c, matches, "sched_score");

	/* amounts asked for do not enter the score */
	p2 = p;
	p2.min_cpu_millis = fz_amount(&r);
	p2.reserve_memory_mb = fz_amount(&r);
	p2.min_gpus = fz_amount(&r);
	fs_score(&p2, &c, &out2);
	FZ_CHECK(out2.score == out.score, "the score depends on the request's amounts");

	/* one more unit of weight, one more live attempt, one preferred match fewer */
	c2 = c;
	if (c2.weight > 0 && c2.weight < INT32_MAX)
	{
		c2.weight++;
		fs_score(&p, &c2, &out2);
		FZ_CHECK(out2.score - out.score == 1000, "weight + 1 moved the score by %lld",
				 (long long) (out2.score - out.score));
		c2.weight--;
	}
	if (c2.node_live_attempts < INT32_MAX)
	{
		c2.node_live_attempts++;
		fs_score(&p, &c2, &out2);
		FZ_CHECK(out.score - out2.score == SCHED_SCORE_PER_RUNNING_ATTEMPT,
				 "one more live attempt moved the score by %lld", (long long) (out2.score - out.score));
		c2.node_live_attempts--;
	}
	if (matches > 0)
	{
		/* drop preferred entries until one match is gone */
		p2 = p;
		while (ref_label_matches(&c.labels, &p2.preferred_labels) == matches)
			p2.preferred_labels.count--;
		fs_score(&p2, &c, &out2);
		FZ_CHECK(out.score - out2.score == 1000000, "one preferred match fewer moved the score by %lld",
				 (long long) (out2.score - out.score));
	}

	/* sched_score_add_running: a chain of additions */
	chain = out;
	total = 0;
	k = fz_u8(&r) % 6;
	for (i = 0; i < k; i++)
	{
		int32_t		a = fz_i32(&r);
		int64_t		after;
		SchedRanked one;

#ifndef FUZZ_OUT_OF_CONTRACT
		/* what the callers add: attempts held on the node, so the count stays an int32 */
		after = (int64_t) chain.running_attempts + a;
		if (after > INT32_MAX || after < INT32_MIN)
			a = 0;
#endif
		one = chain;
		sched_score_add_running(&chain, a);
		total += a;
		after = (int64_t) c.node_live_attempts + total;
		FZ_CHECK(chain.running_attempts == after, "running_attempts %d, want %lld", (int) chain.running_attempts,
				 (long long) after);
		FZ_CHECK((__int128) chain.score == fs_formula(matches, c.weight, after),
				 "score %lld after adding %d running attempts, exact %lld", (long long) chain.score, (int) a,
				 (long long) fs_formula(matches, c.weight, after));
		c2 = c;
		c2.node_live_attempts = (int32_t) after;
		fs_score(&p, &c2, &out2);
		FZ_CHECK(out2.score == chain.score && out2.running_attempts == chain.running_attempts,
				 "add_running disagrees with sched_score on %lld live attempts", (long long) after);
		FZ_CHECK(chain.preferred_matches == one.preferred_matches && chain.weight == one.weight &&
				 chain.node_id == one.node_id && chain.index == one.index && chain.held == one.held,
				 "add_running changed other fields");
		if (a != INT32_MIN)
		{
			sched_score_add_running(&one, a);
			sched_score_add_running(&one, -a);
			sched_score_add_running(&one, a);
			FZ_CHECK(one.score == chain.score && one.running_attempts == chain.running_attempts,
					 "adding %d, -%d, %d is not adding %d", (int) a, (int) a, (int) a, (int) a);
		}
	}

	/* sched_score_add_spread: chains of spread matches, running attempts interleaved */
	{
		int64_t		run_total = 0,
					spread_total = 0;

		chain = out;
		k = fz_u8(&r) % 8;
		for (i = 0; i < k; i++)
		{
			uint8_t		op = fz_u8(&r);
			int32_t		m = (op & 1) ? fz_count(&r) : (int32_t) (op >> 4);
			int32_t		a = (op & 2) ? (int32_t) fz_u8(&r) : 0;
			SchedRanked one = chain,
						two;
			int64_t		running;

#ifndef FUZZ_OUT_OF_CONTRACT
			if ((int64_t) chain.spread_matches + m > INT32_MAX)
				m = 0;
			if ((int64_t) chain.running_attempts + a > INT32_MAX)
				a = 0;
#endif
			sched_score_add_spread(&chain, m);
			if (op & 4)
				sched_score_add_running(&chain, a);
			else
				a = 0;
			spread_total += m;
			run_total += a;
			running = (int64_t) c.node_live_attempts + run_total;
			FZ_CHECK(chain.spread_matches == spread_total, "spread_matches %d, want %lld",
					 (int) chain.spread_matches, (long long) spread_total);
			FZ_CHECK(chain.running_attempts == running, "running_attempts %d, want %lld",
					 (int) chain.running_attempts, (long long) running);
			FZ_CHECK((__int128) chain.score == fs_formula4(matches, c.weight, running, spread_total),
					 "score %lld with %lld spread matches and %lld running, exact %lld",
					 (long long) chain.score, (long long) spread_total, (long long) running,
					 (long long) fs_formula4(matches, c.weight, running, spread_total));
			FZ_CHECK(chain.preferred_matches == one.preferred_matches && chain.weight == one.weight &&
					 chain.node_id == one.node_id && chain.index == one.index && chain.held == one.held,
					 "add_spread changed other fields");
			/* the other order gives the same record */
			two = one;
			if (op & 4)
				sched_score_add_running(&two, a);
			sched_score_add_spread(&two, m);
			FZ_CHECK(two.score == chain.score && two.spread_matches == chain.spread_matches &&
					 two.running_attempts == chain.running_attempts,
					 "add_running and add_spread do not commute");
			/* one more match is -100,000 */
			if (chain.spread_matches < INT32_MAX)
			{
				two = chain;
				sched_score_add_spread(&two, 1);
				FZ_CHECK(chain.score - two.score == 100000 &&
						 chain.score - two.score == SCHED_SCORE_PER_SPREAD_MATCH &&
						 two.spread_matches == chain.spread_matches + 1,
						 "one more spread match moved the score by %lld", (long long) (two.score - chain.score));
			}
		}
	}

	fs_rank_with_spread(&r);
	return 0;
}
