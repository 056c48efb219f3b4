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
 * their end, after their commit was visible) and this transaction's own earlier writes;
 * the reservations a dispatch_next batch still defers are added from the batch
 * (count_deferred), except for a rate limit, whose window is counted after the batch is
 * written.  A key's count is first bounded from above by its entries in
 * attempt_live_key_idx, read without the table (key_live_bound); the exact count follows
 * only when the bound leaves no room under the limit (scope_used).  A tenant's live
 * attempts and what they reserve are the sums sched.tenant_live keeps, written in the
 * same transactions as the attempts.  So the holders of a lock check and reserve one
 * after another, each seeing all that the others reserved, whatever the isolation level.
 * Attempts that end take no lock: an end only lowers a count, and a dispatcher that
 * counted an attempt ending meanwhile errs on the safe side.
 *
 * Claims (limit_claims.c).  Preloaded, a tenant and a key without a rate limit take no
 * lock held to the commit: the check counts, then, under an LWLock of limit_claims.c
 * held for no statement, reads the other transactions' claims and publishes its own,
 * which the next checkers count until this transaction ends.  Dispatchers of one tenant
 * or key no longer run one transaction at a time.
 *
 * No waiting otherwise.  A lock held to the commit (a rate-limited key, or anything when
 * not preloaded) is taken with ConditionalLockAcquire, before any worker/node pair is
 * locked, and never waited for: a dispatch that finds one held passes the request over
 * (from the queue) or answers UNSCHEDULABLE (contention).  Nothing that holds one of
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
#include "limit_claims.h"
#include "spi_util.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#define SCHED_KEY_LOCK_SPACE 0x534B		/* "SK" */
#define SCHED_TENANT_LOCK_SPACE 0x5354	/* "ST" */

/*
 * The limits that apply to a request: its key's concurrency and rate limits, its tenant's
 * quota.  Looked up by the key and tenant of the request row the dispatch loaded (and
 * locked), with the latest snapshot: the call's own snapshot may predate the request (a
 * request submitted, or requeued, after the dispatching statement began is still fetched
 * from the queue), and a limit set meanwhile applies at once.
 */
/* (the three limits of a key and tenant: concurrency_limit.max_live, rate_limit's
 * dispatches and per, tenant_quota's four maxima, each read by its table's primary key
 * in C: read_limits) */

/* The three limit tables, as bits of a mask; SchedBatch.limit_tables also has
 * LIMIT_KNOWN once the call has read them (0: not yet). */
#define LIMIT_CONCURRENCY	0x1
#define LIMIT_RATE			0x2
#define LIMIT_QUOTA			0x4
#define LIMIT_KNOWN			0x8

/*
 * Which limit tables may hold a row: those with a block (bits LIMIT_*).  A row,
 * committed or not, needs a block, so a table without one holds no row for any
 * snapshot; a limit set concurrently is one that commits after this look (it applies from
 * the calls that begin after it commits).  Relation sizes, no statement: most databases
 * set no limit, and every dispatch_attempt asks.
 */
static int
limit_tables_with_blocks(void)
{
	static const char *const tables[] = {"concurrency_limit", "rate_limit", "tenant_quota"};
	Oid			nsp = get_namespace_oid("sched", false);
	int			mask = 0;
	int			i;

	for (i = 0; i < lengthof(tables); i++)
	{
		Oid			relid = get_relname_relid(tables[i], nsp);
		Relation	rel;

		if (!OidIsValid(relid))
			elog(ERROR, "pg_sched: sched.%s is missing", tables[i]);
		rel = table_open(relid, AccessShareLock);
		if (RelationGetNumberOfBlocks(rel) > 0)
			mask |= 1 << i;
		table_close(rel, AccessShareLock);
	}
	return mask;
}

/* (when tables have blocks: which have rows the latest snapshot sees, in the bits' order) */
static SchedStatement tables_with_rows = {
	"SELECT EXISTS (SELECT 1 FROM sched.concurrency_limit), EXISTS (SELECT 1 FROM sched.rate_limit), "
	"       EXISTS (SELECT 1 FROM sched.tenant_quota)",
	0, {InvalidOid}
};

/* Which limit tables have rows the latest snapshot sees (bits LIMIT_*): read once per
 * dispatch_next call, so a limit set during a call applies from the next one. */
static int
limit_tables_with_rows(void)
{
	int			mask = limit_tables_with_blocks();
	int			i;

	if (mask == 0)
		return 0;
	sched_spi_exec_latest(&tables_with_rows, NULL, NULL, SPI_OK_SELECT);
	for (i = 0; i < 3; i++)
	{
		bool		isnull;

		if (!DatumGetBool(sched_spi_get(0, i + 1, &isnull)))
			mask &= ~(1 << i);
	}
	return mask;
}

/*
 * The live attempts of `key` that `snapshot` sees (the latest: with this transaction's
 * own written ones), read through the partial index attempt_live_key_idx in C: a plan made
 * while sched.attempt was empty (after a TRUNCATE, on a fresh install) and kept by the
 * session took the tenant's live-attempt index instead, and filtered every live attempt
 * of the tenant at every check.
 */
static int64
key_live_count(const char *key, Snapshot snapshot)
{
	SchedIndexScan scan;
	ScanKeyData skey;
	AttrNumber	status_col;
	int64		live = 0;

	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(key));
	sched_index_scan_begin(&scan, "attempt", "attempt_live_key_idx", snapshot, &skey, 1);
	status_col = sched_column_of(scan.rel, "status");
	while (sched_index_scan_next(&scan))
	{
		bool		isnull;
		char	   *status = TextDatumGetCString(slot_getattr(scan.slot, status_col, &isnull));

		/* (the index holds live versions only; the status is checked all the same) */
		if (sched_attempt_status_live(status))
			live++;
		pfree(status);
	}
	sched_index_scan_end(&scan);
	return live;
}

/*
 * Into used[0], an upper bound of key_live_count(key, snapshot), read from
 * attempt_live_key_idx alone: the number of the key's entries (a ScopeCounter, as
 * key_used).  A version that satisfies the index's predicate (finished_at IS NULL) has
 * an entry, or shares its update chain's entry (a HOT update changes neither the key nor
 * finished_at: columns of an index or its predicate), and no snapshot sees two versions
 * of one chain; so no snapshot sees more live attempts of the key than it has entries.
 * Entries of versions it does not see (ended or replaced since, another transaction's
 * not yet committed, aborted) count too, until they are marked dead or vacuumed away.
 * No row is read, so it costs a walk of the key's index entries where the exact count
 * reads a table row for each.
 */
static void
key_live_bound(const char *key, Snapshot snapshot, int64 used[SCHED_LIMIT_DIMENSIONS])
{
	SchedIndexScan scan;
	ScanKeyData skey;

	used[0] = 0;
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(key));
	sched_index_scan_begin(&scan, "attempt", "attempt_live_key_idx", snapshot, &skey, 1);
	while (sched_index_scan_next_entry(&scan))
		used[0]++;
	sched_index_scan_end(&scan);
}

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


/*
 * Adds what the batch's deferred (not yet written) reservations hold of `key` (live
 * attempts, into key_live) or of `tenant` (live attempts, cpu, memory, gpus, into
 * tenant_used), whichever is not NULL: the table does not show them yet.
 */
static void
count_deferred(const SchedBatch *cache, const char *key, const char *tenant,
			   int64 *key_live, int64 tenant_used[4])
{
	int			i;

	if (cache == NULL)
		return;
	for (i = 0; i < cache->npending; i++)
	{
		const SchedReservationWrite *w = &cache->pending[i];

		if (key != NULL && w->concurrency_key != NULL && strcmp(w->concurrency_key, key) == 0)
			(*key_live)++;
		if (tenant != NULL && strcmp(w->tenant, tenant) == 0)
		{
			tenant_used[0]++;
			tenant_used[1] += w->reserve_cpu_millis;
			tenant_used[2] += w->reserve_memory_mb;
			tenant_used[3] += w->reserve_gpus;
		}
	}
}

/* the locks one check took (not those this transaction held already) */
typedef struct Taken
{
	int			n;
	LOCKTAG		tags[2];
} Taken;

/* The 64-bit hash a key or tenant is known by: its locks' and its claims' scope. */
static uint64
scope_hash(const char *name)
{
	return hash_bytes_extended((const unsigned char *) name, (int) strlen(name), 0);
}

static void
scope_tag(LOCKTAG *tag, uint64 key, uint16 space)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (key >> 32), (uint32) key, space);
}

/* Takes the lock of scope (a key's or tenant's hash) in `space` without waiting; false
 * when another transaction holds it. */
static bool
lock_scope(uint64 scope, uint16 space, Taken *taken)
{
	LOCKTAG		tag;
	LockAcquireResult r;

	scope_tag(&tag, scope, space);
	r = LockAcquire(&tag, ExclusiveLock, false, true);
	if (r == LOCKACQUIRE_OK)
		taken->tags[taken->n++] = tag;
	return r != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Gives back what one check took when nothing will be reserved under it: its claims
 * (a key's, when its tenant then refuses) and the locks it took (not those this
 * transaction held already).
 */
static void
give_back(SchedLimitsResult *out, Taken *taken)
{
	int			i;

	sched_limits_withdraw(out);
	out->nclaims = 0;
	for (i = 0; i < taken->n; i++)
		LockRelease(&taken->tags[i], ExclusiveLock, false);
	taken->n = 0;
}

/*
 * A limit is reached: nothing will be reserved under the locks this check took, so they
 * go at once (another dispatcher of the key or tenant need not pass over it until this
 * transaction ends); locks held from an earlier reservation of this transaction stay.
 */
static void
reached(SchedLimitsResult *out, SchedWait waits, char *detail, Taken *taken)
{
	give_back(out, taken);
	out->verdict = SCHED_LIMITS_REACHED;
	out->waits = waits;
	out->detail = detail;
}

void
sched_limits_withdraw(const SchedLimitsResult *limits)
{
	int			i;

	for (i = 0; i < limits->nclaims; i++)
		sched_limit_claims_withdraw(limits->claims[i].space, limits->claims[i].scope,
									limits->claims[i].asks);
}

/* " (n of them ...)": what of a count comes from the claims of transactions not yet
 * committed, for a reason; "" when none */
static const char *
uncommitted(int64 unseen)
{
	return unseen == 0 ? "" :
		psprintf(" (" INT64_FORMAT " of them dispatched by transactions not yet committed)", unseen);
}

/* The limits of one key and tenant (limits_of). */
typedef struct LimitsOf
{
	uint64		hash;			/* of the tenant and key: the call's hash table's key */
	char	   *key;			/* NULL: none */
	char	   *tenant;
	bool		has_concurrency;
	bool		has_rate;
	bool		has_quota;
	int64		max_live;
	int64		dispatches;
	Interval	per;
	bool		q_null[4];		/* the quota's live attempts, cpu, memory, gpus: none */
	int64		q_max[4];
} LimitsOf;

static bool
same_key(const char *a, const char *b)
{
	return (a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0);
}

/*
 * The row of limit table `table` whose primary key (text, COLLATE "C") is `key`, as
 * `snapshot` sees it: its columns `columns` into values/nulls (copied: they outlive the
 * read), true; false when there is none.
 */
static bool
limit_row(const char *table, const char *key, Snapshot snapshot, const char *const *columns,
		  int n, Datum *values, bool *nulls)
{
	SchedIndexScan scan;
	ScanKeyData skey;
	bool		found;

	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(key));
	skey.sk_collation = C_COLLATION_OID;
	sched_index_scan_begin(&scan, table, psprintf("%s_pkey", table), snapshot, &skey, 1);
	found = sched_index_scan_next(&scan);
	if (found)
		sched_slot_copy_columns(scan.slot, scan.rel, columns, n, values, nulls);
	sched_index_scan_end(&scan);
	return found;
}

/*
 * The limits that apply to req (its key's and tenant's scope hashes given: key_hash 0
 * without a key), read with the latest snapshot; a dispatch_next call
 * (cache) reads those of a key and tenant once, so a limit set during a call applies from
 * the next one (as whether any limit exists).
 */
static void
read_limits(const SchedRequestRow *req, uint64 key_hash, uint64 tenant_hash, int tables,
			SchedBatch *cache, LimitsOf *out)
{
	const char *key = req->concurrency_key;
	LimitsOf   *e = NULL;
	Snapshot	snapshot;
	Datum		d[4];
	bool		isnull[4];
	int			i;

	if (cache != NULL)
	{
		uint64		h = hash_combine64(tenant_hash, key_hash);
		bool		found;

		if (cache->limits_of == NULL)
		{
			HASHCTL		ctl;

			ctl.keysize = sizeof(uint64);
			ctl.entrysize = sizeof(LimitsOf);
			ctl.hcxt = cache->cxt;
			cache->limits_of = hash_create("pg_sched limits of a call", 64, &ctl,
										   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		}
		e = hash_search(cache->limits_of, &h, HASH_ENTER, &found);
		if (!found)
			e->tenant = NULL;	/* filled once read (an error in between leaves it so) */
		else if (e->tenant != NULL)
		{
			if (strcmp(e->tenant, req->tenant) == 0 && same_key(e->key, key))
			{
				*out = *e;
				return;
			}
			e = NULL;			/* two pairs of one hash: the second is read each time */
		}
	}
	memset(out, 0, sizeof(*out));
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (key != NULL)
	{
		static const char *const concurrency[] = {"max_live"};
		static const char *const rate[] = {"dispatches", "per"};

		if ((tables & LIMIT_CONCURRENCY) &&
			limit_row("concurrency_limit", key, snapshot, concurrency, 1, d, isnull))
		{
			out->has_concurrency = !isnull[0];
			out->max_live = isnull[0] ? 0 : DatumGetInt32(d[0]);
		}
		if ((tables & LIMIT_RATE) && limit_row("rate_limit", key, snapshot, rate, 2, d, isnull) &&
			!isnull[0] && !isnull[1])
		{
			out->has_rate = true;
			out->dispatches = DatumGetInt32(d[0]);
			out->per = *DatumGetIntervalP(d[1]);
		}
	}
	{
		static const char *const quota[] = {"max_live", "max_cpu_millis", "max_memory_mb", "max_gpus"};

		if (!(tables & LIMIT_QUOTA) ||
			!limit_row("tenant_quota", req->tenant, snapshot, quota, 4, d, out->q_null))
			for (i = 0; i < 4; i++)
				out->q_null[i] = true;
		for (i = 0; i < 4; i++)
		{
			out->q_max[i] = out->q_null[i] ? 0
				: i == 2 ? DatumGetInt64(d[i]) : (int64) DatumGetInt32(d[i]);
			out->has_quota |= !out->q_null[i];
		}
	}
	UnregisterSnapshot(snapshot);
	if (e != NULL)
	{
		uint64		h = e->hash;

		*e = *out;
		e->hash = h;
		e->tenant = MemoryContextStrdup(cache->cxt, req->tenant);
		e->key = key != NULL ? MemoryContextStrdup(cache->cxt, key) : NULL;
	}
}

/*
 * Steps 1-2 of a check by claims (limit_claims.c), after a count made with the snapshot
 * taken after `ended` was read: the scope's lock (an LWLock held for no statement), then
 * the other transactions' claims on it.  True with the lock held.  False, the lock given
 * back, when a transaction with claims ended since `ended` was read: the caller counts
 * again, with a new snapshot ("The count before the lock").
 */
static bool
claim_begin(uint16 space, uint64 scope, uint64 ended, SchedClaimOthers *others)
{
	sched_limit_claims_lock(space, scope);
	sched_limit_claims_others(space, scope, others);
	if (sched_limit_claims_ended() == ended)
		return true;
	sched_limit_claims_unlock(space, scope);
	CHECK_FOR_INTERRUPTS();
	return false;
}

/*
 * What the tenant's live attempts hold (live, cpu, memory, gpus) as `snapshot` sees them:
 * the sums of its rows in sched.tenant_live (one per backend slot that dispatched or
 * ended its attempts), read through the table's primary key in C.
 */
static void
tenant_used(const char *tenant, Snapshot snapshot, int64 used[SCHED_LIMIT_DIMENSIONS])
{
	static const char *const column[SCHED_LIMIT_DIMENSIONS] = {"live", "cpu_millis", "memory_mb", "gpus"};
	SchedIndexScan scan;
	ScanKeyData skey;
	AttrNumber	cols[SCHED_LIMIT_DIMENSIONS];
	int			d;

	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(tenant));
	sched_index_scan_begin(&scan, "tenant_live", "tenant_live_pkey", snapshot, &skey, 1);
	for (d = 0; d < SCHED_LIMIT_DIMENSIONS; d++)
	{
		cols[d] = sched_column_of(scan.rel, column[d]);
		used[d] = 0;
	}
	while (sched_index_scan_next(&scan))
	{
		for (d = 0; d < SCHED_LIMIT_DIMENSIONS; d++)
		{
			bool		isnull;
			Datum		x = slot_getattr(scan.slot, cols[d], &isnull);

			if (!isnull)
				used[d] += DatumGetInt64(x);
		}
	}
	sched_index_scan_end(&scan);
}

/* What a key's live attempts hold (their number) as `snapshot` sees them. */
static void
key_used(const char *key, Snapshot snapshot, int64 used[SCHED_LIMIT_DIMENSIONS])
{
	used[0] = key_live_count(key, snapshot);
}

typedef void (*ScopeCounter) (const char *name, Snapshot snapshot, int64 used[SCHED_LIMIT_DIMENSIONS]);

/*
 * Steps 1-4 of a check (limit_claims.c) on a scope (a key or a tenant, `name`, hashed
 * `scope` in lock `space`): into used what its live attempts hold as the latest snapshot
 * sees them (count), and, with claims, into unseen what the other transactions claimed
 * that this snapshot does not show; it returns then with the scope's lock held (step 5,
 * claim_end, or the caller, releases it).  Without claims the caller holds the scope's
 * lock to the commit already, and unseen is left alone.
 *
 * With `bound` (a counter of at least what count counts, cheaper), the bound is counted
 * first, and the check is made again with count only when the bound and unseen reach
 * `room` (live attempts): under room, the exact count is under it too, and the caller's
 * comparison with the limit has the same outcome.  So used holds the exact count when
 * used[0] + unseen[0] >= room.
 */
static void
scope_used(uint16 space, uint64 scope, const char *name, ScopeCounter count,
		   ScopeCounter bound, int64 room, bool claims,
		   int64 used[SCHED_LIMIT_DIMENSIONS], int64 unseen[SCHED_LIMIT_DIMENSIONS])
{
	SchedClaimOthers others;
	Snapshot	snapshot;
	ScopeCounter counter = bound != NULL ? bound : count;

	for (;;)
	{
		uint64		ended = claims ? sched_limit_claims_ended() : 0;

		snapshot = RegisterSnapshot(GetLatestSnapshot());
		counter(name, snapshot, used);
		if (claims && !claim_begin(space, scope, ended, &others))
		{
			UnregisterSnapshot(snapshot);
			continue;
		}
		if (claims)
			sched_limit_claims_unseen(&others, snapshot, unseen);
		if (counter == count || used[0] + unseen[0] < room)
			break;
		/* the bound leaves no room: the check again, with the exact count */
		if (claims)
			sched_limit_claims_unlock(space, scope);
		UnregisterSnapshot(snapshot);
		memset(unseen, 0, sizeof(int64) * SCHED_LIMIT_DIMENSIONS);
		counter = count;
	}
	UnregisterSnapshot(snapshot);
}

/*
 * Step 5: publishes the claim and releases the scope's lock; the claim is noted in out
 * (withdrawn if the reservation does not happen).  False when this transaction has no
 * room for another claim: out is then BUSY, and the claims and locks this check took
 * are given back.
 */
static bool
claim_end(uint16 space, uint64 scope, const int64 asks[SCHED_LIMIT_DIMENSIONS],
		  SchedLimitsResult *out, Taken *taken)
{
	bool		claimed = sched_limit_claims_add(space, scope, asks);
	SchedLimitClaim *c;

	sched_limit_claims_unlock(space, scope);
	if (!claimed)
	{
		give_back(out, taken);
		out->verdict = SCHED_LIMITS_BUSY;
		out->waits = SCHED_WAIT_CONTENTION;
		return false;
	}
	c = &out->claims[out->nclaims++];
	c->space = space;
	c->scope = scope;
	memcpy(c->asks, asks, sizeof(c->asks));
	return true;
}


void
sched_limits_check(const SchedRequestRow *req, const SchedPlacement *p, TimestampTz at,
				   SchedBatch *cache, SchedLimitsResult *out)
{
	Datum		v[5];
	bool		isnull;
	const char *key = req->concurrency_key;
	uint64		key_hash;
	uint64		tenant_hash;
	Taken		taken = {0};
	bool		short_key,
				short_quota;
	int			i;
	int			tables;
	LimitsOf	lim;

	memset(out, 0, sizeof(*out));
	if (cache != NULL && cache->limit_tables == LIMIT_KNOWN)
		return;					/* this call found no limit at its first check */
	if (!sched_schema_is_0_2())
		return;					/* still at 0.1.0: no limits there */
	if (cache == NULL)
		tables = limit_tables_with_blocks();
	else
	{
		if (cache->limit_tables == 0)
			cache->limit_tables = LIMIT_KNOWN | limit_tables_with_rows();
		tables = cache->limit_tables & ~LIMIT_KNOWN;
	}
	if (tables == 0)
		return;
	key_hash = key != NULL ? scope_hash(key) : 0;
	tenant_hash = scope_hash(req->tenant);
	read_limits(req, key_hash, tenant_hash, tables, cache, &lim);
	if (!lim.has_concurrency && !lim.has_rate && !lim.has_quota)
		return;

	/*
	 * The locks first.  With the claims in shared memory (limit_claims.c) a key without a
	 * rate limit, and a tenant, are locked below for their check alone; otherwise here,
	 * without waiting, until the transaction ends.
	 */
	short_key = lim.has_concurrency && !lim.has_rate && sched_limit_claims_available();
	short_quota = lim.has_quota && sched_limit_claims_available();
	if ((lim.has_concurrency || lim.has_rate) && !short_key && !lock_scope(key_hash, SCHED_KEY_LOCK_SPACE, &taken))
	{
		out->verdict = SCHED_LIMITS_BUSY;
		out->waits = SCHED_WAIT_CONTENTION;
		out->detail = psprintf("concurrency key \"%s\" is being dispatched by another transaction",
							   key);
		return;
	}
	if (lim.has_quota && !short_quota && !lock_scope(tenant_hash, SCHED_TENANT_LOCK_SPACE, &taken))
	{
		give_back(out, &taken);
		out->verdict = SCHED_LIMITS_BUSY;
		out->waits = SCHED_WAIT_CONTENTION;
		out->detail = psprintf("tenant \"%s\" is being dispatched by another transaction",
							   req->tenant);
		out->tenant_busy = true;
		return;
	}
	/* the rate window is counted in the table alone: the batch is written first */
	if (lim.has_rate && cache != NULL)
		sched_batch_flush(cache);

	if (lim.has_concurrency)
	{
		int64		used[SCHED_LIMIT_DIMENSIONS] = {0};
		int64		unseen[SCHED_LIMIT_DIMENSIONS] = {0};
		int64		asks[SCHED_LIMIT_DIMENSIONS] = {1, 0, 0, 0};
		int64		deferred = 0;

		count_deferred(cache, key, NULL, &deferred, NULL);
		scope_used(SCHED_KEY_LOCK_SPACE, key_hash, key, key_used, key_live_bound, lim.max_live - deferred,
				   short_key, used, unseen);
		used[0] += deferred;
		if (used[0] + unseen[0] >= lim.max_live)
		{
			if (short_key)
				sched_limit_claims_unlock(SCHED_KEY_LOCK_SPACE, key_hash);
			reached(out, SCHED_WAIT_CONCURRENCY,
					psprintf("concurrency_limit: key \"%s\" has " INT64_FORMAT " of " INT64_FORMAT
							 " live attempts%s", key, used[0] + unseen[0], lim.max_live,
							 uncommitted(unseen[0])), &taken);
			return;
		}
		if (short_key && !claim_end(SCHED_KEY_LOCK_SPACE, key_hash, asks, out, &taken))
		{
			out->detail = psprintf("this transaction dispatched under too many limits; "
								   "concurrency key \"%s\" is left to another", key);
			return;
		}
	}
	if (lim.has_rate)
	{
		int64		recent;

		v[0] = CStringGetTextDatum(key);
		v[1] = TimestampTzGetDatum(at);
		v[2] = IntervalPGetDatum(&lim.per);
		v[3] = Int32GetDatum((int32) lim.dispatches);
		sched_spi_exec_latest(&key_window, v, NULL, SPI_OK_SELECT);
		recent = sched_spi_int64(0, 1);
		if (recent >= lim.dispatches)
		{
			Datum		e = sched_spi_get(0, 2, &isnull);

			out->eligible_at = isnull ? at : Max(DatumGetTimestampTz(e), at);
			v[0] = CStringGetTextDatum(key);
			v[1] = Int64GetDatum(recent);
			v[2] = IntervalPGetDatum(&lim.per);
			v[3] = Int64GetDatum(lim.dispatches);
			v[4] = TimestampTzGetDatum(out->eligible_at);
			sched_spi_exec(&rate_reason, v, NULL, true, 1, SPI_OK_SELECT);
			reached(out, SCHED_WAIT_RATE, sched_spi_text(0, 1), &taken);
			return;
		}
	}
	if (lim.has_quota)
	{
		static const char *const dimension[4] = {"live attempts", "cpu_millis", "memory_mb", "gpus"};
		int64		used[SCHED_LIMIT_DIMENSIONS];
		int64		asks[SCHED_LIMIT_DIMENSIONS];
		int64		unseen[SCHED_LIMIT_DIMENSIONS] = {0};

		scope_used(SCHED_TENANT_LOCK_SPACE, tenant_hash, req->tenant, tenant_used, NULL, 0,
				   short_quota, used, unseen);
		count_deferred(cache, NULL, req->tenant, NULL, used);
		asks[0] = 1;
		asks[1] = p->reserve_cpu_millis;
		asks[2] = p->reserve_memory_mb;
		asks[3] = p->reserve_gpus;
		for (i = 0; i < 4; i++)
		{
			if (lim.q_null[i] || used[i] + unseen[i] + asks[i] <= lim.q_max[i])
				continue;
			if (short_quota)
				sched_limit_claims_unlock(SCHED_TENANT_LOCK_SPACE, tenant_hash);
			out->tenant_full = (i == 0);
			reached(out, SCHED_WAIT_QUOTA,
					psprintf("tenant_quota_exceeded: tenant \"%s\" %s: its live attempts hold "
							 INT64_FORMAT " of " INT64_FORMAT "%s, this request asks " INT64_FORMAT,
							 req->tenant, dimension[i], used[i] + unseen[i], lim.q_max[i],
							 uncommitted(unseen[i]), asks[i]), &taken);
			return;
		}
		if (short_quota && !claim_end(SCHED_TENANT_LOCK_SPACE, tenant_hash, asks, out, &taken))
		{
			out->tenant_busy = true;
			out->detail = psprintf("this transaction dispatched under too many limits; "
								   "tenant \"%s\" is left to another", req->tenant);
			return;
		}
	}
}
