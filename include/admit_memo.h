/*
 * admit_memo.h — what admission found of a shape on the rows of one fleet, kept while
 * the rows stay as they were (admit_memo.c).
 */
#ifndef PG_SCHED_ADMIT_MEMO_H
#define PG_SCHED_ADMIT_MEMO_H

#include "fleet.h"

/* shapes remembered per fleet; the least recently used one gives way */
#define SCHED_ADMIT_MEMOS 8

typedef struct SchedAdmitMemo
{
	MemoryContext cxt;			/* the placement's copy and the arrays; NULL: unused */
	uint64		last_use;
	SchedPlacement p;			/* the shape (any placement of it) */
	int			size;			/* entries of state and matches */
	uint8	   *state;			/* per row: 0 not judged, 1 admits but for transient and
								 * clock reasons, 2 refuses for a reason of the shape */
	int32	   *matches;		/* per row in state 1: preferred labels matched */
} SchedAdmitMemo;

/*
 * The memos of one fleet's rows.  The owner of the rows keeps them true: it calls
 * sched_admit_memos_forget for a row whose contents change, _move when a row moves to
 * another index, _reset when every row changes.  Invariant: a memo's state is 0 for
 * every index at or past the fleet's row count, so that a row appended is not judged.
 */
typedef struct SchedAdmitMemos
{
	MemoryContext parent;		/* the memos' contexts are its children */
	SchedAdmitMemo memos[SCHED_ADMIT_MEMOS];
	uint64		uses;
} SchedAdmitMemos;

extern void sched_admit_memos_init(SchedAdmitMemos *set, MemoryContext parent);

/*
 * sched_fleet_admit(p, fleet, out), judging each row by what the memo of p's shape knows
 * of it: a row is judged in full once, then only for its transient and clock reasons.
 */
extern int	sched_admit_memos_admit(SchedAdmitMemos *set, const SchedFleet *fleet,
									const SchedPlacement *p, SchedRanked *out);

/* dst (of other rows) made a copy of src: what src knows of its rows, for rows that are
 * a copy of them, at the same indexes. */
extern void sched_admit_memos_copy(SchedAdmitMemos *dst, const SchedAdmitMemos *src);

/* Row `row` changed: every memo judges it again. */
extern void sched_admit_memos_forget(SchedAdmitMemos *set, int row);

/* The row at index `from` is now also at `to` (what was at `to` is gone); a caller that
 * empties `from` forgets it. */
extern void sched_admit_memos_move(SchedAdmitMemos *set, int from, int to);

/* Every row changed, or the rows are gone: the memos are freed. */
extern void sched_admit_memos_reset(SchedAdmitMemos *set);

/* The rows of fleet (the memos' own) whose memo says other than a full judging would, and
 * the judged entries past its rows: 0 is the memos' invariant (for tests). */
extern int	sched_admit_memos_check(const SchedAdmitMemos *set, const SchedFleet *fleet);

#endif							/* PG_SCHED_ADMIT_MEMO_H */
