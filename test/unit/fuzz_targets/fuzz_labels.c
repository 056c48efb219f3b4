/*
 * fuzz_labels.c — libFuzzer target: label maps and label matching (placement.c's
 * sched_labels_sort, sched_labels_get, sched_labels_matching, and how admission and
 * scoring use them for required and preferred labels).
 *
 * The input decodes into three label maps of up to FL_MAX entries each (node labels,
 * required, preferred), keys and values drawn mostly from a small pool so that they
 * collide, sometimes raw bytes (high bytes included: the order is bytewise unsigned),
 * with duplicate keys in the raw decoding.  Properties checked:
 *   sort      false exactly when a key repeats; a permutation of its input either way;
 *             sorted by key (strictly when true); sorting again is true and a no-op
 *   get       finds every key of a sorted unique set, with its own value; agrees with a
 *             linear scan for keys that may be absent
 *   matching  equals a linear count; 0 <= m <= |wanted|; symmetric; m(have, have) =
 *             |have|; 0 against an empty set; removing an entry of `have` lowers m by
 *             at most one; have ∪ wanted (wanted's values winning) matches all of wanted
 *   admission on an otherwise admissible pair: the only possible reason is
 *             required_labels_mismatch, exactly when some required entry is not matched;
 *             preferred labels never change admission
 *   score     preferred_matches = m(have, preferred); the score moves by exactly
 *             1,000,000 per match
 */
#include "fuzz_common.h"

#define FL_MAX 24

typedef struct FlMap
{
	int			n;
	SchedLabel	items[FL_MAX * 2];
	char		kv[FL_MAX * 2][2][FZ_STR];
} FlMap;

static FlMap fl_have,
			fl_req,
			fl_pref,
			fl_union;

static void
fl_decode(FzReader *r, FlMap *m, int max)
{
	int			i;
	int			small = 2 + fz_u8(r) % 10;	/* pool size: how often keys collide */

	m->n = fz_u8(r) % (max + 1);
	for (i = 0; i < m->n; i++)
	{
		fz_str(r, m->kv[i][0], small);
		fz_str(r, m->kv[i][1], 3);
		m->items[i].key = m->kv[i][0];
		m->items[i].value = m->kv[i][1];
	}
}

static SchedLabelSet
fl_set(FlMap *m)
{
	SchedLabelSet s;

	s.count = m->n;
	s.items = m->n > 0 ? m->items : NULL;
	return s;
}

/* sched_labels_sort on the raw decoding (duplicates and all), then dedupe and sort. */
static void
fl_check_sort(FlMap *m)
{
	SchedLabel	before[FL_MAX * 2];
	SchedLabelSet s = fl_set(m);
	bool		dup = false;
	bool		ok;
	int			i,
				j;

	for (i = 0; i < m->n; i++)
		for (j = i + 1; j < m->n; j++)
			if (ref_streq(m->items[i].key, m->items[j].key))
				dup = true;
	memcpy(before, m->items, sizeof(SchedLabel) * (size_t) m->n);
	ok = sched_labels_sort(&s);
	FZ_CHECK(ok == !dup, "sched_labels_sort returned %d with duplicate=%d (n=%d)", ok, dup, m->n);
	FZ_CHECK(s.count == m->n, "count changed %d -> %d", m->n, s.count);
	for (i = 0; i < m->n; i++)
	{
		int			found = 0;

		for (j = 0; j < m->n; j++)
			if (m->items[j].key == before[i].key && m->items[j].value == before[i].value)
				found++;
		FZ_CHECK(found == 1, "entry %d (\"%s\") found %d times after sorting", i, before[i].key, found);
	}
	for (i = 1; i < m->n; i++)
	{
		int			c = ref_bytecmp(m->items[i - 1].key, m->items[i].key);

		FZ_CHECK(ok ? c < 0 : c <= 0, "not sorted at %d: \"%s\" then \"%s\"", i,
				 m->items[i - 1].key, m->items[i].key);
	}
	/* restore the decoding order: the dedupe keeps the first of each key */
	memcpy(m->items, before, sizeof(SchedLabel) * (size_t) m->n);
	m->n = fz_dedupe_sort(m->items, m->n);
	memcpy(before, m->items, sizeof(SchedLabel) * (size_t) m->n);
	s = fl_set(m);
	FZ_CHECK(sched_labels_sort(&s), "sorting a sorted unique set returned false");
	FZ_CHECK(memcmp(before, m->items, sizeof(SchedLabel) * (size_t) m->n) == 0,
			 "sorting a sorted set moved entries");
}

static void
fl_check_get(const SchedLabelSet *s, const SchedLabelSet *probes)
{
	int			i;

	for (i = 0; i < s->count; i++)
		FZ_CHECK(sched_labels_get(s, s->items[i].key) == s->items[i].value,
				 "get(\"%s\") does not return its own value", s->items[i].key);
	for (i = 0; i < probes->count; i++)
		FZ_CHECK(sched_labels_get(s, probes->items[i].key) == ref_label_value(s, probes->items[i].key),
				 "get(\"%s\") disagrees with a linear scan", probes->items[i].key);
	FZ_CHECK(sched_labels_get(s, "\xff\xff\xff\xff-absent") == ref_label_value(s, "\xff\xff\xff\xff-absent"),
			 "get of a high-byte key disagrees with a linear scan");
}

static void
fl_check_matching(const SchedLabelSet *have, const SchedLabelSet *wanted)
{
	SchedLabelSet empty = {0, NULL};
	SchedLabel	less[FL_MAX * 2];
	SchedLabelSet ls;
	int			m = sched_labels_matching(have, wanted);
	int			i,
				k;

	FZ_CHECK(m == ref_label_matches(have, wanted), "matching = %d, linear count = %d", m,
			 ref_label_matches(have, wanted));
	FZ_CHECK(m >= 0 && m <= wanted->count, "matching = %d outside [0, %d]", m, wanted->count);
	FZ_CHECK(sched_labels_matching(wanted, have) == m, "matching is not symmetric: %d vs %d", m,
			 sched_labels_matching(wanted, have));
	FZ_CHECK(sched_labels_matching(have, have) == have->count, "a set does not match itself");
	FZ_CHECK(sched_labels_matching(have, &empty) == 0 && sched_labels_matching(&empty, wanted) == 0,
			 "matching against an empty set is not 0");
	/* drop each entry of `have` in turn: m drops by 0 or 1 */
	for (k = 0; k < have->count; k++)
	{
		int			n = 0,
					m2;

		for (i = 0; i < have->count; i++)
			if (i != k)
				less[n++] = have->items[i];
		ls.count = n;
		ls.items = less;
		m2 = sched_labels_matching(&ls, wanted);
		FZ_CHECK(m2 == m || m2 == m - 1, "dropping \"%s\" took matching from %d to %d",
				 have->items[k].key, m, m2);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzReader	r;
	SchedLabelSet have,
				req,
				pref,
				uni;
	SchedPlacement p;
	SchedCandidate c;
	SchedRanked sc,
				sc0;
	SchedReasonSet reasons,
				reasons_nopref;
	int			m_req,
				m_pref,
				i;

	fz_target_name = "fuzz_labels";
	fz_init(&r, data, size);
	fl_decode(&r, &fl_have, FL_MAX);
	fl_decode(&r, &fl_req, FL_MAX / 2);
	fl_decode(&r, &fl_pref, FL_MAX / 2);
	fl_check_sort(&fl_have);
	fl_check_sort(&fl_req);
	fl_check_sort(&fl_pref);
	have = fl_set(&fl_have);
	req = fl_set(&fl_req);
	pref = fl_set(&fl_pref);

	fl_check_get(&have, &req);
	fl_check_get(&have, &pref);
	fl_check_get(&req, &have);
	fl_check_matching(&have, &req);
	fl_check_matching(&have, &pref);
	fl_check_matching(&req, &pref);

	/* have ∪ req, req's values winning: matches every required entry */
	fl_union.n = 0;
	for (i = 0; i < req.count; i++)
		fl_union.items[fl_union.n++] = req.items[i];
	for (i = 0; i < have.count; i++)
		fl_union.items[fl_union.n++] = have.items[i];
	fl_union.n = fz_dedupe_sort(fl_union.items, fl_union.n);
	uni = fl_set(&fl_union);
	FZ_CHECK(sched_labels_matching(&uni, &req) == req.count,
			 "have + required does not match every required entry (%d of %d)",
			 sched_labels_matching(&uni, &req), req.count);

	/* admission and score on a pair that nothing else keeps apart */
	m_req = sched_labels_matching(&have, &req);
	m_pref = sched_labels_matching(&have, &pref);
	fz_placement_base(&p);
	fz_candidate_base(&c, "node-a");
	c.labels = have;
	p.required_labels = req;
	p.preferred_labels = pref;
	reasons = sched_admission(&p, &c);
	FZ_CHECK(reasons == (m_req == req.count ? 0 : REF_BIT(SCHED_R_REQUIRED_LABELS_MISMATCH)),
			 "reasons 0x%x with %d of %d required labels matched", (unsigned) reasons, m_req, req.count);
	FZ_CHECK(reasons == ref_admission(&p, &c), "admission differs from the SPEC reference");
	p.preferred_labels.count = 0;
	p.preferred_labels.items = NULL;
	reasons_nopref = sched_admission(&p, &c);
	FZ_CHECK(reasons_nopref == reasons, "preferred labels changed admission");
	sched_score(&p, &c, &sc0);
	p.preferred_labels = pref;
	sched_score(&p, &c, &sc);
	FZ_CHECK(sc.preferred_matches == m_pref, "preferred_matches %d, matching %d", sc.preferred_matches, m_pref);
	FZ_CHECK(sc0.preferred_matches == 0, "no preferred labels but %d matches", sc0.preferred_matches);
	FZ_CHECK(sc.score - sc0.score == (int64_t) m_pref * 1000000,
			 "score moved by %lld for %d preferred matches", (long long) (sc.score - sc0.score), m_pref);
	/* required labels on the node itself always pass */
	p.required_labels = have;
	FZ_CHECK(sched_admission(&p, &c) == 0, "a node does not satisfy its own labels as required");
	return 0;
}
