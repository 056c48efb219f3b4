/*
 * fuzz_rank.c — libFuzzer target: sched_ranked_cmp() and sched_rank() (placement.c) on
 * arrays of up to FR_MAX candidates with unique node_ids (node_id is a key), any int64
 * score (ties, INT64_MIN and INT64_MAX included) and any held flag.
 *
 * Properties:
 *   - the comparator is a strict total order on distinct node_ids: cmp(x, x) = 0,
 *     sign(cmp(x, y)) = -sign(cmp(y, x)), cmp(x, y) != 0 for x != y, and after sorting
 *     every earlier element compares below every later one (so it is transitive on the
 *     array)
 *   - the order is consistent with scores: held candidates last; within each group the
 *     scores never increase; equal scores by node_id ascending, bytewise unsigned
 *   - the result is a permutation of the input (index and node_id kept together), equal
 *     to an insertion sort with the SPEC's order written out, and the same whatever the
 *     order of the input (reversed, rotated); sorting again changes nothing
 *   - with scores from sched_score() of real candidates, the first unheld candidate has
 *     the highest score among the unheld ones
 */
#include "fuzz_common.h"

#define FR_MAX 48

static char fr_ids[FR_MAX][FZ_STR];
static SchedRanked fr_in[FR_MAX],
			fr_a[FR_MAX],
			fr_b[FR_MAX],
			fr_ref[FR_MAX];

static int
fr_sign(int v)
{
	return (v > 0) - (v < 0);
}

/* held last, then higher score, then smaller node_id bytewise */
static int
fr_ref_before(const SchedRanked *x, const SchedRanked *y)
{
	if (x->held != y->held)
		return !x->held;
	if (x->score != y->score)
		return x->score > y->score;
	return ref_bytecmp(x->node_id, y->node_id) < 0;
}

static void
fr_ref_sort(SchedRanked *a, int n)
{
	int			i,
				j;

	for (i = 1; i < n; i++)
	{
		SchedRanked v = a[i];

		for (j = i; j > 0 && fr_ref_before(&v, &a[j - 1]); j--)
			a[j] = a[j - 1];
		a[j] = v;
	}
}

static int64_t
fr_score(FzReader *r, uint8_t mode)
{
	switch (mode & 3)
	{
		case 0:
			return (int64_t) (fz_u8(r) % 3);	/* many ties */
		case 1:
			return (int64_t) (int8_t) fz_u8(r) * 1000;
		case 2:
			return fz_i64(r);
		default:
			return (int64_t) fz_u8(r) * 1000000 + (int64_t) fz_u8(r) * 1000 - (int64_t) fz_u8(r) * 10000;
	}
}

static void
fr_same(const SchedRanked *x, const SchedRanked *y, int n, const char *what)
{
	int			i;

	for (i = 0; i < n; i++)
		FZ_CHECK(x[i].index == y[i].index && x[i].node_id == y[i].node_id && x[i].score == y[i].score &&
				 x[i].held == y[i].held, "%s: position %d differs (\"%s\" vs \"%s\")", what, i,
				 x[i].node_id, y[i].node_id);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzReader	r;
	uint8_t		mode;
	int			want,
				n = 0,
				i,
				j,
				rot;
	int			seen[FR_MAX];

	fz_target_name = "fuzz_rank";
	fz_init(&r, data, size);
	mode = fz_u8(&r);
	want = fz_u8(&r) % (FR_MAX + 1);
	for (i = 0; i < want; i++)
	{
		fz_str(&r, fr_ids[n], 12);
		for (j = 0; j < n; j++)
			if (ref_streq(fr_ids[j], fr_ids[n]))
				break;
		if (j < n)
			continue;			/* node_id is a key */
		memset(&fr_in[n], 0, sizeof fr_in[n]);
		fr_in[n].index = n;
		fr_in[n].node_id = fr_ids[n];
		fr_in[n].held = (mode & 4) ? fz_bool(&r) : false;
		if (mode & 8)
		{
			/* scored like the extension does: sched_score of a candidate */
			SchedPlacement p;
			SchedCandidate c;

			fz_placement_base(&p);
			fz_candidate_base(&c, fr_ids[n]);
			c.weight = fz_i32(&r);
			c.node_live_attempts = fz_count(&r);
			sched_score(&p, &c, &fr_in[n]);
			fr_in[n].index = n;
			fr_in[n].held = (mode & 4) ? fz_bool(&r) : false;
			if (fr_in[n].held)
			{
				/* attempts held on the node; the count stays an int32 as the callers' does */
				int			a = fz_u8(&r);

				if (fr_in[n].running_attempts > INT32_MAX - a)
					a = INT32_MAX - fr_in[n].running_attempts;
				sched_score_add_running(&fr_in[n], a);
			}
		}
		else
			fr_in[n].score = fr_score(&r, (uint8_t) (mode >> 4));
		n++;
	}

	/* the comparator on every pair */
	for (i = 0; i < n; i++)
	{
		FZ_CHECK(sched_ranked_cmp(&fr_in[i], &fr_in[i]) == 0, "cmp(x, x) != 0 for \"%s\"", fr_ids[i]);
		for (j = i + 1; j < n; j++)
		{
			int			a = fr_sign(sched_ranked_cmp(&fr_in[i], &fr_in[j]));
			int			b = fr_sign(sched_ranked_cmp(&fr_in[j], &fr_in[i]));

			FZ_CHECK(a != 0 && a == -b, "cmp(\"%s\", \"%s\") = %d but the reverse is %d", fr_ids[i],
					 fr_ids[j], a, b);
			FZ_CHECK((a < 0) == (fr_ref_before(&fr_in[i], &fr_in[j]) != 0),
					 "cmp(\"%s\" score %lld held %d, \"%s\" score %lld held %d) = %d against the SPEC order",
					 fr_ids[i], (long long) fr_in[i].score, fr_in[i].held, fr_ids[j],
					 (long long) fr_in[j].score, fr_in[j].held, a);
		}
	}

	memcpy(fr_a, fr_in, sizeof(SchedRanked) * (size_t) n);
	sched_rank(fr_a, n);

	memset(seen, 0, sizeof seen);
	for (i = 0; i < n; i++)
	{
		int			k = fr_a[i].index;

		FZ_CHECK(k >= 0 && k < n && !seen[k] && fr_a[i].node_id == fr_ids[k] &&
				 fr_a[i].score == fr_in[k].score && fr_a[i].held == fr_in[k].held,
				 "not a permutation of the input at position %d", i);
		seen[k] = 1;
		if (i > 0)
		{
			const SchedRanked *x = &fr_a[i - 1];
			const SchedRanked *y = &fr_a[i];

			FZ_CHECK(!x->held || y->held, "held \"%s\" ranked before unheld \"%s\"", x->node_id, y->node_id);
			FZ_CHECK(x->held != y->held || x->score >= y->score,
					 "score %lld ranked before higher %lld", (long long) x->score, (long long) y->score);
			FZ_CHECK(x->held != y->held || x->score != y->score || ref_bytecmp(x->node_id, y->node_id) < 0,
					 "tie on %lld: \"%s\" before \"%s\"", (long long) x->score, x->node_id, y->node_id);
		}
		for (j = i + 1; j < n; j++)
			FZ_CHECK(sched_ranked_cmp(&fr_a[i], &fr_a[j]) < 0, "sorted position %d does not compare below %d",
					 i, j);
	}

	memcpy(fr_ref, fr_in, sizeof(SchedRanked) * (size_t) n);
	fr_ref_sort(fr_ref, n);
	fr_same(fr_a, fr_ref, n, "sched_rank vs reference insertion sort");

	/* the input's order does not matter */
	for (i = 0; i < n; i++)
		fr_b[i] = fr_in[n - 1 - i];
	sched_rank(fr_b, n);
	fr_same(fr_a, fr_b, n, "reversed input");
	rot = n > 0 ? fz_u8(&r) % n : 0;
	for (i = 0; i < n; i++)
		fr_b[i] = fr_in[(i + rot) % n];
	sched_rank(fr_b, n);
	fr_same(fr_a, fr_b, n, "rotated input");
	sched_rank(fr_b, n);
	fr_same(fr_a, fr_b, n, "sorted twice");

	/* the best unheld candidate has the highest unheld score */
	if (n > 0 && !fr_a[0].held)
		for (i = 0; i < n; i++)
			FZ_CHECK(fr_in[i].held || fr_in[i].score <= fr_a[0].score, "\"%s\" scores above the first",
					 fr_ids[i]);
	return 0;
}
