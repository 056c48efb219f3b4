/*
 * fuzz_placement.c — libFuzzer harness for the pure placement core (src/placement.c).
 *
 * It decodes the input bytes into a placement request, one candidate (node + worker),
 * alternative transient values, reason counts and a small ranking, then checks the
 * invariants of test_placement.c against its SPEC reference (which it #includes with
 * PG_SCHED_UNIT_NO_MAIN): sched_admission() equals the reference reason set; admitted
 * iff the set is empty iff every rule passes; no worker reason with capability_missing;
 * no *_exhausted with the matching insufficient_*; static reasons independent of live
 * attempts and reservations; the score formula; sched_labels_sort() (false exactly on a
 * duplicate key, content kept, strictly sorted on success) and sched_labels_get();
 * sched_rank() order; sched_format_summary() text and snprintf-like truncation.
 * Any violation prints the case and abort()s.
 *
 * Build and run from /work/main (clang >= 6):
 *
 *     clang -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *           -Iinclude -o test/unit/fuzz_placement test/unit/fuzz_placement.c src/placement.c
 *     mkdir -p /tmp/fuzz_placement_corpus
 *     ./test/unit/fuzz_placement -max_total_time=60 -max_len=512 /tmp/fuzz_placement_corpus
 *
 * Replay a crash file without libFuzzer (any C99 compiler):
 *
 *     cc -std=c99 -g -DFUZZ_STANDALONE_MAIN -fsanitize=address,undefined -Iinclude \
 *        -o /tmp/fuzz_replay test/unit/fuzz_placement.c src/placement.c
 *     /tmp/fuzz_replay crash-<hash>
 *
 * Inputs respect what the callers guarantee (placement.h): amounts >= 0, strings
 * NUL-terminated, label maps with unique keys, the candidate's labels sorted.  Everything
 * else (weights, attempts, slots, heartbeats, enum values within range, raw bytes in
 * strings) is taken from the input as is.
 */
#define PG_SCHED_UNIT_NO_MAIN
#include "test_placement.c"

#define F_STR 20
#define F_MAXLABELS 7
#define F_MAXRANK 10

typedef struct Rd
{
	const uint8_t *d;
	size_t		n;
	size_t		i;
} Rd;

static uint8_t
rd8(Rd *r)
{
	return r->i < r->n ? r->d[r->i++] : 0;
}

static uint64_t
rd64(Rd *r)
{
	uint64_t	v = 0;
	int			k;

	for (k = 0; k < 8; k++)
		v |= (uint64_t) rd8(r) << (8 * k);
	return v;
}

static uint32_t
rd32(Rd *r)
{
	return (uint32_t) rd64(r);
}

/* Amounts >= 0: small, round, any, or near the top of int64. */
static int64_t
rd_amount(Rd *r)
{
	uint8_t		m = rd8(r);

	switch (m & 3)
	{
		case 0:
			return (int64_t) (m >> 2);
		case 1:
			return (int64_t) rd8(r) * 1000;
		case 2:
			return (int64_t) (rd64(r) >> 1);
		default:
			return INT64_MAX - (int64_t) rd8(r);
	}
}

static const char *const f_pool[] = {
	"", "node-a", "node-b", "B", "a", "A", "node-10", "node-9", "n\303\266de", "tier", "Tier",
	"fast", "FAST", "fast ", "zone", "eu", "1.0", "1.0.0", "v1", "V1", "\xc3\xa9t\xc3\xa9"
};
#define F_NPOOL ((int) (sizeof f_pool / sizeof f_pool[0]))

/* A string: from the pool, or up to 15 raw bytes (NUL mapped to 0x01). */
static void
rd_str(Rd *r, char *buf)
{
	uint8_t		b = rd8(r);

	if (b < 0xC0)
	{
		size_t		n = strlen(f_pool[b % F_NPOOL]);

		memcpy(buf, f_pool[b % F_NPOOL], n + 1);
	}
	else
	{
		int			len = b & 15;
		int			k;

		for (k = 0; k < len; k++)
		{
			uint8_t		ch = rd8(r);

			buf[k] = (char) (ch ? ch : 1);
		}
		buf[len] = '\0';
	}
}

static void
f_fail(const char *what, const char *msg, const SchedPlacement *p, const SchedCandidate *c)
{
	fprintf(stderr, "fuzz_placement: %s: %s\n", what, msg);
	if (p != NULL && c != NULL)
		ref_dump_pair(stderr, p, c);
	abort();
}

/*
 * Decodes a label map into items (keys/values stored in kv), checks sched_labels_sort on
 * the raw decoding (duplicates and all), then returns it de-duplicated and sorted.
 */
static int
rd_labels(Rd *r, SchedLabel *items, char kv[][2][F_STR])
{
	SchedLabel	raw[F_MAXLABELS] = {{NULL, NULL}};	/* zero past key and value: plain */
	SchedLabelSet rs;
	int			n = rd8(r) % (F_MAXLABELS + 1);
	int			i,
				j;
	int			dup = 0;
	int			out = 0;
	bool		sorted;

	for (i = 0; i < n; i++)
	{
		rd_str(r, kv[i][0]);
		rd_str(r, kv[i][1]);
		raw[i].key = kv[i][0];
		raw[i].value = kv[i][1];
	}
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (ref_streq(raw[i].key, raw[j].key))
				dup = 1;

	/* sched_labels_sort on the raw set */
	{
		SchedLabel	before[F_MAXLABELS];

		memcpy(before, raw, sizeof(SchedLabel) * (size_t) n);
		rs.count = n;
		rs.items = n > 0 ? raw : NULL;
		sorted = sched_labels_sort(&rs);
		if (sorted != !dup)
			f_fail("sched_labels_sort", dup ? "true on a duplicate key" : "false without duplicates",
				   NULL, NULL);
		if (rs.count != n)
			f_fail("sched_labels_sort", "count changed", NULL, NULL);
		for (i = 0; i < n; i++)
		{
			int			found = 0;

			for (j = 0; j < n; j++)
				if (raw[j].key == before[i].key && raw[j].value == before[i].value)
					found++;
			if (found != 1)
				f_fail("sched_labels_sort", "content changed", NULL, NULL);
		}
		if (sorted)
			for (i = 1; i < n; i++)
				if (ref_bytecmp(raw[i - 1].key, raw[i].key) >= 0)
					f_fail("sched_labels_sort", "not strictly sorted", NULL, NULL);
		memcpy(raw, before, sizeof(SchedLabel) * (size_t) n);
	}

	/* keep the first of each key (a JSON object has unique keys), then sort */
	for (i = 0; i < n; i++)
	{
		for (j = 0; j < out; j++)
			if (ref_streq(items[j].key, raw[i].key))
				break;
		if (j == out)
			items[out++] = raw[i];
	}
	rs.count = out;
	rs.items = items;
	if (!sched_labels_sort(&rs))
		f_fail("sched_labels_sort", "false on unique keys", NULL, NULL);
	for (i = 0; i < out; i++)
		if (sched_labels_get(&rs, items[i].key) != items[i].value)
			f_fail("sched_labels_get", "does not find a present key", NULL, NULL);
	return out;
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Rd			r;
	SchedPlacement p;
	SchedCandidate c;
	SchedLabel	have[F_MAXLABELS],
				req[F_MAXLABELS],
				pref[F_MAXLABELS];
	char		have_kv[F_MAXLABELS][2][F_STR],
				req_kv[F_MAXLABELS][2][F_STR],
				pref_kv[F_MAXLABELS][2][F_STR];
	char		node_id[F_STR],
				pin[F_STR],
				version[F_STR],
				probe[F_STR];
	char		vbuf[4][F_STR];
	const char *versions[4];
	int64_t		alt[5];
	int			counts[SCHED_R_COUNT];
	char		msg[1024];
	uint8_t		flags;
	int			i;

	r.d = data;
	r.n = size;
	r.i = 0;
	memset(&p, 0, sizeof p);
	memset(&c, 0, sizeof c);

	flags = rd8(&r);
	rd_str(&r, node_id);
	sched_candidate_set_node(&c, node_id);
	c.management_status = (SchedNodeStatus) (rd8(&r) % 3);
	c.labels.count = rd_labels(&r, have, have_kv);
	c.labels.items = c.labels.count > 0 ? have : NULL;
	c.cpu_millis = rd_amount(&r);
	c.memory_mb = rd_amount(&r);
	c.gpus = rd_amount(&r);
	c.weight = (int32_t) rd32(&r);
	c.reserved_cpu_millis = rd_amount(&r);
	c.reserved_memory_mb = rd_amount(&r);
	c.reserved_gpus = rd_amount(&r);
	c.node_live_attempts = (int32_t) rd32(&r);
	c.has_worker = (flags & 1) != 0;
	c.runtime_state = (SchedRuntimeState) (rd8(&r) % 4);
	c.scheduling_status = (SchedSchedulingStatus) (rd8(&r) % 2);
	c.has_heartbeat = (flags & 2) != 0;
	c.slots = (int32_t) (int8_t) rd8(&r);
	c.worker_live_attempts = (int32_t) (int8_t) rd8(&r);
	c.version_count = rd8(&r) % 5;
	for (i = 0; i < c.version_count; i++)
	{
		rd_str(&r, vbuf[i]);
		versions[i] = (flags & 4) && i == 0 ? NULL : vbuf[i];
	}
	c.versions = c.version_count > 0 ? versions : NULL;

	p.capability = "fuzz";
	rd_str(&r, version);
	p.capability_version = version;
	p.required_labels.count = rd_labels(&r, req, req_kv);
	p.required_labels.items = p.required_labels.count > 0 ? req : NULL;
	p.preferred_labels.count = rd_labels(&r, pref, pref_kv);
	p.preferred_labels.items = p.preferred_labels.count > 0 ? pref : NULL;
	p.min_cpu_millis = rd_amount(&r);
	p.min_memory_mb = rd_amount(&r);
	p.min_gpus = rd_amount(&r);
	p.reserve_cpu_millis = rd_amount(&r);
	p.reserve_memory_mb = rd_amount(&r);
	p.reserve_gpus = rd_amount(&r);
	if (flags & 8)
	{
		rd_str(&r, pin);
		p.pin_node_id = pin;
	}
	p.heartbeat_cutoff = (int64_t) rd64(&r);
	if (flags & 16)
	{
		int64_t		d = (int64_t) (int8_t) rd8(&r) % 3;

		c.last_heartbeat = (d < 0 && p.heartbeat_cutoff < INT64_MIN - d) ||
			(d > 0 && p.heartbeat_cutoff > INT64_MAX - d) ? p.heartbeat_cutoff
			: p.heartbeat_cutoff + d;
	}
	else
		c.last_heartbeat = (int64_t) rd64(&r);

	alt[0] = rd_amount(&r);
	alt[1] = rd_amount(&r);
	alt[2] = rd_amount(&r);
	alt[3] = (int64_t) (int32_t) rd32(&r);
	alt[4] = (int64_t) (int32_t) rd32(&r);

	if (!ref_check_pair(&p, &c, alt, msg, sizeof msg))
		f_fail("admission/score", msg, &p, &c);

	/* label lookup of an arbitrary key agrees with a linear scan */
	rd_str(&r, probe);
	if (sched_labels_get(&c.labels, probe) != ref_label_value(&c.labels, probe))
		f_fail("sched_labels_get", probe, &p, &c);
	if (sched_labels_matching(&c.labels, &p.required_labels) !=
		ref_label_matches(&c.labels, &p.required_labels))
		f_fail("sched_labels_matching", "count differs", &p, &c);

	/* summary */
	{
		int			nodes = (int) (rd32(&r) & 0xFFFF);
		int			eligible = (int) (rd32(&r) & 0xFFFF);

		memset(counts, 0, sizeof counts);
		sched_count_reasons(sched_admission(&p, &c), counts);
		for (i = 0; i < SCHED_R_COUNT; i++)
			if ((int) ((ref_admission(&p, &c) >> i) & 1u) != counts[i])
				f_fail("sched_count_reasons", ref_reason_names[i], &p, &c);
		for (i = 0; i < SCHED_R_COUNT; i++)
		{
			uint8_t		b = rd8(&r);

			counts[i] += b < 128 ? 0 : (b == 255 ? INT32_MAX - 1 : b);
		}
		if (!ref_check_summary(nodes, eligible, counts, msg, sizeof msg, (flags & 0xC0) == 0xC0))
			f_fail("sched_format_summary", msg, NULL, NULL);
	}

	/* ranking */
	{
		SchedRanked arr[F_MAXRANK];
		char		ids[F_MAXRANK][F_STR];
		int			n = 0;
		int			want = rd8(&r) % (F_MAXRANK + 1);
		int			seen[F_MAXRANK];
		int			j;

		for (i = 0; i < want; i++)
		{
			rd_str(&r, ids[n]);
			for (j = 0; j < n; j++)
				if (ref_streq(ids[j], ids[n]))
					break;
			if (j < n)
				continue;		/* node_id is a key */
			memset(&arr[n], 0, sizeof arr[n]);
			sched_ranked_set_node(&arr[n], ids[n]);
			arr[n].score = (flags & 32) ? (int64_t) rd64(&r) : (int64_t) (rd8(&r) % 3);
			arr[n].index = n;
			n++;
		}
		sched_rank(arr, n);
		memset(seen, 0, sizeof seen);
		for (i = 0; i < n; i++)
		{
			if (arr[i].index < 0 || arr[i].index >= n || seen[arr[i].index]++ ||
				arr[i].node_id != ids[arr[i].index])
				f_fail("sched_rank", "not a permutation", NULL, NULL);
			if (i > 0 && !ref_rank_before(&arr[i - 1], &arr[i]))
				f_fail("sched_rank", "out of order", NULL, NULL);
		}
	}
	return 0;
}

#ifdef FUZZ_STANDALONE_MAIN
/* Replays input files given as arguments (no libFuzzer needed). */
int
main(int argc, char **argv)
{
	int			i;

	for (i = 1; i < argc; i++)
	{
		static uint8_t buf[1 << 20];
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
