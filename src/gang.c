/*
 * gang.c — the rows of a gang (README, "Gangs"): sched.gang, locked by the transaction
 * that places the gang, and the member requests it reads and leaves queued.  How the
 * members are placed, all in one subtransaction or none, is in reservation.c.
 *
 * Lock: the gang row, FOR UPDATE SKIP LOCKED, after the request a dispatch met and
 * before any other member's step or request (reservation.c's lock order); submit takes
 * it FOR UPDATE to add a member, so a gang does not change while it is being placed.
 */
#include "postgres.h"

#include "gang.h"
#include "spi_util.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

static SchedStatement gang_lock = {
	"SELECT g.gang_size, g.distinct_nodes, g.placed_at IS NOT NULL, "
	"       (SELECT pg_catalog.array_agg(r.request_id ORDER BY r.request_id) "
	"          FROM sched.request r WHERE r.gang_id OPERATOR(pg_catalog.=) g.gang_id) "
	"  FROM sched.gang g WHERE g.gang_id OPERATOR(pg_catalog.=) $1 "
	"   FOR UPDATE OF g SKIP LOCKED",
	1, {UUIDOID},
	.keyed = true
};

static SchedStatement gang_placed = {
	"UPDATE sched.gang SET placed_at = $2 WHERE gang_id OPERATOR(pg_catalog.=) $1",
	2, {UUIDOID, TIMESTAMPTZOID},
	.keyed = true
};

static SchedStatement gang_leave = {
	"UPDATE sched.request r SET state = 'PENDING', claim_id = NULL, claimed_until = NULL, "
	"       tries = r.tries OPERATOR(pg_catalog.+) $2, last_reason = $3, "
	"       available_at = GREATEST(r.available_at, $4) "
	" WHERE r.request_id OPERATOR(pg_catalog.=) ANY ($1) "
	"   AND r.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[]) "
	"   AND (r.state OPERATOR(pg_catalog.<>) 'PENDING' OR $2 OPERATOR(pg_catalog.<>) 0 "
	"        OR r.last_reason IS DISTINCT FROM $3 OR r.available_at OPERATOR(pg_catalog.<) $4)",
	4, {INT8ARRAYOID, INT4OID, TEXTOID, TIMESTAMPTZOID},
	.keyed = true
};

bool
sched_gang_lock(const pg_uuid_t *gang_id, SchedGang *out)
{
	Datum		arg = UUIDPGetDatum(gang_id);
	bool		isnull;
	Datum		d;

	memset(out, 0, sizeof(*out));
	out->gang_id = *gang_id;
	sched_spi_exec(&gang_lock, &arg, NULL, false, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return false;
	out->size = (int32) sched_spi_int64(0, 1);
	out->distinct_nodes = DatumGetBool(sched_spi_get(0, 2, &isnull));
	out->placed = DatumGetBool(sched_spi_get(0, 3, &isnull));
	d = sched_spi_get(0, 4, &isnull);
	if (!isnull)
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		int			i;

		deconstruct_array(DatumGetArrayTypeP(d), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						  &elems, &nulls, &n);
		out->members = palloc(sizeof(int64) * Max(n, 1));
		for (i = 0; i < n; i++)
			out->members[i] = DatumGetInt64(elems[i]);
		out->nmembers = n;
	}
	return true;
}

void
sched_gang_mark_placed(const SchedGang *g, TimestampTz at)
{
	Datum		v[2];

	v[0] = UUIDPGetDatum(&g->gang_id);
	v[1] = TimestampTzGetDatum(at);
	sched_spi_exec(&gang_placed, v, NULL, false, 0, SPI_OK_UPDATE);
}

void
sched_gang_leave(const int64 *ids, int n, const char *reason, int tries_added,
				 TimestampTz not_before)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	Datum		v[4];
	int			i;

	if (n == 0)
		return;
	for (i = 0; i < n; i++)
		elems[i] = Int64GetDatum(ids[i]);
	v[0] = sched_array_of(elems, n, INT8OID);
	v[1] = Int32GetDatum(tries_added);
	v[2] = CStringGetTextDatum(reason);
	v[3] = TimestampTzGetDatum(not_before);
	sched_spi_exec(&gang_leave, v, NULL, false, 0, SPI_OK_UPDATE);
}
