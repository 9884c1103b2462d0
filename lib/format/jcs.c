/*
 * jcs.c - RFC 8785 JSON Canonicalization Scheme, used to fingerprint
 * request bodies: two bodies that mean the same JSON value (member order,
 * whitespace, escapes, number spelling aside) canonicalise to the same bytes.
 *
 * yajl does the lexing (and most UTF-8 checking); the value is collected in
 * a flat array of nodes so that neither building, emitting nor freeing it
 * recurses, whatever the nesting.
 */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "internal.h"

/* --- numbers ------------------------------------------------------------- */

/* Longest output: "-0.0000012345678901234567" or 21 digits plus sign. */
#define NUM_OUT_MAX	40

#define NUM_INVALID	(-1)	/* not a JSON number, or not finite */
#define NUM_NOMEM	(-2)

static pthread_once_t	 c_locale_once = PTHREAD_ONCE_INIT;
static locale_t		 c_locale;

static void
c_locale_init(void)
{
	c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/*
 * strtod() and printf() follow LC_NUMERIC; an application that calls
 * setlocale() must not change what "1.5" means to the fingerprint.
 */
static locale_t
c_locale_enter(void)
{
	pthread_once(&c_locale_once, c_locale_init);
	if (c_locale == (locale_t)0)
		return (locale_t)0;
	return uselocale(c_locale);
}

static void
c_locale_leave(locale_t old)
{
	if (old != (locale_t)0)
		uselocale(old);
}

/* The RFC 8259 number grammar; strtod() alone accepts far more. */
static int
num_syntax_ok(const char *s, size_t len)
{
	size_t	 i = 0;

	if (i < len && s[i] == '-')
		i++;
	if (i < len && s[i] == '0')
		i++;
	else if (i < len && s[i] >= '1' && s[i] <= '9')
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
	else
		return 0;
	if (i < len && s[i] == '.') {
		if (++i >= len || s[i] < '0' || s[i] > '9')
			return 0;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < len && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i >= len || s[i] < '0' || s[i] > '9')
			return 0;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	return i == len;
}

/*
 * Add one unit in the last place to the mantissa of "%.*e" output in e
 * ("d.ddde+XX"), in place.  A carry out of the first digit ("9.99e+01")
 * becomes "1.00e+02".  Returns 0, or -1 if the text is not as expected.
 */
static int
mantissa_inc(char *e, size_t size)
{
	char	*x, *p;

	if ((x = strchr(e, 'e')) == NULL)
		return -1;
	for (p = x - 1; p >= e; p--) {
		if (*p == '.')
			continue;
		if (*p != '9') {
			(*p)++;
			return 0;
		}
		*p = '0';
	}
	/* All nines: now "0.00e+XX", and the value is 10^(XX+1). */
	e[0] = '1';
	if (snprintf(x, size - (size_t)(x - e), "e%+03d", atoi(x + 1) + 1) < 0)
		return -1;
	return 0;
}

/*
 * Is some prec-digit decimal read back as a (positive, finite)?  If so it
 * is left in e as "%.*e" text: the nearest one, as ECMAScript wants.
 */
static int
num_try(double a, int prec, char *e, size_t esize)
{
	double	 r;
	int	 m;

	snprintf(e, esize, "%.*e", prec - 1, a);
	r = strtod(e, NULL);
	if (r == a)
		return 1;
	/*
	 * At a power of two the doubles below are twice as dense as those
	 * above, so the nearest decimal (below) can miss while the next one
	 * up still rounds to a: 2^-1017 is 7.120236347223045e-307, not
	 * 7.1202363472230444e-307.  Elsewhere the interval is symmetric.
	 */
	return r < a && frexp(a, &m) == 0.5 && mantissa_inc(e, esize) == 0 &&
	    strtod(e, NULL) == a;
}

/*
 * Shortest decimal digits that round-trip to a (positive, finite), as
 * ECMAScript Number::toString wants them: digits (no trailing zeros) and
 * the exponent n such that a ~= 0.digits * 10^n.  maxprec (<= 17) digits
 * are known to be enough.
 */
static void
num_shortest(double a, int maxprec, char *digits, size_t dsize, int *n)
{
	char	 e[48], *x, *p;
	size_t	 k;
	int	 lo = 1, hi = maxprec, mid;

	/*
	 * If prec digits can hit a, so can prec + 1 (the decimals of prec
	 * digits are among them), so bisect: 17-digit bodies are common and
	 * each try is a printf and a strtod.
	 */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (num_try(a, mid, e, sizeof(e)))
			hi = mid;
		else
			lo = mid + 1;
	}
	if (!num_try(a, lo, e, sizeof(e)))
		snprintf(e, sizeof(e), "%.16e", a);	/* always enough */
	k = 0;
	for (p = e; *p != '\0' && *p != 'e' && k + 1 < dsize; p++)
		if (*p >= '0' && *p <= '9')
			digits[k++] = *p;
	while (k > 1 && digits[k - 1] == '0')
		k--;
	digits[k] = '\0';
	x = strchr(e, 'e');
	*n = (x != NULL ? atoi(x + 1) : 0) + 1;
}

/*
 * Significant digits in JSON number text (at least 1), at most 17: the
 * text itself is a decimal of that many digits which reads back as its
 * double, so no more are ever needed.
 */
static int
num_sigdigits(const char *s, size_t len)
{
	size_t	 i, first = 0, last = 0, n = 0;

	for (i = 0; i < len && s[i] != 'e' && s[i] != 'E'; i++) {
		if (s[i] < '0' || s[i] > '9')
			continue;
		n++;
		if (s[i] != '0') {
			if (first == 0)
				first = n;
			last = n;
		}
	}
	if (first == 0 || last - first + 1 > 17)
		return 17;
	return (int)(last - first + 1);
}

/* Format a finite double as ECMAScript does (Number::toString). */
static size_t
num_es_format(double d, int maxprec, char *out)
{
	char	 digits[24];
	size_t	 o = 0, i, k;
	int	 n, j;

	if (d == 0)	/* also -0 */
		return (size_t)snprintf(out, NUM_OUT_MAX, "0");
	if (d < 0) {
		out[o++] = '-';
		d = -d;
	}
	/*
	 * A whole number below 2^53 is its own shortest round-trip decimal,
	 * and ECMAScript writes it out in full: no printf, no strtod (most
	 * amounts are such).
	 */
	if (d < 9007199254740992.0 && d == (double)(long long)d)
		return o + idem_fmt_int(out + o, (long long)d);
	num_shortest(d, maxprec, digits, sizeof(digits), &n);
	k = strlen(digits);
	if ((int)k <= n && n <= 21) {
		/* Integer: digits then n - k zeros. */
		memcpy(out + o, digits, k);
		o += k;
		for (j = (int)k; j < n; j++)
			out[o++] = '0';
	} else if (0 < n && n <= 21) {
		memcpy(out + o, digits, (size_t)n);
		o += (size_t)n;
		out[o++] = '.';
		memcpy(out + o, digits + n, k - (size_t)n);
		o += k - (size_t)n;
	} else if (-6 < n && n <= 0) {
		out[o++] = '0';
		out[o++] = '.';
		for (j = 0; j < -n; j++)
			out[o++] = '0';
		memcpy(out + o, digits, k);
		o += k;
	} else {
		out[o++] = digits[0];
		if (k > 1) {
			out[o++] = '.';
			for (i = 1; i < k; i++)
				out[o++] = digits[i];
		}
		o += (size_t)snprintf(out + o, NUM_OUT_MAX - o, "e%c%d",
		    n - 1 >= 0 ? '+' : '-', abs(n - 1));
	}
	out[o] = '\0';
	return o;
}

/* Canonical text of JSON number num into out; its length or NUM_*. */
static int
num_canon(const char *num, size_t len, char out[NUM_OUT_MAX])
{
	char		 small[64], *copy, *end;
	double		 d;
	locale_t	 old;
	int		 n;

	if (num == NULL || !num_syntax_ok(num, len))
		return NUM_INVALID;
	if (len < sizeof(small))
		copy = small;
	else if ((copy = malloc(len + 1)) == NULL)
		return NUM_NOMEM;
	memcpy(copy, num, len);
	copy[len] = '\0';

	old = c_locale_enter();
	/* Underflow (ERANGE) is fine: 1e-400 is nearest to 0, as in ES. */
	d = strtod(copy, &end);
	if (end != copy + len || !isfinite(d))
		n = NUM_INVALID;
	else
		n = (int)num_es_format(d, num_sigdigits(num, len), out);
	c_locale_leave(old);

	if (copy != small)
		free(copy);
	return n;
}

int
idem_jcs_number(const char *num, size_t len, struct idem_buf *out)
{
	char	 s[NUM_OUT_MAX];
	int	 n;

	if ((n = num_canon(num, len, s)) < 0)
		return -1;
	return idem_buf_add(out, s, (size_t)n);
}

/* --- strings ------------------------------------------------------------- */

/*
 * Strict UTF-8 (RFC 3629): yajl lets overlong forms, UTF-8-encoded
 * surrogates (which is also how it passes on an escaped lone low surrogate)
 * and code points above U+10FFFF through.
 */
static int
utf8_valid(const unsigned char *s, size_t len)
{
	size_t		 i = 0;
	unsigned char	 c;

	while (i < len) {
		c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			if (len - i < 2 || (s[i + 1] & 0xc0) != 0x80)
				return 0;
			i += 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			if (len - i < 3 || (s[i + 1] & 0xc0) != 0x80 ||
			    (s[i + 2] & 0xc0) != 0x80)
				return 0;
			if (c == 0xe0 && s[i + 1] < 0xa0)	/* overlong */
				return 0;
			if (c == 0xed && s[i + 1] > 0x9f)	/* surrogate */
				return 0;
			i += 3;
		} else if (c >= 0xf0 && c <= 0xf4) {
			if (len - i < 4 || (s[i + 1] & 0xc0) != 0x80 ||
			    (s[i + 2] & 0xc0) != 0x80 ||
			    (s[i + 3] & 0xc0) != 0x80)
				return 0;
			if (c == 0xf0 && s[i + 1] < 0x90)	/* overlong */
				return 0;
			if (c == 0xf4 && s[i + 1] > 0x8f)	/* > U+10FFFF */
				return 0;
			i += 4;
		} else
			return 0;
	}
	return 1;
}

static int
hex4(const char *s, size_t avail, unsigned *v)
{
	size_t	 i;
	int	 c;

	if (avail < 4)
		return -1;
	*v = 0;
	for (i = 0; i < 4; i++) {
		c = (unsigned char)s[i];
		if (c >= '0' && c <= '9')
			c -= '0';
		else if (c >= 'a' && c <= 'f')
			c -= 'a' - 10;
		else if (c >= 'A' && c <= 'F')
			c -= 'A' - 10;
		else
			return -1;
		*v = *v << 4 | (unsigned)c;
	}
	return 0;
}

/*
 * yajl turns an escaped lone high surrogate into "?" and pairs a high
 * surrogate with whatever \u escape follows, so the decoded strings cannot
 * show those; look at the escapes in the raw text (exact for valid JSON;
 * yajl refuses the rest anyway).  Returns -1 if some \uD800-\uDFFF escape
 * is not half of a proper pair.
 */
static int
escapes_valid(const char *in, size_t len)
{
	size_t	 i;
	int	 instr = 0;
	unsigned v, lo;

	for (i = 0; i < len; i++) {
		if (!instr) {
			if (in[i] == '"')
				instr = 1;
			continue;
		}
		if (in[i] == '"') {
			instr = 0;
			continue;
		}
		if (in[i] != '\\')
			continue;
		/* A malformed escape is left for yajl to report. */
		if (++i >= len)
			return 0;
		if (in[i] != 'u')
			continue;
		if (hex4(in + i + 1, len - i - 1, &v) == -1)
			return 0;
		i += 4;
		if (v >= 0xdc00 && v <= 0xdfff)
			return -1;
		if (v >= 0xd800 && v <= 0xdbff) {
			if (len - i - 1 < 6 || in[i + 1] != '\\' ||
			    in[i + 2] != 'u' ||
			    hex4(in + i + 3, len - i - 3, &lo) == -1 ||
			    lo < 0xdc00 || lo > 0xdfff)
				return -1;
			i += 6;
		}
	}
	return 0;
}

/* Next code point of valid UTF-8 at *p (advanced), as UTF-16's first unit
 * would order it; *cp gets the code point itself. */
static unsigned
utf8_next(const unsigned char **p, unsigned *cp)
{
	const unsigned char	*s = *p;
	unsigned		 c;

	if (s[0] < 0x80) {
		c = s[0];
		s += 1;
	} else if (s[0] < 0xe0) {
		c = (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu);
		s += 2;
	} else if (s[0] < 0xf0) {
		c = (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 |
		    (s[2] & 0x3fu);
		s += 3;
	} else {
		c = (s[0] & 0x07u) << 18 | (s[1] & 0x3fu) << 12 |
		    (s[2] & 0x3fu) << 6 | (s[3] & 0x3fu);
		s += 4;
	}
	*p = s;
	*cp = c;
	return c >= 0x10000 ? 0xd800 + ((c - 0x10000) >> 10) : c;
}

/* --- the value tree ------------------------------------------------------ */

enum jtype { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };

struct jkid {
	char	*key;		/* member name (decoded), NULL in arrays */
	size_t	 klen;
	size_t	 node;		/* index into jctx.nodes */
};

struct jnode {
	enum jtype	 type;
	char		*s;	/* J_STR: decoded bytes; J_NUM: canonical */
	size_t		 slen;
	struct jkid	*kids;
	size_t		 nkids, kcap;
};

struct jctx {
	struct jnode	*nodes;
	size_t		 nnodes, ncap;
	size_t		 max_values;	/* nodes allowed in all */
	size_t		*open;		/* indexes of the open containers */
	size_t		 depth, ocap;
	size_t		 maxdepth;	/* deepest nesting seen */
	unsigned	 limit;
	char		*key;		/* member name awaiting its value */
	size_t		 klen;
	const char	*why;		/* set when a callback cancels */
	enum idem_jcs_result why_rc;	/* and what kind of refusal it is */
	char		 whybuf[96];
};

/* Sort by UTF-16 code units (RFC 8785 3.2.3); names are valid UTF-8. */
static int
kid_cmp(const void *va, const void *vb)
{
	const struct jkid	*a = va, *b = vb;
	const unsigned char	*p = (const unsigned char *)a->key;
	const unsigned char	*q = (const unsigned char *)b->key;
	const unsigned char	*pe = p + a->klen, *qe = q + b->klen;
	unsigned		 ua, ub, ca, cb;

	while (p < pe && q < qe) {
		ua = utf8_next(&p, &ca);
		ub = utf8_next(&q, &cb);
		if (ca == cb)
			continue;
		if (ua != ub)
			return ua < ub ? -1 : 1;
		/* Same high surrogate: low ones order as the code points. */
		return ca < cb ? -1 : 1;
	}
	if (p < pe)
		return 1;
	if (q < qe)
		return -1;
	return 0;
}

/* p grown to hold need elements of size bytes, or NULL (p still valid). */
static void *
grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t	 n;

	if (need <= *cap)
		return p;
	n = *cap ? *cap : 8;
	while (n < need) {
		if (n > (size_t)-1 / 2 / size)
			return NULL;
		n *= 2;
	}
	if ((p = realloc(p, n * size)) == NULL)
		return NULL;
	*cap = n;
	return p;
}

static int
cancel_as(struct jctx *c, enum idem_jcs_result rc, const char *why)
{
	c->why = why;
	c->why_rc = rc;
	return 0;
}

static int
cancel(struct jctx *c, const char *why)
{
	return cancel_as(c, IDEM_JCS_INVALID, why);
}

static int
cancel_nomem(struct jctx *c)
{
	return cancel_as(c, IDEM_JCS_NOMEM, "out of memory");
}

/*
 * Handlers read C strings: a NUL inside a string or name would hide the
 * rest of it from them while the fingerprint still covers it.
 */
static int
has_nul(const unsigned char *s, size_t len)
{
	return memchr(s, '\0', len) != NULL;
}

/*
 * Add a node of type t (taking s, which is freed on failure) and hang it
 * on the innermost open container.  Returns the index or -1.
 */
static long
add_node(struct jctx *c, enum jtype t, char *s, size_t slen)
{
	struct jnode	*parent, *n;
	struct jkid	*kids;
	size_t		 idx = c->nnodes;

	if (c->depth == 0 && c->nnodes > 0) {
		/* yajl refuses a second top-level value; be sure anyway. */
		free(s);
		cancel(c, "more than one JSON value");
		return -1;
	}
	/* Checked before growing: work and memory stop at the cap. */
	if (c->nnodes >= c->max_values) {
		free(s);
		snprintf(c->whybuf, sizeof(c->whybuf), "more than %zu JSON "
		    "values (members and array elements)", c->max_values);
		cancel_as(c, IDEM_JCS_TOO_MANY, c->whybuf);
		return -1;
	}
	if ((n = grow(c->nodes, &c->ncap, c->nnodes + 1,
	    sizeof(*c->nodes))) == NULL)
		goto nomem;
	c->nodes = n;
	if (c->depth > 0) {
		parent = &c->nodes[c->open[c->depth - 1]];
		if (parent->type == J_OBJ && c->key == NULL) {
			free(s);
			cancel(c, "member without a name");
			return -1;
		}
		if ((kids = grow(parent->kids, &parent->kcap,
		    parent->nkids + 1, sizeof(*parent->kids))) == NULL)
			goto nomem;
		parent->kids = kids;
		kids[parent->nkids].key = NULL;
		kids[parent->nkids].klen = 0;
		if (parent->type == J_OBJ) {
			/* The pending name now belongs to the parent. */
			kids[parent->nkids].key = c->key;
			kids[parent->nkids].klen = c->klen;
			c->key = NULL;
		}
		kids[parent->nkids].node = idx;
		parent->nkids++;
	}
	n = &c->nodes[idx];
	memset(n, 0, sizeof(*n));
	n->type = t;
	n->s = s;
	n->slen = slen;
	c->nnodes++;
	return (long)idx;
nomem:
	free(s);
	cancel_nomem(c);
	return -1;
}

static char *
dup_bytes(const void *p, size_t len)
{
	char	*s;

	if ((s = malloc(len + 1)) == NULL)
		return NULL;
	memcpy(s, p, len);
	s[len] = '\0';
	return s;
}

static int
cb_null(void *ctx)
{
	return add_node(ctx, J_NULL, NULL, 0) >= 0;
}

static int
cb_boolean(void *ctx, int v)
{
	return add_node(ctx, v ? J_TRUE : J_FALSE, NULL, 0) >= 0;
}

static int
cb_number(void *ctx, const char *num, size_t len)
{
	char	 buf[NUM_OUT_MAX], *s;
	int	 n;

	if ((n = num_canon(num, len, buf)) == NUM_NOMEM)
		return cancel_nomem(ctx);
	if (n < 0)
		return cancel(ctx, "number out of range");
	if ((s = dup_bytes(buf, (size_t)n)) == NULL)
		return cancel_nomem(ctx);
	return add_node(ctx, J_NUM, s, (size_t)n) >= 0;
}

static int
cb_string(void *ctx, const unsigned char *str, size_t len)
{
	char	*s;

	if (!utf8_valid(str, len))
		return cancel(ctx, "invalid UTF-8 in string");
	if (has_nul(str, len))
		return cancel(ctx, "U+0000 (\\u0000) in a string");
	if ((s = dup_bytes(str, len)) == NULL)
		return cancel_nomem(ctx);
	return add_node(ctx, J_STR, s, len) >= 0;
}

static int
cb_map_key(void *ctx, const unsigned char *str, size_t len)
{
	struct jctx	*c = ctx;

	if (!utf8_valid(str, len))
		return cancel(c, "invalid UTF-8 in member name");
	if (has_nul(str, len))
		return cancel(c, "U+0000 (\\u0000) in a member name");
	free(c->key);
	if ((c->key = dup_bytes(str, len)) == NULL)
		return cancel_nomem(c);
	c->klen = len;
	return 1;
}

static int
open_container(struct jctx *c, enum jtype t)
{
	size_t	*o;
	long	 idx;

	/* Refuse before going deeper, so a "[[[[..." bomb stops at once. */
	if (c->depth >= c->limit) {
		snprintf(c->whybuf, sizeof(c->whybuf),
		    "nesting deeper than %u levels", c->limit);
		return cancel(c, c->whybuf);
	}
	if ((o = grow(c->open, &c->ocap, c->depth + 1,
	    sizeof(*c->open))) == NULL)
		return cancel_nomem(c);
	c->open = o;
	if ((idx = add_node(c, t, NULL, 0)) < 0)
		return 0;
	c->open[c->depth++] = (size_t)idx;
	if (c->depth > c->maxdepth)
		c->maxdepth = c->depth;
	return 1;
}

static int
cb_start_map(void *ctx)
{
	return open_container(ctx, J_OBJ);
}

static int
cb_start_array(void *ctx)
{
	return open_container(ctx, J_ARR);
}

static int
cb_end_map(void *ctx)
{
	struct jctx	*c = ctx;
	struct jnode	*n = &c->nodes[c->open[--c->depth]];
	size_t		 i;

	if (n->nkids > 1)
		qsort(n->kids, n->nkids, sizeof(*n->kids), kid_cmp);
	/* Sorted, so equal names are neighbours. */
	for (i = 1; i < n->nkids; i++)
		if (n->kids[i].klen == n->kids[i - 1].klen &&
		    memcmp(n->kids[i].key, n->kids[i - 1].key,
		    n->kids[i].klen) == 0)
			return cancel(c, "duplicate member name");
	return 1;
}

static int
cb_end_array(void *ctx)
{
	struct jctx	*c = ctx;

	c->depth--;
	return 1;
}

static const yajl_callbacks jcs_callbacks = {
	cb_null,
	cb_boolean,
	NULL,			/* yajl_integer: unused with yajl_number */
	NULL,			/* yajl_double */
	cb_number,
	cb_string,
	cb_start_map,
	cb_map_key,
	cb_end_map,
	cb_start_array,
	cb_end_array,
};

static void
jctx_free(struct jctx *c)
{
	size_t	 i, j;

	/* Flat: every node is freed by this one loop, no recursion. */
	for (i = 0; i < c->nnodes; i++) {
		free(c->nodes[i].s);
		for (j = 0; j < c->nodes[i].nkids; j++)
			free(c->nodes[i].kids[j].key);
		free(c->nodes[i].kids);
	}
	free(c->nodes);
	free(c->open);
	free(c->key);
}

static int
emit_scalar(const struct jnode *n, struct idem_buf *out)
{
	switch (n->type) {
	case J_NULL:
		return idem_buf_add(out, "null", 4);
	case J_FALSE:
		return idem_buf_add(out, "false", 5);
	case J_TRUE:
		return idem_buf_add(out, "true", 4);
	case J_NUM:
		return idem_buf_add(out, n->s, n->slen);
	case J_STR:
		return idem_buf_add_jstr(out, n->s, n->slen);
	case J_ARR:
		return idem_buf_addc(out, '[');
	case J_OBJ:
		return idem_buf_addc(out, '{');
	}
	return -1;
}

/* The pointers a pruned form leaves out (NULL: none). */
struct jexclude {
	const char *const	*ptr;
	size_t			 n;
};

/* Append "/" and the RFC 6901 escaped reference of kid i of n to path. */
static int
path_push(struct idem_buf *path, const struct jnode *n, size_t i)
{
	const struct jkid	*k = &n->kids[i];
	size_t			 j;

	if (idem_buf_addc(path, '/') == -1)
		return -1;
	if (n->type == J_ARR)
		return idem_buf_addf(path, "%zu", i);
	for (j = 0; j < k->klen; j++)
		if ((k->key[j] == '~' ? idem_buf_add(path, "~0", 2) :
		    k->key[j] == '/' ? idem_buf_add(path, "~1", 2) :
		    idem_buf_addc(path, k->key[j])) == -1)
			return -1;
	return 0;
}

static int
path_excluded(const struct idem_buf *path, const struct jexclude *ex)
{
	size_t	 i;

	for (i = 0; i < ex->n; i++)
		if (strlen(ex->ptr[i]) == path->len &&
		    memcmp(ex->ptr[i], path->p, path->len) == 0)
			return 1;
	return 0;
}

int
idem_jcs_pointer_ok(const char *p)
{
	size_t	 i;

	if (p == NULL || p[0] != '/' || p[1] == '\0')
		return 0;
	for (i = 1; p[i] != '\0'; i++) {
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return 0;
		if (p[i] == '~' && p[i + 1] != '0' && p[i + 1] != '1')
			return 0;
	}
	return 1;
}

/* One child k of container n (kid its node): after a comma unless it is
 * the first written, its name in an object, its scalar or opening. */
static int
emit_member(struct idem_buf *out, const struct jnode *n,
    const struct jkid *k, const struct jnode *kid, int first)
{
	if (!first && idem_buf_addc(out, ',') == -1)
		return -1;
	if (n->type == J_OBJ &&
	    (idem_buf_add_jstr(out, k->key, k->klen) == -1 ||
	    idem_buf_addc(out, ':') == -1))
		return -1;
	return emit_scalar(kid, out);
}

/*
 * Write the tree out with an explicit stack of (container, next child),
 * leaving out the members ex names (ex NULL: none; then path is unused).
 */
static int
emit(const struct jctx *c, struct idem_buf *out, const struct jexclude *ex)
{
	struct frame {
		size_t	 node;
		size_t	 next;
		size_t	 written;	/* children written so far */
		size_t	 plen;		/* the container's pointer length */
	}			*st;
	const struct jnode	*n, *kid;
	const struct jkid	*k;
	struct idem_buf		 path = { 0 };
	size_t			 sp, i;
	int			 rc = -1;

	if (emit_scalar(&c->nodes[0], out) == -1)
		return -1;
	if (c->nodes[0].type != J_ARR && c->nodes[0].type != J_OBJ)
		return 0;
	if ((st = calloc(c->maxdepth, sizeof(*st))) == NULL)
		return -1;
	memset(&st[0], 0, sizeof(st[0]));
	sp = 1;
	while (sp > 0) {
		n = &c->nodes[st[sp - 1].node];
		if (st[sp - 1].next == n->nkids) {
			if (idem_buf_addc(out, n->type == J_OBJ ? '}' : ']')
			    == -1)
				goto done;
			sp--;
			continue;
		}
		i = st[sp - 1].next++;
		k = &n->kids[i];
		if (ex != NULL) {
			path.len = st[sp - 1].plen;
			if (path_push(&path, n, i) == -1)
				goto done;
			if (path_excluded(&path, ex))
				continue;
		}
		kid = &c->nodes[k->node];
		if (emit_member(out, n, k, kid, st[sp - 1].written++ == 0) ==
		    -1)
			goto done;
		if (kid->type == J_ARR || kid->type == J_OBJ) {
			/* sp < maxdepth: the parser counted this nesting. */
			st[sp].node = k->node;
			st[sp].next = 0;
			st[sp].written = 0;
			st[sp].plen = path.len;
			sp++;
		}
	}
	rc = 0;
done:
	free(st);
	idem_buf_free(&path);
	return rc;
}

static void
set_err(char *err, size_t errlen, const char *msg)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
}

static int
json_blank(const char *in, size_t len)
{
	size_t	 i;

	for (i = 0; i < len; i++)
		if (in[i] != ' ' && in[i] != '\t' && in[i] != '\n' &&
		    in[i] != '\r')
			return 0;
	return 1;
}

/* Back to its length on entry, NUL-terminated as before. */
static void
buf_truncate(struct idem_buf *b, size_t len)
{
	if (b == NULL)
		return;
	b->len = len;
	if (b->p != NULL)
		b->p[len] = '\0';
}

enum idem_jcs_result
idem_jcs_canonicalize(const char *in, size_t len,
    const struct idem_jcs_limits *lim, struct idem_buf *out, char *err,
    size_t errlen)
{
	return idem_jcs_canonicalize_pruned(in, len, lim, NULL, 0, out, NULL,
	    err, errlen);
}

/* What makes a text invalid before it is parsed: 1, err set. */
static int
text_refused(const char *in, size_t len, char *err, size_t errlen)
{
	if (in == NULL || json_blank(in, len)) {
		set_err(err, errlen, "empty JSON text");
		return 1;
	}
	/* Never valid JSON; named, so that the reason is not just an offset. */
	if (memchr(in, '\0', len) != NULL) {
		set_err(err, errlen, "NUL byte in the JSON text");
		return 1;
	}
	if (escapes_valid(in, len) == -1) {
		set_err(err, errlen, "invalid \\u escape (lone surrogate)");
		return 1;
	}
	return 0;
}

/* The text's tree into c (its limits set); IDEM_JCS_OK, or why not. */
static enum idem_jcs_result
parse_tree(struct jctx *c, const char *in, size_t len, char *err,
    size_t errlen)
{
	yajl_handle		 h;
	yajl_status		 st;
	size_t			 at;
	char			 msg[64];
	enum idem_jcs_result	 rc = IDEM_JCS_OK;

	if ((h = yajl_alloc(&jcs_callbacks, NULL, c)) == NULL) {
		set_err(err, errlen, "out of memory");
		return IDEM_JCS_NOMEM;
	}
	/* yajl's defaults, spelled out: they are what makes this strict. */
	yajl_config(h, yajl_allow_comments, 0);
	yajl_config(h, yajl_dont_validate_strings, 0);
	yajl_config(h, yajl_allow_trailing_garbage, 0);
	yajl_config(h, yajl_allow_multiple_values, 0);
	yajl_config(h, yajl_allow_partial_values, 0);

	st = yajl_parse(h, (const unsigned char *)in, len);
	at = yajl_get_bytes_consumed(h);
	if (st == yajl_status_ok) {
		st = yajl_complete_parse(h);
		at = len;
	}
	if (st == yajl_status_client_canceled) {
		set_err(err, errlen, c->why != NULL ? c->why : "rejected");
		rc = c->why != NULL ? c->why_rc : IDEM_JCS_INVALID;
	} else if (st != yajl_status_ok || c->nnodes == 0 || c->depth != 0) {
		/* Not yajl_get_error(): that quotes the input. */
		snprintf(msg, sizeof(msg), "invalid JSON at byte %zu", at);
		set_err(err, errlen, msg);
		rc = IDEM_JCS_INVALID;
	}
	yajl_free(h);
	return rc;
}

enum idem_jcs_result
idem_jcs_canonicalize_pruned(const char *in, size_t len,
    const struct idem_jcs_limits *lim, const char *const *exclude,
    size_t nexclude, struct idem_buf *out, struct idem_buf *pruned,
    char *err, size_t errlen)
{
	struct jctx		 c;
	struct jexclude		 ex = { exclude, nexclude };
	size_t			 outlen0 = out->len;
	size_t			 prunedlen0 = pruned ? pruned->len : 0;
	enum idem_jcs_result	 rc;

	if (text_refused(in, len, err, errlen))
		return IDEM_JCS_INVALID;
	memset(&c, 0, sizeof(c));
	c.limit = lim->max_depth;
	c.max_values = lim->max_values;
	if ((rc = parse_tree(&c, in, len, err, errlen)) == IDEM_JCS_OK &&
	    (emit(&c, out, NULL) == -1 ||
	    (pruned != NULL && emit(&c, pruned, &ex) == -1))) {
		/* Leave both as they were, not half a document. */
		buf_truncate(out, outlen0);
		buf_truncate(pruned, prunedlen0);
		set_err(err, errlen, "out of memory");
		rc = IDEM_JCS_NOMEM;
	}
	jctx_free(&c);
	return rc;
}
