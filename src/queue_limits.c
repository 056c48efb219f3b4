/*
 * queue_limits.c — limits that hold under any number of dispatchers (issue 14,
 * docs/design/limits.md): a concurrency key's live attempts (sched.concurrency_limit), its
 * dispatches in a sliding window (sched.rate_limit), and what a tenant's live attempts
 * hold (sched.tenant_quota).
 *
 * Exactness.  A dispatch checks a limit only while it holds the limit's lock: an advisory
 * lock of transaction scope in a lock space of pg_sched's own (objsubid
 * SCHED_KEY_LOCK_SPACE for keys, SCHED_TENANT_LOCK_SPACE for tenants, like the step lock:
 * pg_advisory_lock() cannot take it), keyed by a 64-bit hash of the key or tenant (a
 * collision only makes two keys check one after the other).  It counts with the latest
 * snapshot, which sees every transaction that held the lock before (they released it at
 * their end, after their commit was visible) and this transaction's own earlier writes
 * (a deferred batch is written first).  So the holders of a lock check and reserve one
 * after another, each seeing all that the others reserved, whatever the isolation level.
 * Attempts that end take no lock: an end only lowers a count, and a dispatcher that
 * counted an attempt ending meanwhile errs on the safe side.
 *
 * No waiting.  The locks are taken with ConditionalLockAcquire, before any worker/node
 * pair is locked, and never waited for: a dispatch that finds one held passes the request
 * over (from the queue) or answers UNSCHEDULABLE (contention).  Nothing that holds one of
 * these locks waits for one, so they add no edge to any wait-for cycle.
 *
 * The rate limit is a sliding window: a dispatch at time t is allowed when fewer than
 * `dispatches` dispatches of the key have dispatched_at in (t - per, t + per): then every
 * window of length `per` that contains t holds at most `dispatches` (dispatched_at is each
 * caller's `at`, so concurrent dispatchers' times need not be in commit order; counting
 * the later ones too keeps it exact).  A limited request is left with available_at at the
 * time the window frees a dispatch, and tried again then, not before.
 */
#include "postgres.h"

#include "queue_limits.h"
#include "batch.h"
#include "spi_util.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/timestamp.h"

#define SCHED_KEY_LOCK_SPACE 0x534B		/* "SK" */
#define SCHED_TENANT_LOCK_SPACE 0x5354	/* "ST" */

/* the limits that apply: the key's concurrency and rate limits, the tenant's quota */
static SchedStatement limits_of = {
	"SELECT c.max_live, r.dispatches, r.per, q.max_live, q.max_cpu_millis, q.max_memory_mb, "
	"       q.max_gpus, x.concurrency_key "
	"  FROM sched.request x "
	"  LEFT JOIN sched.concurrency_limit c ON c.concurrency_key OPERATOR(pg_catalog.=) x.concurrency_key "
	"  LEFT JOIN sched.rate_limit r ON r.concurrency_key OPERATOR(pg_catalog.=) x.concurrency_key "
	"  LEFT JOIN sched.tenant_quota q ON q.tenant OPERATOR(pg_catalog.=) x.tenant "
	" WHERE x.request_id OPERATOR(pg_catalog.=) $1",
	1, {INT8OID}
};

static SchedStatement any_limits = {
	"SELECT EXISTS (SELECT 1 FROM sched.concurrency_limit) OR EXISTS (SELECT 1 FROM sched.rate_limit) "
	"    OR EXISTS (SELECT 1 FROM sched.tenant_quota)",
	0, {InvalidOid}
};

static SchedStatement key_live = {
	"SELECT pg_catalog.count(*) FROM sched.attempt a "
	" WHERE a.concurrency_key OPERATOR(pg_catalog.=) $1 AND a.concurrency_key IS NOT NULL "
	"   AND a.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[])",
	1, {TEXTOID},
	.keyed = true
};

/* dispatches of the key within `per` of t, and the time the n-th latest of them leaves
 * the window (when a dispatch at that time would be allowed) */
static SchedStatement key_window = {
	"SELECT pg_catalog.count(*), "
	"       ((pg_catalog.array_agg(a.dispatched_at ORDER BY a.dispatched_at DESC))[$4] "
	"           OPERATOR(pg_catalog.+) $3) "
	"  FROM sched.attempt a "
	" WHERE a.concurrency_key OPERATOR(pg_catalog.=) $1 AND a.concurrency_key IS NOT NULL "
	"   AND a.dispatched_at OPERATOR(pg_catalog.>) ($2 OPERATOR(pg_catalog.-) $3) "
	"   AND a.dispatched_at OPERATOR(pg_catalog.<) ($2 OPERATOR(pg_catalog.+) $3)",
	4, {TEXTOID, TIMESTAMPTZOID, INTERVALOID, INT4OID},
	.keyed = true
};

/* the words of a rate limit's reason, the same whatever the session's DateStyle,
 * IntervalStyle and TimeZone (sched.limit_explanations writes them alike) */
static SchedStatement rate_reason = {
	"SELECT pg_catalog.format('rate_limited: key \"%s\" has %s dispatches within %s s of now "
	"(limit %s per %s s); eligible at %s UTC', $1, $2, "
	"pg_catalog.date_part('epoch', $3), $4, pg_catalog.date_part('epoch', $3), "
	"pg_catalog.to_char(pg_catalog.timezone('UTC', $5), 'YYYY-MM-DD HH24:MI:SS.US'))",
	5, {TEXTOID, INT8OID, INTERVALOID, INT8OID, TIMESTAMPTZOID}
};

static SchedStatement tenant_live = {
	"SELECT pg_catalog.count(*), COALESCE(pg_catalog.sum(a.reserve_cpu_millis), 0)::pg_catalog.int8, "
	"       COALESCE(pg_catalog.sum(a.reserve_memory_mb), 0)::pg_catalog.int8, "
	"       COALESCE(pg_catalog.sum(a.reserve_gpus), 0)::pg_catalog.int8 "
	"  FROM sched.attempt a "
	" WHERE a.tenant OPERATOR(pg_catalog.=) $1 "
	"   AND a.status OPERATOR(pg_catalog.=) ANY ('{DISPATCHED,RUNNING}'::pg_catalog.text[])",
	1, {TEXTOID},
	.keyed = true
};

/* the locks one check took (not those this transaction held already) */
typedef struct Taken
{
	int			n;
	LOCKTAG		tags[2];
} Taken;

/* Takes the lock of `name` in `space` without waiting; false when another transaction
 * holds it. */
static bool
lock_scope(const char *name, uint16 space, Taken *taken)
{
	LOCKTAG		tag;
	uint64		key = hash_bytes_extended((const unsigned char *) name, (int) strlen(name), 0);
	LockAcquireResult r;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32), (uint32) key, space);
	r = LockAcquire(&tag, ExclusiveLock, false, true);
	if (r == LOCKACQUIRE_OK)
		taken->tags[taken->n++] = tag;
	return r != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * A limit is reached: nothing will be reserved under the locks this check took, so they
 * go at once (another dispatcher of the key or tenant need not pass over it until this
 * transaction ends); locks held from an earlier reservation of this transaction stay.
 */
static void
reached(SchedLimitsResult *out, SchedWait waits, char *detail, Taken *taken)
{
	int			i;

	out->verdict = SCHED_LIMITS_REACHED;
	out->waits = waits;
	out->detail = detail;
	for (i = 0; i < taken->n; i++)
		LockRelease(&taken->tags[i], ExclusiveLock, false);
	taken->n = 0;
}

void
sched_limits_check(const SchedRequestRow *req, const SchedPlacement *p, TimestampTz at,
				   SchedBatch *cache, SchedLimitsResult *out)
{
	Datum		v[5];
	bool		isnull;
	char	   *key;
	Taken		taken = {0};
	bool		has_concurrency,
				has_rate,
				has_quota;
	int64		max_live = 0,
				dispatches = 0;
	Interval   *per = NULL;
	bool		q_null[4];
	int64		q_max[4];
	int			i;

	memset(out, 0, sizeof(*out));
	if (cache != NULL && cache->limits_known == 1)
		return;
	if (!sched_schema_is_0_2())
		return;					/* still at 0.1.0: no limits there */
	if (cache != NULL && cache->limits_known == 0)
	{
		sched_spi_exec(&any_limits, NULL, NULL, true, 1, SPI_OK_SELECT);
		cache->limits_known = DatumGetBool(sched_spi_get(0, 1, &isnull)) ? 2 : 1;
		if (cache->limits_known == 1)
			return;
	}
	v[0] = Int64GetDatum(req->request_id);
	sched_spi_exec(&limits_of, v, NULL, true, 1, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;
	key = sched_spi_text(0, 8);
	(void) sched_spi_get(0, 1, &isnull);
	has_concurrency = !isnull;
	if (has_concurrency)
		max_live = sched_spi_int64(0, 1);
	(void) sched_spi_get(0, 2, &isnull);
	has_rate = !isnull;
	if (has_rate)
	{
		dispatches = sched_spi_int64(0, 2);
		per = DatumGetIntervalP(datumCopy(sched_spi_get(0, 3, &isnull), false, sizeof(Interval)));
	}
	has_quota = false;
	for (i = 0; i < 4; i++)
	{
		(void) sched_spi_get(0, 4 + i, &q_null[i]);
		q_max[i] = q_null[i] ? 0 : sched_spi_int64(0, 4 + i);
		has_quota |= !q_null[i];
	}
	if (!has_concurrency && !has_rate && !has_quota)
		return;

	/* the locks first, then what this transaction reserved so far into the table */
	if ((has_concurrency || has_rate) && !lock_scope(key, SCHED_KEY_LOCK_SPACE, &taken))
	{
		out->verdict = SCHED_LIMITS_BUSY;
		out->waits = SCHED_WAIT_CONTENTION;
		out->detail = psprintf("concurrency key \"%s\" is being dispatched by another transaction",
							   key);
		return;
	}
	if (has_quota && !lock_scope(req->tenant, SCHED_TENANT_LOCK_SPACE, &taken))
	{
		for (int i = 0; i < taken.n; i++)
			LockRelease(&taken.tags[i], ExclusiveLock, false);	/* nothing reserved */
		out->verdict = SCHED_LIMITS_BUSY;
		out->waits = SCHED_WAIT_CONTENTION;
		out->detail = psprintf("tenant \"%s\" is being dispatched by another transaction",
							   req->tenant);
		return;
	}
	if (cache != NULL)
		sched_batch_flush(cache);

	if (has_concurrency)
	{
		int64		live;

		v[0] = CStringGetTextDatum(key);
		sched_spi_exec_latest(&key_live, v, NULL, SPI_OK_SELECT);
		live = sched_spi_int64(0, 1);
		if (live >= max_live)
		{
			reached(out, SCHED_WAIT_CONCURRENCY,
					psprintf("concurrency_limit: key \"%s\" has " INT64_FORMAT " of " INT64_FORMAT
							 " live attempts", key, live, max_live), &taken);
			return;
		}
	}
	if (has_rate)
	{
		int64		recent;

		v[0] = CStringGetTextDatum(key);
		v[1] = TimestampTzGetDatum(at);
		v[2] = IntervalPGetDatum(per);
		v[3] = Int32GetDatum((int32) dispatches);
		sched_spi_exec_latest(&key_window, v, NULL, SPI_OK_SELECT);
		recent = sched_spi_int64(0, 1);
		if (recent >= dispatches)
		{
			Datum		e = sched_spi_get(0, 2, &isnull);

			out->eligible_at = isnull ? at : Max(DatumGetTimestampTz(e), at);
			v[0] = CStringGetTextDatum(key);
			v[1] = Int64GetDatum(recent);
			v[2] = IntervalPGetDatum(per);
			v[3] = Int64GetDatum(dispatches);
			v[4] = TimestampTzGetDatum(out->eligible_at);
			sched_spi_exec(&rate_reason, v, NULL, true, 1, SPI_OK_SELECT);
			reached(out, SCHED_WAIT_RATE, sched_spi_text(0, 1), &taken);
			return;
		}
	}
	if (has_quota)
	{
		static const char *const dimension[4] = {"live attempts", "cpu_millis", "memory_mb", "gpus"};
		int64		used[4];
		int64		asks[4];

		v[0] = CStringGetTextDatum(req->tenant);
		sched_spi_exec_latest(&tenant_live, v, NULL, SPI_OK_SELECT);
		for (i = 0; i < 4; i++)
			used[i] = sched_spi_int64(0, 1 + i);
		asks[0] = 1;
		asks[1] = p->reserve_cpu_millis;
		asks[2] = p->reserve_memory_mb;
		asks[3] = p->reserve_gpus;
		for (i = 0; i < 4; i++)
		{
			if (q_null[i] || used[i] + asks[i] <= q_max[i])
				continue;
			out->tenant_full = (i == 0);
			reached(out, SCHED_WAIT_QUOTA,
					psprintf("tenant_quota_exceeded: tenant \"%s\" %s: its live attempts hold "
							 INT64_FORMAT " of " INT64_FORMAT ", this request asks " INT64_FORMAT,
							 req->tenant, dimension[i], used[i], q_max[i], asks[i]), &taken);
			return;
		}
	}
}
