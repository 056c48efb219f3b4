/*
 * fuzz_common.h — what the libFuzzer targets in test/unit/fuzz_targets share: a reader
 * that turns the input bytes into numbers (with the extremes over-represented) and
 * strings, a failure report that abort()s (libFuzzer then saves the input as a crash
 * file), and a replay main() for builds without libFuzzer.
 *
 * Each target #includes this file once.  It pulls in the SPEC reference of
 * test/unit/test_placement.c (PG_SCHED_UNIT_NO_MAIN: the reference and its checkers,
 * not the unit tests), so the targets can compare with it where a property alone would
 * not pin the result down.  Build (test/unit/fuzz.sh does this for every target):
 *
 *     clang -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *           -Iinclude -Itest/unit -o /tmp/fuzz_labels \
 *           test/unit/fuzz_targets/fuzz_labels.c src/placement.c
 *
 * Replay a crash file without libFuzzer (gcc or clang, any sanitizers):
 *
 *     cc -std=c99 -g -DFUZZ_STANDALONE_MAIN -fsanitize=address,undefined -Iinclude \
 *        -Itest/unit -o /tmp/replay test/unit/fuzz_targets/fuzz_labels.c src/placement.c
 *     /tmp/replay crash-<hash>
 *
 * Compile with -DFUZZ_OUT_OF_CONTRACT to also feed values outside what the callers
 * guarantee (negative amounts, attempt counts whose sum leaves int32): the targets then
 * check fewer properties, and the sanitizers say where the arithmetic breaks.
 */
#ifndef PG_SCHED_FUZZ_COMMON_H
#define PG_SCHED_FUZZ_COMMON_H

/* not every target uses every checker of the reference */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunused-function"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

#define PG_SCHED_UNIT_NO_MAIN
#include "test_placement.c"

#include <stdarg.h>

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct FzReader
{
	const uint8_t *d;
	size_t		n;
	size_t		i;
} FzReader;

static void
fz_init(FzReader *r, const uint8_t *data, size_t size)
{
	r->d = data;
	r->n = size;
	r->i = 0;
}

/* Past the end of the input every byte reads as 0. */
static uint8_t
fz_u8(FzReader *r)
{
	return r->i < r->n ? r->d[r->i++] : 0;
}

static bool
fz_bool(FzReader *r)
{
	return (fz_u8(r) & 1) != 0;
}

static uint64_t
fz_u64(FzReader *r)
{
	uint64_t	v = 0;
	int			k;

	for (k = 0; k < 8; k++)
		v |= (uint64_t) fz_u8(r) << (8 * k);
	return v;
}

static uint32_t
fz_u32(FzReader *r)
{
	uint32_t	v = 0;
	int			k;

	for (k = 0; k < 4; k++)
		v |= (uint32_t) fz_u8(r) << (8 * k);
	return v;
}

/* An int64 >= 0: small, round, near the int32 and int64 limits, or any. */
static int64_t
fz_amount(FzReader *r)
{
	uint8_t		m = fz_u8(r);

	switch (m & 7)
	{
		case 0:
		case 1:
			return (int64_t) (m >> 3);
		case 2:
			return (int64_t) fz_u8(r) * 1000;
		case 3:
			return (int64_t) INT32_MAX - (int64_t) (m >> 3) + 1;	/* around 2^31 */
		case 4:
			return INT64_MAX - (int64_t) (m >> 3);
		case 5:
			return (int64_t) (fz_u32(r) & 0x7fffffff);
		default:
			return (int64_t) (fz_u64(r) >> 1);
	}
}

/* Any int64, the limits over-represented. */
static int64_t
fz_i64(FzReader *r)
{
	uint8_t		m = fz_u8(r);

	switch (m & 7)
	{
		case 0:
			return (int64_t) (int8_t) fz_u8(r);
		case 1:
			return INT64_MIN + (int64_t) (m >> 3);
		case 2:
			return INT64_MAX - (int64_t) (m >> 3);
		case 3:
			return (int64_t) (int32_t) fz_u32(r);
		default:
			return (int64_t) fz_u64(r);
	}
}

/* Any int32, the limits over-represented. */
static int32_t
fz_i32(FzReader *r)
{
	uint8_t		m = fz_u8(r);

	switch (m & 7)
	{
		case 0:
		case 1:
			return (int32_t) (int8_t) fz_u8(r);
		case 2:
			return INT32_MIN + (int32_t) (m >> 3);
		case 3:
			return INT32_MAX - (int32_t) (m >> 3);
		case 4:
			return (int32_t) (m >> 3) * 1000;
		default:
			return (int32_t) fz_u32(r);
	}
}

/* An int32 >= 0 (counts of attempts, slots): small mostly, up to INT32_MAX. */
static int32_t
fz_count(FzReader *r)
{
	uint8_t		m = fz_u8(r);

	switch (m & 3)
	{
		case 0:
		case 1:
			return (int32_t) (m >> 2);
		case 2:
			return INT32_MAX - (int32_t) (m >> 2);
		default:
			return (int32_t) (fz_u32(r) & 0x7fffffff);
	}
}

#define FZ_STR 40				/* buffer size of a decoded string, NUL included */

static const char *const fz_pool[] = {
	"", "node-a", "node-b", "B", "a", "A", "node-10", "node-9", "n\303\266de", "tier", "Tier",
	"fast", "FAST", "fast ", "zone", "eu", "1.0", "1.0.0", "v1", "V1", "\xc3\xa9t\xc3\xa9",
	"\x7f", "\xff", "\x80", "zone\xff", "gpu", "ssd", "region", "eu-west-1"
};
#define FZ_NPOOL ((int) (sizeof fz_pool / sizeof fz_pool[0]))

/*
 * A NUL-terminated string into buf (FZ_STR bytes): one of the first `small` pool
 * entries (so keys and values collide often), any pool entry, or up to FZ_STR - 1 raw
 * bytes (NUL read as 0x01: the callers' strings come from text, which has no NUL).
 */
static void
fz_str(FzReader *r, char *buf, int small)
{
	uint8_t		b = fz_u8(r);

	if (small > FZ_NPOOL)
		small = FZ_NPOOL;
	if (b < 0x90 && small > 0)
		memcpy(buf, fz_pool[b % small], strlen(fz_pool[b % small]) + 1);
	else if (b < 0xD0)
		memcpy(buf, fz_pool[b % FZ_NPOOL], strlen(fz_pool[b % FZ_NPOOL]) + 1);
	else
	{
		int			len = (b - 0xD0) % FZ_STR;
		int			k;

		for (k = 0; k < len; k++)
		{
			uint8_t		ch = fz_u8(r);

			buf[k] = (char) (ch ? ch : 1);
		}
		buf[len] = '\0';
	}
}

static const char *fz_target_name = "fuzz";

static void
fz_fail(const char *fmt, ...)
{
	va_list		ap;

	fprintf(stderr, "%s: property violated: ", fz_target_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static void
fz_fail_at(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list		ap;

	fprintf(stderr, "%s: property violated at %s:%d: %s\n    ", fz_target_name, file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* FZ_CHECK(cond, fmt, ...): abort() with the location, the condition and a message. */
#define FZ_CHECK(cond, ...) \
	do { if (!(cond)) fz_fail_at(__FILE__, __LINE__, #cond, __VA_ARGS__); } while (0)

/* Dedupes (first of each key kept, as a JSON object keeps one) and sorts a label set. */
static int
fz_dedupe_sort(SchedLabel *items, int n)
{
	SchedLabelSet s;
	int			out = 0;
	int			i,
				j;

	for (i = 0; i < n; i++)
	{
		for (j = 0; j < out; j++)
			if (ref_streq(items[j].key, items[i].key))
				break;
		if (j == out)
			items[out++] = items[i];
	}
	s.count = out;
	s.items = items;
	if (!sched_labels_sort(&s))
		fz_fail("sched_labels_sort returned false on unique keys");
	return out;
}

/* A candidate every fz_placement() admits: ACTIVE, READY, ELIGIBLE, fresh, room. */
static const char *const fz_versions_default[] = {"1.0"};

static void
fz_placement_base(SchedPlacement *p)
{
	memset(p, 0, sizeof *p);
	p->capability = "fuzz";
	p->capability_version = "1.0";
	p->heartbeat_cutoff = 1000;
}

static void
fz_candidate_base(SchedCandidate *c, const char *node_id)
{
	memset(c, 0, sizeof *c);
	c->node_id = node_id;
	c->management_status = SCHED_NODE_ACTIVE;
	c->cpu_millis = 4000;
	c->memory_mb = 8192;
	c->gpus = 1;
	c->weight = 100;
	c->has_worker = true;
	c->runtime_state = SCHED_WORKER_READY;
	c->scheduling_status = SCHED_WORKER_ELIGIBLE;
	c->has_heartbeat = true;
	c->last_heartbeat = 2000;
	c->version_count = 1;
	c->versions = fz_versions_default;
	c->slots = 4;
}

static int
fz_popcount(SchedReasonSet s)
{
	int			n = 0;

	for (; s; s &= s - 1)
		n++;
	return n;
}

#ifdef FUZZ_STANDALONE_MAIN
/* Replays the input files given as arguments (no libFuzzer needed). */
int
main(int argc, char **argv)
{
	static uint8_t buf[1 << 20];
	int			i;

	for (i = 1; i < argc; i++)
	{
		FILE	   *f = fopen(argv[i], "rb");
		size_t		n;

		if (f == NULL)
		{
			perror(argv[i]);
			return 2;
		}
		n = fread(buf, 1, sizeof buf, f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
		printf("%s: ok\n", argv[i]);
	}
	return 0;
}
#endif

#endif							/* PG_SCHED_FUZZ_COMMON_H */
