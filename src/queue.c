/*
 * queue.c — stage 1, queue selection (SPEC section 7), and the functions that consume
 * the queue: claim_requests and dispatch_next.
 *
 * Order among ready requests (state PENDING, or CLAIMED with an expired claim, and
 * available_at <= at):
 *   1. starving requests (queued_at < at - sched.starvation_after), oldest first;
 *   2. then the tenant whose live attempts divided by its weight is lowest (ties: tenant
 *      name, bytewise), re-evaluated after every request handed out in the same call;
 *   3. within a tenant: sort_key = epoch(queued_at) - priority * aging_interval
 *      ascending (the static form of "highest priority + wait / aging_interval"), then
 *      queued_at, then request_id.
 *
 * Every step is an index range scan (request_age_idx, request_queue_idx) that reads a
 * batch of QUEUE_BATCH rows after a keyset position, so the cost of taking the next
 * request does not grow with the length of the queue.  Tenants are enumerated with a
 * loose index scan of request_queue_idx (one probe per tenant).  Each batch is read FOR
 * UPDATE SKIP LOCKED: requests that concurrent consumers hold are passed over inside the
 * index scan (without that, every dispatcher of a busy queue walked the hundreds of
 * requests the others were dispatching, one statement each), and what a batch returns
 * stays locked by this transaction until it ends, dispatched or not.  A batch reads at
 * most as many rows as the caller still wants (QueueScan.want), so a call holds few
 * requests it does not get to.  Consumers re-check that each request is still ready.
 * A tenant's first batch starts at its bound, past the dead entries at the head of
 * request_queue_idx (queue_bound.c); dispatch_next's batches also leave out, without a
 * try of their row locks, the requests other running transactions hold
 * (queue_held.c: they publish what their batches return).  claim_requests' batches are
 * statements; dispatch_next's are the same walks in C (queue_fetch.c).
 *
 * Waiting for capacity (dispatch_next).  Requests of one shape (request.shape: a hash of
 * everything admission reads) are admitted by exactly the same nodes.  So a call judges
 * shapes, not requests: before the scan, one ready request of each shape with ready
 * requests (request_shape_idx, a loose index scan) is judged on the call's fleet:
 * FITS (some node admits it), WAITS (none does, some only for transient reasons) or
 * STATIC (every node has a static reason).  The scan then leaves out the shapes that
 * wait (their rows are neither read nor locked: the batch statements exclude them), and
 * a shape is judged again on the call's fleet after each placement of the call, so the
 * call stops as soon as nothing it can see fits.  Requests that wait keep their place:
 * nothing about them is written, and the first call after capacity frees takes them in
 * queue order.  Requests of static shapes are tried, and back off, one by one.
 */
#include "postgres.h"

#include "reservation.h"
#include "privileges.h"
#include "batch.h"
#include "counters.h"
#include "dispatch_gate.h"
#include "validate.h"
#include "spi_util.h"
#include "settings.h"
#include "queue_bound.h"
#include "queue_held.h"
#include "queue_fetch.h"

#include "storage/backendid.h"

#include "common/hashfn.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "access/stratnum.h"
#include "utils/jsonb.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "miscadmin.h"

PG_FUNCTION_INFO_V1(sched_queue_key);
PG_FUNCTION_INFO_V1(sched_backend_slot);
PG_FUNCTION_INFO_V1(sched_request_shape);

/* a text value, length-prefixed in characters as pg_catalog.length counts them */
static void
append_prefixed(StringInfo buf, text *t)
{
	const char *s = VARDATA_ANY(t);
	int			len = VARSIZE_ANY_EXHDR(t);

	appendStringInfo(buf, "%d:", pg_mbstrlen_with_len(s, len));
	appendBinaryStringInfo(buf, s, len);
}

/*
 * sched._request_shape(capability, capability_version, required_labels, min_cpu_millis,
 * min_memory_mb, min_gpus, reserve_cpu_millis, reserve_memory_mb, reserve_gpus,
 * node_id): the stored generated column request.shape.  The hash (hashtextextended's,
 * seed 0) of the text
 *   len(capability) ':' capability len(capability_version) ':' capability_version
 *   len(labels) ':' labels  min_cpu ',' min_memory ',' min_gpus ','
 *   reserve_cpu ',' reserve_memory ',' reserve_gpus ',' (len(node_id) ':' node_id | '-')
 * with labels as jsonb prints them and len in characters: what the column's SQL
 * expression hashed before it was this function, so the values are the same.  NULL when
 * any but node_id is NULL (as that expression was).  The stored values depend on this
 * body: a different hash needs a new function and the column rewritten.
 */
Datum
sched_request_shape(PG_FUNCTION_ARGS)
{
	StringInfoData buf;
	Jsonb	   *labels;
	char	   *labels_text;
	int			i;
	Datum		hash;

	for (i = 0; i < 9; i++)
		if (PG_ARGISNULL(i))
			PG_RETURN_NULL();
	labels = PG_GETARG_JSONB_P(2);
	labels_text = JsonbToCString(NULL, &labels->root, VARSIZE(labels));

	initStringInfo(&buf);
	append_prefixed(&buf, PG_GETARG_TEXT_PP(0));
	append_prefixed(&buf, PG_GETARG_TEXT_PP(1));
	appendStringInfo(&buf, "%d:%s", pg_mbstrlen(labels_text), labels_text);
	appendStringInfo(&buf, "%d," INT64_FORMAT ",%d,%d," INT64_FORMAT ",%d,",
					 PG_GETARG_INT32(3), PG_GETARG_INT64(4), PG_GETARG_INT32(5),
					 PG_GETARG_INT32(6), PG_GETARG_INT64(7), PG_GETARG_INT32(8));
	if (PG_ARGISNULL(9))
		appendStringInfoChar(&buf, '-');
	else
		append_prefixed(&buf, PG_GETARG_TEXT_PP(9));
	hash = hash_any_extended((unsigned char *) buf.data, buf.len, 0);
	pfree(buf.data);
	PG_RETURN_DATUM(hash);
}

/*
 * sched._backend_slot(): this backend's slot number (BackendId), unique among the
 * backends running at any moment: the row of sched.tenant_live a transaction updates.
 * Only 0.1.0's PL/pgSQL tenant trigger calls it (this library serves a database still at
 * 0.1.0 until ALTER EXTENSION UPDATE); 0.2.0 has no such SQL function, its C trigger
 * takes MyBackendId itself (tenant_live.c).
 */
Datum
sched_backend_slot(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(MyBackendId);
}
PG_FUNCTION_INFO_V1(sched_setting_seconds);
PG_FUNCTION_INFO_V1(sched_claim_requests);
PG_FUNCTION_INFO_V1(sched_dispatch_next);
PG_FUNCTION_INFO_V1(sched_dispatch_next_0_2);

#define QUEUE_BATCH 32

/* shapes judged before the scan; a call that finds more judges the rest as it meets them */
#define SHAPES_JUDGED_FIRST 256

/* a call for at most this many judges the shapes as it meets them, until one waits
 * (ShapeJudge.judged_up_front): for a few placements the statement that judges every
 * shape would cost more than the placements gain from it */
#define SHAPES_MET_FIRST_MAX 4

/* ready(r, at): the shared predicate, with $at the scan's clock */
#define READY(at) \
	" r.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[]) AND r.available_at OPERATOR(pg_catalog.<=) " at \
	" AND (r.state OPERATOR(pg_catalog.=) 'PENDING' OR r.claimed_until OPERATOR(pg_catalog.<=) " at ") "

/*
 * claim_requests' batch statements (the columns of 0.1.0, so a database not yet updated
 * is served).  dispatch_next's batches are the same walks with more filters, in C
 * (queue_fetch.c): they run at every call, and the executor's start of a plan cost more
 * than the walk.
 */
#define STARVING_BATCH \
	"SELECT r.request_id, r.tenant, r.queued_at, r.step_id, r.attempt_number" \
	"  FROM sched.request r " \
	" WHERE " READY("$4") \
	"   AND r.queued_at OPERATOR(pg_catalog.<) $1 " \
	"   AND ROW(r.queued_at, r.request_id) OPERATOR(pg_catalog.>) ROW($2, $3) " \
	"   AND ($5::pg_catalog.text IS NULL OR r.capability OPERATOR(pg_catalog.=) $5) " \
	"   AND ($6::pg_catalog.text IS NULL OR r.tenant OPERATOR(pg_catalog.=) $6) " \
	" ORDER BY r.queued_at, r.request_id LIMIT $7 FOR UPDATE OF r SKIP LOCKED"

#define TENANT_BATCH \
	"SELECT r.request_id, r.sort_key, r.queued_at, r.step_id, r.attempt_number" \
	"  FROM sched.request r " \
	" WHERE " READY("$5") \
	"   AND r.tenant OPERATOR(pg_catalog.=) $1 " \
	"   AND ROW(r.sort_key, r.queued_at, r.request_id) OPERATOR(pg_catalog.>) ROW($2, $3, $4) " \
	"   AND r.queued_at OPERATOR(pg_catalog.>=) $7 " \
	"   AND ($6::pg_catalog.text IS NULL OR r.capability OPERATOR(pg_catalog.=) $6) " \
	" ORDER BY r.sort_key, r.queued_at, r.request_id LIMIT $8 FOR UPDATE OF r SKIP LOCKED"

static SchedStatement starving_batch = {
	STARVING_BATCH,
	7, {TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID}
};

static SchedStatement tenant_batch = {
	TENANT_BATCH,
	8, {TEXTOID, FLOAT8OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID,
		INT4OID}
};

/*
 * The shapes with ready requests (a loose index scan of request_shape_idx) and, for each,
 * a ready request to judge it by (its id and SCHED_PLACEMENT_COLUMNS: no statement per
 * shape to load it), without locking anything.  Every request of a shape is
 * admitted by the same nodes (the shape hashes all admission looks at, capability
 * included), so any of them judges it; with a tenant, the statement looks for one of the
 * tenant's among the shape's last $5 ready requests (request_shape_idx has no tenant:
 * looking further would walk the other tenants' queues, at every call); when none is
 * there but there are $5, the shape is judged all the same, by the $5-th.  A shape left
 * out has fewer than $5 ready requests, none of the tenant's.
 *
 * The scans run from the end of the index, and of each shape's range: a request placed
 * leaves its entry, dead, until the next vacuum, and the requests placed are the first
 * of their range (the earliest available), so a scan from the start walks over every
 * placement since that vacuum (measured: 110-130 us a probe after 29,000 placements).
 * Shapes are ordered by their hash, so their order says nothing of the queue's.
 */
/* the ready requests of shape s.shape */
#define SHAPE_READY \
	"  FROM sched.request r WHERE r.shape OPERATOR(pg_catalog.=) s.shape AND " READY("$1") \
	"   AND ($2::pg_catalog.text IS NULL OR r.capability OPERATOR(pg_catalog.=) $2) "
/* s(shape): the shapes with open requests, from the highest down (a loose index scan of
 * request_shape_idx: one probe a shape) */
#define OPEN_SHAPES \
	"WITH RECURSIVE s(shape) AS ( " \
	"  (SELECT r.shape FROM sched.request r WHERE r.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[]) " \
	"    ORDER BY r.shape DESC LIMIT 1) " \
	"  UNION ALL " \
	"  SELECT (SELECT r.shape FROM sched.request r WHERE r.state OPERATOR(pg_catalog.=) ANY ('{PENDING,CLAIMED}'::pg_catalog.text[]) " \
	"            AND r.shape OPERATOR(pg_catalog.<) s.shape ORDER BY r.shape DESC LIMIT 1) " \
	"    FROM s WHERE s.shape IS NOT NULL) "
static SchedStatement ready_shapes = {
	OPEN_SHAPES
	"SELECT s.shape, x.* FROM s CROSS JOIN LATERAL ( "
	"  (SELECT y.request_id, " SCHED_PLACEMENT_COLUMNS("y")
	"     FROM (SELECT r.request_id, r.tenant, " SCHED_PLACEMENT_COLUMNS("r") SHAPE_READY
	"      ORDER BY r.available_at DESC LIMIT $5) y "
	"    WHERE $3::pg_catalog.text IS NULL OR y.tenant OPERATOR(pg_catalog.=) $3 LIMIT 1) "
	"  UNION ALL "
	"  (SELECT r.request_id, " SCHED_PLACEMENT_COLUMNS("r") SHAPE_READY
	"    ORDER BY r.available_at DESC OFFSET $5 OPERATOR(pg_catalog.-) 1 LIMIT 1) "
	"  LIMIT 1) x "
	" WHERE s.shape IS NOT NULL LIMIT $4",
	5, {TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, INT4OID},
	/* (left to the plan cache it planned at every call: the generic plan's estimate
	 * is far above a custom one's, for the same plan) */
	.generic_plan = true, .ordered = true
};

/* the same for a call of any tenant (its $3, NULL, and $5, 1, are not read): each
 * shape's newest ready request, in one sub-select instead of the two a tenant needs (a
 * statement's start-up is most of what a probe costs). */
static SchedStatement ready_shapes_any_tenant = {
	OPEN_SHAPES
	"SELECT s.shape, x.* FROM s CROSS JOIN LATERAL ( "
	"  SELECT r.request_id, " SCHED_PLACEMENT_COLUMNS("r") SHAPE_READY
	"   ORDER BY r.available_at DESC LIMIT 1) x "
	" WHERE s.shape IS NOT NULL LIMIT $4",
	5, {TIMESTAMPTZOID, TEXTOID, TEXTOID, INT4OID, INT4OID},
	.generic_plan = true, .ordered = true
};

/* with a tenant, how many of a shape's last ready requests ready_shapes looks through */
#define SHAPE_TENANT_LOOKAHEAD 64

/* the live attempts of each tenant of $1, by its position in $1: the counters
 * sched.tenant_live keeps (counting attempts would cost as many as are live) */
static SchedStatement tenant_live_sums = {
	"SELECT u.i, (SELECT CAST(pg_catalog.sum(l.live) AS pg_catalog.int8) FROM sched.tenant_live l "
	"              WHERE l.tenant OPERATOR(pg_catalog.=) u.tenant) "
	"  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[])) WITH ORDINALITY AS u(tenant, i)",
	1, {TEXTARRAYOID}
};

static SchedStatement request_claim = {
	"UPDATE sched.request r SET state = 'CLAIMED', claim_id = $2, claimed_until = $3 "
	"  FROM sched.execution e "
	" WHERE r.request_id OPERATOR(pg_catalog.=) $1 "
	"   AND e.execution_id OPERATOR(pg_catalog.=) r.execution_id "
	"   AND e.status OPERATOR(pg_catalog.=) ANY ('{CREATED,QUEUED,RUNNING}'::pg_catalog.text[]) "
	"RETURNING r.tenant",
	3, {INT8OID, UUIDOID, TIMESTAMPTZOID},
	.keyed = true
};

/* A batch read and not yet handed out: rows[next .. count - 1].  Rows read by statement
 * (claim_requests) have no shape (0) and no concurrency key (NULL). */
typedef struct QueueBuffer
{
	SchedQueueRow rows[QUEUE_BATCH];
	int			count;
	int			next;
} QueueBuffer;

typedef struct QueueTenant
{
	char	   *name;
	int64		weight;
	int64		live;			/* live attempts, plus what this call handed out */
	bool		exhausted;
	/* keyset position: the last row read */
	double		sort_key;
	TimestampTz queued_at;
	int64		request_id;
	QueueBuffer *batch;			/* NULL until its first fetch: a call meets few tenants */
} QueueTenant;

typedef struct QueueScan
{
	TimestampTz at;
	TimestampTz starving_cutoff;
	char	   *capability;		/* NULL: any */
	char	   *tenant;			/* NULL: any */
	/* starving phase */
	bool		starving_exhausted;
	TimestampTz starving_queued_at;
	int64		starving_request_id;
	QueueBuffer starving;
	/* tenant phase */
	int			ntenants;
	QueueTenant *tenants;
	/* how many more requests the caller wants: a fetch locks at most that many */
	int			want;
	/* dispatch_next: the batches read shapes and leave out those below (they wait for
	 * capacity); claim_requests reads no shapes (*shape is 0) */
	bool		with_shapes;
	int64	   *excluded;
	int			nexcluded;
	int			excluded_size;
	/* dispatch_next: keys and tenants a limit holds back, left out for the rest of the
	 * call (they are full: trying their requests would only find the same) */
	char	  **excluded_keys;
	int			nexcluded_keys;
	char	  **excluded_tenants;
	int			nexcluded_tenants;
	/* dispatch_next: asked before a fetch locks a row (SchedQueueFetch.before_lock);
	 * stopped: it ended the last fetch, and queue_next returned NULL for that */
	bool		(*before_lock) (void *arg, Relation rel, TupleTableSlot *slot, int64 shape);
	void	   *before_lock_arg;
	bool		stopped;
} QueueScan;

static Datum
text_array(char **names, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(names[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

static bool
name_in(char **names, int n, const char *name)
{
	int			i;

	if (name == NULL)
		return false;
	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* From now on the scan reads no request of the key (or tenant); the consumer passes
 * over rows already buffered (queue_limited). */
static void
queue_exclude_name(char ***names, int *n, const char *name)
{
	if (name == NULL || name_in(*names, *n, name))
		return;
	*names = *names == NULL ? palloc(sizeof(char *) * 8)
		: (*n % 8 == 0 ? repalloc(*names, sizeof(char *) * (*n + 8)) : *names);
	(*names)[(*n)++] = pstrdup(name);
}

/* Whether a limit holds the request's key or tenant back for the rest of the call. */
static bool
queue_limited(const QueueScan *q, const char *ckey, const char *tenant)
{
	return name_in(q->excluded_keys, q->nexcluded_keys, ckey) ||
		name_in(q->excluded_tenants, q->nexcluded_tenants, tenant);
}

/* From now on the scan reads no request of `shape` (rows already buffered are the
 * consumer's to pass over). */
static void
queue_exclude_shape(QueueScan *q, int64 shape)
{
	if (q->nexcluded == q->excluded_size)
	{
		q->excluded_size = Max(16, q->excluded_size * 2);
		q->excluded = q->excluded == NULL
			? palloc(sizeof(int64) * q->excluded_size)
			: repalloc(q->excluded, sizeof(int64) * q->excluded_size);
	}
	q->excluded[q->nexcluded++] = shape;
}

static Datum
text_or_null(const char *s, char *null)
{
	*null = s == NULL ? 'n' : ' ';
	return s == NULL ? (Datum) 0 : CStringGetTextDatum(s);
}

/*
 * The tenants with open requests (only `only`, when not NULL) and their weights, into
 * q->tenants (order does not matter: tenant_before): a loose scan of request_queue_idx
 * from its end, one probe a tenant (the placed requests' dead entries are at the start
 * of each tenant's range), then each tenant's weight by sched.tenant's key (1 when not
 * listed); in C, with a statement's snapshot, where the statement's start-up cost more
 * than its run at every call.
 */
static void
open_tenants(QueueScan *q, const char *only)
{
	SchedIndexScan s;
	SchedIndexScan w;
	ScanKeyData key;
	Oid			collation;
	int			size = 8;
	int			i;

	q->ntenants = 0;
	q->tenants = palloc0(sizeof(QueueTenant) * size);
	/* (a scan keeps the number of keys it began with: one, every tenant at first) */
	if (only != NULL)
		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(only));
	else
		ScanKeyEntryInitialize(&key, SK_ISNULL | SK_SEARCHNOTNULL, 1, InvalidStrategy,
							   InvalidOid, InvalidOid, InvalidOid, (Datum) 0);
	sched_index_scan_begin_fresh(&s, "request", "request_queue_idx", &key, 1);
	collation = s.index->rd_indcollation[0];
	if (only != NULL)
	{
		key.sk_collation = collation;
		sched_index_scan_rescan(&s, &key, 1);
	}
	for (;;)
	{
		bool		found = false;
		char	   *name;

		while (!found && sched_index_scan_prev(&s))
		{
			char	   *state = sched_slot_text(s.slot, s.rel, "state");

			found = strcmp(state, "PENDING") == 0 || strcmp(state, "CLAIMED") == 0;
		}
		if (!found)
			break;
		name = sched_slot_text(s.slot, s.rel, "tenant");
		if (q->ntenants == size)
		{
			size *= 2;
			q->tenants = repalloc(q->tenants, sizeof(QueueTenant) * size);
			memset(q->tenants + q->ntenants, 0, sizeof(QueueTenant) * (size - q->ntenants));
		}
		q->tenants[q->ntenants++].name = name;
		if (only != NULL)
			break;
		/* the next tenant down */
		ScanKeyInit(&key, 1, BTLessStrategyNumber, F_TEXT_LT, CStringGetTextDatum(name));
		key.sk_collation = collation;
		sched_index_scan_rescan(&s, &key, 1);
	}
	for (i = 0; i < q->ntenants; i++)
	{
		QueueTenant *t = &q->tenants[i];

		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(t->name));
		sched_index_scan_begin(&w, "tenant", "tenant_pkey", s.own_snapshot, &key, 1);
		t->weight = sched_index_scan_next(&w)
			? Max(DatumGetInt32(sched_slot_value(w.slot, w.rel, "weight")), 1) : 1;
		sched_index_scan_end(&w);
	}
	sched_index_scan_end(&s);
}

static void
queue_begin(QueueScan *q, TimestampTz at, char *capability, char *tenant)
{
	Datum		v[1];
	uint64		i;

	memset(q, 0, sizeof(*q));
	q->at = at;
	q->starving_cutoff = at - (int64) sched_starvation_after_s * USECS_PER_SEC;
	q->capability = capability;
	q->tenant = tenant;
	q->starving_queued_at = DT_NOBEGIN;

	open_tenants(q, tenant);
	for (i = 0; i < (uint64) q->ntenants; i++)
	{
		QueueTenant *t = &q->tenants[i];

		t->sort_key = -get_float8_infinity();
		t->queued_at = DT_NOBEGIN;
		t->request_id = PG_INT64_MIN;
	}
	/* live attempts order tenants against one another (tenant_before): one tenant
	 * needs none */
	if (q->ntenants > 1)
	{
		char	  **names = palloc(sizeof(char *) * q->ntenants);

		for (i = 0; i < (uint64) q->ntenants; i++)
			names[i] = q->tenants[i].name;
		v[0] = text_array(names, q->ntenants);
		sched_spi_exec(&tenant_live_sums, v, NULL, false, 0, SPI_OK_SELECT);
		for (i = 0; i < SPI_processed; i++)
		{
			int64		at_index = sched_spi_int64((int) i, 1) - 1;

			if (at_index >= 0 && at_index < q->ntenants)
				q->tenants[at_index].live = sched_spi_int64((int) i, 2);
		}
	}
}

/* Rows one fetch reads and locks: a batch, or fewer when the caller wants fewer. */
static int
fetch_limit(const QueueScan *q)
{
	return Max(1, Min(QUEUE_BATCH, q->want));
}

/* The filters of q, for a fetch of dispatch_next (queue_fetch.c). */
static void
fetch_filters(const QueueScan *q, SchedQueueFetch *f)
{
	memset(f, 0, sizeof(*f));
	f->capability = q->capability;
	f->at = q->at;
	f->starving_cutoff = q->starving_cutoff;
	f->excluded_shapes = q->excluded;
	f->nexcluded_shapes = q->nexcluded;
	f->excluded_keys = q->excluded_keys;
	f->nexcluded_keys = q->nexcluded_keys;
	f->excluded_tenants = q->excluded_tenants;
	f->nexcluded_tenants = q->nexcluded_tenants;
	f->limit = fetch_limit(q);
	f->before_lock = q->before_lock;
	f->before_lock_arg = q->before_lock_arg;
}

/*
 * Reads the batch f asks for into b, each request locked (queue_fetch.c), passing over
 * those other transactions hold and publishing each one locked (queue_held.c); sets
 * *exhausted when it got fewer than it asked for, q->stopped instead when before_lock
 * ended it.  The last row read, or NULL.
 */
static const SchedQueueRow *
fetch_locked(QueueScan *q, const SchedQueueFetch *f, QueueBuffer *b, bool *exhausted)
{
	int			i;

	sched_queue_held_collect();
	b->count = sched_queue_fetch(f, b->rows, &q->stopped);
	sched_queue_held_release();
	b->next = 0;
	if (b->count < f->limit && !q->stopped)
		*exhausted = true;
	for (i = 0; i < b->count; i++)
		sched_queue_held_publish(b->rows[i].request_id);
	return b->count > 0 ? &b->rows[b->count - 1] : NULL;
}

/* dispatch_next's starving batch. */
static void
fetch_starving_locked(QueueScan *q)
{
	SchedQueueFetch f;
	const SchedQueueRow *last;

	fetch_filters(q, &f);
	f.starving = true;
	f.tenant = q->tenant;
	f.queued_at = q->starving_queued_at;
	f.request_id = q->starving_queued_at == DT_NOBEGIN ? PG_INT64_MIN : q->starving_request_id;
	if ((last = fetch_locked(q, &f, &q->starving, &q->starving_exhausted)) != NULL)
	{
		q->starving_queued_at = last->queued_at;
		q->starving_request_id = last->request_id;
	}
}

/* dispatch_next's batch of tenant t. */
static void
fetch_tenant_locked(QueueScan *q, QueueTenant *t)
{
	SchedQueueFetch f;
	const SchedQueueRow *last;

	fetch_filters(q, &f);
	f.starving = false;
	f.tenant = t->name;
	f.sort_key = t->sort_key;
	f.queued_at = t->queued_at;
	f.request_id = t->request_id;
	if ((last = fetch_locked(q, &f, t->batch, &t->exhausted)) != NULL)
	{
		t->sort_key = last->sort_key;
		t->queued_at = last->queued_at;
		t->request_id = last->request_id;
	}
}

static void
fetch_starving(QueueScan *q)
{
	Datum		v[7];
	char		n[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	uint64		i;
	bool		isnull;

	if (q->with_shapes)
	{
		fetch_starving_locked(q);
		return;
	}
	v[0] = TimestampTzGetDatum(q->starving_cutoff);
	v[1] = TimestampTzGetDatum(q->starving_queued_at);
	v[2] = Int64GetDatum(q->starving_request_id);
	v[3] = TimestampTzGetDatum(q->at);
	v[4] = text_or_null(q->capability, &n[4]);
	v[5] = text_or_null(q->tenant, &n[5]);
	if (q->starving_queued_at == DT_NOBEGIN)
		v[2] = Int64GetDatum(PG_INT64_MIN);
	v[6] = Int32GetDatum(fetch_limit(q));
	sched_spi_exec(&starving_batch, v, n, false, 0, SPI_OK_SELECT);
	q->starving.count = (int) SPI_processed;
	q->starving.next = 0;
	if (SPI_processed < (uint64) fetch_limit(q))
		q->starving_exhausted = true;
	for (i = 0; i < SPI_processed; i++)
	{
		SchedQueueRow *r = &q->starving.rows[i];

		memset(r, 0, sizeof(*r));
		r->request_id = sched_spi_int64((int) i, 1);
		r->key.step_id = *DatumGetUUIDP(sched_spi_get((int) i, 4, &isnull));
		r->key.attempt_number = (int32) sched_spi_int64((int) i, 5);
		r->tenant = sched_spi_text((int) i, 2);
		q->starving_queued_at = DatumGetTimestampTz(sched_spi_get((int) i, 3, &isnull));
		q->starving_request_id = r->request_id;
	}
}

static void
fetch_tenant(QueueScan *q, QueueTenant *t)
{
	Datum		v[8];
	char		n[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	uint64		i;
	bool		isnull;

	/* the first fetch of the tenant starts where its queue begins (queue_bound.c) */
	if (t->request_id == PG_INT64_MIN && t->queued_at == DT_NOBEGIN)
	{
		SchedQueueKey bound;

		if (sched_queue_bound(t->name, &bound))
		{
			t->sort_key = bound.sort_key;
			t->queued_at = bound.queued_at;
			t->request_id = bound.request_id - 1;	/* the bound itself comes next */
		}
	}
	if (t->batch == NULL)
		t->batch = MemoryContextAllocZero(GetMemoryChunkContext(q->tenants), sizeof(QueueBuffer));
	if (q->with_shapes)
	{
		fetch_tenant_locked(q, t);
		return;
	}
	v[0] = CStringGetTextDatum(t->name);
	v[1] = Float8GetDatum(t->sort_key);
	v[2] = TimestampTzGetDatum(t->queued_at);
	v[3] = Int64GetDatum(t->request_id);
	v[4] = TimestampTzGetDatum(q->at);
	v[5] = text_or_null(q->capability, &n[5]);
	v[6] = TimestampTzGetDatum(q->starving_cutoff);
	v[7] = Int32GetDatum(fetch_limit(q));
	sched_spi_exec(&tenant_batch, v, n, false, 0, SPI_OK_SELECT);
	t->batch->count = (int) SPI_processed;
	t->batch->next = 0;
	if (SPI_processed < (uint64) fetch_limit(q))
		t->exhausted = true;
	for (i = 0; i < SPI_processed; i++)
	{
		SchedQueueRow *r = &t->batch->rows[i];

		memset(r, 0, sizeof(*r));
		r->request_id = sched_spi_int64((int) i, 1);
		r->key.step_id = *DatumGetUUIDP(sched_spi_get((int) i, 4, &isnull));
		r->key.attempt_number = (int32) sched_spi_int64((int) i, 5);
		r->tenant = t->name;
		t->sort_key = DatumGetFloat8(sched_spi_get((int) i, 2, &isnull));
		t->queued_at = DatumGetTimestampTz(sched_spi_get((int) i, 3, &isnull));
		t->request_id = r->request_id;
	}
}

/* Requests of tenant t read and not yet handed out. */
static int
buffered(const QueueTenant *t)
{
	return t->batch == NULL ? 0 : t->batch->count - t->batch->next;
}

/* a before b in fair share: lower live/weight, then name bytewise */
static bool
tenant_before(const QueueTenant *a, const QueueTenant *b)
{
	int64		x = a->live * b->weight;
	int64		y = b->live * a->weight;

	if (x != y)
		return x < y;
	return strcmp(a->name, b->name) < 0;
}

/*
 * The next request in queue order (valid until the next call), or NULL when the queue
 * has no more ready requests, or (q->stopped) when before_lock ended a fetch: the
 * caller decides, then asks again.  *tenant is set to the request's tenant entry (NULL
 * for a starving request of a tenant not in the list).
 */
static const SchedQueueRow *
queue_next(QueueScan *q, QueueTenant **tenant)
{
	*tenant = NULL;
	for (;;)
	{
		if (q->starving.next < q->starving.count)
		{
			const SchedQueueRow *r = &q->starving.rows[q->starving.next++];
			int			i;

			for (i = 0; i < q->ntenants; i++)
				if (strcmp(q->tenants[i].name, r->tenant) == 0)
					*tenant = &q->tenants[i];
			return r;
		}
		if (q->starving_exhausted)
			break;
		fetch_starving(q);
		if (q->stopped)
			return NULL;
	}

	for (;;)
	{
		QueueTenant *best = NULL;
		int			i;

		for (i = 0; i < q->ntenants; i++)
		{
			QueueTenant *t = &q->tenants[i];

			if (buffered(t) == 0 && t->exhausted)
				continue;
			if (best == NULL || tenant_before(t, best))
				best = t;
		}
		if (best == NULL)
			return NULL;
		if (buffered(best) == 0)
		{
			fetch_tenant(q, best);
			if (q->stopped)
				return NULL;
			continue;
		}
		*tenant = best;
		return &best->batch->rows[best->batch->next++];
	}
}

static char *
optional_text_arg(FunctionCallInfo fcinfo, int argno, const char *parameter, const char *hint)
{
	char	   *s;

	if (PG_ARGISNULL(argno))
		return NULL;
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (s[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"%s\" must not be empty", parameter),
				 errhint("%s", hint)));
	sched_check_name_length(s, parameter);
	return s;
}

static int32
positive_int_arg(FunctionCallInfo fcinfo, int argno, const char *parameter)
{
	int32		v;

	sched_check_not_null(fcinfo, argno, parameter);
	v = PG_GETARG_INT32(argno);
	if (v < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"%s\" must be at least 1: %d", parameter, v)));
	return v;
}

/* claim_requests(max_requests, claim_ttl, capability, tenant, at) → sched.claim rows */
Datum
sched_claim_requests(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		max_requests = positive_int_arg(fcinfo, 0, "max_requests");
	Interval   *ttl;
	Interval	zero = {0, 0, 0};
	char	   *capability;
	char	   *tenant;
	TimestampTz at;
	TimestampTz until;
	pg_uuid_t	claim;
	QueueScan	q;
	int			claimed = 0;
	int64		scanned = 0;

	sched_check_not_null(fcinfo, 1, "claim_ttl");
	ttl = PG_GETARG_INTERVAL_P(1);
	if (!DatumGetBool(DirectFunctionCall2(interval_gt, IntervalPGetDatum(ttl),
										  IntervalPGetDatum(&zero))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parameter \"claim_ttl\" must be positive: %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl))))));
	{
		Interval	day = {0, 1, 0};	/* a claim is held for minutes, never past a day */

		if (DatumGetBool(DirectFunctionCall2(interval_gt, IntervalPGetDatum(ttl),
											 IntervalPGetDatum(&day))))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("parameter \"claim_ttl\" is too long: %s",
							DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl)))),
					 errdetail("The limit is 1 day."),
					 errhint("A scheduler that needs longer claims the request again.")));
	}
	capability = optional_text_arg(fcinfo, 2, "capability", "Pass NULL to claim any capability.");
	tenant = optional_text_arg(fcinfo, 3, "tenant", "Pass NULL to claim for any tenant.");
	sched_check_not_null(fcinfo, 4, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(4), "at");
	at = PG_GETARG_TIMESTAMPTZ(4);
	sched_check_at_not_future(at, "at");	/* it would claim requests not yet ready */
	until = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													TimestampTzGetDatum(at),
													IntervalPGetDatum(ttl)));
	sched_uuid_random(&claim);
	PreventCommandIfReadOnly("claim_requests");	/* a standby, or a read-only transaction */

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	queue_begin(&q, at, capability, tenant);
	while (claimed < max_requests && scanned < (int64) max_requests * 4 + 64)
	{
		QueueTenant *t;
		const SchedQueueRow *r;
		int64		id;
		Datum		v[3];

		q.want = max_requests - claimed;
		if ((r = queue_next(&q, &t)) == NULL)
			break;
		id = r->request_id;
		scanned++;
		/* the scan returned it locked and ready (FOR UPDATE re-checks the predicate on
		 * the newest version): claim it */
		v[0] = Int64GetDatum(id);
		v[1] = UUIDPGetDatum(&claim);
		v[2] = TimestampTzGetDatum(until);
		sched_spi_exec(&request_claim, v, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
		if (SPI_processed == 0)
			continue;			/* its execution is closed */
		{
			Datum		values[3];
			bool		nulls[3] = {0};

			values[0] = Int64GetDatum(id);
			values[1] = UUIDPGetDatum(&claim);
			values[2] = TimestampTzGetDatum(until);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		if (t != NULL)
			t->live++;
		claimed++;
	}
	SPI_finish();
	return (Datum) 0;
}

typedef struct ShapeEntry
{
	int64		shape;			/* hash key: request.shape */
	SchedVerdict verdict;
	int			judged_at;		/* the call's placements when it was judged */
	SchedPlacementArgs args;	/* the placement of the request it was judged by */
} ShapeEntry;

typedef struct ShapeJudge
{
	HTAB	   *shapes;
	int			placements;		/* placements the call made so far */
	int			not_waiting;	/* judged shapes whose verdict is not WAITS */
	/*
	 * A call for more than SHAPES_MET_FIRST_MAX judges every shape with ready
	 * requests before the scan.  A smaller call judges each shape as the scan meets
	 * it, on the version read, before the row is locked (shape_before_lock), until a
	 * shape waits for capacity: that row is left unlocked, and from then on
	 * (judged_up_front) every shape with ready requests is judged, at once, so that
	 * the scan leaves out all that wait and the call ends when none is left.  Before
	 * that no shape is left out of the scan, so it never walks past requests it will
	 * not try.  On a full fleet the first shape met already waits, and the call ends
	 * without locking or writing a request; a call that places what it wants from
	 * shapes that fit never runs the statement of all shapes.
	 */
	bool		judged_up_front;
	bool		all_known;		/* every shape with ready requests was judged up front */
	SchedBatch *cache;
	TimestampTz at;
	QueueScan  *scan;			/* the call's */
} ShapeJudge;

/* Judges placement p on the call's fleet (kept current with the call's placements):
 * the fleet's verdict (placement.h), stopping at the first node that admits it. */
static SchedVerdict
judge_placement(ShapeJudge *j, const SchedPlacement *p)
{
	SchedFleet *fleet = sched_batch_fleet(j->cache, p->capability, false);
	SchedVerdict v = SCHED_VERDICT_STATIC;
	int			i;

	for (i = 0; i < fleet->count && v != SCHED_VERDICT_FITS; i++)
		v = sched_verdict_add(v, sched_admission(p, &fleet->rows[i].c));
	return v;
}

/*
 * With sched.preemption on, a request that waits for capacity may still make room by
 * preempting (preemption.c), and a request that holds room from its preemption looks as
 * if it waited (its own hold fills the node) while it is the one to take it: then no
 * shape is left out of the scan or passed over.  Set at the start of each call.
 */
static bool skip_waiting_shapes = true;

static bool
waiting_shapes_skipped(void)
{
	return skip_waiting_shapes;
}

static void
decide_waiting_shapes(void)
{
	skip_waiting_shapes = !sched_preemption;
	if (skip_waiting_shapes && sched_schema_is_0_2())
		skip_waiting_shapes = !sched_request_any_held();
}

static void
set_verdict(ShapeJudge *j, ShapeEntry *e, SchedVerdict v, QueueScan *q)
{
	if (e->verdict != SCHED_VERDICT_WAITS && v == SCHED_VERDICT_WAITS)
	{
		j->not_waiting--;
		if (waiting_shapes_skipped())
			queue_exclude_shape(q, e->shape);
	}
	e->verdict = v;
	e->judged_at = j->placements;
}

/*
 * The entry of `shape`, judged when the call meets it for the first time by the
 * placement `args` of one of its requests, or when args is NULL by that of the request
 * the scan returned in `row` (the version the scan locked, else the request as a
 * statement sees it now).  Allocates in the call's memory (CurrentMemoryContext).
 */
static ShapeEntry *
shape_entry(ShapeJudge *j, int64 shape, const SchedQueueRow *row,
			const SchedPlacementArgs *args, QueueScan *q)
{
	bool		found;
	ShapeEntry *e = hash_search(j->shapes, &shape, HASH_ENTER, &found);

	if (!found)
	{
		if (args != NULL)
			e->args = *args;
		else if (!sched_request_read_locked((ItemPointer) &row->tid, j->at, &e->args, NULL) &&
				 !sched_request_load(row->request_id, SCHED_LOCK_NONE, j->at, &e->args, NULL))
		{
			/* gone since the scan read it: nothing to judge by */
			hash_search(j->shapes, &shape, HASH_REMOVE, NULL);
			return NULL;
		}
		e->verdict = SCHED_VERDICT_FITS;
		j->not_waiting++;
		set_verdict(j, e, judge_placement(j, &e->args.p), q);
	}
	return e;
}

/*
 * Judges the shapes that have ready requests, from the highest id down: at most
 * SHAPES_JUDGED_FIRST of them (j->all_known tells whether that was all).
 */
static void
judge_ready_shapes(ShapeJudge *j, QueueScan *q)
{
	Datum		v[5];
	char		n[5] = {' ', ' ', ' ', ' ', ' '};
	int64	   *shapes;
	SchedPlacementArgs *placements;
	int			count;
	int			i;

	v[0] = TimestampTzGetDatum(q->at);
	v[1] = text_or_null(q->capability, &n[1]);
	v[2] = text_or_null(q->tenant, &n[2]);
	v[3] = Int32GetDatum(SHAPES_JUDGED_FIRST + 1);
	v[4] = Int32GetDatum(q->tenant == NULL ? 1 : SHAPE_TENANT_LOOKAHEAD);
	sched_spi_exec(q->tenant == NULL ? &ready_shapes_any_tenant : &ready_shapes, v, n, false, 0,
				   SPI_OK_SELECT);
	j->judged_up_front = true;
	j->all_known = SPI_processed <= SHAPES_JUDGED_FIRST;
	count = (int) Min(SPI_processed, SHAPES_JUDGED_FIRST);
	/* (decoded before the judging runs statements of its own) */
	shapes = palloc(sizeof(int64) * Max(count, 1));
	placements = palloc(sizeof(SchedPlacementArgs) * Max(count, 1));
	for (i = 0; i < count; i++)
	{
		shapes[i] = sched_spi_int64(i, 1);
		sched_placement_decode(i, 3, 0, j->at, &placements[i]);
	}
	for (i = 0; i < count; i++)
		(void) shape_entry(j, shapes[i], NULL, &placements[i], q);
}

/* Whether every shape with ready requests is known to wait, so the scan would try
 * none: the call ends. */
static bool
every_shape_waits(const ShapeJudge *j)
{
	return j->all_known && j->not_waiting == 0 && waiting_shapes_skipped();
}

/*
 * Whether the request met by the scan is to be tried: false when its shape waits for
 * capacity, judged again on the call's fleet if the call placed something since.
 */
static bool
worth_trying(ShapeJudge *j, ShapeEntry *e, QueueScan *q)
{
	if (e == NULL)
		return true;
	if (e->verdict != SCHED_VERDICT_WAITS && e->judged_at < j->placements)
		set_verdict(j, e, judge_placement(j, &e->args.p), q);
	return e->verdict != SCHED_VERDICT_WAITS || !waiting_shapes_skipped();
}

/*
 * Asked by the queue's fetch before it locks a row of `shape` (the version read in
 * slot): whether it is worth trying, the shape judged now on that version when the call
 * has not met it.  False ends the fetch with the row unlocked.
 */
static bool
shape_before_lock(void *arg, Relation rel, TupleTableSlot *slot, int64 shape)
{
	ShapeJudge *j = arg;
	ShapeEntry *e = hash_search(j->shapes, &shape, HASH_FIND, NULL);

	if (e == NULL)
	{
		SchedPlacementArgs args;

		sched_request_placement_of_slot(rel, slot, j->at, &args);
		e = shape_entry(j, shape, NULL, &args, j->scan);
	}
	return worth_trying(j, e, j->scan);
}

/*
 * dispatch_next(max_dispatches, capability, tenant, at) → sched.dispatch_result rows.
 * Tries at most 4 * max_dispatches + 64 requests; requests of shapes that wait for
 * capacity are passed over untried and unwritten (see "Waiting for capacity" above),
 * and the call ends when every shape it knows of waits.  Each request is dispatched by
 * sched_dispatch_request() in queue mode: a request another dispatcher holds is passed
 * over silently, an unschedulable one gets its reason (and, for a static reason, its
 * backoff) and the scan moves on.  The fleet of each capability is read once per call
 * and kept current in memory (sched_batch_update_rows); per-request work runs in a
 * memory context reset after each request, so memory stays flat in the batch size.
 */
Datum
sched_dispatch_next_0_2(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		max_dispatches = positive_int_arg(fcinfo, 0, "max_dispatches");
	char	   *capability = optional_text_arg(fcinfo, 1, "capability", "Pass NULL to dispatch any capability.");
	char	   *tenant = optional_text_arg(fcinfo, 2, "tenant", "Pass NULL to dispatch for any tenant.");
	TimestampTz at;
	QueueScan	q;
	ShapeJudge	judge;
	HASHCTL		hctl;
	int			dispatched = 0;
	int64		scanned = 0;
	MemoryContext per_request;
	MemoryContext outer;
	SchedBatch *cache;
	bool		turn;

	sched_check_not_null(fcinfo, 3, "at");
	sched_check_time(PG_GETARG_TIMESTAMPTZ(3), "at");
	at = PG_GETARG_TIMESTAMPTZ(3);
	sched_check_at_not_future(at, "at");	/* it starts the leases of what is placed */
	PreventCommandIfReadOnly("dispatch_next");	/* a standby, or a read-only transaction */
	turn = sched_dispatch_gate_enter();	/* before anything is read or locked */

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_sched: SPI_connect failed");
	queue_begin(&q, at, capability, tenant);
	q.with_shapes = true;
	decide_waiting_shapes();
	outer = CurrentMemoryContext;
	per_request = AllocSetContextCreate(outer, "pg_sched dispatch_next request",
										ALLOCSET_DEFAULT_SIZES);
	cache = palloc0(sizeof(SchedBatch));
	cache->cxt = outer;			/* one fleet read per capability for the whole call */
	cache->defer = true;		/* and one write statement per SCHED_BATCH_MAX placements */
	cache->at = at;

	memset(&judge, 0, sizeof(judge));
	memset(&hctl, 0, sizeof(hctl));
	hctl.keysize = sizeof(int64);
	hctl.entrysize = sizeof(ShapeEntry);
	hctl.hcxt = outer;
	judge.shapes = hash_create("pg_sched dispatch_next shapes", 64, &hctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	judge.cache = cache;
	judge.at = at;
	judge.scan = &q;
	q.before_lock = shape_before_lock;
	q.before_lock_arg = &judge;
	if (max_dispatches > SHAPES_MET_FIRST_MAX)
		judge_ready_shapes(&judge, &q);

	while (dispatched < max_dispatches && scanned < (int64) max_dispatches * 4 + 64 &&
		   !every_shape_waits(&judge))
	{
		QueueTenant *t;
		const SchedQueueRow *next;
		SchedQueueRow r;
		ShapeEntry *e;
		SchedDispatchResult res;
		Datum		values[8];
		bool		nulls[8];

		/* the first shape met that waits: judge every shape now (see judged_up_front) */
		if (!judge.judged_up_front &&
			hash_get_num_entries(judge.shapes) > judge.not_waiting)
		{
			judge_ready_shapes(&judge, &q);
			if (every_shape_waits(&judge))
				break;			/* nothing to scan for */
		}
		q.want = max_dispatches - dispatched;
		if ((next = queue_next(&q, &t)) == NULL)
		{
			if (!q.stopped)
				break;
			q.stopped = false;	/* a shape met waits: judged above, then scan on */
			continue;
		}
		r = *next;
		if (queue_limited(&q, r.concurrency_key, r.tenant))
			continue;			/* its key or tenant is full: untried, unwritten */
		e = shape_entry(&judge, r.shape, &r, NULL, &q);
		if (!worth_trying(&judge, e, &q))
			continue;			/* waits for capacity: left as it is, in its place */
		scanned++;
		MemoryContextSwitchTo(per_request);
		if (sched_dispatch_request(r.request_id, &r.key, &r.tid, NULL, at, true, cache, &res))
		{
			sched_counters_add(&res);
			sched_dispatch_result_values(&res, values, nulls);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			if (strcmp(res.outcome, "DISPATCHED") == 0)
			{
				dispatched++;
				judge.placements++;
				if (t != NULL)
					t->live++;
			}
			/* a gang placed whole: a row for each of its other members, each counted
			 * against max_dispatches (the call may end up to gang_size - 1 over it) */
			for (int g = 0; g < res.ngang; g++)
			{
				sched_counters_add(&res.gang[g]);
				sched_dispatch_result_values(&res.gang[g], values, nulls);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
				dispatched++;
				judge.placements++;
				if (t != NULL)
					t->live++;
			}
		}
		MemoryContextSwitchTo(outer);
		MemoryContextReset(per_request);
		/* what the try found of the shape, on a fresh snapshot */
		/* (a key or tenant another transaction is dispatching stays locked until that
		 * transaction ends, and one this transaction has no room to claim under stays
		 * so until this one ends: its requests would only be passed over one by one) */
		if (res.waits == SCHED_WAIT_CONCURRENCY || res.waits == SCHED_WAIT_RATE ||
			res.limit_busy == SCHED_LIMIT_KEY_BUSY)
			queue_exclude_name(&q.excluded_keys, &q.nexcluded_keys, r.concurrency_key);
		else if ((res.waits == SCHED_WAIT_QUOTA && res.tenant_full) ||
				 res.limit_busy == SCHED_LIMIT_TENANT_BUSY)
		{
			queue_exclude_name(&q.excluded_tenants, &q.nexcluded_tenants, r.tenant);
			if (t != NULL && t->batch != NULL)
				t->batch->next = t->batch->count;	/* and its buffered rows */
		}
		if (e != NULL && res.waits == SCHED_WAIT_CAPACITY)
			set_verdict(&judge, e, SCHED_VERDICT_WAITS, &q);
		else if (e != NULL && res.waits == SCHED_WAIT_STATIC)
			set_verdict(&judge, e, SCHED_VERDICT_STATIC, &q);
	}
	sched_batch_flush(cache);
	SPI_finish();
	if (turn)
		sched_dispatch_gate_leave();
	return (Datum) 0;
}

/*
 * The entry point of dispatch_next in a database whose extension is still at 0.1.0:
 * this library's dispatch_next needs the 0.2.0 schema (request.shape).
 */
Datum
sched_dispatch_next(PG_FUNCTION_ARGS)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dispatch_next needs pg_sched 0.2.0, but the extension in this database is at 0.1.0"),
			 errdetail("The pg_sched library installed is version 0.2.0."),
			 errhint("Run ALTER EXTENSION pg_sched UPDATE.")));
	PG_RETURN_NULL();
}

/* sched._queue_key(priority, queued_at): the static queue key, seconds */
Datum
sched_queue_key(PG_FUNCTION_ARGS)
{
	int32		priority = PG_GETARG_INT32(0);
	TimestampTz queued_at = PG_GETARG_TIMESTAMPTZ(1);
	double		epoch = (double) (queued_at - SetEpochTimestamp()) / USECS_PER_SEC;

	PG_RETURN_FLOAT8(epoch - (double) priority * (double) sched_aging_interval_s);
}

/* sched._setting_seconds(name): a sched.* setting in seconds */
Datum
sched_setting_seconds(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	if (strcmp(name, "sched.lease_ttl") == 0)
		PG_RETURN_FLOAT8(sched_lease_ttl_s);
	if (strcmp(name, "sched.heartbeat_ttl") == 0)
		PG_RETURN_FLOAT8(sched_heartbeat_ttl_s);
	if (strcmp(name, "sched.retry_backoff_max") == 0)
		PG_RETURN_FLOAT8(sched_retry_backoff_max_s);
	if (strcmp(name, "sched.unschedulable_backoff_max") == 0)
		PG_RETURN_FLOAT8(sched_unschedulable_backoff_max_s);
	if (strcmp(name, "sched.starvation_after") == 0)
		PG_RETURN_FLOAT8(sched_starvation_after_s);
	if (strcmp(name, "sched.aging_interval") == 0)
		PG_RETURN_FLOAT8(sched_aging_interval_s);
	sched_check_name_length(name, "name");
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for parameter \"name\": \"%s\" is not a pg_sched duration setting", name),
			 errhint("Pass one of sched.heartbeat_ttl, sched.lease_ttl, sched.retry_backoff_max, sched.unschedulable_backoff_max, sched.starvation_after, sched.aging_interval.")));
	PG_RETURN_NULL();
}
