/*
 * query.c - declared query parameters: a query string split once into
 * decoded pairs, then checked against a route's struct idem_param list,
 * every failure listed.  Pure: text and declarations in, values and
 * failures out.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* %XX and + decoded from [b, e) into a new string; NULL on a decoded NUL,
 * a malformed escape or no memory. */
static char *
decode(const char *b, const char *e)
{
	char	*out, *o;

	if ((out = o = malloc((size_t)(e - b) + 1)) == NULL)
		return NULL;
	for (; b < e; b++) {
		if (*b == '+')
			*o++ = ' ';
		else if (*b == '%') {
			if (e - b < 3 || !isxdigit((unsigned char)b[1]) ||
			    !isxdigit((unsigned char)b[2]))
				goto bad;
			char h[3] = { b[1], b[2], '\0' };
			*o = (char)strtol(h, NULL, 16);
			if (*o++ == '\0')
				goto bad;
			b += 2;
		} else
			*o++ = *b;
	}
	*o = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

void
idem_query_pairs_free(struct idem_query_pairs *q)
{
	size_t	i;

	for (i = 0; i < q->n; i++) {
		free(q->name[i]);
		free(q->value[i]);
	}
	q->n = 0;
}

enum idem_query_rc
idem_query_split(const char *query, struct idem_query_pairs *q)
{
	const char	*p, *end, *eq;

	q->n = 0;
	if (query == NULL)
		return IDEM_QUERY_OK;
	for (p = query; *p != '\0'; p = *end != '\0' ? end + 1 : end) {
		if ((end = strchr(p, '&')) == NULL)
			end = p + strlen(p);
		if (end == p)
			continue;		/* "a=1&&b=2" */
		if (q->n == IDEM_QUERY_PAIRS_MAX) {
			idem_query_pairs_free(q);
			return IDEM_QUERY_TOO_MANY;
		}
		if ((eq = memchr(p, '=', (size_t)(end - p))) == NULL)
			eq = end;		/* "flag": an empty value */
		q->name[q->n] = decode(p, eq);
		q->value[q->n] = decode(eq < end ? eq + 1 : end, end);
		if (q->name[q->n] == NULL || q->value[q->n] == NULL) {
			free(q->name[q->n]);
			free(q->value[q->n]);
			idem_query_pairs_free(q);
			return IDEM_QUERY_MALFORMED;
		}
		q->n++;
	}
	return IDEM_QUERY_OK;
}

static void
add_err(struct idem_validation_error *errs, size_t max, size_t *n,
    const char *name, const char *detail)
{
	if (*n < max) {
		snprintf(errs[*n].pointer, sizeof(errs[*n].pointer), "%s",
		    name);
		snprintf(errs[*n].detail, sizeof(errs[*n].detail), "%s",
		    detail);
	}
	(*n)++;
}

/* 0 if v is a whole decimal number (optional "-") in [min, max]. */
static int
int_ok(const char *v, long long min, long long max)
{
	long long	 x;
	char		*end;

	if (*v == '\0' || (!isdigit((unsigned char)*v) && *v != '-'))
		return -1;
	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	return (min == 0 && max == 0) || (x >= min && x <= max) ? 0 : -1;
}

/* The rule v breaks, into why; 0 when it breaks none. */
static int
rule_broken(const struct idem_param *d, const char *v, char *why,
    size_t whylen)
{
	size_t	 i, len = strlen(v), o;

	switch (d->type) {
	case IDEM_T_INTEGER:
		if (int_ok(v, d->min, d->max) == 0)
			return 0;
		if (d->min != 0 || d->max != 0)
			snprintf(why, whylen, "must be an integer from %lld to "
			    "%lld", d->min, d->max);
		else
			snprintf(why, whylen, "must be an integer");
		return 1;
	case IDEM_T_BOOLEAN:
		if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
			return 0;
		snprintf(why, whylen, "must be true or false");
		return 1;
	case IDEM_T_STRING:
		if (d->oneof != NULL) {
			for (i = 0; d->oneof[i] != NULL; i++)
				if (strcmp(d->oneof[i], v) == 0)
					return 0;
			o = (size_t)snprintf(why, whylen, "must be one of:");
			for (i = 0; d->oneof[i] != NULL && o < whylen; i++)
				o += (size_t)snprintf(why + o, whylen - o,
				    "%s %s", i > 0 ? "," : "", d->oneof[i]);
			return 1;
		}
		if ((d->min == 0 && d->max == 0) ||
		    ((long long)len >= d->min && (long long)len <= d->max))
			return 0;
		snprintf(why, whylen, "must be %lld to %lld characters long",
		    d->min, d->max);
		return 1;
	default:
		snprintf(why, whylen, "has a type no query parameter can have");
		return 1;
	}
}

size_t
idem_query_collect(const struct idem_query_pairs *q,
    const struct idem_param *params, const char **vals,
    struct idem_validation_error *errs, size_t max)
{
	char	 why[IDEM_VALIDATION_TEXT_MAX];
	size_t	 i, j, n = 0;
	int	 known;

	for (i = 0; params[i].name != NULL; i++)
		vals[i] = NULL;
	/* Each pair names a declared parameter, once. */
	for (j = 0; j < q->n; j++) {
		known = 0;
		for (i = 0; params[i].name != NULL; i++) {
			if (strcmp(params[i].name, q->name[j]) != 0)
				continue;
			known = 1;
			if (vals[i] != NULL) {
				add_err(errs, max, &n, q->name[j],
				    "is given more than once");
				break;
			}
			if (rule_broken(&params[i], q->value[j], why,
			    sizeof(why)))
				add_err(errs, max, &n, q->name[j], why);
			vals[i] = q->value[j];
			break;
		}
		if (!known)
			add_err(errs, max, &n, q->name[j],
			    "is not a parameter of this operation");
	}
	for (i = 0; params[i].name != NULL; i++)
		if (vals[i] == NULL) {
			if (params[i].flags & IDEM_REQUIRED)
				add_err(errs, max, &n, params[i].name,
				    "is required");
			vals[i] = params[i].def;
		}
	return n;
}
