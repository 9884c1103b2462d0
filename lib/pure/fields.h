/*
 * fields.h - a list of HTTP header fields (name, value) read from
 * "Name: value" lines: the HTTP client's answers, libidem_test's answers
 * and its stub's requests keep theirs in one.  Static inline, so that
 * libidem_test, which links only what libidem exports, shares the code.
 */
#ifndef IDEM_FIELDS_H
#define IDEM_FIELDS_H

#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct idem_field {
	char	*name;
	char	*value;
};

struct idem_fields {
	struct idem_field	*v;
	size_t			 n;
};

/* What idem_fields_add_line did with a line. */
enum idem_fields_rc {
	IDEM_FIELDS_ADDED = 0,
	IDEM_FIELDS_NOT_A_FIELD,	/* no ':', or nothing before it */
	IDEM_FIELDS_NO_MEMORY
};

/* line[0..len-1] ("Name: value", no line end) added, the value without
 * the white space around it (RFC 9110's OWS). */
static inline enum idem_fields_rc
idem_fields_add_line(struct idem_fields *f, const char *line, size_t len)
{
	const char		*colon = memchr(line, ':', len), *v, *end;
	struct idem_field	*g;

	if (colon == NULL || colon == line)
		return IDEM_FIELDS_NOT_A_FIELD;
	for (v = colon + 1, end = line + len; v < end && (*v == ' ' ||
	    *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if ((g = reallocarray(f->v, f->n + 1, sizeof(*g))) == NULL)
		return IDEM_FIELDS_NO_MEMORY;
	f->v = g;
	g[f->n].name = strndup(line, (size_t)(colon - line));
	g[f->n].value = strndup(v, (size_t)(end - v));
	if (g[f->n].name == NULL || g[f->n].value == NULL) {
		free(g[f->n].name);
		free(g[f->n].value);
		return IDEM_FIELDS_NO_MEMORY;
	}
	f->n++;
	return IDEM_FIELDS_ADDED;
}

/* The value of the first field named name (any case), or NULL. */
static inline const char *
idem_fields_get(const struct idem_fields *f, const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && i < f->n; i++)
		if (strcasecmp(f->v[i].name, name) == 0)
			return f->v[i].value;
	return NULL;
}

/* Every field freed; f is empty again. */
static inline void
idem_fields_free(struct idem_fields *f)
{
	while (f->n > 0) {
		f->n--;
		free(f->v[f->n].name);
		free(f->v[f->n].value);
	}
	free(f->v);
	f->v = NULL;
}

#endif /* IDEM_FIELDS_H */
