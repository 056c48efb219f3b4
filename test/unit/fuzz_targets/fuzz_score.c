/*
 * fuzz_score.c — libFuzzer target: sched_score(), sched_effective_weight() and
 * sched_score_add_running() (placement.c), on any int32 weight and live-attempt count.
 *
 * Properties:
 *   - the score is exactly preferred_matches * 1,000,000 + effective_weight * 1,000
 *     - running_attempts * 10,000, computed here in 128 bits: it fits int64 and was not
 *     wrapped (no silent overflow); preferred_matches is the label match count
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
 */
#include "fuzz_common.h"

#define FS_LABELS 12

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
	return 0;
}
