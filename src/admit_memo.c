/*
 * admit_memo.c — what admission found of a shape on the rows of one fleet, kept while the
 * rows stay as they were.
 *
 * Requests of one shape (sched_placement_same_shape) ask the same of every node but for
 * what changes as attempts come and go (SCHED_TRANSIENT_REASONS: the row's counters) and
 * what moves with the clock (SCHED_CLOCK_REASONS: the heartbeat cutoff).  So a memo
 * judges each row in full once per shape, and from then on only for those reasons, until
 * the owner of the rows says the row changed.  A batch keeps memos for one call
 * (batch.c); the fleet mirror keeps them across calls, for the rows it has not re-read
 * (fleet_mirror.c).
 *
 * A memo also carries the best rows (m->carry of them) of its last walk over every row, and
 * the worst of them as a bound: no other row ranked before it (the mirror's memos across
 * calls, a batch's copy of them for the rest of its call).  A row's score changes only
 * when the row does (the mirror forgets it, and the memo judges it at the next call: if
 * it now ranks before the bound it is carried too), so sched_admit_memos_best gives the
 * carried rows, and a caller that ranks one of them before the bound (after lowering
 * scores for what it adds: running attempts in flight, spread) knows it ranks before
 * every row of the fleet without reading them; a walk is needed only when none does.
 *
 * Memory: each memo lives in a context of its own (a child of the set's parent), so a
 * memo that gives way to another shape frees its copy of the placement.
 */
#include "postgres.h"

#include "admit_memo.h"
#include "settings.h"

#include "utils/memutils.h"

/* marks, per row */
#define MEMO_IN_TOP 1			/* in top */
#define MEMO_DIRTY 2			/* in dirty */

void
sched_admit_memos_init(SchedAdmitMemos *set, MemoryContext parent)
{
	memset(set, 0, sizeof(*set));
	set->parent = parent;
}

static const char *
copy_text(const char *s)
{
	return s == NULL ? NULL : pstrdup(s);
}

static void
copy_labels(SchedLabelSet *to, const SchedLabelSet *from)
{
	int			i;

	to->count = from->count;
	to->items = palloc0(sizeof(SchedLabel) * Max(from->count, 1));
	for (i = 0; i < from->count; i++)
	{
		const SchedLabel *f = &from->items[i];
		SchedLabel *t = &to->items[i];

		/* (only what the label's operator uses: the rest may be uninitialized) */
		memset(t, 0, sizeof(*t));
		t->op = f->op;
		t->key = copy_text(f->key);
		if (f->op == SCHED_LABEL_EQ)
			t->value = copy_text(f->value);
		if (f->op == SCHED_LABEL_GT || f->op == SCHED_LABEL_LT)
			t->number = f->number;
		if (f->op == SCHED_LABEL_IN || f->op == SCHED_LABEL_NOT_IN)
		{
			const char **values = palloc(sizeof(char *) * Max(f->nvalues, 1));
			int			k;

			for (k = 0; k < f->nvalues; k++)
				values[k] = copy_text(f->values[k]);
			t->nvalues = f->nvalues;
			t->values = values;
		}
		if (f->op == SCHED_LABEL_VERSION)
		{
			SchedVersionBound *bounds = palloc(sizeof(SchedVersionBound) * f->nbounds);

			memcpy(bounds, f->bounds, sizeof(SchedVersionBound) * f->nbounds);
			t->nbounds = f->nbounds;
			t->bounds = bounds;
		}
	}
}

/* Room in m for `count` rows, the new entries not judged. */
static void
ensure_size(SchedAdmitMemo *m, int count)
{
	int			size = Max(64, m->size);

	if (count <= m->size)
		return;
	while (size < count)
		size *= 2;
	if (m->state == NULL)
	{
		m->state = MemoryContextAllocZero(m->cxt, sizeof(uint8) * size);
		m->matches = MemoryContextAlloc(m->cxt, sizeof(int32) * size);
		m->marks = MemoryContextAllocZero(m->cxt, sizeof(uint8) * size);
	}
	else
	{
		m->state = repalloc(m->state, sizeof(uint8) * size);
		m->matches = repalloc(m->matches, sizeof(int32) * size);
		m->marks = repalloc(m->marks, sizeof(uint8) * size);
		memset(m->state + m->size, 0, sizeof(uint8) * (size - m->size));
		memset(m->marks + m->size, 0, sizeof(uint8) * (size - m->size));
	}
	m->size = size;
}

/* m, unused, given a copy of placement p (in its own context) and room for `count` rows. */
static void
memo_start(SchedAdmitMemos *set, SchedAdmitMemo *m, const SchedPlacement *p, int count)
{
	MemoryContext old;

	if (m->cxt == NULL)
		m->cxt = AllocSetContextCreate(set->parent, "pg_sched admission memo",
									   ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(m->cxt);
	m->state = NULL;
	m->matches = NULL;
	m->marks = NULL;
	m->size = 0;
	m->top_valid = false;
	m->top = NULL;
	m->dirty = NULL;
	m->bound.node_id = NULL;
	m->carry = SCHED_ADMIT_TOP;
	m->calls = 0;
	old = MemoryContextSwitchTo(m->cxt);
	m->p = *p;
	m->p.capability = copy_text(p->capability);
	m->p.capability_version = copy_text(p->capability_version);
	m->p.pin_node_id = copy_text(p->pin_node_id);
	copy_labels(&m->p.required_labels, &p->required_labels);
	copy_labels(&m->p.preferred_labels, &p->preferred_labels);
	MemoryContextSwitchTo(old);
	ensure_size(m, count);
	m->last_use = ++set->uses;
}

/* The memo of p's shape, with room for `count` rows: one that holds it, else the least
 * recently used (or an unused one), given to it with no row judged. */
static SchedAdmitMemo *
memo_for(SchedAdmitMemos *set, const SchedPlacement *p, int count)
{
	SchedAdmitMemo *m = NULL;
	int			i;

	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
		if (set->memos[i].cxt != NULL && sched_placement_same_shape(&set->memos[i].p, p))
		{
			m = &set->memos[i];
			m->last_use = ++set->uses;
			ensure_size(m, count);
			return m;
		}
	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
		if (m == NULL || set->memos[i].cxt == NULL || set->memos[i].last_use < m->last_use)
		{
			m = &set->memos[i];
			if (m->cxt == NULL)
				break;
		}
	memo_start(set, m, p, count);
	return m;
}

/*
 * Whether row i of fleet admits p (the shape of m) now, judging it by what m knows of it
 * (in full when m has not judged it); if so, its score into *out.
 */
static inline bool
memo_admits(SchedAdmitMemo *m, const SchedFleet *fleet, const SchedPlacement *p, int i,
			SchedRanked *out)
{
	const SchedCandidate *c = &fleet->rows[i].c;

	if (fleet->rows[i].busy || m->state[i] == 2)
		return false;
	if (m->state[i] == 0)
	{
		SchedReasonSet r = sched_admission(p, c);

		if ((r & ~(SCHED_TRANSIENT_REASONS | SCHED_CLOCK_REASONS)) != 0)
		{
			m->state[i] = 2;
			return false;
		}
		m->state[i] = 1;
		m->matches[i] = sched_labels_matching(&c->labels, &p->preferred_labels);
		if (r != 0)
			return false;
	}
	else if (sched_admission_clock(p, c) != 0 || sched_admission_transient(p, c) != 0)
		return false;
	sched_score_matched(c, m->matches[i], out);
	out->index = i;
	return true;
}

/* Sets m's bound to r (its node_id copied). */
static void
set_bound(SchedAdmitMemo *m, const SchedRanked *r)
{
	if (m->bound.node_id != NULL)
		pfree((char *) m->bound.node_id);
	m->bound = *r;
	m->bound.held = false;
	m->bound.node_id = MemoryContextStrdup(m->cxt, r->node_id);
	m->top_bounded = true;
}

/* Sift-down of the heap heap[0..n-1] of positions into ranked, worst-ranked at the root. */
static void
worst_heap_down(int *heap, int n, const SchedRanked *ranked, int k)
{
	for (;;)
	{
		int			l = 2 * k + 1;
		int			w = k;

		if (l < n && sched_ranked_order(&ranked[heap[l]], &ranked[heap[w]]) > 0)
			w = l;
		if (l + 1 < n && sched_ranked_order(&ranked[heap[l + 1]], &ranked[heap[w]]) > 0)
			w = l + 1;
		if (w == k)
			return;
		{
			int			t = heap[k];

			heap[k] = heap[w];
			heap[w] = t;
		}
		k = w;
	}
}

/*
 * m carries the best m->carry of ranked[0..n-1] (every row of fleet that admits p now,
 * as a walk found them), bounded by the worst of them when there are more.  The carry
 * first widens when the rows carried last were used up within SCHED_ADMIT_WALK_SOON
 * calls, or narrows when they lasted more than SCHED_ADMIT_WALK_LATE: a call judges
 * every carried row, a walk every row of the fleet.
 */
static void
carry_best(SchedAdmitMemo *m, const SchedFleet *fleet, const SchedPlacement *p,
		   const SchedRanked *ranked, int n)
{
	int			heap[SCHED_ADMIT_TOP_WIDE];
	int			nheap = 0;
	int			i;

	if (m->top_valid && m->calls < SCHED_ADMIT_WALK_SOON)
		m->carry = Min(m->carry * 2, SCHED_ADMIT_TOP_WIDE);
	else if (m->calls > SCHED_ADMIT_WALK_LATE)
		m->carry = Max(m->carry / 2, SCHED_ADMIT_TOP);
	m->calls = 0;

	if (m->top == NULL)
	{
		m->top = MemoryContextAlloc(m->cxt, sizeof(int32) * SCHED_ADMIT_TOP_MAX);
		m->dirty = MemoryContextAlloc(m->cxt, sizeof(int32) * SCHED_ADMIT_DIRTY_MAX);
	}
	memset(m->marks, 0, sizeof(uint8) * m->size);
	for (i = 0; i < n; i++)
	{
		if (nheap < m->carry)
		{
			int			k = nheap++;

			heap[k] = i;
			/* sift up */
			while (k > 0 && sched_ranked_order(&ranked[heap[k]], &ranked[heap[(k - 1) / 2]]) > 0)
			{
				int			t = heap[k];

				heap[k] = heap[(k - 1) / 2];
				heap[(k - 1) / 2] = t;
				k = (k - 1) / 2;
			}
		}
		else if (sched_ranked_order(&ranked[i], &ranked[heap[0]]) < 0)
		{
			heap[0] = i;
			worst_heap_down(heap, nheap, ranked, 0);
		}
	}
	m->ntop = nheap;
	for (i = 0; i < nheap; i++)
	{
		m->top[i] = ranked[heap[i]].index;
		m->marks[ranked[heap[i]].index] = MEMO_IN_TOP;
	}
	m->top_bounded = false;
	if (n > nheap)
		set_bound(m, &ranked[heap[0]]);
	m->ndirty = 0;
	m->judged_count = fleet->count;
	m->cutoff = p->heartbeat_cutoff;
	m->top_valid = true;
}

/* Every row of fleet that admits p, judged by m; when carry, m then carries the best. */
static int
memo_walk(SchedAdmitMemo *m, const SchedFleet *fleet, const SchedPlacement *p,
		  SchedRanked *out, bool carry)
{
	int			n = 0;
	int			i;

	for (i = 0; i < fleet->count; i++)
		if (memo_admits(m, fleet, p, i, &out[n]))
			n++;
	if (carry)
		carry_best(m, fleet, p, out, n);
	else
		m->top_valid = false;
	return n;
}

int
sched_admit_memos_admit(SchedAdmitMemos *set, const SchedFleet *fleet,
						const SchedPlacement *p, SchedRanked *out)
{
	SchedAdmitMemo *m = memo_for(set, p, fleet->count);

	/* a memo that carries rows keeps carrying them: a walk costs little more */
	return memo_walk(m, fleet, p, out, m->top_valid);
}

/* Row i, re-read or appended since m's last call, judged: carried if it ranks before the
 * bound (or there is none).  False when m can carry no more. */
static bool
judge_again(SchedAdmitMemo *m, const SchedFleet *fleet, const SchedPlacement *p, int i)
{
	SchedRanked r;

	m->marks[i] &= ~MEMO_DIRTY;
	if ((m->marks[i] & MEMO_IN_TOP) != 0 || !memo_admits(m, fleet, p, i, &r))
		return true;			/* carried already, or refuses the shape now */
	if (m->top_bounded && sched_ranked_order(&r, &m->bound) > 0)
		return true;			/* still after the bound */
	if (m->ntop == SCHED_ADMIT_TOP_GROWTH * m->carry)
		return false;
	m->top[m->ntop++] = i;
	m->marks[i] |= MEMO_IN_TOP;
	return true;
}

int
sched_admit_memos_best(SchedAdmitMemos *set, const SchedFleet *fleet,
					   const SchedPlacement *p, SchedRanked *out, const SchedRanked **bound,
					   bool *walked)
{
	SchedAdmitMemo *m = memo_for(set, p, fleet->count);
	bool		carried;
	int			n = 0;
	int			i;

	m->calls++;
	carried = sched_fleet_mirror_carry && m->top_valid && p->heartbeat_cutoff >= m->cutoff &&
		m->judged_count <= fleet->count;
	for (i = 0; carried && i < m->ndirty; i++)
		carried = judge_again(m, fleet, p, m->dirty[i]);
	for (i = m->judged_count; carried && i < fleet->count; i++)
		carried = judge_again(m, fleet, p, i);
	*walked = !carried;
	if (!carried)
	{
		*bound = NULL;
		return memo_walk(m, fleet, p, out, sched_fleet_mirror_carry);
	}
	m->ndirty = 0;
	m->judged_count = fleet->count;
	m->cutoff = p->heartbeat_cutoff;
	for (i = 0; i < m->ntop; i++)
		if (memo_admits(m, fleet, p, m->top[i], &out[n]))
			n++;
	*bound = m->top_bounded ? &m->bound : NULL;
	return n;
}

void
sched_admit_memos_copy(SchedAdmitMemos *dst, const SchedAdmitMemos *src)
{
	int			i;

	sched_admit_memos_reset(dst);
	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
	{
		const SchedAdmitMemo *f = &src->memos[i];
		SchedAdmitMemo *t = &dst->memos[i];

		if (f->cxt == NULL)
			continue;
		memo_start(dst, t, &f->p, f->size);
		memcpy(t->state, f->state, sizeof(uint8) * f->size);
		memcpy(t->matches, f->matches, sizeof(int32) * f->size);
		t->last_use = f->last_use;
		if (f->top_valid)
		{
			memcpy(t->marks, f->marks, sizeof(uint8) * f->size);
			t->top = MemoryContextAlloc(t->cxt, sizeof(int32) * SCHED_ADMIT_TOP_MAX);
			t->dirty = MemoryContextAlloc(t->cxt, sizeof(int32) * SCHED_ADMIT_DIRTY_MAX);
			memcpy(t->top, f->top, sizeof(int32) * f->ntop);
			memcpy(t->dirty, f->dirty, sizeof(int32) * f->ndirty);
			t->ntop = f->ntop;
			t->ndirty = f->ndirty;
			t->judged_count = f->judged_count;
			t->cutoff = f->cutoff;
			t->carry = f->carry;
			t->calls = f->calls;
			t->top_bounded = false;
			if (f->top_bounded)
				set_bound(t, &f->bound);
			t->top_valid = true;
		}
	}
	dst->uses = src->uses;
}

/* Row `row` changed: every memo ranks it again at its next call (its carried rows);
 * forget: and judges it in full again. */
static void
row_changed(SchedAdmitMemos *set, int row, bool forget)
{
	int			i;

	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
	{
		SchedAdmitMemo *m = &set->memos[i];

		if (m->cxt == NULL || row >= m->size)
			continue;
		if (forget)
			m->state[row] = 0;
		if (!m->top_valid || row >= m->judged_count || (m->marks[row] & MEMO_DIRTY) != 0)
			continue;
		if (m->ndirty == SCHED_ADMIT_DIRTY_MAX)
			m->top_valid = false;	/* the next call walks */
		else
		{
			m->dirty[m->ndirty++] = row;
			m->marks[row] |= MEMO_DIRTY;
		}
	}
}

void
sched_admit_memos_forget(SchedAdmitMemos *set, int row)
{
	row_changed(set, row, true);
}

void
sched_admit_memos_counters_changed(SchedAdmitMemos *set, int row)
{
	row_changed(set, row, false);
}

void
sched_admit_memos_move(SchedAdmitMemos *set, int from, int to)
{
	int			i;

	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
	{
		SchedAdmitMemo *m = &set->memos[i];

		if (m->cxt == NULL)
			continue;
		m->top_valid = false;	/* carried rows are indexes */
		if (to < m->size)
		{
			m->state[to] = from < m->size ? m->state[from] : 0;
			if (from < m->size)
				m->matches[to] = m->matches[from];
		}
	}
}

void
sched_admit_memos_reset(SchedAdmitMemos *set)
{
	int			i;

	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
		if (set->memos[i].cxt != NULL)
			MemoryContextDelete(set->memos[i].cxt);
	sched_admit_memos_init(set, set->parent);
}

/* The rows that break the invariant of m's carried rows (admit_memo.h), at m's cutoff. */
static int
check_carried(const SchedAdmitMemo *m, const SchedFleet *fleet)
{
	SchedPlacement p = m->p;
	int			wrong = 0;
	int			k;

	if (!m->top_valid)
		return 0;
	for (k = 0; k < m->ntop; k++)
		if (m->top[k] >= fleet->count || (m->marks[m->top[k]] & MEMO_IN_TOP) == 0)
			wrong++;			/* carried: a row past the fleet's, or unmarked */
	p.heartbeat_cutoff = m->cutoff;
	for (k = 0; k < m->judged_count && k < fleet->count; k++)
	{
		SchedRanked r;

		if ((m->marks[k] & (MEMO_IN_TOP | MEMO_DIRTY)) != 0 || fleet->rows[k].busy ||
			sched_admission(&p, &fleet->rows[k].c) != 0)
			continue;
		sched_score(&p, &fleet->rows[k].c, &r);
		if (!m->top_bounded || sched_ranked_order(&r, &m->bound) <= 0)
			wrong++;			/* a row not carried that may rank first */
	}
	return wrong;
}

int
sched_admit_memos_check(const SchedAdmitMemos *set, const SchedFleet *fleet)
{
	int			wrong = 0;
	int			i,
				k;

	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
	{
		const SchedAdmitMemo *m = &set->memos[i];

		if (m->cxt == NULL)
			continue;
		wrong += check_carried(m, fleet);
		for (k = 0; k < m->size; k++)
		{
			const SchedCandidate *c;
			SchedReasonSet r;

			if (m->state[k] == 0)
				continue;
			if (k >= fleet->count)
			{
				wrong++;		/* a judged row past the fleet's rows */
				continue;
			}
			c = &fleet->rows[k].c;
			r = sched_admission(&m->p, c) & ~(SCHED_TRANSIENT_REASONS | SCHED_CLOCK_REASONS);
			if (m->state[k] != (r != 0 ? 2 : 1) ||
				(r == 0 && m->matches[k] != sched_labels_matching(&c->labels,
																  &m->p.preferred_labels)))
				wrong++;
		}
	}
	return wrong;
}
