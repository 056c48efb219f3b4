/*
 * fuzz_summary.c — libFuzzer target: the "why is it waiting" summary, as the extension
 * computes it for a request over a fleet (fleet.c sched_fleet_summary: per node
 * sched_admission(), sched_verdict_add(), sched_count_reasons(), then
 * sched_format_summary() once to measure and once into a buffer of that size), and the
 * ranking of the same fleet (sched_fleet_admit + sched_rank).
 *
 * The fleet has up to FS_NODES nodes, each the admissible base candidate with a set of
 * faults chosen by the input (each fault makes one reason apply), or with raw numbers.
 * Properties:
 *   - eligible + (nodes with at least one reason) = nodes; an admitted node has no
 *     reason; every count is <= nodes - eligible; the counts sum to the number of
 *     (node, reason) pairs and are >= nodes - eligible
 *   - the text reads back: "E/N nodes eligible" with E and N the fleet's, then every
 *     code with a count > 0 exactly once, with its count, names in strictly increasing
 *     bytewise order, nothing else; it equals the SPEC reference's text
 *   - measuring and writing agree; buffer sizes 0, 1, 2, len/2, len - 1, len, len + 1
 *     and four the input picks (each an exactly sized heap block, so ASan sees a write
 *     past it) get the snprintf behaviour: returns len, holds the first cap - 1 bytes
 *     and a NUL
 *   - verdict: FITS iff some node is eligible; else WAITS iff some node has only
 *     transient reasons; else STATIC (also for an empty fleet); the same in any node
 *     order.  WAITS means waiting for capacity: with every attempt ended (nothing
 *     reserved, nothing running) the request fits — except where a worker has 0 slots
 *   - ranking: exactly the eligible nodes are ranked; the first has the highest score
 *   - on arbitrary counts, nodes and eligible (negative, INT_MIN, INT_MAX), the text
 *     equals the reference and stays within the buffer
 */
#include "fuzz_common.h"

#define FS_NODES 24

static SchedCandidate fs_nodes[FS_NODES];
static char fs_ids[FS_NODES][16];
static const char *const fs_v2[] = {"2.0"};
static SchedLabel fs_req_items[] = {{"tier", "fast"}};
static SchedLabel fs_node_fast[] = {{"tier", "fast"}, {"zone", "eu"}};
static SchedLabel fs_node_slow[] = {{"tier", "slow"}};

/* Faults, one per reason (in SPEC order). */
static void
fs_fault(SchedCandidate *c, int reason, FzReader *r)
{
	switch (reason)
	{
		case SCHED_R_PINNED_TO_OTHER_NODE:
			break;				/* the request's pin, handled by the caller */
		case SCHED_R_NODE_NOT_ACTIVE:
			c->management_status = fz_bool(r) ? SCHED_NODE_DRAINING : SCHED_NODE_DISABLED;
			break;
		case SCHED_R_CAPABILITY_MISSING:
			c->has_worker = false;
			break;
		case SCHED_R_WORKER_NOT_READY:
			c->runtime_state = (SchedRuntimeState) (fz_u8(r) % 3 == 0 ? SCHED_WORKER_STARTING
													: fz_bool(r) ? SCHED_WORKER_DRAINING : SCHED_WORKER_STOPPED);
			break;
		case SCHED_R_WORKER_NOT_ELIGIBLE:
			c->scheduling_status = SCHED_WORKER_CORDONED;
			break;
		case SCHED_R_HEARTBEAT_EXPIRED:
			if (fz_bool(r))
				c->has_heartbeat = false;
			else
				c->last_heartbeat = 999;	/* cutoff is 1000 */
			break;
		case SCHED_R_CAPABILITY_VERSION_MISSING:
			c->versions = fs_v2;
			break;
		case SCHED_R_REQUIRED_LABELS_MISMATCH:
			c->labels.count = 1;
			c->labels.items = fs_node_slow;
			break;
		case SCHED_R_INSUFFICIENT_CPU:
			c->cpu_millis = 499;	/* the request asks 500 */
			break;
		case SCHED_R_INSUFFICIENT_MEMORY:
			c->memory_mb = 0;
			break;
		case SCHED_R_INSUFFICIENT_GPUS:
			c->gpus = 0;
			break;
		case SCHED_R_NO_FREE_SLOT:
			c->worker_live_attempts = c->slots = (int32_t) (fz_u8(r) % 3);
			break;
		case SCHED_R_CPU_EXHAUSTED:
			c->reserved_cpu_millis = c->cpu_millis - 499;
			break;
		case SCHED_R_MEMORY_EXHAUSTED:
			c->reserved_memory_mb = c->memory_mb;
			break;
		case SCHED_R_GPUS_EXHAUSTED:
			c->reserved_gpus = c->gpus;
			break;
	}
}

/* Reads the summary back; returns 1 if it says what counts/nodes/eligible say. */
static void
fs_parse(const char *s, int nodes, int eligible, const int counts[SCHED_R_COUNT])
{
	int			e,
				n,
				used = 0,
				listed[SCHED_R_COUNT] = {0};
	const char *q;
	const char *prev = NULL;
	int			i;

	FZ_CHECK(sscanf(s, "%d/%d nodes eligible%n", &e, &n, &used) == 2 && used > 0,
			 "summary does not start with \"E/N nodes eligible\": \"%s\"", s);
	FZ_CHECK(e == eligible && n == nodes, "summary says %d/%d, fleet is %d/%d", e, n, eligible, nodes);
	q = s + used;
	while (*q != '\0')
	{
		int			cnt,
					k,
					len;
		char		name[64];

		FZ_CHECK(strncmp(q, prev == NULL ? ": " : ", ", 2) == 0, "bad separator at \"%s\" in \"%s\"", q, s);
		q += 2;
		FZ_CHECK(sscanf(q, "%d %63[a-z_]%n", &cnt, name, &len) == 2, "bad entry at \"%s\"", q);
		for (k = 0; k < SCHED_R_COUNT; k++)
			if (strcmp(name, sched_reason_names[k]) == 0)
				break;
		FZ_CHECK(k < SCHED_R_COUNT, "unknown reason \"%s\" in \"%s\"", name, s);
		FZ_CHECK(!listed[k]++, "reason \"%s\" listed twice", name);
		FZ_CHECK(cnt == counts[k] && cnt > 0, "\"%s\" listed with %d, counted %d", name, cnt, counts[k]);
		FZ_CHECK(prev == NULL || ref_bytecmp(prev, sched_reason_names[k]) < 0,
				 "\"%s\" listed after \"%s\"", name, prev);
		prev = sched_reason_names[k];
		q += len;
	}
	for (i = 0; i < SCHED_R_COUNT; i++)
		FZ_CHECK(listed[i] == (counts[i] > 0), "reason %s counted %d but listed %d times",
				 sched_reason_names[i], counts[i], listed[i]);
}

/* Measure, write, compare with the reference, and every buffer size up to len + 1. */
static void
fs_check_format(FzReader *r, int nodes, int eligible, const int counts[SCHED_R_COUNT], bool parse)
{
	int			k;
	char		want[1024];
	size_t		wlen = ref_summary(want, sizeof want, nodes, eligible, counts);
	size_t		len = sched_format_summary(NULL, 0, nodes, eligible, counts);
	char	   *buf;
	size_t		cap;

	FZ_CHECK(len == wlen, "measured %zu, reference %zu (\"%s\")", len, wlen, want);
	buf = malloc(len + 1);
	FZ_CHECK(sched_format_summary(buf, len + 1, nodes, eligible, counts) == len, "write returned another length");
	FZ_CHECK(strlen(buf) == len && strcmp(buf, want) == 0, "\"%s\" vs reference \"%s\"", buf, want);
	if (parse)
		fs_parse(buf, nodes, eligible, counts);
	free(buf);
	for (k = 0; k < 11; k++)
	{
		size_t		got;
		size_t		keep;

		/* 0, 1, 2, len - 1, len, len + 1, len / 2 and four sizes the input picks */
		cap = k < 3 ? (size_t) k : k < 6 ? len + (size_t) k - 4 : k == 6 ? len / 2
			: (size_t) fz_u8(r) % (len + 2);
		keep = cap == 0 ? 0 : (cap - 1 < len ? cap - 1 : len);
		buf = cap > 0 ? malloc(cap) : NULL;
		got = sched_format_summary(buf, cap, nodes, eligible, counts);
		FZ_CHECK(got == len, "cap %zu returned %zu, not %zu", cap, got, len);
		if (cap > 0)
			FZ_CHECK(memcmp(buf, want, keep) == 0 && buf[keep] == '\0', "cap %zu: not a NUL-terminated prefix", cap);
		free(buf);
	}
}

static SchedVerdict
fs_verdict(const SchedReasonSet *rs, int n, bool reverse)
{
	SchedVerdict v = SCHED_VERDICT_STATIC;
	int			i;

	for (i = 0; i < n; i++)
		v = sched_verdict_add(v, rs[reverse ? n - 1 - i : i]);
	return v;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzReader	r;
	SchedPlacement p;
	SchedReasonSet rs[FS_NODES];
	SchedRanked ranked[FS_NODES];
	int			counts[SCHED_R_COUNT] = {0};
	int			n,
				i,
				k,
				eligible = 0,
				with_reason = 0,
				pairs = 0,
				sum = 0,
				nranked = 0;
	bool		some_transient_only = false,
				zero_slots = false;
	uint8_t		mode;
	SchedVerdict v;

	fz_target_name = "fuzz_summary";
	fz_init(&r, data, size);
	mode = fz_u8(&r);

	if (mode & 1)
	{
		/* the formatter alone, on arbitrary numbers */
		int			nodes = fz_i32(&r);
		int			el = fz_i32(&r);

		for (i = 0; i < SCHED_R_COUNT; i++)
			counts[i] = fz_bool(&r) ? fz_i32(&r) : 0;
		fs_check_format(&r, nodes, el, counts, false);
		return 0;
	}

	fz_placement_base(&p);
	p.min_cpu_millis = 500;
	p.reserve_cpu_millis = fz_bool(&r) ? 500 : 0;
	p.reserve_memory_mb = 1024;
	p.reserve_gpus = fz_u8(&r) % 2;
	p.min_gpus = 1;
	if (mode & 4)
	{
		p.required_labels.count = 1;
		p.required_labels.items = fs_req_items;
	}
	p.preferred_labels.count = 1;
	p.preferred_labels.items = fs_node_fast + 1;	/* zone: eu */
	n = fz_u8(&r) % (FS_NODES + 1);
	if (mode & 8)
		p.pin_node_id = "n05";

	for (i = 0; i < n; i++)
	{
		SchedCandidate *c = &fs_nodes[i];
		uint16_t	faults = (uint16_t) (fz_u8(&r) | (fz_u8(&r) << 8));

		snprintf(fs_ids[i], sizeof fs_ids[i], "n%02d", i);
		fz_candidate_base(c, fs_ids[i]);
		c->labels.count = 2;
		c->labels.items = fs_node_fast;
		c->weight = fz_i32(&r);
		c->node_live_attempts = fz_count(&r);
		if ((faults & 0x8000) && (mode & 16))
		{
			/* raw numbers */
			c->cpu_millis = fz_amount(&r);
			c->reserved_cpu_millis = fz_amount(&r);
			c->memory_mb = fz_amount(&r);
			c->reserved_memory_mb = fz_amount(&r);
			c->gpus = fz_amount(&r);
			c->reserved_gpus = fz_amount(&r);
			c->slots = fz_i32(&r);
			c->worker_live_attempts = fz_i32(&r);
			c->last_heartbeat = fz_i64(&r);
		}
		else
			for (k = 1; k < SCHED_R_COUNT; k++)
				if (faults & (1u << (k - 1)))
					fs_fault(c, k, &r);
	}

	for (i = 0; i < n; i++)
	{
		rs[i] = sched_admission(&p, &fs_nodes[i]);
		FZ_CHECK(rs[i] == ref_admission(&p, &fs_nodes[i]), "node %d: admission differs from the reference", i);
		if (rs[i] == 0)
			eligible++;
		else
			with_reason++;
		if (rs[i] != 0 && (rs[i] & ~SCHED_TRANSIENT_REASONS) == 0)
			some_transient_only = true;
		pairs += fz_popcount(rs[i]);
		sched_count_reasons(rs[i], counts);
	}
	FZ_CHECK(eligible + with_reason == n, "eligible %d + with a reason %d != %d nodes", eligible, with_reason, n);
	for (k = 0; k < SCHED_R_COUNT; k++)
	{
		int			direct = 0;

		for (i = 0; i < n; i++)
			direct += (rs[i] >> k) & 1;
		FZ_CHECK(counts[k] == direct, "count of %s is %d, %d nodes have it", sched_reason_names[k], counts[k], direct);
		FZ_CHECK(counts[k] >= 0 && counts[k] <= n - eligible, "count of %s is %d with %d nodes not eligible",
				 sched_reason_names[k], counts[k], n - eligible);
		sum += counts[k];
	}
	FZ_CHECK(sum == pairs && sum >= n - eligible, "counts sum to %d, %d (node, reason) pairs, %d not eligible",
			 sum, pairs, n - eligible);

	fs_check_format(&r, n, eligible, counts, true);

	v = fs_verdict(rs, n, false);
	FZ_CHECK(v == fs_verdict(rs, n, true), "verdict depends on the nodes' order");
	FZ_CHECK(v == (eligible > 0 ? SCHED_VERDICT_FITS : some_transient_only ? SCHED_VERDICT_WAITS
				   : SCHED_VERDICT_STATIC), "verdict %d with %d eligible, transient-only node %d", (int) v,
			 eligible, some_transient_only);
	if (v == SCHED_VERDICT_WAITS)
	{
		/* every attempt ends: the nodes that waited for capacity take it */
		bool		fits = false;

		for (i = 0; i < n; i++)
		{
			SchedCandidate c = fs_nodes[i];

			if (rs[i] == 0 || (rs[i] & ~SCHED_TRANSIENT_REASONS) != 0)
				continue;
			c.reserved_cpu_millis = c.reserved_memory_mb = c.reserved_gpus = 0;
			c.worker_live_attempts = c.node_live_attempts = 0;
			if (sched_admission(&p, &c) == 0)
				fits = true;
			else
			{
				FZ_CHECK(c.slots <= 0, "node %d waits for capacity, but with every attempt ended it has 0x%x",
						 i, (unsigned) sched_admission(&p, &c));
				zero_slots = true;	/* no_free_slot on a 0-slot worker: never clears */
			}
		}
		FZ_CHECK(fits || zero_slots, "WAITS, but nothing fits when every attempt has ended");
	}

	/* ranking the same fleet, as sched_fleet_rank does */
	for (i = 0; i < n; i++)
		if (rs[i] == 0)
		{
			sched_score(&p, &fs_nodes[i], &ranked[nranked]);
			ranked[nranked].index = i;
			nranked++;
		}
	sched_rank(ranked, nranked);
	FZ_CHECK(nranked == eligible, "%d ranked, %d eligible", nranked, eligible);
	for (i = 0; i < nranked; i++)
	{
		FZ_CHECK(rs[ranked[i].index] == 0, "ranked node %d has reasons", ranked[i].index);
		FZ_CHECK(ranked[i].score <= ranked[0].score, "ranked %d scores above the first", i);
	}
	return 0;
}
