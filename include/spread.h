/*
 * spread.h — the spread term of the score: live attempts of a request's spread_key on
 * each node of a fleet (spread.c).
 */
#ifndef PG_SCHED_SPREAD_H
#define PG_SCHED_SPREAD_H

#include "fleet.h"

/* Live attempts of one spread key per row of one fleet (0 for most rows). */
typedef struct SchedSpread
{
	int			nrows;			/* the fleet's count when counted */
	int32	   *per_row;		/* NULL: the key has no live attempt anywhere */
} SchedSpread;

/*
 * Counts the live attempts (DISPATCHED, RUNNING) with spread_key on the node of each
 * row of `fleet`, read with the latest snapshot when `latest` (dispatch: attempts other
 * dispatchers have committed count, as this transaction's own writes do) or with the
 * statement's (the STABLE what-if functions).  The fleet is only read (it may be the
 * fleet mirror's).  Must be called inside SPI.
 */
extern void sched_spread_count(const char *spread_key, bool latest, const SchedFleet *fleet,
							   SchedSpread *out);

/* The matches of fleet row `row` (0 when s is NULL: no spread key). */
extern int32 sched_spread_of(const SchedSpread *s, int row);

/* Adds the spread term to every scored candidate (ranked[i].index: its fleet row). */
extern void sched_spread_score(const SchedSpread *s, SchedRanked *ranked, int n);

#endif							/* PG_SCHED_SPREAD_H */
