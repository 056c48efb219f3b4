/*
 * fuzz_label_expr.c — libFuzzer target: label expressions (placement.c's
 * sched_label_satisfied, sched_labels_first_unmet, and admission on required
 * expressions) and the parsers under them (sched_label_number, sched_version_parse,
 * sched_version_cmp, sched_version_range_parse, sched_version_in_range).
 *
 * Everything is compared with a slow reference written here from the documentation in
 * include/placement.h, which calls none of the functions under test: its own number
 * grammar (then strtod for the value), its own version and range parsers, its own
 * version order (trailing zeros stripped, then lexicographic), linear label lookup.
 *
 * Each input decodes into three parts, the first byte choosing which comes first:
 *   labels    a node label map and a required map of up to LX_MAXLABELS expressions
 *             (all operators; values from a pool of numeric-looking, version-looking and
 *             junk strings, or raw bytes; an expression's strings, number or versions
 *             often the node's value for its key or next to it, so that expressions
 *             both hold and fail)
 *   versions  three versions of 1 to 8 parts (small parts over-represented so they tie)
 *             and up to 8 bounds built from them
 *   strings   two strings (pool entries, concatenations of number, version and range
 *             tokens, or raw bytes), each given to the three parsers
 * Properties checked:
 *   number    sched_label_number accepts exactly what the reference grammar
 *             -?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)? accepts, within the range of a
 *             double (overflow to infinity or underflow to zero is not a number; a
 *             subnormal result is one), with the same value and sign
 *   version   sched_version_parse accepts exactly the reference's versions (1 to 8
 *             parts of 1 to 9 digits, single dots), with the same parts; a formatted
 *             version (leading zeros and all) parses back to its parts
 *   range     sched_version_range_parse returns the reference's count (-1 when not a
 *             range) and bounds, never writes past SCHED_MAX_VERSION_BOUNDS; a version
 *             alone, or after an operator, is a range of one; bounds formatted with
 *             random spacing parse back; a 9th bound or a trailing comma is rejected
 *   cmp       sched_version_cmp is -1, 0 or 1 and equals the reference; antisymmetric,
 *             reflexive, transitive on every ordering of the triple; a trailing ".0"
 *             changes nothing; parts past nparts are not read
 *   in_range  sched_version_in_range equals the reference, and the conjunction of each
 *             bound alone
 *   labels    sched_label_satisfied equals the reference for each expression, and on a
 *             node without labels holds for not_in and exists: false only;
 *             sched_labels_first_unmet is the index of the failing expression with the
 *             smallest key (-1 when none fails or nothing is required); on an otherwise
 *             admissible pair, sched_admission is exactly required_labels_mismatch when
 *             one fails, else empty; preferred labels are matched as plain labels
 *             whatever op holds, and do not change admission
 *
 * A number has no length limit (a label value has its own, 1024 bytes): 64 and 65 byte
 * numbers are in the pool.
 */
#include "fuzz_common.h"

#include <float.h>
#include <math.h>

#define LX_STR 128				/* a parser input, NUL included */
#define LX_MAXLABELS 8
#define LX_MAXVALUES SCHED_MAX_LABEL_VALUES
#define LX_VAL 24				/* a raw label value, NUL included */
#define LX_RANGE_STR 1200		/* a formatted range of 8 bounds of 8 padded parts, and more */

/* ------------------------------------------------------------------------------------ */
/* The reference                                                                        */
/* ------------------------------------------------------------------------------------ */

static bool
lx_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/*
 * A number: the grammar by hand, then the value from strtod; a
 * result that is infinite (overflow) or zero although some digit of the mantissa is not
 * (underflow) is not a number.
 */
static bool
lx_ref_number(const char *s, double *out)
{
	size_t		n = strlen(s);
	size_t		i = 0;
	size_t		int_digits = 0,
				frac_digits = 0,
				exp_digits = 0;
	bool		nonzero = false;
	double		v;

	if (n == 0)
		return false;
	if (s[i] == '-')
		i++;
	for (; i < n && lx_digit(s[i]); i++, int_digits++)
		nonzero = nonzero || s[i] != '0';
	if (int_digits == 0)
		return false;
	if (i < n && s[i] == '.')
	{
		for (i++; i < n && lx_digit(s[i]); i++, frac_digits++)
			nonzero = nonzero || s[i] != '0';
		if (frac_digits == 0)
			return false;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E'))
	{
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (; i < n && lx_digit(s[i]); i++)
			exp_digits++;
		if (exp_digits == 0)
			return false;
	}
	if (i != n)
		return false;
	v = strtod(s, NULL);
	if (isinf(v) || (v == 0.0 && nonzero))
		return false;
	*out = v;
	return true;
}

/* A version in s[0 .. len): dot-separated segments, each 1 to 9 digits, 1 to 8 of them. */
static bool
lx_ref_version(const char *s, size_t len, SchedVersion *out)
{
	size_t		start = 0;
	int			count = 0;

	for (;;)
	{
		size_t		end = start;
		int64_t		value = 0;
		size_t		k;

		while (end < len && s[end] != '.')
			end++;
		if (end == start || end - start > 9 || count == SCHED_MAX_VERSION_PARTS)
			return false;
		for (k = start; k < end; k++)
		{
			if (!lx_digit(s[k]))
				return false;
			value = value * 10 + (s[k] - '0');
		}
		out->parts[count++] = (int32_t) value;
		if (end == len)
			break;
		start = end + 1;		/* past the dot; an empty last segment fails above */
	}
	out->nparts = count;
	return true;
}

/* A range: split on commas, each segment trimmed, an operator prefix, a version. */
static int
lx_ref_range(const char *s, SchedVersionBound *bounds)
{
	static const struct
	{
		const char *text;
		SchedVersionCmp cmp;
	}			ops[] = {
		{"!=", SCHED_VCMP_NE}, {">=", SCHED_VCMP_GE}, {"<=", SCHED_VCMP_LE},
		{">", SCHED_VCMP_GT}, {"<", SCHED_VCMP_LT}, {"=", SCHED_VCMP_EQ}
	};
	size_t		len = strlen(s);
	size_t		start = 0;
	int			count = 0;

	for (;;)
	{
		size_t		end = start;
		size_t		a,
					b;
		SchedVersionCmp cmp = SCHED_VCMP_EQ;
		size_t		k;

		while (end < len && s[end] != ',')
			end++;
		if (count == SCHED_MAX_VERSION_BOUNDS)
			return -1;
		a = start;
		b = end;
		while (a < b && s[a] == ' ')
			a++;
		while (b > a && s[b - 1] == ' ')
			b--;
		for (k = 0; k < sizeof ops / sizeof ops[0]; k++)
		{
			size_t		ol = strlen(ops[k].text);

			if (b - a >= ol && memcmp(s + a, ops[k].text, ol) == 0)
			{
				cmp = ops[k].cmp;
				a += ol;
				break;
			}
		}
		while (a < b && s[a] == ' ')
			a++;
		if (!lx_ref_version(s + a, b - a, &bounds[count].version))
			return -1;
		bounds[count++].cmp = cmp;
		if (end == len)
			return count;
		start = end + 1;
	}
}

/* Order of versions: trailing zero parts dropped, then lexicographic, a prefix first. */
static int
lx_ref_cmp(const SchedVersion *a, const SchedVersion *b)
{
	int			na = a->nparts,
				nb = b->nparts;
	int			i;

	while (na > 0 && a->parts[na - 1] == 0)
		na--;
	while (nb > 0 && b->parts[nb - 1] == 0)
		nb--;
	for (i = 0; i < na && i < nb; i++)
		if (a->parts[i] != b->parts[i])
			return a->parts[i] < b->parts[i] ? -1 : 1;
	return na == nb ? 0 : na < nb ? -1 : 1;
}

static bool
lx_ref_bound(const SchedVersion *v, const SchedVersionBound *b)
{
	int			c = lx_ref_cmp(v, &b->version);

	switch (b->cmp)
	{
		case SCHED_VCMP_EQ:
			return c == 0;
		case SCHED_VCMP_NE:
			return c != 0;
		case SCHED_VCMP_GT:
			return c == 1;
		case SCHED_VCMP_GE:
			return c != -1;
		case SCHED_VCMP_LT:
			return c == -1;
		case SCHED_VCMP_LE:
			return c != 1;
	}
	fz_fail("bound with cmp %d", (int) b->cmp);
	return false;
}

static bool
lx_ref_in_range(const SchedVersion *v, const SchedVersionBound *bounds, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (!lx_ref_bound(v, &bounds[i]))
			return false;
	return true;
}

static bool
lx_ref_satisfied(const SchedLabel *req, const SchedLabelSet *have)
{
	const char *v = ref_label_value(have, req->key);
	double		x;
	SchedVersion ver;
	int			i;
	bool		listed = false;

	if (req->op == SCHED_LABEL_IN || req->op == SCHED_LABEL_NOT_IN)
		for (i = 0; v != NULL && i < req->nvalues; i++)
			listed = listed || ref_streq(v, req->values[i]);
	switch (req->op)
	{
		case SCHED_LABEL_EQ:
			return v != NULL && ref_streq(v, req->value);
		case SCHED_LABEL_IN:
			return listed;
		case SCHED_LABEL_NOT_IN:
			return !listed;
		case SCHED_LABEL_EXISTS:
			return v != NULL;
		case SCHED_LABEL_NOT_EXISTS:
			return v == NULL;
		case SCHED_LABEL_GT:
			return v != NULL && lx_ref_number(v, &x) && x > req->number;
		case SCHED_LABEL_LT:
			return v != NULL && lx_ref_number(v, &x) && x < req->number;
		case SCHED_LABEL_VERSION:
			return v != NULL && lx_ref_version(v, strlen(v), &ver) &&
				lx_ref_in_range(&ver, req->bounds, req->nbounds);
	}
	fz_fail("label with op %d", (int) req->op);
	return false;
}

/* The index of the failing expression with the smallest key, or -1. */
static int
lx_ref_first_unmet(const SchedLabelSet *have, const SchedLabelSet *required)
{
	int			best = -1;
	int			i;

	for (i = 0; i < required->count; i++)
		if (!lx_ref_satisfied(&required->items[i], have) &&
			(best < 0 || ref_bytecmp(required->items[i].key, required->items[best].key) < 0))
			best = i;
	return best;
}

/* ------------------------------------------------------------------------------------ */
/* Decoding                                                                             */
/* ------------------------------------------------------------------------------------ */

static const char *const lx_values[] = {
	"", "0", "-0", "1", "-1", "2", "8", "10", "16", "007", "1.0", "1.5", "-2.5", "0.25",
	"2.5E-1", "1e3", "1E3", "1000", "1e+3", "1e-3", "1e0003", "+1", " 1", "1 ", "1.", ".5",
	"0x10", "inf", "nan", "-inf", "1e999", "-1e999", "1e-999", "0e-999", "1e-310",
	"1.7976931348623157e308", "1.2", "1.2.0", "1.2.10", "1.10", "1.9", "2.0", "2.0.0.0",
	"535.104.05", "999999999", "1000000000", "1.2.3.4.5.6.7.8", "1.2.3.4.5.6.7.8.9", "v1",
	"1..2", "1.2-rc1", "fast", "eu-1", "x86_64", "\xff", "\xd9\xa1",
	"10000000000000000000000000000000000000000000000000000000000000000",	/* 65 bytes */
	"1000000000000000000000000000000000000000000000000000000000000000",	/* 64 bytes */
};
#define LX_NVALUES ((int) (sizeof lx_values / sizeof lx_values[0]))

static const char *const lx_keys[] = {"a", "arch", "cores", "driver", "tier", "zone", "\xff", ""};
#define LX_NKEYS ((int) (sizeof lx_keys / sizeof lx_keys[0]))

static const char *const lx_tokens[] = {
	"0", "1", "2", "9", "10", "01", "123456789", "999999999", "1000000000", ".", ".", ".",
	",", ",", ", ", " ", "  ", ">", ">=", "<", "<=", "=", "!=", "!", "~", "^", "=>", "-",
	"+", "e", "E", "e+", "e-", "e308", "e-999", "x", "v", "inf", "nan", "\t", "\xff"
};
#define LX_NTOKENS ((int) (sizeof lx_tokens / sizeof lx_tokens[0]))

static const double lx_numbers[] = {
	0.0, -0.0, 1, -1, 2, 8, 16, 1.5, -2.5, 0.25, 1000, 1e-3, 7.999, 1e308, -1e308,
	DBL_MAX, -DBL_MAX, DBL_MIN, 1e-310, 10, 999999999, 0.5
};
#define LX_NNUMBERS ((int) (sizeof lx_numbers / sizeof lx_numbers[0]))

static const int32_t lx_parts[] = {0, 0, 0, 1, 1, 2, 9, 10, 104, 535, 999999999};
#define LX_NPARTS ((int) (sizeof lx_parts / sizeof lx_parts[0]))

/* A parser input: a pool value, a concatenation of tokens, or raw bytes (NUL as 1). */
static void
lx_string(FzReader *r, char *buf)
{
	uint8_t		m = fz_u8(r);
	size_t		len = 0;

	buf[0] = '\0';
	if (m < 0x40)
		memcpy(buf, lx_values[m % LX_NVALUES], strlen(lx_values[m % LX_NVALUES]) + 1);
	else if (m < 0xC0)
	{
		int			n = 1 + m % 24;
		int			k;

		for (k = 0; k < n; k++)
		{
			const char *t = lx_tokens[fz_u8(r) % LX_NTOKENS];
			size_t		tl = strlen(t);

			if (len + tl >= LX_STR)
				break;
			memcpy(buf + len, t, tl);
			len += tl;
		}
		buf[len] = '\0';
	}
	else
	{
		size_t		n = fz_u8(r) % LX_STR;

		for (len = 0; len < n; len++)
		{
			uint8_t		ch = fz_u8(r);

			buf[len] = (char) (ch ? ch : 1);
		}
		buf[len] = '\0';
	}
}

static void
lx_decode_version(FzReader *r, SchedVersion *v)
{
	int			i;

	memset(v, 0, sizeof *v);
	v->nparts = 1 + fz_u8(r) % SCHED_MAX_VERSION_PARTS;
	for (i = 0; i < v->nparts; i++)
	{
		uint8_t		m = fz_u8(r);

		v->parts[i] = (m & 3) == 3 ? (int32_t) (fz_u32(r) % 1000000000u)
			: lx_parts[(m >> 2) % LX_NPARTS];
	}
}

/* ------------------------------------------------------------------------------------ */
/* Checks                                                                               */
/* ------------------------------------------------------------------------------------ */

static bool
lx_same_version(const SchedVersion *a, const SchedVersion *b)
{
	int			i;

	if (a->nparts != b->nparts)
		return false;
	for (i = 0; i < a->nparts; i++)
		if (a->parts[i] != b->parts[i])
			return false;
	return true;
}

/* sched_version_range_parse with a canary bound past the SCHED_MAX_VERSION_BOUNDS. */
static int
lx_range_parse(const char *s, SchedVersionBound *bounds)
{
	SchedVersionBound buf[SCHED_MAX_VERSION_BOUNDS + 1];
	SchedVersionBound canary;
	int			n;

	memset(buf, 0xa5, sizeof buf);
	memset(&canary, 0xa5, sizeof canary);
	n = sched_version_range_parse(s, buf);
	FZ_CHECK(memcmp(&buf[SCHED_MAX_VERSION_BOUNDS], &canary, sizeof canary) == 0,
			 "sched_version_range_parse(\"%s\") wrote past %d bounds", s, SCHED_MAX_VERSION_BOUNDS);
	memcpy(bounds, buf, sizeof(SchedVersionBound) * SCHED_MAX_VERSION_BOUNDS);
	return n;
}

static void
lx_check_range_equal(const char *s, int n, const SchedVersionBound *got, int want_n,
					 const SchedVersionBound *want)
{
	int			i;

	FZ_CHECK(n == want_n, "sched_version_range_parse(\"%s\") = %d, reference %d", s, n, want_n);
	for (i = 0; i < n; i++)
	{
		FZ_CHECK(got[i].cmp == want[i].cmp, "\"%s\" bound %d: cmp %d, reference %d", s, i,
				 (int) got[i].cmp, (int) want[i].cmp);
		FZ_CHECK(lx_same_version(&got[i].version, &want[i].version),
				 "\"%s\" bound %d: %d parts, reference %d (or the parts differ)", s, i,
				 got[i].version.nparts, want[i].version.nparts);
	}
}

/* The three parsers on one string. */
static void
lx_check_parsers(const char *s)
{
	double		x = 0,
				y = 0;
	bool		got,
				want;
	SchedVersion v,
				w;
	SchedVersionBound b[SCHED_MAX_VERSION_BOUNDS],
				rb[SCHED_MAX_VERSION_BOUNDS];
	int			n,
				rn;
	char		buf[LX_STR + 4];

	got = sched_label_number(s, &x);
	want = lx_ref_number(s, &y);
	{
		FZ_CHECK(got == want, "sched_label_number(\"%s\") = %d, reference %d", s, got, want);
		FZ_CHECK(!got || (x == y && !signbit(x) == !signbit(y)),
				 "sched_label_number(\"%s\") = %.17g, reference %.17g", s, x, y);
	}
	if (got)
		FZ_CHECK(isfinite(x), "sched_label_number(\"%s\") = %g is not finite", s, x);

	memset(&v, 0, sizeof v);
	got = sched_version_parse(s, &v);
	want = lx_ref_version(s, strlen(s), &w);
	FZ_CHECK(got == want, "sched_version_parse(\"%s\") = %d, reference %d", s, got, want);
	FZ_CHECK(!got || lx_same_version(&v, &w), "sched_version_parse(\"%s\"): %d parts, reference %d"
			 " (or the parts differ)", s, v.nparts, w.nparts);

	n = lx_range_parse(s, b);
	rn = lx_ref_range(s, rb);
	lx_check_range_equal(s, n, b, rn, rb);

	/* a version alone, and after each operator, is a range of one */
	if (want)
	{
		static const char *const opnames[] = {"", "=", "!=", ">", ">=", "<", "<="};
		static const SchedVersionCmp opcmp[] = {SCHED_VCMP_EQ, SCHED_VCMP_EQ, SCHED_VCMP_NE,
			SCHED_VCMP_GT, SCHED_VCMP_GE, SCHED_VCMP_LT, SCHED_VCMP_LE};
		int			k;

		for (k = 0; k < 7; k++)
		{
			snprintf(buf, sizeof buf, "%s%s", opnames[k], s);
			n = lx_range_parse(buf, b);
			FZ_CHECK(n == 1 && b[0].cmp == opcmp[k] && lx_same_version(&b[0].version, &w),
					 "\"%s\" (a version after \"%s\") parsed as %d bounds", buf, opnames[k], n);
		}
	}
}

/* Writes v into out with random leading zeros (a part keeps at most 9 digits). */
static size_t
lx_format_version(FzReader *r, char *out, const SchedVersion *v)
{
	size_t		len = 0;
	int			i;

	for (i = 0; i < v->nparts; i++)
	{
		char		digits[16];
		int			nd = snprintf(digits, sizeof digits, "%" PRId32, v->parts[i]);
		int			zeros = fz_u8(r) % 4;

		if (zeros > 9 - nd)
			zeros = 9 - nd;
		if (i > 0)
			out[len++] = '.';
		while (zeros-- > 0)
			out[len++] = '0';
		memcpy(out + len, digits, (size_t) nd);
		len += (size_t) nd;
	}
	out[len] = '\0';
	return len;
}

static void
lx_check_versions(FzReader *r)
{
	SchedVersion v[3],
				z,
				junk,
				parsed;
	SchedVersionBound bounds[SCHED_MAX_VERSION_BOUNDS],
				got[SCHED_MAX_VERSION_BOUNDS];
	static const char *const opnames[] = {"=", "!=", ">", ">=", "<", "<="};
	static char text[LX_RANGE_STR];
	size_t		len;
	int			nb,
				i,
				j,
				k,
				n;
	bool		all;

	for (i = 0; i < 3; i++)
		lx_decode_version(r, &v[i]);

	for (i = 0; i < 3; i++)
	{
		/* round trip through text */
		lx_format_version(r, text, &v[i]);
		memset(&parsed, 0, sizeof parsed);
		FZ_CHECK(sched_version_parse(text, &parsed) && lx_same_version(&parsed, &v[i]),
				 "\"%s\" does not parse back to its %d parts", text, v[i].nparts);
		FZ_CHECK(sched_version_cmp(&v[i], &v[i]) == 0, "\"%s\" is not equal to itself", text);
		/* a trailing .0 changes nothing */
		if (v[i].nparts < SCHED_MAX_VERSION_PARTS)
		{
			z = v[i];
			z.parts[z.nparts++] = 0;
			FZ_CHECK(sched_version_cmp(&z, &v[i]) == 0 && sched_version_cmp(&v[i], &z) == 0,
					 "\"%s\" and \"%s.0\" differ", text, text);
			for (j = 0; j < 3; j++)
				FZ_CHECK(sched_version_cmp(&z, &v[j]) == sched_version_cmp(&v[i], &v[j]) &&
						 sched_version_cmp(&v[j], &z) == sched_version_cmp(&v[j], &v[i]),
						 "a trailing .0 on version %d changes its order against version %d", i, j);
		}
		/* parts past nparts are not read */
		junk = v[i];
		for (j = junk.nparts; j < SCHED_MAX_VERSION_PARTS; j++)
			junk.parts[j] = 1 + j;
		for (j = 0; j < 3; j++)
			FZ_CHECK(sched_version_cmp(&junk, &v[j]) == sched_version_cmp(&v[i], &v[j]),
					 "parts past nparts of version %d change its order", i);
	}
	for (i = 0; i < 3; i++)
		for (j = 0; j < 3; j++)
		{
			int			c = sched_version_cmp(&v[i], &v[j]);

			FZ_CHECK(c == lx_ref_cmp(&v[i], &v[j]), "cmp(v%d, v%d) = %d, reference %d", i, j, c,
					 lx_ref_cmp(&v[i], &v[j]));
			FZ_CHECK(c == -sched_version_cmp(&v[j], &v[i]), "cmp is not antisymmetric on v%d, v%d", i, j);
		}
	/* transitive, on every ordering of the triple */
	for (i = 0; i < 3; i++)
		for (j = 0; j < 3; j++)
			for (k = 0; k < 3; k++)
			{
				int			ij = sched_version_cmp(&v[i], &v[j]);
				int			jk = sched_version_cmp(&v[j], &v[k]);
				int			ik = sched_version_cmp(&v[i], &v[k]);

				if (ij <= 0 && jk <= 0)
					FZ_CHECK(ik <= 0 && (ik == 0) == (ij == 0 && jk == 0),
							 "not transitive: cmp(v%d,v%d)=%d cmp(v%d,v%d)=%d cmp(v%d,v%d)=%d",
							 i, j, ij, j, k, jk, i, k, ik);
			}

	/* bounds from the three versions: in_range, then formatted and parsed back */
	nb = fz_u8(r) % (SCHED_MAX_VERSION_BOUNDS + 1);
	for (i = 0; i < nb; i++)
	{
		bounds[i].cmp = (SchedVersionCmp) (fz_u8(r) % 6);
		bounds[i].version = v[fz_u8(r) % 3];
	}
	for (i = 0; i < 3; i++)
	{
		bool		in = sched_version_in_range(&v[i], bounds, nb);

		FZ_CHECK(in == lx_ref_in_range(&v[i], bounds, nb), "in_range(v%d, %d bounds) = %d, reference %d",
				 i, nb, in, !in);
		all = true;
		for (j = 0; j < nb; j++)
			all = all && sched_version_in_range(&v[i], &bounds[j], 1);
		FZ_CHECK(in == all, "in_range(v%d) over %d bounds is not the conjunction of each", i, nb);
	}
	if (nb == 0)
		return;
	len = 0;
	for (i = 0; i < nb; i++)
	{
		uint8_t		m = fz_u8(r);

		if (i > 0)
			text[len++] = ',';
		len += (size_t) snprintf(text + len, sizeof text - len, "%.*s%s%.*s", (int) (m & 3), "   ",
								 bounds[i].cmp == SCHED_VCMP_EQ && (m & 4) ? "" : opnames[bounds[i].cmp],
								 (int) ((m >> 3) & 3), "   ");
		len += lx_format_version(r, text + len, &bounds[i].version);
		len += (size_t) snprintf(text + len, sizeof text - len, "%.*s", (int) ((m >> 5) & 3), "   ");
	}
	n = lx_range_parse(text, got);
	lx_check_range_equal(text, n, got, nb, bounds);
	/* one bound more than SCHED_MAX_VERSION_BOUNDS, or a trailing comma: not a range */
	snprintf(text + len, sizeof text - len, "%s", nb == SCHED_MAX_VERSION_BOUNDS ? ",1" : ",");
	n = lx_range_parse(text, got);
	FZ_CHECK(n == -1, "\"%s\" parsed as %d bounds", text, n);
}

typedef struct LxMap
{
	int			n;
	SchedLabel	items[LX_MAXLABELS];
	const char *values[LX_MAXLABELS][LX_MAXVALUES];
	char		raw[LX_MAXLABELS][LX_MAXVALUES][LX_VAL];
	SchedVersionBound bounds[LX_MAXLABELS][SCHED_MAX_VERSION_BOUNDS];
} LxMap;

static LxMap lx_have,
			lx_req;

/* A label value: mostly the pool, sometimes raw bytes into raw. */
static const char *
lx_value(FzReader *r, char *raw)
{
	uint8_t		m = fz_u8(r);
	char		s[LX_STR];

	if (m < 0xF0)
		return lx_values[m % LX_NVALUES];
	lx_string(r, s);
	s[LX_VAL - 1] = '\0';		/* cut to LX_VAL - 1 bytes */
	memcpy(raw, s, strlen(s) + 1);
	return raw;
}

/* The double next to x, above or below (nextafter without libm). */
static double
lx_next_double(double x, bool up)
{
	uint64_t	bits;

	if (x == 0.0)
		return up ? 4.9406564584124654e-324 : -4.9406564584124654e-324;
	memcpy(&bits, &x, sizeof bits);
	if ((x > 0) == up)
		bits++;
	else
		bits--;
	memcpy(&x, &bits, sizeof x);
	return x;
}

/* A value asked of key: often the node's own value there (node_value), so that matches happen. */
static const char *
lx_req_value(FzReader *r, char *raw, const char *node_value)
{
	if ((fz_u8(r) & 1) == 0 && node_value != NULL)
		return node_value;
	return lx_value(r, raw);
}

/*
 * A label map of up to LX_MAXLABELS entries, deduplicated and sorted: plain labels, or
 * (node not NULL) expressions of every operator whose strings, numbers and versions are
 * often those of the node's value for the key, or next to it.
 */
static void
lx_decode_map(FzReader *r, LxMap *m, const SchedLabelSet *node)
{
	int			i,
				k;

	memset(m->items, 0, sizeof m->items);
	m->n = fz_u8(r) % (LX_MAXLABELS + 1);
	for (i = 0; i < m->n; i++)
	{
		SchedLabel *l = &m->items[i];
		uint8_t		op = node != NULL ? fz_u8(r) : 0;
		uint8_t		kb = fz_u8(r);
		const char *nv;
		double		x;
		SchedVersion v,
					nver;
		bool		nv_version;

		/* an expression's key is mostly one of the node's */
		if (node != NULL && node->count > 0 && (kb & 1) == 0)
			l->key = node->items[(kb >> 1) % node->count].key;
		else
			l->key = lx_keys[(kb >> 1) % LX_NKEYS];
		l->op = (SchedLabelOp) (op % 8);
		nv = node != NULL ? ref_label_value(node, l->key) : NULL;
		nv_version = nv != NULL && lx_ref_version(nv, strlen(nv), &nver);
		switch (l->op)
		{
			case SCHED_LABEL_EQ:
				l->value = lx_req_value(r, m->raw[i][0], nv);
				break;
			case SCHED_LABEL_IN:
			case SCHED_LABEL_NOT_IN:
				{
					uint8_t		c = fz_u8(r);

					l->nvalues = 1 + (c & 0x80 ? c % LX_MAXVALUES : c % 6);
					for (k = 0; k < l->nvalues; k++)
						m->values[i][k] = lx_req_value(r, m->raw[i][k], nv);
					l->values = m->values[i];
				}
				break;
			case SCHED_LABEL_EXISTS:
			case SCHED_LABEL_NOT_EXISTS:
				break;
			case SCHED_LABEL_GT:
			case SCHED_LABEL_LT:
				{
					uint8_t		c = fz_u8(r);

					if ((c & 3) != 3 && nv != NULL && lx_ref_number(nv, &x))
					{
						/* the double just below the node's number, the number, the one above */
						if ((c & 3) != 1)
							x = lx_next_double(x, (c & 3) == 2);
						l->number = isfinite(x) ? x : 0.0;
					}
					else if ((c & 4) && lx_ref_number(lx_values[(c >> 3) % LX_NVALUES], &x))
						l->number = x;
					else
						l->number = lx_numbers[(c >> 3) % LX_NNUMBERS];
				}
				break;
			case SCHED_LABEL_VERSION:
				{
					uint8_t		c = fz_u8(r);

					/* mostly one or two bounds, which a version meets more often */
					l->nbounds = 1 + (c & 0x80 ? c % SCHED_MAX_VERSION_BOUNDS : c % 2);
				}
				for (k = 0; k < l->nbounds; k++)
				{
					uint8_t		c = fz_u8(r);
					const char *s = lx_values[fz_u8(r) % LX_NVALUES];
					SchedVersion *bv = &m->bounds[i][k].version;

					m->bounds[i][k].cmp = (SchedVersionCmp) (c % 6);
					if ((c & 0x30) != 0x30 && nv_version)
					{
						/* the node's version, or one part more, or a trailing .0 or .1 */
						*bv = nver;
						if ((c & 0x30) == 0x10 && bv->parts[bv->nparts - 1] < SCHED_MAX_VERSION_PART)
							bv->parts[bv->nparts - 1]++;
						else if ((c & 0x30) == 0x20 && bv->nparts < SCHED_MAX_VERSION_PARTS)
							bv->parts[bv->nparts++] = (c >> 6) & 1;
					}
					else if ((c & 0x40) && lx_ref_version(s, strlen(s), &v))
						*bv = v;
					else
						lx_decode_version(r, bv);
				}
				l->bounds = m->bounds[i];
				break;
		}
	}
	m->n = fz_dedupe_sort(m->items, m->n);
}

static SchedLabelSet
lx_set(LxMap *m)
{
	SchedLabelSet s;

	s.count = m->n;
	s.items = m->n > 0 ? m->items : NULL;
	return s;
}

static void
lx_check_labels(FzReader *r)
{
	SchedLabelSet have,
				req,
				empty = {0, NULL};
	SchedLabel	pref[LX_MAXLABELS];
	SchedLabelSet prefs;
	SchedPlacement p;
	SchedCandidate c;
	SchedReasonSet reasons;
	int			first,
				want,
				i;

	lx_decode_map(r, &lx_have, NULL);
	have = lx_set(&lx_have);
	lx_decode_map(r, &lx_req, &have);
	req = lx_set(&lx_req);

	for (i = 0; i < req.count; i++)
	{
		bool		got = sched_label_satisfied(&req.items[i], &have);
		bool		ref = lx_ref_satisfied(&req.items[i], &have);
		const char *v = ref_label_value(&have, req.items[i].key);

		FZ_CHECK(got == ref, "satisfied(\"%s\" op %d) = %d, reference %d (node value %s%s%s)",
				 req.items[i].key, (int) req.items[i].op, got, ref, v ? "\"" : "", v ? v : "absent",
				 v ? "\"" : "");
		FZ_CHECK(sched_label_satisfied(&req.items[i], &empty) ==
				 (req.items[i].op == SCHED_LABEL_NOT_IN || req.items[i].op == SCHED_LABEL_NOT_EXISTS),
				 "op %d on a node without labels", (int) req.items[i].op);
	}

	first = sched_labels_first_unmet(&have, &req);
	want = lx_ref_first_unmet(&have, &req);
	FZ_CHECK(first == want, "first_unmet = %d, reference %d (of %d)", first, want, req.count);
	FZ_CHECK(sched_labels_first_unmet(&have, &empty) == -1, "first_unmet of no requirement is not -1");

	fz_placement_base(&p);
	fz_candidate_base(&c, "node-a");
	c.labels = have;
	p.required_labels = req;
	reasons = sched_admission(&p, &c);
	FZ_CHECK(reasons == (want >= 0 ? REF_BIT(SCHED_R_REQUIRED_LABELS_MISMATCH) : 0),
			 "reasons 0x%x with the first unmet expression at %d", (unsigned) reasons, want);

	/* preferred labels are plain: the node's own labels, any op, all match */
	for (i = 0; i < have.count; i++)
	{
		pref[i] = have.items[i];
		pref[i].op = (SchedLabelOp) (fz_u8(r) % 8);
	}
	prefs.count = have.count;
	prefs.items = have.count > 0 ? pref : NULL;
	FZ_CHECK(sched_labels_matching(&have, &prefs) == have.count,
			 "preferred labels with ops set match %d of %d", sched_labels_matching(&have, &prefs),
			 have.count);
	p.preferred_labels = prefs;
	FZ_CHECK(sched_admission(&p, &c) == reasons, "preferred labels changed admission");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FzReader	r;
	char		s[LX_STR];
	int			first,
				k;

	fz_target_name = "fuzz_label_expr";
	fz_init(&r, data, size);
	/* the part that comes first gets the input's bytes before they run out (zeros) */
	first = fz_u8(&r) % 3;
	for (k = 0; k < 3; k++)
		switch ((first + k) % 3)
		{
			case 0:
				lx_check_labels(&r);
				break;
			case 1:
				lx_check_versions(&r);
				break;
			default:
				lx_string(&r, s);
				lx_check_parsers(s);
				lx_string(&r, s);
				lx_check_parsers(s);
				break;
		}
	return 0;
}
