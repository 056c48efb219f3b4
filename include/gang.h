/*
 * gang.h — the rows of a gang: its lock, its members, and what a try leaves on them
 * (gang.c).  Placing the members is the reservation's (reservation.c).
 */
#ifndef PG_SCHED_GANG_H
#define PG_SCHED_GANG_H

#include "utils/timestamp.h"
#include "utils/uuid.h"

typedef struct SchedGang
{
	pg_uuid_t	gang_id;
	int32		size;			/* gang_size: the members it takes */
	bool		distinct_nodes;
	bool		placed;			/* placed_at is set */
	int			nmembers;		/* requests submitted with the gang_id */
	int64	   *members;		/* their request_ids, ascending */
} SchedGang;

/*
 * Locks the row of gang `gang_id` (FOR UPDATE SKIP LOCKED: never waits) and reads it and
 * its members into *out.  False when another transaction holds the row (a dispatch
 * placing the gang, or a submit adding a member).  Inside SPI.
 */
extern bool sched_gang_lock(const pg_uuid_t *gang_id, SchedGang *out);

/* Records that every member was dispatched, in this transaction. */
extern void sched_gang_mark_placed(const SchedGang *g, TimestampTz at);

/*
 * Leaves the requests ids[0..n-1] (members this transaction holds locked) that are still
 * waiting (PENDING or CLAIMED; never a dispatched or cancelled one) queued with
 * `reason`: PENDING, unclaimed, tries + tries_added, available_at moved to `not_before`
 * when that is later (DT_NOBEGIN: unchanged).  A row already in that state is not
 * written again.
 */
extern void sched_gang_leave(const int64 *ids, int n, const char *reason, int tries_added,
							 TimestampTz not_before);

#endif							/* PG_SCHED_GANG_H */
