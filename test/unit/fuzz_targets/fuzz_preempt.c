/*
 * fuzz_preempt.c — libFuzzer target: sched_preemption_victims() and
 * sched_preemption_cmp() (placement.c), the choice of the attempts a preemptor ends on
 * one candidate, and of the candidate.
 *
 * Each input decodes into a placement (reservations and minimums, sometimes a static
 * reason: no worker, node not active, worker not ready or cordoned, heartbeat expired,
 * pinned elsewhere, version or labels missing), a candidate whose counters include the
 * victims' (capacity mostly at least what the request asks; reserved = the victims'
 * reservations + others', worker live attempts = the
 * victims on the worker + others, node live attempts likewise; sometimes unrelated
 * counters instead), and up to FP_MAX victims (priorities and ages from small pools so
 * they tie, or any int32 / int64; on or off the worker; amounts in round units so sums
 * meet the request's exactly, or any up to 2^40).
 *
 * The oracle for "c admits p with the set S of victims gone" is sched_admission on a
 * copy of c with S's counters subtracted here (admission has its own tests; it is also
 * checked against the reference ref_admitted of test_placement.c on every copy).
 * Properties:
 *   - the result is -1 exactly when c does not admit p with every victim gone, and then
 *     nothing is chosen (chosen[] is reset, whatever it held); always -1 when c has a
 *     static reason for p
 *   - otherwise: the count is the number of victims chosen; c admits p with the chosen
 *     gone; every chosen victim is necessary (without it, the rest chosen do not make
 *     room); the chosen set is exactly that of a greedy written here (selection sort
 *     into reprieve order: highest priority, then smallest dispatched_at, then index;
 *     each reprieved when room remains without it)
 *   - the count is 0 exactly when c already admits p with no victim gone (the header's
 *     contract: every victim is reprieved then; it is 0, not -1)
 *   - inputs unchanged; order[] and chosen[] are exactly n long (heap, ASan-bounded);
 *     a second call gives the same; with distinct (priority, dispatched_at) keys the
 *     victims' order in the array does not matter (a rotation chooses the same victims)
 *   - sched_preemption_cmp on triples of options (one of them this call's result and
 *     its top chosen priority): cmp(x, x) = 0, antisymmetric, equal in sign to the
 *     definition (fewer victims, then lower top priority, then node_id bytewise), and
 *     transitive on every ordering of the triple
 */
#include "fuzz_common.h"

#define FP_MAX 12

static char fp_node[FZ_STR];
static char fp_opt_ids[2][FZ_STR];
static const SchedLabel fp_req_eu[1] = {{"zone", "eu"}};

/* Round units (so sums meet the request's amounts exactly), small raw values, or any up
 * to 2^40 (sums of FP_MAX + 1 of them stay far from the int64 limits). */
static int64_t
fp_amount(FzReader *r, int64_t unit)
{
	uint8_t		m = fz_u8(r);

	switch (m & 3)
	{
		case 0:
		case 1:
			return (int64_t) ((m >> 2) % 17) * unit;
		case 2:
			return (int64_t) (m >> 2);
		default:
			return (int64_t) (fz_u64(r) & ((UINT64_C(1) << 40) - 1));
	}
}

/* c with the victims marked in gone[] ended: written here, not the core's. */
static SchedCandidate
fp_without(const SchedCandidate *c, const SchedVictim *v, int n, const bool *gone)
{
	SchedCandidate w = *c;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (!gone[i])
			continue;
		w.node_live_attempts -= 1;
		if (v[i].on_worker)
			w.worker_live_attempts -= 1;
		w.reserved_cpu_millis -= v[i].reserve_cpu_millis;
		w.reserved_memory_mb -= v[i].reserve_memory_mb;
		w.reserved_gpus -= v[i].reserve_gpus;
	}
	return w;
}

static bool
fp_admits(const SchedPlacement *p, const SchedCandidate *c, const SchedVictim *v, int n,
		  const bool *gone)
{
	SchedCandidate w = fp_without(c, v, n, gone);
	SchedReasonSet s = sched_admission(p, &w);

	FZ_CHECK((s == 0) == (ref_admitted(p, &w) != 0), "admission 0x%x but the reference says %d",
			 (unsigned) s, ref_admitted(p, &w));
	return s == 0;
}

/* x is reprieved before y: higher priority, then older, then smaller index */
static bool
fp_reprieved_before(const SchedVictim *v, int x, int y)
{
	if (v[x].priority != v[y].priority)
		return v[x].priority > v[y].priority;
	if (v[x].dispatched_at != v[y].dispatched_at)
		return v[x].dispatched_at < v[y].dispatched_at;
	return x < y;
}

/* The contract written out: selection sort into reprieve order, then the greedy. */
static int
fp_ref_victims(const SchedPlacement *p, const SchedCandidate *c, const SchedVictim *v, int n,
			   bool *gone)
{
	bool		picked[FP_MAX];
	int			ord[FP_MAX];
	int			i,
				k,
				count = 0;

	for (i = 0; i < n; i++)
	{
		gone[i] = true;
		picked[i] = false;
	}
	if (!fp_admits(p, c, v, n, gone))
	{
		for (i = 0; i < n; i++)
			gone[i] = false;
		return -1;
	}
	for (k = 0; k < n; k++)
	{
		int			best = -1;

		for (i = 0; i < n; i++)
			if (!picked[i] && (best < 0 || fp_reprieved_before(v, i, best)))
				best = i;
		picked[best] = true;
		ord[k] = best;
	}
	for (k = 0; k < n; k++)
	{
		gone[ord[k]] = false;
		if (!fp_admits(p, c, v, n, gone))
			gone[ord[k]] = true;
	}
	for (i = 0; i < n; i++)
		count += gone[i];
	return count;
}

static int
fp_sign(int x)
{
	return (x > 0) - (x < 0);
}

typedef struct FpOption
{
	int			victims;
	int32_t		top;
	const char *node;
} FpOption;

static int
fp_cmp(const FpOption *a, const FpOption *b)
{
	return fp_sign(sched_preemption_cmp(a->victims, a->top, a->node, b->victims, b->top, b->node));
}

/* The definition: fewer victims, lower top priority, smaller node_id bytewise. */
static int
fp_ref_cmp(const FpOption *a, const FpOption *b)
{
	if (a->victims != b->victims)
		return a->victims < b->victims ? -1 : 1;
	if (a->top != b->top)
		return a->top < b->top ? -1 : 1;
	return fp_sign(ref_bytecmp(a->node, b->node));
}

static void
fp_check_cmp(const FpOption o[3])
{
	static const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	int			i,
				j;

	for (i = 0; i < 3; i++)
	{
		FZ_CHECK(fp_cmp(&o[i], &o[i]) == 0, "cmp(x, x) != 0 for (%d, %d, \"%s\")", o[i].victims,
				 (int) o[i].top, o[i].node);
		for (j = 0; j < 3; j++)
		{
			FZ_CHECK(fp_cmp(&o[i], &o[j]) == -fp_cmp(&o[j], &o[i]), "cmp not antisymmetric on %d, %d", i, j);
			FZ_CHECK(fp_cmp(&o[i], &o[j]) == fp_ref_cmp(&o[i], &o[j]),
					 "cmp((%d, %d, \"%s\"), (%d, %d, \"%s\")) = %d, the definition says %d",
					 o[i].victims, (int) o[i].top, o[i].node, o[j].victims, (int) o[j].top, o[j].node,
					 fp_cmp(&o[i], &o[j]), fp_ref_cmp(&o[i], &o[j]));
		}
	}
	for (i = 0; i < 6; i++)
	{
		const FpOption *a = &o[perm[i][0]],
				   *b = &o[perm[i][1]],
				   *c = &o[perm[i][2]];
		int			ab = fp_cmp(a, b),
					bc = fp_cmp(b, c),
					ac = fp_cmp(a, c);

		if (ab <= 0 && bc <= 0)
			FZ_CHECK(ac <= 0 && (ac < 0 || (ab == 0 && bc == 0)),
					 "not transitive: cmp(a, b) = %d, cmp(b, c) = %d, cmp(a, c) = %d", ab, bc, ac);
	}
}

static int32_t
fp_priority(FzReader *r, uint8_t mode)
{
	return (mode & 1) ? fz_i32(r) : (int32_t) (fz_u8(r) % 4);
}

static int64_t
fp_age(FzReader *r, uint8_t mode)
{
	return (mode & 2) ? fz_i64(r) : (int64_t) (fz_u8(r) % 4) * 100;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzReader	r;
	SchedPlacement p,
				p0;
	SchedCandidate c,
				c0;
	SchedVictim *v,
			   *v0,
			   *rv;
	int		   *order;
	bool	   *chosen,
			   *chosen2;
	bool		all[FP_MAX],
				none[FP_MAX],
				want[FP_MAX],
				less[FP_MAX];
	uint8_t		mode,
				sflags,
				cflags;
	int			n,
				i,
				j,
				got,
				want_count,
				nchosen = 0,
				extra;
	int32_t		top = INT32_MIN;
	int64_t		other;
	FpOption	opt[3];

	fz_target_name = "fuzz_preempt";
	fz_init(&r, data, size);
	mode = fz_u8(&r);
	sflags = fz_u8(&r);
	cflags = fz_u8(&r);
	n = fz_u8(&r) % (FP_MAX + 1);

	v = malloc(sizeof(SchedVictim) * (size_t) (n > 0 ? n : 1));
	v0 = malloc(sizeof(SchedVictim) * (size_t) (n > 0 ? n : 1));
	rv = malloc(sizeof(SchedVictim) * (size_t) (n > 0 ? n : 1));
	order = malloc(sizeof(int) * (size_t) (n > 0 ? n : 1));
	chosen = malloc(sizeof(bool) * (size_t) (n > 0 ? n : 1));
	chosen2 = malloc(sizeof(bool) * (size_t) (n > 0 ? n : 1));
	if (!v || !v0 || !rv || !order || !chosen || !chosen2)
		abort();

	/* the request */
	fz_placement_base(&p);
	p.reserve_cpu_millis = fp_amount(&r, 250);
	p.reserve_memory_mb = fp_amount(&r, 512);
	p.reserve_gpus = fp_amount(&r, 1);
	if (mode & 0x10)
	{
		p.min_cpu_millis = fp_amount(&r, 250);
		p.min_memory_mb = fp_amount(&r, 512);
		p.min_gpus = fp_amount(&r, 1);
	}

	/* the candidate, and its static reasons (an eighth of the inputs have some) */
	fz_str(&r, fp_node, 6);
	fz_candidate_base(&c, fp_node);
	c.cpu_millis = fp_amount(&r, 250);
	c.memory_mb = fp_amount(&r, 512);
	c.gpus = fp_amount(&r, 1);
	if ((cflags & 0x38) != 0x38)
	{
		/* mostly a node big enough for the request: what is missing is free room */
		c.cpu_millis += p.reserve_cpu_millis > p.min_cpu_millis ? p.reserve_cpu_millis : p.min_cpu_millis;
		c.memory_mb += p.reserve_memory_mb > p.min_memory_mb ? p.reserve_memory_mb : p.min_memory_mb;
		c.gpus += p.reserve_gpus > p.min_gpus ? p.reserve_gpus : p.min_gpus;
	}
	c.slots = (cflags & 1) ? fz_count(&r) : (int32_t) (fz_u8(&r) % 8);
	if ((sflags & 0xe0) != 0)
		sflags = 0;
	c.has_worker = !(sflags & 1);
	if (sflags & 2)
		c.management_status = (fz_u8(&r) & 1) ? SCHED_NODE_DRAINING : SCHED_NODE_DISABLED;
	if (sflags & 4)
		c.runtime_state = (SchedRuntimeState) (fz_u8(&r) & 1 ? SCHED_WORKER_STARTING : SCHED_WORKER_STOPPED);
	if (sflags & 8)
		c.scheduling_status = SCHED_WORKER_CORDONED;
	if (sflags & 16)
	{
		c.last_heartbeat = p.heartbeat_cutoff - 1;
		c.has_heartbeat = fz_bool(&r);
	}
	if (sflags & 32)
	{
		switch (fz_u8(&r) % 3)
		{
			case 0:
				p.pin_node_id = ref_streq(fp_node, "node-b") ? "node-a" : "node-b";
				break;
			case 1:
				p.capability_version = "2.0";
				break;
			default:
				p.required_labels.count = 1;
				p.required_labels.items = (SchedLabel *) fp_req_eu;
				break;
		}
	}
	else if (cflags & 2)
		p.pin_node_id = fp_node;	/* pinned here: no reason */

	/* the victims */
	for (i = 0; i < n; i++)
	{
		memset(&v[i], 0, sizeof v[i]);
		v[i].priority = fp_priority(&r, mode);
		v[i].dispatched_at = fp_age(&r, mode);
		v[i].on_worker = c.has_worker && fz_bool(&r);
		v[i].reserve_cpu_millis = fp_amount(&r, 250);
		v[i].reserve_memory_mb = fp_amount(&r, 512);
		v[i].reserve_gpus = fp_amount(&r, 1);
	}

	/* the candidate's counters: the victims' plus others', or unrelated ones */
	if (cflags & 4)
	{
		c.reserved_cpu_millis = fp_amount(&r, 250);
		c.reserved_memory_mb = fp_amount(&r, 512);
		c.reserved_gpus = fp_amount(&r, 1);
		c.worker_live_attempts = (int32_t) (fz_u8(&r) % 16);
		c.node_live_attempts = (int32_t) (fz_u8(&r) % 16);
	}
	else
	{
		other = fp_amount(&r, 250);
		c.reserved_cpu_millis = other;
		c.reserved_memory_mb = fp_amount(&r, 512);
		c.reserved_gpus = fp_amount(&r, 1);
		extra = fz_u8(&r) % 4;
		c.worker_live_attempts = c.has_worker ? extra : 0;
		c.node_live_attempts = extra + (int32_t) (fz_u8(&r) % 4);
		for (i = 0; i < n; i++)
		{
			c.reserved_cpu_millis += v[i].reserve_cpu_millis;
			c.reserved_memory_mb += v[i].reserve_memory_mb;
			c.reserved_gpus += v[i].reserve_gpus;
			c.worker_live_attempts += v[i].on_worker ? 1 : 0;
			c.node_live_attempts += 1;
		}
	}
	if (!c.has_worker)
		c.worker_live_attempts = 0;

	/* the call, with garbage in its outputs */
	p0 = p;
	c0 = c;
	memcpy(v0, v, sizeof(SchedVictim) * (size_t) n);
	for (i = 0; i < n; i++)
	{
		chosen[i] = fz_bool(&r);
		order[i] = (int) fz_u32(&r);
		all[i] = true;
		none[i] = false;
	}
	got = sched_preemption_victims(&p, &c, v, n, order, chosen);
	FZ_CHECK(memcmp(&p0, &p, sizeof p) == 0 && memcmp(&c0, &c, sizeof c) == 0 &&
			 memcmp(v0, v, sizeof(SchedVictim) * (size_t) n) == 0, "an input was changed");
	for (i = 0; i < n; i++)
		if (chosen[i])
		{
			nchosen++;
			if (v[i].priority > top)
				top = v[i].priority;
		}

	/* -1 exactly when all victims gone do not make room */
	if (!fp_admits(&p, &c, v, n, all))
	{
		FZ_CHECK(got == -1, "returned %d, but c does not admit p with all %d victims gone", got, n);
		FZ_CHECK(nchosen == 0, "-1 with %d victims chosen", nchosen);
	}
	else
	{
		FZ_CHECK(got >= 0, "returned %d, but c admits p with all %d victims gone", got, n);
		FZ_CHECK(got == nchosen, "returned %d, chose %d", got, nchosen);
		FZ_CHECK(fp_admits(&p, &c, v, n, chosen), "c does not admit p with the %d chosen gone", got);
		for (i = 0; i < n; i++)
			if (chosen[i])
			{
				memcpy(less, chosen, sizeof(bool) * (size_t) n);
				less[i] = false;
				FZ_CHECK(!fp_admits(&p, &c, v, n, less),
						 "victim %d (priority %d, dispatched_at %lld) chosen but not needed", i,
						 (int) v[i].priority, (long long) v[i].dispatched_at);
			}
		/* no victim when it fits as it is, and some when it does not */
		FZ_CHECK((got == 0) == fp_admits(&p, &c, v, n, none),
				 "returned %d; c admits p with no victim gone: %d", got, fp_admits(&p, &c, v, n, none));
	}
	if (sched_admission(&p, &c) & ~SCHED_TRANSIENT_REASONS)
		FZ_CHECK(got == -1, "returned %d despite a static reason (0x%x)", got, (unsigned) sched_admission(&p, &c));

	/* the greedy, written out */
	want_count = fp_ref_victims(&p, &c, v, n, want);
	FZ_CHECK(got == want_count, "returned %d, the reference greedy %d", got, want_count);
	for (i = 0; i < n; i++)
		FZ_CHECK(chosen[i] == want[i], "victim %d (priority %d, dispatched_at %lld, on_worker %d): chosen %d, "
				 "the reference greedy %d", i, (int) v[i].priority, (long long) v[i].dispatched_at,
				 (int) v[i].on_worker, (int) chosen[i], (int) want[i]);

	/* deterministic */
	for (i = 0; i < n; i++)
		chosen2[i] = !chosen[i];
	FZ_CHECK(sched_preemption_victims(&p, &c, v, n, order, chosen2) == got &&
			 (n == 0 || memcmp(chosen, chosen2, sizeof(bool) * (size_t) n) == 0),
			 "a second call chose otherwise");

	/* distinct keys: the array's order does not matter */
	if (n > 1)
	{
		bool		distinct = true;
		int			rot = 1 + fz_u8(&r) % (n - 1);

		for (i = 0; i < n && distinct; i++)
			for (j = i + 1; j < n; j++)
				if (v[i].priority == v[j].priority && v[i].dispatched_at == v[j].dispatched_at)
				{
					distinct = false;
					break;
				}
		if (distinct)
		{
			for (i = 0; i < n; i++)
				rv[i] = v[(i + rot) % n];
			FZ_CHECK(sched_preemption_victims(&p, &c, rv, n, order, chosen2) == got,
					 "rotated victims: another count");
			for (i = 0; i < n; i++)
				FZ_CHECK(chosen2[i] == chosen[(i + rot) % n], "rotated by %d: victim %d chosen %d, was %d",
						 rot, (i + rot) % n, (int) chosen2[i], (int) chosen[(i + rot) % n]);
		}
	}

	/* the choice among nodes */
	opt[0].victims = got;
	opt[0].top = top;
	opt[0].node = fp_node;
	for (i = 1; i < 3; i++)
	{
		uint8_t		b = fz_u8(&r);

		opt[i].victims = (b & 1) ? got : (b & 2) ? (int) (fz_u8(&r) % 4) : (int) fz_u32(&r);
		opt[i].top = (b & 4) ? top : (b & 8) ? (int32_t) (fz_u8(&r) % 4) : fz_i32(&r);
		if (b & 16)
			opt[i].node = opt[i - 1].node;
		else
		{
			fz_str(&r, fp_opt_ids[i - 1], 6);
			opt[i].node = fp_opt_ids[i - 1];
		}
	}
	fp_check_cmp(opt);

	free(v);
	free(v0);
	free(rv);
	free(order);
	free(chosen);
	free(chosen2);
	return 0;
}
