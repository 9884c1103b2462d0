/*
 * test_json.c - the JSON writer: table-driven documents (what each
 * sequence of calls writes, or that it fails and sticks), PostgreSQL
 * values by column type, and the typed statement parameters.
 */
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "tap.h"

/* A writer script: one letter per call, args from the same row. */
struct wcase {
	const char	*name;
	const char	*ops;	/* { } [ ] k s i b n (k/s take strs in turn) */
	const char	*strs[6];
	long long	 ints[3];
	const char	*want;	/* NULL: fails */
};

static const struct wcase wcases[] = {
	{ "empty object", "{}", { 0 }, { 0 }, "{}" },
	{ "members of each type", "{kskikbkn}", { "a", "x", "b", "c", "d" },
	    { 42 }, "{\"a\":\"x\",\"b\":42,\"c\":true,\"d\":null}" },
	{ "nested array", "{k[ii]}", { "l" }, { 1, -2 }, "{\"l\":[1,-2]}" },
	{ "escapes", "[s]", { "q\"\\\n\x01" }, { 0 },
	    "[\"q\\\"\\\\\\n\\u0001\"]" },
	{ "UTF-8 kept", "[s]", { "\xc3\xa9\xe2\x82\xac" }, { 0 },
	    "[\"\xc3\xa9\xe2\x82\xac\"]" },
	{ "invalid UTF-8 fails", "[s]", { "\xc3(" }, { 0 }, NULL },
	{ "overlong UTF-8 fails", "[s]", { "\xc0\xaf" }, { 0 }, NULL },
	{ "integer extremes", "[ii]", { 0 }, { -9223372036854775807LL - 1,
	    9223372036854775807LL },
	    "[-9223372036854775808,9223372036854775807]" },
	{ "unclosed is incomplete", "{ks", { "a", "b" }, { 0 }, NULL },
	{ "close without open fails", "}", { 0 }, { 0 }, NULL },
	{ "a key where a value belongs fails", "{kk}", { "a", "b" },
	    { 0 }, NULL },
	{ "an integer as a key fails", "{i}", { 0 }, { 1 }, NULL },
	{ "two top-level values fail", "{}{}", { 0 }, { 0 }, NULL },
	{ "failure sticks after a good call", "[s]{}", { "\xff" }, { 0 },
	    NULL },
};

static const char *
run(const struct wcase *c, idem_json *j)
{
	const char	*s;
	size_t		 si = 0, ii = 0, len;
	static char	 out[256];

	for (s = c->ops; *s != '\0'; s++)
		switch (*s) {
		case '{': idem_json_object(j); break;
		case '}': idem_json_object_end(j); break;
		case '[': idem_json_array(j); break;
		case ']': idem_json_array_end(j); break;
		case 'k': idem_json_key(j, c->strs[si++]); break;
		case 's': idem_json_str(j, c->strs[si++]); break;
		case 'i': idem_json_int(j, c->ints[ii++]); break;
		case 'b': idem_json_bool(j, 1); break;
		case 'n': idem_json_null(j); break;
		}
	if ((s = idem_json_buf(j, &len)) == NULL || len >= sizeof(out))
		return NULL;
	memcpy(out, s, len);
	out[len] = '\0';
	return out;
}

static void
test_writer(void)
{
	const char	*got;
	idem_json	*j;
	size_t		 i;

	for (i = 0; i < sizeof(wcases) / sizeof(wcases[0]); i++) {
		j = idem_json_new();
		got = run(&wcases[i], j);
		if (wcases[i].want == NULL)
			TAP_OK(got == NULL && idem_json_int(j, 1) == -1,
			    "writer: %s (fails, and later calls too)",
			    wcases[i].name);
		else
			TAP_STREQ(got, wcases[i].want, "writer: %s",
			    wcases[i].name);
		idem_json_free(j);
	}
	TAP_OK(idem_json_object(NULL) == -1 && idem_json_buf(NULL, NULL) ==
	    NULL, "a NULL writer (idem_json_new() failed) fails every call");
}

static void
test_value(void)
{
	static const char *const docs[] = {
		"{\"a\":[1,2.5e3,-0],\"b\":{\"c\":null,\"d\":false}}",
		"[\"\\u00e9\",123456789012345678901234567890]",
	};
	const char	*got;
	yajl_val	 v;
	idem_json	*j;
	size_t		 i, len;

	for (i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		v = yajl_tree_parse(docs[i], NULL, 0);
		j = idem_json_new();
		idem_json_value(j, v);
		got = idem_json_buf(j, &len);
		/* Numbers keep their digits; \u00e9 comes back as UTF-8. */
		TAP_OK(got != NULL && (i == 1 ? len == strlen(docs[1]) - 6 + 2 &&
		    strstr(got, "123456789012345678901234567890") != NULL :
		    len == strlen(docs[0]) && memcmp(got, docs[0], len) == 0),
		    "value: parsed document %zu copied exactly", i);
		idem_json_free(j);
		yajl_tree_free(v);
	}
}

/* A PGresult built in memory, as libpq would hand it over. */
static PGresult *
pg_result(void)
{
	static PGresAttDesc cols[] = {
		{ "b", 0, 0, 0, 16, 1, -1 },	/* bool */
		{ "i", 0, 0, 0, 20, 8, -1 },	/* int8 */
		{ "n", 0, 0, 0, 1700, -1, -1 },	/* numeric */
		{ "nan", 0, 0, 0, 1700, -1, -1 },
		{ "j", 0, 0, 0, 3802, -1, -1 },	/* jsonb */
		{ "t", 0, 0, 0, 25, -1, -1 },	/* text */
		{ "z", 0, 0, 0, 25, -1, -1 },	/* text, NULL */
	};
	static const char *const vals[] = { "t", "-12", "3.50", "NaN",
	    "{\"k\": [1, \"v\"]}", "1 < 2 \"x\"" };
	PGresult	*r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	int		 i;

	if (r == NULL || !PQsetResultAttrs(r, 7, cols))
		return NULL;
	for (i = 0; i < 6; i++)
		PQsetvalue(r, 0, i, (char *)vals[i], (int)strlen(vals[i]));
	PQsetvalue(r, 0, 6, NULL, -1);
	return r;
}

static void
test_pg(void)
{
	PGresult	*r = pg_result();
	idem_json	*j;
	const char	*got;
	size_t		 len;

	TAP_OK(r != NULL, "an in-memory PGresult");
	if (r == NULL)
		return;
	j = idem_json_new();
	idem_json_pg_row(j, r, 0);
	got = idem_json_buf(j, &len);
	TAP_STREQ(got, "{\"b\":true,\"i\":-12,\"n\":3.50,\"nan\":\"NaN\","
	    "\"j\":{\"k\":[1,\"v\"]},\"t\":\"1 < 2 \\\"x\\\"\",\"z\":null}",
	    "pg_row: bool, int8, numeric, NaN as a string, jsonb embedded, "
	    "text, NULL");
	idem_json_free(j);
	j = idem_json_new();
	TAP_OK(idem_json_pg(j, r, 1, 0) == -1 && idem_json_pg(j, r, 0, 0) == -1,
	    "pg: a row out of range fails, and sticks");
	idem_json_free(j);
	PQclear(r);
}

static void
test_args(void)
{
	idem_args	*a = idem_args_new();
	idem_req	 req;
	int		 i;

	memset(&req, 0, sizeof(req));
	req.tenant = 7;
	req.json = yajl_tree_parse("{\"n\":12,\"s\":\"x\",\"o\":{\"a\": 1},"
	    "\"z\":null,\"t\":true}", NULL, 0);
	TAP_OK(idem_args_int(a, -5) == 0 && idem_args_tenant(a, &req) == 0 &&
	    idem_args_str(a, NULL) == 0 && idem_args_member(a, &req, "n") == 0 &&
	    idem_args_member(a, &req, "s") == 0 &&
	    idem_args_member(a, &req, "o") == 0 &&
	    idem_args_member(a, &req, "z") == 0 &&
	    idem_args_member(a, &req, "absent") == 0 &&
	    idem_args_member(a, &req, "t") == 0, "args: 9 values accepted");
	TAP_OK(idem_req_defer_args(&req, "SELECT 1", NULL) == -1,
	    "args: a NULL (failed) args fails the statement");
	req.txn.in_txn = 1;		/* queue instead of running */
	TAP_OK(idem_req_defer_args(&req, "SELECT $1", a) == 0 &&
	    req.txn.ndefer == 1 && req.txn.defer[0].n == 9, "args: deferred whole");
	TAP_STREQ(req.txn.defer[0].vals[0], "-5", "args: integer as digits");
	TAP_STREQ(req.txn.defer[0].vals[1], "7", "args: the tenant");
	TAP_OK(req.txn.defer[0].vals[2] == NULL, "args: NULL string is SQL NULL");
	TAP_STREQ(req.txn.defer[0].vals[3], "12", "args: integer member");
	TAP_STREQ(req.txn.defer[0].vals[4], "x", "args: string member");
	TAP_STREQ(req.txn.defer[0].vals[5], "{\"a\":1}", "args: object as JSON");
	TAP_OK(req.txn.defer[0].vals[6] == NULL && req.txn.defer[0].vals[7] == NULL,
	    "args: null and absent members are SQL NULL");
	TAP_STREQ(req.txn.defer[0].vals[8], "true", "args: boolean member");
	idem_defer_free(&req);
	a = idem_args_new();
	for (i = 0; i < 64; i++)
		idem_args_int(a, i);
	TAP_OK(idem_args_int(a, 64) == -1 &&
	    idem_req_defer_args(&req, "SELECT 1", a) == -1 && req.txn.ndefer == 0,
	    "args: the 65th parameter fails, and the statement is refused");
	yajl_tree_free(req.json);
}

int
main(void)
{
	test_writer();
	test_value();
	test_pg();
	test_args();
	return TAP_DONE();
}
