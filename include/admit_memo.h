/*
 * admit_memo.h — what admission found of a shape on the rows of one fleet, kept while
 * the rows stay as they were (admit_memo.c).
 */
#ifndef PG_SCHED_ADMIT_MEMO_H
#define PG_SCHED_ADMIT_MEMO_H

#include "fleet.h"

/* shapes remembered per fleet; the least recently used one gives way */
#define SCHED_ADMIT_MEMOS 16

/*
 * Rows a memo carries from a walk over its fleet (the best ones): SCHED_ADMIT_TOP, or up
 * to SCHED_ADMIT_TOP_WIDE while its carried rows are used up within a few calls (other
 * sessions' placements lower the carried rows' scores: at 32 dispatching sessions,
 * 64 rows lasted two calls); and how many it may carry (with the re-read rows that
 * rank among them) before it walks again: SCHED_ADMIT_TOP_GROWTH times as many.
 */
#define SCHED_ADMIT_TOP 64
#define SCHED_ADMIT_TOP_WIDE 256
#define SCHED_ADMIT_TOP_GROWTH 4
#define SCHED_ADMIT_TOP_MAX (SCHED_ADMIT_TOP_GROWTH * SCHED_ADMIT_TOP_WIDE)
/* a walk fewer than _SOON calls after the last one widens the carry (twice the rows),
 * one more than _LATE calls after it narrows it (half) */
#define SCHED_ADMIT_WALK_SOON 4
#define SCHED_ADMIT_WALK_LATE 16
/* rows forgotten between calls that a memo's carried rows survive */
#define SCHED_ADMIT_DIRTY_MAX 256

typedef struct SchedAdmitMemo
{
	MemoryContext cxt;			/* the placement's copy and the arrays; NULL: unused */
	uint64		last_use;
	SchedPlacement p;			/* the shape (any placement of it) */
	int			size;			/* entries of state and matches */
	uint8	   *state;			/* per row: 0 not judged, 1 admits but for transient and
								 * clock reasons, 2 refuses for a reason of the shape */
	int32	   *matches;		/* per row in state 1: preferred labels matched */

	/*
	 * The best rows, carried across calls and placements (sched_admit_memos_best).
	 * Invariant while top_valid: every row of the fleet below judged_count that is not
	 * in top, not in dirty, not busy and admits the shape with the counters and heartbeat
	 * the row has, ranks after `bound` with its own score (when top_bounded; else there
	 * is no such row), at any heartbeat cutoff at or after `cutoff`.  (A batch's busy row
	 * stays busy for the rest of its call.)  Rows change only through
	 * the owner's forget (then they go to dirty) and move (then top_valid is cleared); a
	 * row's score and its transient and clock reasons are functions of the row, and a
	 * later cutoff only refuses more rows.
	 */
	bool		top_valid;
	bool		top_bounded;
	int			carry;			/* rows a walk carries (SCHED_ADMIT_TOP .. _WIDE) */
	int			calls;			/* sched_admit_memos_best calls since the last walk */
	SchedRanked bound;			/* its node_id a copy in cxt */
	int32	   *top;			/* [SCHED_ADMIT_TOP_MAX] row indexes; at most
								 * SCHED_ADMIT_TOP_GROWTH * carry used */
	int			ntop;
	int32	   *dirty;			/* [SCHED_ADMIT_DIRTY_MAX] rows forgotten since */
	int			ndirty;
	int			judged_count;	/* rows at or past it were appended since */
	int64		cutoff;			/* the latest heartbeat cutoff asked with */
	uint8	   *marks;			/* per row: MEMO_IN_TOP, MEMO_DIRTY */
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

/*
 * The admitted rows of fleet, as sched_admit_memos_admit, but only those that may rank
 * first: the rows the memo of p's shape carries from its last walk and the rows re-read
 * since that rank among them.  *bound is NULL when out holds every admitted row; else
 * every admitted row not in out ranks after *bound (sched_ranked_order, with its score
 * as sched_score_matched gives it), so an entry of out that ranks before *bound once its
 * score is lowered (what a call adds to a score only lowers it) ranks before every row
 * not in out.  *bound lives until the next call on set.  Walks every row, as sched_admit_memos_admit (*walked), when
 * the memo carries nothing (new, or rows moved, or too many forgotten), the heartbeat
 * cutoff went back, or sched.fleet_mirror_carry is off.
 */
extern int	sched_admit_memos_best(SchedAdmitMemos *set, const SchedFleet *fleet,
								   const SchedPlacement *p, SchedRanked *out,
								   const SchedRanked **bound, bool *walked);

/* dst (of other rows) made a copy of src: what src knows of its rows, for rows that are
 * a copy of them, at the same indexes (the carried rows too). */
extern void sched_admit_memos_copy(SchedAdmitMemos *dst, const SchedAdmitMemos *src);

/* Row `row` changed: every memo judges it again. */
extern void sched_admit_memos_forget(SchedAdmitMemos *set, int row);

/* Only the counters of row `row` changed (its reservations and live attempts, its
 * worker's heartbeat): what a memo judged of it stands, since these decide only
 * SCHED_TRANSIENT_REASONS and SCHED_CLOCK_REASONS (judged again at every use) and the
 * score; every memo ranks the row again (its carried rows). */
extern void sched_admit_memos_counters_changed(SchedAdmitMemos *set, int row);

/* The row at index `from` is now also at `to` (what was at `to` is gone); a caller that
 * empties `from` forgets it. */
extern void sched_admit_memos_move(SchedAdmitMemos *set, int from, int to);

/* Every row changed, or the rows are gone: the memos are freed. */
extern void sched_admit_memos_reset(SchedAdmitMemos *set);

/* The rows of fleet (the memos' own) whose memo says other than a full judging would, the
 * judged entries past its rows, and the rows that break the invariant of a memo's carried
 * rows (at the memo's cutoff): 0 is the memos' invariant (for tests). */
extern int	sched_admit_memos_check(const SchedAdmitMemos *set, const SchedFleet *fleet);

#endif							/* PG_SCHED_ADMIT_MEMO_H */
