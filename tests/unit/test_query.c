/*
 * test_query.c - declared query parameters: query strings split into
 * decoded pairs, and checked against a declaration, one row each: the
 * values each parameter gets, and every failure as "name: detail".
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "tap.h"

static const char *const sorts[] = { "asc", "desc", NULL };

static const struct idem_param params[] = {
	{ .name = "limit", .type = IDEM_T_INTEGER, .min = 1, .max = 100,
	  .def = "10" },
	{ .name = "after", .type = IDEM_T_STRING, .min = 1, .max = 8 },
	{ .name = "sort", .type = IDEM_T_STRING, .oneof = sorts,
	  .def = "desc" },
	{ .name = "live", .type = IDEM_T_BOOLEAN },
	{ .name = "n", .type = IDEM_T_INTEGER },
	{ .name = NULL } };

static const struct idem_param required[] = {
	{ .name = "q", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED },
	{ .name = NULL } };

/* The values of params[0..4] as "limit after sort live n", "-" for NULL. */
static const struct {
	const char	*query;
	const char	*values;
	const char	*errors;	/* "name: detail; ..." */
} t[] = {
	{ NULL,			"10 - desc - -",	"" },
	{ "",			"10 - desc - -",	"" },
	{ "limit=5",		"5 - desc - -",		"" },
	{ "limit=100&after=pay_1", "100 pay_1 desc - -", "" },
	{ "sort=asc&live=true&n=-7", "10 - asc true -7", "" },
	{ "&&limit=1&",		"1 - desc - -",		"" },
	{ "after=a%20b",	"10 a_b desc - -",	"" },
	{ "after=a+b",		"10 a_b desc - -",	"" },
	{ "limit=0",		"0 - desc - -",
	  "limit: must be an integer from 1 to 100" },
	{ "limit=101",		"101 - desc - -",
	  "limit: must be an integer from 1 to 100" },
	{ "limit=5x",		"5x - desc - -",
	  "limit: must be an integer from 1 to 100" },
	{ "limit=",		"'' - desc - -",
	  "limit: must be an integer from 1 to 100" },
	{ "limit",		"'' - desc - -",
	  "limit: must be an integer from 1 to 100" },
	{ "limit=+5",		"_5 - desc - -",
	  "limit: must be an integer from 1 to 100" },
	{ "limit=99999999999999999999", "99999999999999999999 - desc - -",
	  "limit: must be an integer from 1 to 100" },
	{ "n=1.5",		"10 - desc - 1.5",	"n: must be an integer" },
	{ "after=123456789",	"10 123456789 desc - -",
	  "after: must be 1 to 8 characters long" },
	{ "after=",		"10 '' desc - -",
	  "after: must be 1 to 8 characters long" },
	{ "sort=up",		"10 - up - -",
	  "sort: must be one of: asc, desc" },
	{ "live=1",		"10 - desc 1 -",	"live: must be true or false" },
	{ "limit=1&limit=2",	"1 - desc - -",
	  "limit: is given more than once" },
	{ "Limit=1",		"10 - desc - -",
	  "Limit: is not a parameter of this operation" },
	{ "limit=0&sort=up&x=1", "0 - up - -",
	  "limit: must be an integer from 1 to 100; sort: must be one of: "
	  "asc, desc; x: is not a parameter of this operation" },
};

/* The five values, blank-separated: "-" for none, "''" for empty, and a
 * blank inside a value as "_". */
static void
join_values(const char **vals, char *out, size_t len)
{
	const char	*c;
	size_t		 i, o = 0;

	for (i = 0; i < 5 && o + 3 < len; i++) {
		if (i > 0)
			out[o++] = ' ';
		if (vals[i] == NULL)
			out[o++] = '-';
		else if (vals[i][0] == '\0')
			o += (size_t)snprintf(out + o, len - o, "''");
		for (c = vals[i]; c != NULL && *c != '\0' && o + 2 < len; c++)
			out[o++] = *c == ' ' ? '_' : *c;
	}
	out[o] = '\0';
}

static void
join_errors(const struct idem_validation_error *e, size_t n, char *out,
    size_t len)
{
	size_t	 i, o = 0;

	out[0] = '\0';
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s: %s",
		    i ? "; " : "", e[i].pointer, e[i].detail);
}

int
main(void)
{
	struct idem_query_pairs		 q;
	struct idem_validation_error	 errs[8];
	const char			*vals[IDEM_PARAMS_MAX];
	char				 got[512], qs[IDEM_QUERY_PAIRS_MAX * 4 + 8];
	size_t				 i, n;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		TAP_OK(idem_query_split(t[i].query, &q) == IDEM_QUERY_OK,
		    "split %s", t[i].query ? t[i].query : "(no query)");
		n = idem_query_collect(&q, params, vals, errs, 8);
		join_values(vals, got, sizeof(got));
		TAP_STREQ(got, t[i].values, "  values");
		join_errors(errs, n < 8 ? n : 8, got, sizeof(got));
		TAP_STREQ(got, t[i].errors, "  failures");
		idem_query_pairs_free(&q);
	}

	/* required */
	idem_query_split("", &q);
	n = idem_query_collect(&q, required, vals, errs, 8);
	join_errors(errs, n, got, sizeof(got));
	TAP_STREQ(got, "q: is required", "a required parameter missing");
	idem_query_split("q=x", &q);
	TAP_OK(idem_query_collect(&q, required, vals, errs, 8) == 0 &&
	    strcmp(vals[0], "x") == 0, "a required parameter given");
	idem_query_pairs_free(&q);

	/* malformed escapes, encoded NUL, too many pairs */
	TAP_OK(idem_query_split("a=%2", &q) == IDEM_QUERY_MALFORMED && q.n == 0,
	    "a=%%2: malformed");
	TAP_OK(idem_query_split("a=%zz", &q) == IDEM_QUERY_MALFORMED,
	    "a=%%zz: malformed");
	TAP_OK(idem_query_split("a=1&b%00=2", &q) == IDEM_QUERY_MALFORMED &&
	    q.n == 0, "an encoded NUL in a name: malformed, nothing kept");
	qs[0] = '\0';
	for (i = 0; i <= IDEM_QUERY_PAIRS_MAX; i++)
		strcat(qs, i ? "&a=1" : "a=1");
	TAP_OK(idem_query_split(qs, &q) == IDEM_QUERY_TOO_MANY && q.n == 0,
	    "%d pairs: too many", IDEM_QUERY_PAIRS_MAX + 1);
	qs[strlen(qs) - 4] = '\0';
	TAP_OK(idem_query_split(qs, &q) == IDEM_QUERY_OK &&
	    q.n == IDEM_QUERY_PAIRS_MAX, "%d pairs: accepted",
	    IDEM_QUERY_PAIRS_MAX);
	idem_query_pairs_free(&q);
	/* more failures than room: all counted */
	idem_query_split("x1=1&x2=1&x3=1", &q);
	TAP_OK(idem_query_collect(&q, params, vals, errs, 2) == 3,
	    "three failures counted with room for two");
	idem_query_pairs_free(&q);
	return TAP_DONE();
}
