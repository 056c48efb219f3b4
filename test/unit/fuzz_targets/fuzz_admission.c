/*
 * fuzz_admission.c — libFuzzer target: sched_admission() (placement.c) and the verdict
 * built on it, on arbitrary numbers with the extremes (0, 1, 2^31, INT64_MAX, and values
 * one off a boundary) over-represented.
 *
 * Inputs stay within what the callers guarantee (placement.h): amounts (capacities,
 * reservations, requested minimums and reserves) >= 0, up to INT64_MAX — wider than the
 * table types; attempt counts, slots, weights, heartbeats any int32/int64.  With
 * -DFUZZ_OUT_OF_CONTRACT the amounts may be negative too, and only the properties that
 * do not depend on the contract are checked (the sanitizers catch overflow).
 *
 * Properties:
 *   - equals the SPEC reference of test_placement.c, bit for bit, and is deterministic;
 *     no bit beyond SCHED_R_COUNT
 *   - admitted (empty set) exactly when every rule passes — a node admitted has no reason,
 *     a node with a reason is not admitted
 *   - no worker reason with capability_missing; no *_exhausted with its insufficient_*
 *   - the resource reasons agree with exact (128-bit) arithmetic: no silent overflow
 *   - at a boundary: capacity == max(min, reserve) is enough, one less is not
 *   - static reasons do not change when reservations or live attempts change; with no
 *     reservation and no live attempt, no transient reason but no_free_slot on a
 *     zero-slot worker
 *   - monotone: more capacity, fewer reservations or live attempts, smaller requests,
 *     no pin, no required labels never add a problem (insufficient_X and X_exhausted
 *     counted as one problem per resource); an admitted pair stays admitted
 *   - sched_verdict_add: FITS iff no reason, WAITS iff only transient reasons, never
 *     lowers a verdict
 */
#include "fuzz_common.h"

#define FA_LABELS 4

static char fa_node[FZ_STR],
			fa_pin[FZ_STR],
			fa_version[FZ_STR];
static char fa_vbuf[6][FZ_STR];
static const char *fa_versions[6];
static SchedLabel fa_have[FA_LABELS],
			fa_req[FA_LABELS];
static char fa_have_kv[FA_LABELS][2][FZ_STR],
			fa_req_kv[FA_LABELS][2][FZ_STR];

#ifdef FUZZ_OUT_OF_CONTRACT
#define FA_AMOUNT(r) fz_i64(r)
#else
#define FA_AMOUNT(r) fz_amount(r)
#endif

/* Problems per resource: insufficient_X and X_exhausted folded into one bit. */
static SchedReasonSet
fa_problems(SchedReasonSet s)
{
	if (s & REF_BIT(SCHED_R_CPU_EXHAUSTED))
		s = (s & ~REF_BIT(SCHED_R_CPU_EXHAUSTED)) | REF_BIT(SCHED_R_INSUFFICIENT_CPU);
	if (s & REF_BIT(SCHED_R_MEMORY_EXHAUSTED))
		s = (s & ~REF_BIT(SCHED_R_MEMORY_EXHAUSTED)) | REF_BIT(SCHED_R_INSUFFICIENT_MEMORY);
	if (s & REF_BIT(SCHED_R_GPUS_EXHAUSTED))
		s = (s & ~REF_BIT(SCHED_R_GPUS_EXHAUSTED)) | REF_BIT(SCHED_R_INSUFFICIENT_GPUS);
	return s;
}

static int64_t
fa_max(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Moves a capacity onto the boundary of need: need - 1, need or need + 1 (clamped). */
static int64_t
fa_boundary(int64_t need, uint8_t how)
{
	int			d = (int) (how % 3) - 1;

	if (d < 0 && need > 0)
		return need - 1;
	if (d > 0 && need < INT64_MAX)
		return need + 1;
	return need;
}

static void
fa_check_resource(const char *what, SchedReasonSet s, int insufficient, int exhausted,
				  int64_t cap, int64_t reserved, int64_t min, int64_t reserve)
{
#ifndef FUZZ_OUT_OF_CONTRACT
	__int128	free_ = (__int128) cap - (__int128) reserved;
	bool		ins = (__int128) cap < (__int128) fa_max(min, reserve);
	bool		exh = !ins && free_ < (__int128) reserve;

	FZ_CHECK(((s & REF_BIT(insufficient)) != 0) == ins, "%s: insufficient bit %d, exact %d "
			 "(cap %lld min %lld reserve %lld)", what, (s & REF_BIT(insufficient)) != 0, ins,
			 (long long) cap, (long long) min, (long long) reserve);
	FZ_CHECK(((s & REF_BIT(exhausted)) != 0) == exh, "%s: exhausted bit %d, exact %d "
			 "(cap %lld reserved %lld reserve %lld)", what, (s & REF_BIT(exhausted)) != 0, exh,
			 (long long) cap, (long long) reserved, (long long) reserve);
#else
	(void) what; (void) s; (void) insufficient; (void) exhausted;
	(void) cap; (void) reserved; (void) min; (void) reserve;
#endif
}

static void
fa_check_verdict(SchedReasonSet s)
{
	SchedVerdict v = sched_verdict_add(SCHED_VERDICT_STATIC, s);
	SchedVerdict want = s == 0 ? SCHED_VERDICT_FITS
		: (s & REF_STATIC_REASONS) == 0 ? SCHED_VERDICT_WAITS : SCHED_VERDICT_STATIC;
	int			k;

	FZ_CHECK(v == want, "verdict %d for reasons 0x%x, want %d", (int) v, (unsigned) s, (int) want);
	for (k = SCHED_VERDICT_STATIC; k <= SCHED_VERDICT_FITS; k++)
	{
		SchedVerdict w = sched_verdict_add((SchedVerdict) k, s);

		FZ_CHECK(w == (want > (SchedVerdict) k ? want : (SchedVerdict) k),
				 "verdict_add(%d, 0x%x) = %d is not the max of the two", k, (unsigned) s, (int) w);
	}
	FZ_CHECK((SCHED_TRANSIENT_REASONS & REF_STATIC_REASONS) == 0 &&
			 (SCHED_TRANSIENT_REASONS | REF_STATIC_REASONS) == REF_ALL_REASONS,
			 "SCHED_TRANSIENT_REASONS is not the SPEC's last four reasons");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzReader	r;
	SchedPlacement p,
				p2;
	SchedCandidate c,
				c2;
	SchedReasonSet s,
				s2;
	uint8_t		flags,
				bflags;
	int			i,
				n;

	fz_target_name = "fuzz_admission";
	fz_init(&r, data, size);
	fz_placement_base(&p);
	flags = fz_u8(&r);
	bflags = fz_u8(&r);

	fz_str(&r, fa_node, 6);
	fz_candidate_base(&c, fa_node);
	c.management_status = (SchedNodeStatus) (fz_u8(&r) % 3);
	c.cpu_millis = FA_AMOUNT(&r);
	c.memory_mb = FA_AMOUNT(&r);
	c.gpus = FA_AMOUNT(&r);
	c.weight = fz_i32(&r);
	c.reserved_cpu_millis = FA_AMOUNT(&r);
	c.reserved_memory_mb = FA_AMOUNT(&r);
	c.reserved_gpus = FA_AMOUNT(&r);
	c.node_live_attempts = fz_i32(&r);
	c.has_worker = (flags & 1) != 0;
	c.runtime_state = (SchedRuntimeState) (fz_u8(&r) % 4);
	c.scheduling_status = (SchedSchedulingStatus) (fz_u8(&r) % 2);
	c.has_heartbeat = (flags & 2) != 0;
	c.slots = fz_i32(&r);
	/* live attempts at slots or one below (the no_free_slot boundary), or any */
	c.worker_live_attempts = (flags & 4) && c.slots > INT32_MIN ? c.slots - (int32_t) (fz_u8(&r) % 2)
		: fz_i32(&r);
	n = fz_u8(&r) % 7;
	for (i = 0; i < n; i++)
	{
		fz_str(&r, fa_vbuf[i], 4);
		fa_versions[i] = (flags & 8) && i == 0 ? NULL : fa_vbuf[i];
	}
	c.version_count = n;
	c.versions = n > 0 ? fa_versions : NULL;
	n = fz_u8(&r) % (FA_LABELS + 1);
	for (i = 0; i < n; i++)
	{
		fz_str(&r, fa_have_kv[i][0], 4);
		fz_str(&r, fa_have_kv[i][1], 2);
		fa_have[i].key = fa_have_kv[i][0];
		fa_have[i].value = fa_have_kv[i][1];
	}
	c.labels.count = fz_dedupe_sort(fa_have, n);
	c.labels.items = fa_have;

	fz_str(&r, fa_version, 4);
	p.capability_version = fa_version;
	n = fz_u8(&r) % (FA_LABELS + 1);
	for (i = 0; i < n; i++)
	{
		fz_str(&r, fa_req_kv[i][0], 4);
		fz_str(&r, fa_req_kv[i][1], 2);
		fa_req[i].key = fa_req_kv[i][0];
		fa_req[i].value = fa_req_kv[i][1];
	}
	p.required_labels.count = fz_dedupe_sort(fa_req, n);
	p.required_labels.items = fa_req;
	p.min_cpu_millis = FA_AMOUNT(&r);
	p.min_memory_mb = FA_AMOUNT(&r);
	p.min_gpus = FA_AMOUNT(&r);
	p.reserve_cpu_millis = FA_AMOUNT(&r);
	p.reserve_memory_mb = FA_AMOUNT(&r);
	p.reserve_gpus = FA_AMOUNT(&r);
	switch ((flags >> 4) & 3)
	{
		case 0:
			p.pin_node_id = NULL;
			break;
		case 1:
			memcpy(fa_pin, fa_node, sizeof fa_pin);
			p.pin_node_id = fa_pin;	/* pinned to this node, another pointer */
			break;
		default:
			fz_str(&r, fa_pin, 6);
			p.pin_node_id = fa_pin;
	}
	p.heartbeat_cutoff = fz_i64(&r);
	if (flags & 64)
	{
		int			d = (int) (fz_u8(&r) % 3) - 1;	/* cutoff - 1, cutoff, cutoff + 1 */

		c.last_heartbeat = (d < 0 && p.heartbeat_cutoff == INT64_MIN) ||
			(d > 0 && p.heartbeat_cutoff == INT64_MAX) ? p.heartbeat_cutoff : p.heartbeat_cutoff + d;
	}
	else
		c.last_heartbeat = fz_i64(&r);
#ifndef FUZZ_OUT_OF_CONTRACT
	/* capacities on the boundary of what is asked, and reservations that just fit */
	if (bflags & 1)
		c.cpu_millis = fa_boundary(fa_max(p.min_cpu_millis, p.reserve_cpu_millis), fz_u8(&r));
	if (bflags & 2)
		c.memory_mb = fa_boundary(fa_max(p.min_memory_mb, p.reserve_memory_mb), fz_u8(&r));
	if (bflags & 4)
		c.gpus = fa_boundary(fa_max(p.min_gpus, p.reserve_gpus), fz_u8(&r));
	if ((bflags & 8) && c.cpu_millis >= p.reserve_cpu_millis)
		c.reserved_cpu_millis = fa_boundary(c.cpu_millis - p.reserve_cpu_millis, fz_u8(&r));
	if ((bflags & 16) && c.memory_mb >= p.reserve_memory_mb)
		c.reserved_memory_mb = fa_boundary(c.memory_mb - p.reserve_memory_mb, fz_u8(&r));
	if ((bflags & 32) && c.gpus >= p.reserve_gpus)
		c.reserved_gpus = fa_boundary(c.gpus - p.reserve_gpus, fz_u8(&r));
#endif

	s = sched_admission(&p, &c);
	FZ_CHECK(s == ref_admission(&p, &c), "admission 0x%x, SPEC reference 0x%x", (unsigned) s,
			 (unsigned) ref_admission(&p, &c));
	FZ_CHECK(sched_admission(&p, &c) == s, "not deterministic");
	FZ_CHECK((s & ~REF_ALL_REASONS) == 0, "bits beyond SCHED_R_COUNT: 0x%x", (unsigned) s);
	FZ_CHECK((s == 0) == (ref_admitted(&p, &c) != 0), "admitted %d but every rule passes %d",
			 s == 0, ref_admitted(&p, &c));
	FZ_CHECK(!(s & REF_BIT(SCHED_R_CAPABILITY_MISSING)) || !(s & REF_WORKER_REASONS),
			 "worker reason with capability_missing: 0x%x", (unsigned) s);
	FZ_CHECK(!(s & REF_BIT(SCHED_R_INSUFFICIENT_CPU)) || !(s & REF_BIT(SCHED_R_CPU_EXHAUSTED)),
			 "cpu_exhausted with insufficient_cpu");
	FZ_CHECK(!(s & REF_BIT(SCHED_R_INSUFFICIENT_MEMORY)) || !(s & REF_BIT(SCHED_R_MEMORY_EXHAUSTED)),
			 "memory_exhausted with insufficient_memory");
	FZ_CHECK(!(s & REF_BIT(SCHED_R_INSUFFICIENT_GPUS)) || !(s & REF_BIT(SCHED_R_GPUS_EXHAUSTED)),
			 "gpus_exhausted with insufficient_gpus");
	FZ_CHECK(((s & REF_BIT(SCHED_R_PINNED_TO_OTHER_NODE)) != 0) ==
			 (p.pin_node_id != NULL && strcmp(p.pin_node_id, c.node_id) != 0),
			 "pinned_to_other_node 0x%x for pin \"%s\" on node \"%s\"", (unsigned) s,
			 p.pin_node_id ? p.pin_node_id : "(null)", c.node_id);
	fa_check_resource("cpu", s, SCHED_R_INSUFFICIENT_CPU, SCHED_R_CPU_EXHAUSTED, c.cpu_millis,
					  c.reserved_cpu_millis, p.min_cpu_millis, p.reserve_cpu_millis);
	fa_check_resource("memory", s, SCHED_R_INSUFFICIENT_MEMORY, SCHED_R_MEMORY_EXHAUSTED, c.memory_mb,
					  c.reserved_memory_mb, p.min_memory_mb, p.reserve_memory_mb);
	fa_check_resource("gpus", s, SCHED_R_INSUFFICIENT_GPUS, SCHED_R_GPUS_EXHAUSTED, c.gpus,
					  c.reserved_gpus, p.min_gpus, p.reserve_gpus);
	fa_check_verdict(s);

	/* transient inputs changed: static reasons stay */
	c2 = c;
	c2.reserved_cpu_millis = FA_AMOUNT(&r);
	c2.reserved_memory_mb = FA_AMOUNT(&r);
	c2.reserved_gpus = FA_AMOUNT(&r);
	c2.worker_live_attempts = fz_i32(&r);
	c2.node_live_attempts = fz_i32(&r);
	s2 = sched_admission(&p, &c2);
	FZ_CHECK((s2 & REF_STATIC_REASONS) == (s & REF_STATIC_REASONS),
			 "static reasons 0x%x became 0x%x when only reservations and attempts changed",
			 (unsigned) (s & REF_STATIC_REASONS), (unsigned) (s2 & REF_STATIC_REASONS));
	FZ_CHECK(s2 == ref_admission(&p, &c2), "admission (transient variant) differs from the reference");
	fa_check_verdict(s2);

	/* every attempt ended: no transient reason left but a worker without slots */
#ifndef FUZZ_OUT_OF_CONTRACT
	c2 = c;
	c2.reserved_cpu_millis = c2.reserved_memory_mb = c2.reserved_gpus = 0;
	c2.worker_live_attempts = c2.node_live_attempts = 0;
	s2 = sched_admission(&p, &c2);
	FZ_CHECK((s2 & SCHED_TRANSIENT_REASONS) ==
			 (c2.has_worker && c2.slots <= 0 ? REF_BIT(SCHED_R_NO_FREE_SLOT) : 0),
			 "transient reasons 0x%x with nothing reserved and nothing running (slots %d)",
			 (unsigned) (s2 & SCHED_TRANSIENT_REASONS), (int) c2.slots);
#endif

	/* monotone: a more permissive pair has no more problems */
#ifndef FUZZ_OUT_OF_CONTRACT
	{
		uint8_t		which = fz_u8(&r);
		int64_t		d = fz_amount(&r);

		c2 = c;
		p2 = p;
		if (which & 1)
			c2.cpu_millis = c2.cpu_millis > INT64_MAX - d ? INT64_MAX : c2.cpu_millis + d;
		if (which & 2)
			c2.memory_mb = c2.memory_mb > INT64_MAX - d ? INT64_MAX : c2.memory_mb + d;
		if (which & 4)
			c2.gpus = c2.gpus > INT64_MAX - d ? INT64_MAX : c2.gpus + d;
		if (which & 8)
		{
			c2.reserved_cpu_millis = c2.reserved_cpu_millis > d ? c2.reserved_cpu_millis - d : 0;
			c2.reserved_memory_mb = c2.reserved_memory_mb > d ? c2.reserved_memory_mb - d : 0;
			c2.reserved_gpus = c2.reserved_gpus > d ? c2.reserved_gpus - d : 0;
		}
		if ((which & 16) && c2.worker_live_attempts > INT32_MIN)
			c2.worker_live_attempts--;
		if (which & 32)
		{
			p2.min_cpu_millis /= 2;
			p2.reserve_memory_mb = p2.reserve_memory_mb > d ? p2.reserve_memory_mb - d : 0;
			p2.min_gpus = 0;
			p2.reserve_cpu_millis /= 3;
		}
		if (which & 64)
			p2.pin_node_id = NULL;
		if (which & 128)
			p2.required_labels.count = p2.required_labels.count / 2;
		s2 = sched_admission(&p2, &c2);
		FZ_CHECK((fa_problems(s2) & ~fa_problems(s)) == 0,
				 "a more permissive pair (change 0x%x by %lld) has new problems: 0x%x -> 0x%x",
				 which, (long long) d, (unsigned) s, (unsigned) s2);
		FZ_CHECK(s != 0 || s2 == 0, "admitted, but not after a permissive change 0x%x (0x%x)",
				 which, (unsigned) s2);
		FZ_CHECK(s2 == ref_admission(&p2, &c2), "admission (permissive variant) differs from the reference");
	}
#endif
	(void) p2;
	return 0;
}
