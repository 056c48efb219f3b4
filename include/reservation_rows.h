/*
 * reservation_rows.h — the rows of reservations written without a statement
 * (reservation_rows.c).
 */
#ifndef PG_SCHED_RESERVATION_ROWS_H
#define PG_SCHED_RESERVATION_ROWS_H

#include "utils/timestamp.h"

struct SchedReservationWrite;

/*
 * Writes the n reservations r (attempt, START command, milestone, request DISPATCHED;
 * the workers' and nodes' counters; the tenants' sums) as batch.c's statements would,
 * at `at`, and returns true; or writes nothing and returns false when
 * sched.direct_writes is off or a table is not as pg_sched made it (row_write.c), and
 * the caller runs the statements.  Needs an SPI connection.
 */
extern bool sched_reservation_rows_write(const struct SchedReservationWrite *r, int n,
										 TimestampTz at);

#endif
