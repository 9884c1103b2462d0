/*
 * validate.c - declared validation of JSON bodies: members with a type,
 * bounds, an enum set, a pattern or a callback, nested objects, arrays.  Pure (no
 * request): the fuzz harness links it alone; body.c puts it on routes.
 */
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Characters, not bytes: the body is valid UTF-8 already (yajl). */
static long long
u8len(const char *s)
{
	long long	n = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

static int
bounded(const struct idem_member *m)
{
	return m->min != 0 || m->max != 0;
}

/*
 * Every failure of one validation (idem_validate_errors()): the calling
 * thread's list, and the JSON Pointer of the member being checked, kept
 * here rather than passed down so that the checks keep their shape.
 */
struct collect {
	struct idem_validation_error	*errs;
	size_t				 max, n;
	/* room left for "/..." when a pointer is cut short */
	char				 ptr[IDEM_VALIDATION_TEXT_MAX - 8];
	size_t				 ptrlen;
	int				 ptr_cut;	/* pushes not kept */
};
static __thread struct collect *collecting;

/* Write "path: rule" to why (the first failure only); note it in the
 * list; always -1. */
static int __attribute__((format(printf, 4, 5)))
refuse(char *why, size_t whylen, const char *path, const char *fmt, ...)
{
	struct idem_validation_error	*e;
	struct collect			*c = collecting;
	char				 rule[256];
	va_list				 ap;

	va_start(ap, fmt);
	vsnprintf(rule, sizeof(rule), fmt, ap);
	va_end(ap);
	if (whylen > 0 && why[0] == '\0')
		snprintf(why, whylen, "%s: %s", path, rule);
	if (c != NULL && c->n < c->max) {
		e = &c->errs[c->n];
		snprintf(e->pointer, sizeof(e->pointer), "%s%s", c->ptr,
		    c->ptr_cut ? "/..." : "");
		snprintf(e->detail, sizeof(e->detail), "%s", rule);
	}
	if (c != NULL)
		c->n++;
	return -1;
}

/* Enter member name: its RFC 6901 reference token ("~" as "~0", "/" as
 * "~1") is appended to the pointer; returns the length to go back to. */
static size_t
ptr_push(const char *name)
{
	struct collect	*c = collecting;
	size_t		 was;

	if (c == NULL)
		return 0;
	was = c->ptrlen;
	if (c->ptr_cut || c->ptrlen + 1 >= sizeof(c->ptr)) {
		c->ptr_cut++;
		return was;
	}
	c->ptr[c->ptrlen++] = '/';
	for (; *name != '\0'; name++) {
		if (c->ptrlen + 3 >= sizeof(c->ptr)) {
			c->ptr_cut++;
			break;
		}
		if (*name == '~' || *name == '/') {
			c->ptr[c->ptrlen++] = '~';
			c->ptr[c->ptrlen++] = *name == '~' ? '0' : '1';
		} else
			c->ptr[c->ptrlen++] = *name;
	}
	c->ptr[c->ptrlen] = '\0';
	return was;
}

static void
ptr_pop(size_t was)
{
	struct collect	*c = collecting;

	if (c == NULL)
		return;
	/* Once a push is cut, so is every deeper one (LIFO). */
	if (c->ptr_cut > 0)
		c->ptr_cut--;
	c->ptrlen = was;
	c->ptr[was] = '\0';
}

/* "one of: "a", "b"" of an enum set, cut short (", ...") to fit. */
static void
allowed(const char *const *set, char *out, size_t len)
{
	size_t	n = 0;
	int	w;

	out[0] = '\0';
	for (; *set != NULL; set++) {
		w = snprintf(out + n, len - n, "%s\"%s\"", n > 0 ? ", " : "",
		    *set);
		if (w < 0 || (size_t)w >= len - n - 6) {
			snprintf(out + n, len - n, "%s...", n > 0 ? ", " : "");
			return;
		}
		n += (size_t)w;
	}
}

static int
in_set(const char *s, const char *const *set)
{
	for (; *set != NULL; set++)
		if (strcmp(s, *set) == 0)
			return 1;
	return 0;
}

/*
 * Declared patterns, compiled once: compiling one cost more than the rest
 * of a body's validation, on every request.  A program declares few and
 * never changes them; keyed by text (not by address), kept for the life
 * of the process.  Past the table's size, a pattern is compiled per use.
 * regexec() on a shared regex_t is thread-safe (POSIX).
 */
#define PATTERNS_MAX	64
static struct {
	char	*text;
	regex_t	 re;
	int	 ok;		/* regcomp() accepted it */
} patterns[PATTERNS_MAX];
static size_t		npatterns;
static pthread_mutex_t	patterns_lock = PTHREAD_MUTEX_INITIALIZER;

enum pattern_get { PATTERN_CACHED, PATTERN_BAD, PATTERN_FULL };

static enum pattern_get
pattern_get(const char *pattern, const regex_t **re)
{
	enum pattern_get	 rc = PATTERN_FULL;
	size_t			 i;

	pthread_mutex_lock(&patterns_lock);
	for (i = 0; i < npatterns; i++)
		if (strcmp(patterns[i].text, pattern) == 0)
			break;
	if (i == npatterns && npatterns < PATTERNS_MAX &&
	    (patterns[i].text = strdup(pattern)) != NULL) {
		patterns[i].ok = regcomp(&patterns[i].re, pattern,
		    REG_EXTENDED | REG_NOSUB) == 0;
		npatterns++;
	}
	if (i < npatterns) {
		rc = patterns[i].ok ? PATTERN_CACHED : PATTERN_BAD;
		*re = &patterns[i].re;
	}
	pthread_mutex_unlock(&patterns_lock);
	return rc;
}

static int
matches(const char *s, const char *pattern)
{
	const regex_t	*cached;
	regex_t		 re;
	int		 rc;

	switch (pattern_get(pattern, &cached)) {
	case PATTERN_CACHED:
		return regexec(cached, s, 0, NULL, 0) == 0;
	case PATTERN_BAD:
		return 0;	/* an author's bad pattern refuses, never admits */
	case PATTERN_FULL:
		break;
	}
	if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
		return 0;
	rc = regexec(&re, s, 0, NULL, 0);
	regfree(&re);
	return rc == 0;
}

static int check_object(yajl_val v, const struct idem_body *b,
    const char *path, char *why, size_t whylen);

static int
check_string(yajl_val v, const struct idem_member *m, const char *path,
    char *why, size_t whylen)
{
	long long	n;
	char		set[200];

	if (!YAJL_IS_STRING(v))
		return refuse(why, whylen, path, "must be a string");
	n = u8len(v->u.string);
	if (bounded(m) && (n < m->min || n > m->max))
		return m->min == m->max ?
		    refuse(why, whylen, path, "must be %lld characters long",
		    m->min) :
		    refuse(why, whylen, path, "must be %lld to %lld characters "
		    "long", m->min, m->max);
	if (m->oneof != NULL && !in_set(v->u.string, m->oneof)) {
		allowed(m->oneof, set, sizeof(set));
		return refuse(why, whylen, path, "must be one of: %s", set);
	}
	/* The pattern is the author's implementation, not the client's
	 * documentation (a member's doc says what is expected). */
	if (m->pattern != NULL && !matches(v->u.string, m->pattern))
		return refuse(why, whylen, path, "is not in the expected "
		    "format");
	return 0;
}

/*
 * An integer member: an integer literal as written (no fraction, no
 * exponent: 1.0 and 1e2 are refused, not rounded), within the declared
 * bounds and never beyond +-(2^53 - 1), where every integer is exactly a
 * double, so that the fingerprint's canonical form (RFC 8785, through
 * doubles) and the value the handler reads are one number.  "-0" is 0.
 */
static int
check_integer(yajl_val v, const struct idem_member *m, const char *path,
    char *why, size_t whylen)
{
	const char	*lit, *digits;
	long long	 lo = -IDEM_INT_EXACT_MAX, hi = IDEM_INT_EXACT_MAX, n;
	size_t		 nd;

	if (bounded(m)) {
		lo = m->min > lo ? m->min : lo;
		hi = m->max < hi ? m->max : hi;
	}
	if (!YAJL_IS_NUMBER(v))
		return refuse(why, whylen, path, "must be an integer");
	lit = v->u.number.r;
	digits = lit + (lit[0] == '-');
	nd = strspn(digits, "0123456789");
	if (nd == 0 || digits[nd] != '\0')
		return refuse(why, whylen, path, "must be an integer written "
		    "without a fraction or an exponent");
	/* 2^53 - 1 has 16 digits; yajl's value is exact below 2^63. */
	if (nd > 16 || !YAJL_IS_INTEGER(v) ||
	    (n = YAJL_GET_INTEGER(v)) < lo || n > hi)
		return refuse(why, whylen, path, "must be an integer from "
		    "%lld to %lld", lo, hi);
	return 0;
}

static int check_value(yajl_val v, const struct idem_member *m,
    const char *path, char *why, size_t whylen);

/* Two strings alike, or two integers written alike (IDEM_UNIQUE). */
static int
same_item(yajl_val a, yajl_val b)
{
	if (YAJL_IS_STRING(a) && YAJL_IS_STRING(b))
		return strcmp(a->u.string, b->u.string) == 0;
	if (YAJL_IS_NUMBER(a) && YAJL_IS_NUMBER(b))
		return strcmp(a->u.number.r, b->u.number.r) == 0;
	return 0;
}

/* An array member: its count, each item against m->items ("name[i]" in
 * why, "/name/i" in the pointer), and IDEM_UNIQUE. */
static int
check_array(yajl_val v, const struct idem_member *m, const char *path,
    char *why, size_t whylen)
{
	char	sub[280], idx[24];
	size_t	i, k, n, was;
	int	rc = 0;

	if (!YAJL_IS_ARRAY(v))
		return refuse(why, whylen, path, "must be an array");
	n = v->u.array.len;
	if (bounded(m) && ((long long)n < m->min || (long long)n > m->max))
		return refuse(why, whylen, path, "must have %lld to %lld items",
		    m->min, m->max);
	for (i = 0; i < n; i++) {
		snprintf(idx, sizeof(idx), "%lu", (unsigned long)i);
		snprintf(sub, sizeof(sub), "%.250s[%s]", path, idx);
		was = ptr_push(idx);
		if (YAJL_IS_NULL(v->u.array.values[i]))
			rc = refuse(why, whylen, sub, "must not be null");
		else if (m->items != NULL && check_value(v->u.array.values[i],
		    m->items, sub, why, whylen) == -1)
			rc = -1;
		else if (m->flags & IDEM_UNIQUE)
			for (k = 0; k < i; k++)
				if (same_item(v->u.array.values[k],
				    v->u.array.values[i])) {
					rc = refuse(why, whylen, sub, "repeats "
					    "item %lu", (unsigned long)k);
					break;
				}
		ptr_pop(was);
	}
	return rc;
}

/* The types whose value has a check of its own. */
static int (*const type_checks[])(yajl_val, const struct idem_member *,
    const char *, char *, size_t) = {
	[IDEM_T_INTEGER] = check_integer,
	[IDEM_T_STRING] = check_string,
	[IDEM_T_ARRAY] = check_array,
};

/* v (not NULL, not null) against m. */
static int
check_value(yajl_val v, const struct idem_member *m, const char *path,
    char *why, size_t whylen)
{
	char	rule[200];

	switch (m->type) {
	case IDEM_T_INTEGER:
	case IDEM_T_STRING:
	case IDEM_T_ARRAY:
		if (type_checks[m->type](v, m, path, why, whylen) == -1)
			return -1;
		break;
	case IDEM_T_BOOLEAN:
		if (!YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v))
			return refuse(why, whylen, path, "must be true or false");
		break;
	case IDEM_T_OBJECT:
		if (!YAJL_IS_OBJECT(v))
			return refuse(why, whylen, path, "must be an object");
		if (bounded(m) && ((long long)v->u.object.len < m->min ||
		    (long long)v->u.object.len > m->max))
			return refuse(why, whylen, path, "must have %lld to %lld "
			    "members", m->min, m->max);
		if (m->object != NULL &&
		    check_object(v, m->object, path, why, whylen) == -1)
			return -1;
		break;
	default:
		return refuse(why, whylen, path, "has no declared type");
	}
	if (m->check != NULL) {
		snprintf(rule, sizeof(rule), "is not valid");
		if (m->check(v, rule, sizeof(rule)) != 0)
			return refuse(why, whylen, path, "%s", rule);
	}
	return 0;
}

static const struct idem_member *
declared(const struct idem_body *b, const char *name)
{
	const struct idem_member	*m;

	for (m = b->members; m != NULL && m->name != NULL; m++)
		if (strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

/* "outer.name" (or name at the top) into buf. */
static const char *
join(char *buf, size_t len, const char *outer, const char *name)
{
	size_t	o = 0, n;

	/* What snprintf "%s.%.100s" writes, truncated alike, without it
	 * (once per member of every body). */
	if (len == 0)
		return buf;
	if (outer != NULL) {
		n = strlen(outer);
		o = n < len - 1 ? n : len - 1;
		memcpy(buf, outer, o);
		if (o < len - 1)
			buf[o++] = '.';
	}
	n = strnlen(name, 100);
	if (n > len - 1 - o)
		n = len - 1 - o;
	memcpy(buf + o, name, n);
	buf[o + n] = '\0';
	return buf;
}

static int
check_object(yajl_val v, const struct idem_body *b, const char *path,
    char *why, size_t whylen)
{
	const struct idem_member	*m;
	char				 sub[256];
	yajl_val			 mv;
	size_t				 i, was;
	long long			 n;
	int				 rc = 0;

	/* Every member is checked, each failure noted (one per member):
	 * undeclared members first, so a typo is named first as such. */
	for (i = 0; i < v->u.object.len; i++) {
		if (declared(b, v->u.object.keys[i]) != NULL)
			continue;
		join(sub, sizeof(sub), path, v->u.object.keys[i]);
		was = ptr_push(v->u.object.keys[i]);
		n = u8len(v->u.object.keys[i]);
		mv = v->u.object.values[i];
		if (!(b->flags & IDEM_BODY_OPEN))
			rc = refuse(why, whylen, sub, "unknown member");
		else if ((b->name_min != 0 || b->name_max != 0) &&
		    (n < b->name_min || n > b->name_max))
			rc = refuse(why, whylen, sub, "member names must be "
			    "%lld to %lld characters long", b->name_min,
			    b->name_max);
		/* Unlike a declared member, null is a value here. */
		else if (b->rest != NULL && (YAJL_IS_NULL(mv) ?
		    refuse(why, whylen, sub, "must not be null") :
		    check_value(mv, b->rest, sub, why, whylen)) == -1)
			rc = -1;
		ptr_pop(was);
	}
	for (m = b->members; m != NULL && m->name != NULL; m++) {
		join(sub, sizeof(sub), path, m->name);
		mv = NULL;
		for (i = 0; i < v->u.object.len; i++)
			if (strcmp(v->u.object.keys[i], m->name) == 0)
				mv = v->u.object.values[i];
		was = ptr_push(m->name);
		if (mv == NULL || YAJL_IS_NULL(mv)) {
			if (m->flags & IDEM_REQUIRED)
				rc = refuse(why, whylen, sub, "is required");
		} else if (check_value(mv, m, sub, why, whylen) == -1)
			rc = -1;
		ptr_pop(was);
	}
	return rc;
}

size_t
idem_validate_collect(yajl_val v, const struct idem_body *b, char *why,
    size_t whylen, struct idem_validation_error *errs, size_t max)
{
	struct collect	c;

	if (whylen > 0)
		why[0] = '\0';
	memset(&c, 0, sizeof(c));
	c.errs = errs;
	c.max = errs != NULL ? max : 0;
	collecting = &c;
	if (b == NULL)
		refuse(why, whylen, "body", "has no declaration");
	else if (v == NULL || !YAJL_IS_OBJECT(v))
		refuse(why, whylen, "body", "must be a JSON object");
	else
		check_object(v, b, NULL, why, whylen);
	collecting = NULL;
	return c.n;
}

int
idem_validate(yajl_val v, const struct idem_body *b, char *why,
    size_t whylen)
{
	return idem_validate_collect(v, b, why, whylen, NULL, 0) == 0 ? 0 :
	    -1;
}

size_t
idem_validate_errors(yajl_val v, const struct idem_body *b,
    struct idem_validation_error *errs, size_t max)
{
	return idem_validate_collect(v, b, NULL, 0, errs, max);
}
