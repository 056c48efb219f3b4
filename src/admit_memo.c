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
 * Memory: each memo lives in a context of its own (a child of the set's parent), so a
 * memo that gives way to another shape frees its copy of the placement.
 */
#include "postgres.h"

#include "admit_memo.h"

#include "utils/memutils.h"

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
	}
	else
	{
		m->state = repalloc(m->state, sizeof(uint8) * size);
		m->matches = repalloc(m->matches, sizeof(int32) * size);
		memset(m->state + m->size, 0, sizeof(uint8) * (size - m->size));
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
	m->size = 0;
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

int
sched_admit_memos_admit(SchedAdmitMemos *set, const SchedFleet *fleet,
						const SchedPlacement *p, SchedRanked *out)
{
	SchedAdmitMemo *m = memo_for(set, p, fleet->count);
	int			n = 0;
	int			i;

	for (i = 0; i < fleet->count; i++)
	{
		const SchedCandidate *c = &fleet->rows[i].c;

		if (fleet->rows[i].busy || m->state[i] == 2)
			continue;
		if (m->state[i] == 0)
		{
			SchedReasonSet r = sched_admission(p, c);

			if ((r & ~(SCHED_TRANSIENT_REASONS | SCHED_CLOCK_REASONS)) != 0)
			{
				m->state[i] = 2;
				continue;
			}
			m->state[i] = 1;
			m->matches[i] = sched_labels_matching(&c->labels, &p->preferred_labels);
			if (r != 0)
				continue;
		}
		else if (sched_admission_clock(p, c) != 0 || sched_admission_transient(p, c) != 0)
			continue;
		sched_score_matched(c, m->matches[i], &out[n]);
		out[n].index = i;
		n++;
	}
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
	}
	dst->uses = src->uses;
}

void
sched_admit_memos_forget(SchedAdmitMemos *set, int row)
{
	int			i;

	for (i = 0; i < SCHED_ADMIT_MEMOS; i++)
		if (set->memos[i].cxt != NULL && row < set->memos[i].size)
			set->memos[i].state[row] = 0;
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
