/*
 * preemption.c — preemption (README, "Preemption"), off unless sched.preemption is on.
 *
 * A request that waits for capacity (some node refuses it only for transient reasons:
 * slots, cpu, memory, gpus in use) may end live attempts of preemptible requests of
 * lower priority (not gang members).  On each such node the placement core chooses the
 * victims (sched_preemption_victims: all removed must make room, then the highest
 * priorities are reprieved while room remains); the node with the fewest victims wins,
 * then the one whose highest victim priority is lowest, then the smaller node_id.
 *
 * In one subtransaction, never waiting: each victim ends PREEMPTED (lifecycle.c:
 * its reservation released, its step requeued at once without using up an attempt, its
 * worker sent a CANCEL), then the preemptor's pair is locked and re-checked, and the
 * room is held for it: its reservation is added to the node's and worker's counters
 * and recorded in request.held_* (node, worker, until now + sched.preemption_hold).
 * Every other request sees the node as full; the preemptor's next dispatch releases the
 * hold under the rows' locks and places it (reservation.c), so no other request takes
 * the room.  A hold that outlives its time, or its request, is released by
 * reap_expired.  If any row is held by another transaction, the subtransaction is
 * rolled back whole: no victim ends and nothing is held.
 */
#include "postgres.h"

#include "preemption.h"
#include "batch.h"
#include "fleet.h"
#include "lifecycle.h"
#include "settings.h"
#include "spi_util.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

/* live attempts of preemptible requests of lower priority on some nodes, by node */
static SchedStatement victims_on = {
	"SELECT a.attempt_id, a.node_id, a.worker_id, r.priority, a.dispatched_at, "
	"       a.reserve_cpu_millis, a.reserve_memory_mb, a.reserve_gpus, r.request_id "
	"  FROM sched.attempt a JOIN sched.request r ON r.request_id OPERATOR(pg_catalog.=) a.request_id "
	" WHERE a.finished_at IS NULL "
	"   AND a.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[]) "
	"   AND a.node_id OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[]) "
	"   AND r.preemptible AND r.priority OPERATOR(pg_catalog.<) $1 AND r.gang_id IS NULL "
	" ORDER BY a.node_id, a.attempt_id",
	2, {INT4OID, TEXTARRAYOID},
	.keyed = true
};

static SchedStatement hold_recorded = {
	"UPDATE sched.request SET held_node_id = $2, held_worker_id = $3, held_until = $4 "
	" WHERE request_id OPERATOR(pg_catalog.=) $1",
	4, {INT8OID, TEXTOID, UUIDOID, TIMESTAMPTZOID},
	.keyed = true
};


/* the preemptor's milestone (idempotent on its key, as every milestone) */
static SchedStatement preempting_milestone = {
	"INSERT INTO sched.timeline (execution_id, milestone_key, stage, step_id, attempt_number, "
	"                            attempt_id, state, component, title, detail, at) "
	"SELECT r.execution_id, "
	"       'step.preempting:' OPERATOR(pg_catalog.||) r.step_id::pg_catalog.text OPERATOR(pg_catalog.||) ':' "
	"           OPERATOR(pg_catalog.||) r.attempt_number::pg_catalog.text OPERATOR(pg_catalog.||) ':' "
	"           OPERATOR(pg_catalog.||) $2::pg_catalog.text, "
	"       'SCHEDULING', r.step_id, r.attempt_number, NULL, 'PREEMPTING', 'Scheduler', "
	"       'Preempted attempts to make room', "
	"       pg_catalog.jsonb_build_object('node_id', $3::pg_catalog.text, 'victim_attempt_ids', $4::pg_catalog.uuid[], "
	"                                     'victim_request_ids', $5::pg_catalog.int8[], 'held_until', $6::pg_catalog.timestamptz), $2 "
	"  FROM sched.request r WHERE r.request_id OPERATOR(pg_catalog.=) $1 "
	"ON CONFLICT ON CONSTRAINT timeline_milestone_once DO NOTHING",
	6, {INT8OID, TIMESTAMPTZOID, TEXTOID, UUIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID},
	.keyed = true
};

/* a time in words that do not depend on the session's DateStyle or TimeZone */
static SchedStatement utc_text = {
	"SELECT pg_catalog.to_char(pg_catalog.timezone('UTC', $1), 'YYYY-MM-DD HH24:MI:SS.US')",
	1, {TIMESTAMPTZOID}
};

typedef struct Victim
{
	pg_uuid_t	attempt_id;
	int64		request_id;
	char	   *node_id;
	pg_uuid_t	worker_id;
	SchedVictim v;
} Victim;

/* The preemption itself (sched_preempt_for), in its subtransaction: kept only whole. */
typedef struct PreemptTry
{
	const SchedRequestRow *req;
	const SchedPlacement *p;
	TimestampTz at;
	Victim	   *victims;		/* the chosen node's */
	bool	   *chosen;
	int			n;
	SchedFleetRow *row;			/* the preemptor's pair, as the choice saw it */
	SchedFleetRow fresh;		/* and as it is once the victims are gone */
	TimestampTz held_until;
	Datum	   *vattempts;
	Datum	   *vrequests;
	int			nv;
} PreemptTry;

static bool
take_room(void *arg)
{
	PreemptTry *t = (PreemptTry *) arg;
	const SchedPlacement *p = t->p;
	Datum		v[6];
	int			k;

	for (k = 0; k < t->n; k++)
	{
		Victim	   *x = &t->victims[k];

		if (!t->chosen[k])
			continue;
		if (!sched_preempt_attempt(&x->attempt_id, t->req->request_id, t->at))
			return false;		/* another transaction holds one of its rows */
		t->vattempts[t->nv] = UUIDPGetDatum(&x->attempt_id);
		t->vrequests[t->nv++] = Int64GetDatum(x->request_id);
	}
	/* the room, on the row as it now is (this transaction's releases included) */
	if (!sched_fleet_lock_pair(&t->row->worker_id, true, NULL, &t->fresh) ||
		t->fresh.generation != t->row->generation ||
		sched_admission(p, &t->fresh.c) != 0)
		return false;
	t->held_until = t->at + (int64) sched_preemption_hold_s * USECS_PER_SEC;
	sched_hold_reservation(&t->fresh.worker_id, t->fresh.c.node_id, (int32) p->reserve_cpu_millis,
						   p->reserve_memory_mb, (int32) p->reserve_gpus);
	v[0] = Int64GetDatum(t->req->request_id);
	v[1] = CStringGetTextDatum(t->fresh.c.node_id);
	v[2] = UUIDPGetDatum(&t->fresh.worker_id);
	v[3] = TimestampTzGetDatum(t->held_until);
	sched_spi_exec(&hold_recorded, v, NULL, false, 0, SPI_OK_UPDATE);
	v[1] = TimestampTzGetDatum(t->at);
	v[2] = CStringGetTextDatum(t->fresh.c.node_id);
	v[3] = sched_array_of(t->vattempts, t->nv, UUIDOID);
	v[4] = sched_array_of(t->vrequests, t->nv, INT8OID);
	v[5] = TimestampTzGetDatum(t->held_until);
	sched_spi_exec(&preempting_milestone, v, NULL, false, 0, SPI_OK_INSERT);
	return true;
}

char *
sched_preempt_for(const SchedRequestRow *req, const SchedPlacementArgs *args, TimestampTz at)
{
	const SchedPlacement *p = &args->p;
	SchedFleet	fleet;
	Datum	   *nodes;
	int			ncand = 0;
	int		   *cand;
	Victim	   *victims;
	int			nvictims;
	int			best = -1;
	int			best_count = 0;
	int32		best_top = 0;
	bool	   *best_chosen = NULL;
	int			best_first = 0;
	int			best_n = 0;
	int			i;
	int			k;
	Datum		v[6];
	PreemptTry	t = {0};

	if (!sched_preemption)
		return NULL;

	/*
	 * The nodes that refuse it only for transient reasons.  If any node admits it, it
	 * does not wait for capacity (its pairs were held by concurrent dispatches, or
	 * their rows changed): nothing is preempted, it is tried again.
	 */
	sched_fleet_load(p->capability, SCHED_FLEET_FRESH | sched_fleet_flags_for(p, false), p, &fleet);
	cand = palloc(sizeof(int) * Max(fleet.count, 1));
	nodes = palloc(sizeof(Datum) * Max(fleet.count, 1));
	for (i = 0; i < fleet.count; i++)
	{
		SchedReasonSet r = sched_admission(p, &fleet.rows[i].c);

		if (r == 0)
			return NULL;
		if ((r & ~SCHED_TRANSIENT_REASONS) == 0)
		{
			cand[ncand] = i;
			nodes[ncand++] = CStringGetTextDatum(fleet.rows[i].c.node_id);
		}
	}
	if (ncand == 0)
		return NULL;

	/* the victims there, read with the latest snapshot (grouped by node) */
	v[0] = Int32GetDatum(req->priority);
	v[1] = sched_array_of(nodes, ncand, TEXTOID);
	sched_spi_exec_latest(&victims_on, v, NULL, SPI_OK_SELECT);
	nvictims = (int) SPI_processed;
	if (nvictims == 0)
		return NULL;
	victims = palloc(sizeof(Victim) * nvictims);
	for (k = 0; k < nvictims; k++)
	{
		bool		isnull;
		Victim	   *x = &victims[k];

		x->attempt_id = *DatumGetUUIDP(sched_spi_get(k, 1, &isnull));
		x->node_id = sched_spi_text(k, 2);
		x->worker_id = *DatumGetUUIDP(sched_spi_get(k, 3, &isnull));
		x->v.priority = (int32) sched_spi_int64(k, 4);
		x->v.dispatched_at = DatumGetTimestampTz(sched_spi_get(k, 5, &isnull));
		x->v.reserve_cpu_millis = sched_spi_int64(k, 6);
		x->v.reserve_memory_mb = sched_spi_int64(k, 7);
		x->v.reserve_gpus = sched_spi_int64(k, 8);
		x->request_id = sched_spi_int64(k, 9);
	}

	/* the choice, node by node, by the placement core */
	for (i = 0; i < ncand; i++)
	{
		SchedFleetRow *row = &fleet.rows[cand[i]];
		int			first = -1;
		int			n = 0;
		SchedVictim *sv;
		int		   *order;
		bool	   *chosen;
		int			count;
		int32		top = PG_INT32_MIN;

		for (k = 0; k < nvictims; k++)
			if (strcmp(victims[k].node_id, row->c.node_id) == 0)
			{
				if (first < 0)
					first = k;
				n++;
			}
		if (n == 0)
			continue;
		sv = palloc(sizeof(SchedVictim) * n);
		order = palloc(sizeof(int) * n);
		chosen = palloc(sizeof(bool) * n);
		for (k = 0; k < n; k++)
		{
			sv[k] = victims[first + k].v;
			sv[k].on_worker = memcmp(&victims[first + k].worker_id, &row->worker_id, sizeof(pg_uuid_t)) == 0;
		}
		count = sched_preemption_victims(p, &row->c, sv, n, order, chosen);
		if (count <= 0)
			continue;
		for (k = 0; k < n; k++)
			if (chosen[k] && sv[k].priority > top)
				top = sv[k].priority;
		if (best < 0 || sched_preemption_cmp(count, top, row->c.node_id, best_count, best_top,
											 fleet.rows[cand[best]].c.node_id) < 0)
		{
			best = i;
			best_count = count;
			best_top = top;
			best_chosen = chosen;
			best_first = first;
			best_n = n;
		}
	}
	if (best < 0)
		return NULL;

	/* all or nothing: the victims, the preemptor's pair, the hold */
	t.req = req;
	t.p = p;
	t.at = at;
	t.victims = &victims[best_first];
	t.chosen = best_chosen;
	t.n = best_n;
	t.row = &fleet.rows[cand[best]];
	t.vattempts = palloc(sizeof(Datum) * best_count);
	t.vrequests = palloc(sizeof(Datum) * best_count);
	if (!sched_in_subxact(take_room, &t))
		return NULL;

	{
		StringInfoData s;

		initStringInfo(&s);
		appendStringInfo(&s, "preempting: %d attempt%s of lower priority ended on node %s (request%s",
						 t.nv, t.nv == 1 ? "" : "s", t.fresh.c.node_id, t.nv == 1 ? "" : "s");
		for (k = 0; k < t.nv; k++)
			appendStringInfo(&s, "%s " INT64_FORMAT, k == 0 ? "" : ",", DatumGetInt64(t.vrequests[k]));
		v[0] = TimestampTzGetDatum(t.held_until);
		sched_spi_exec(&utc_text, v, NULL, true, 1, SPI_OK_SELECT);
		appendStringInfo(&s, "); the room is held for this request until %s UTC",
						 sched_spi_text(0, 1));
		return s.data;
	}
}

bool
sched_release_hold(const SchedRequestRow *req, const SchedPlacementArgs *args)
{
	SchedFleetRow row;

	if (req->held_node_id == NULL)
		return true;
	if (!sched_fleet_lock_pair((pg_uuid_t *) &req->held_worker_id, true, NULL, &row))
		return false;
	sched_release_hold_reservation(req->request_id, &req->held_worker_id, req->held_node_id,
								   (int32) args->p.reserve_cpu_millis, args->p.reserve_memory_mb,
								   (int32) args->p.reserve_gpus);
	return true;
}
