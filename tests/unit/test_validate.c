/*
 * test_validate.c - declared body validation, table-driven: each body
 * against a schema like the payments create, valid or refused with the
 * member and the rule in the detail; the phase-table dispatch; and the
 * OpenAPI document made from routes, declarations (bodies, responses,
 * problem types, summaries) and the config.
 */
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "outbox.h"
#include "stubs.h"
#include "tap.h"

static const char *const colours[] = { "red", "green", NULL };

static const struct idem_member meta_value = { .name = "*",
	.type = IDEM_T_STRING, .max = 5 };
static const struct idem_body meta = { .flags = IDEM_BODY_OPEN,
	.rest = &meta_value, .name_min = 1, .name_max = 4 };
static const struct idem_body inner = { (const struct idem_member[]){
	{ .name = "x", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static const struct idem_member colour_item = { .name = "*",
	.type = IDEM_T_STRING, .oneof = colours };

static const struct idem_body schema = { (const struct idem_member[]){
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 100 },
	{ .name = "code", .type = IDEM_T_STRING, .min = 3, .max = 3,
	  .pattern = "^[a-z]+$", .check = not_zzz },
	{ .name = "colour", .type = IDEM_T_STRING, .oneof = colours },
	{ .name = "note", .type = IDEM_T_STRING, .max = 3 },
	{ .name = "flag", .type = IDEM_T_BOOLEAN },
	{ .name = "meta", .type = IDEM_T_OBJECT, .max = 2, .object = &meta },
	{ .name = "inner", .type = IDEM_T_OBJECT, .object = &inner },
	{ .name = "tags", .type = IDEM_T_ARRAY, .flags = IDEM_UNIQUE,
	  .min = 1, .max = 2, .items = &colour_item },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static const struct {
	const char	*body;
	const char	*why;	/* NULL: valid; else the whole detail */
} cases[] = {
	{ "{\"amount\":1}", NULL },
	{ "{\"amount\":100,\"code\":\"abc\",\"colour\":\"red\",\"note\":"
	  "\"\xc3\xa9\xc3\xa9\xc3\xa9\",\"flag\":false,\"meta\":{\"k\":\"v\"},"
	  "\"inner\":{\"x\":-1}}", NULL },
	{ "{\"amount\":1,\"note\":null,\"meta\":null}", NULL },
	{ "[]", "body: must be a JSON object" },
	{ "\"x\"", "body: must be a JSON object" },
	{ "{}", "amount: is required" },
	{ "{\"amount\":null}", "amount: is required" },
	{ "{\"amount\":0}", "amount: must be an integer from 1 to 100" },
	{ "{\"amount\":101}", "amount: must be an integer from 1 to 100" },
	{ "{\"amount\":1.5}", "amount: must be an integer written without a "
	  "fraction or an exponent" },
	{ "{\"amount\":\"1\"}", "amount: must be an integer" },
	{ "{\"amount\":true}", "amount: must be an integer" },
	{ "{\"amount\":99999999999999999999}",
	  "amount: must be an integer from 1 to 100" },
	{ "{\"amount\":1,\"amuont\":2}", "amuont: unknown member" },
	{ "{\"amount\":1,\"code\":\"ab\"}",
	  "code: must be 3 characters long" },
	/* The pattern is not echoed. */
	{ "{\"amount\":1,\"code\":\"ABC\"}",
	  "code: is not in the expected format" },
	{ "{\"amount\":1,\"code\":\"zzz\"}", "code: must not be zzz" },
	{ "{\"amount\":1,\"code\":7}", "code: must be a string" },
	{ "{\"amount\":1,\"colour\":\"blue\"}",
	  "colour: must be one of: \"red\", \"green\"" },
	{ "{\"amount\":1,\"note\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}",
	  "note: must be 0 to 3 characters long" },
	{ "{\"amount\":1,\"flag\":1}", "flag: must be true or false" },
	{ "{\"amount\":1,\"meta\":[]}", "meta: must be an object" },
	{ "{\"amount\":1,\"meta\":{\"a\":\"\",\"b\":\"\",\"c\":\"\"}}",
	  "meta: must have 0 to 2 members" },
	{ "{\"amount\":1,\"meta\":{\"a\":1}}", "meta.a: must be a string" },
	{ "{\"amount\":1,\"meta\":{\"a\":null}}", "meta.a: must not be null" },
	{ "{\"amount\":1,\"meta\":{\"a\":\"123456\"}}",
	  "meta.a: must be 0 to 5 characters long" },
	{ "{\"amount\":1,\"meta\":{\"\":\"v\"}}",
	  "meta.: member names must be 1 to 4 characters long" },
	{ "{\"amount\":1,\"meta\":{\"abcde\":\"v\"}}",
	  "meta.abcde: member names must be 1 to 4 characters long" },
	{ "{\"amount\":1,\"inner\":{}}", "inner.x: is required" },
	{ "{\"amount\":1,\"inner\":{\"x\":1,\"y\":2}}",
	  "inner.y: unknown member" },
	/* An unknown member is named before a missing one. */
	{ "{\"amonut\":1}", "amonut: unknown member" },
	/* Arrays: the count, each item, no repeats. */
	{ "{\"amount\":1,\"tags\":[\"red\",\"green\"]}", NULL },
	{ "{\"amount\":1,\"tags\":null}", NULL },
	{ "{\"amount\":1,\"tags\":\"red\"}", "tags: must be an array" },
	{ "{\"amount\":1,\"tags\":{}}", "tags: must be an array" },
	{ "{\"amount\":1,\"tags\":[]}", "tags: must have 1 to 2 items" },
	{ "{\"amount\":1,\"tags\":[\"red\",\"green\",\"red\"]}",
	  "tags: must have 1 to 2 items" },
	{ "{\"amount\":1,\"tags\":[\"red\",\"blue\"]}",
	  "tags[1]: must be one of: \"red\", \"green\"" },
	{ "{\"amount\":1,\"tags\":[\"red\",\"red\"]}",
	  "tags[1]: repeats item 0" },
	{ "{\"amount\":1,\"tags\":[null]}", "tags[0]: must not be null" },
	{ "{\"amount\":1,\"tags\":[7]}", "tags[0]: must be a string" },
};

static void
test_cases(void)
{
	char		 why[320];
	yajl_val	 v;
	size_t		 i;
	int		 rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		v = yajl_tree_parse(cases[i].body, NULL, 0);
		rc = idem_validate(v, &schema, why, sizeof(why));
		if (cases[i].why == NULL)
			TAP_OK(v != NULL && rc == 0 && why[0] == '\0',
			    "valid: %s (%s)", cases[i].body, why);
		else {
			TAP_OK(rc == -1, "refused: %s", cases[i].body);
			TAP_STREQ(why, cases[i].why, "  detail names member "
			    "and rule");
		}
		yajl_tree_free(v);
	}
	TAP_OK(idem_validate(NULL, &schema, why, sizeof(why)) == -1,
	    "no body is refused");
	v = yajl_tree_parse("{\"amount\":1}", NULL, 0);
	TAP_OK(idem_validate(v, &schema, why, 8) == -1 ||
	    strlen(why) < 8, "a short why buffer is never overrun");
	TAP_OK(idem_validate(v, &schema, NULL, 0) == 0,
	    "a zero-length why buffer is allowed");
	yajl_tree_free(v);
}

/* --- exact integers ------------------------------------------------------ */

/* n: no declared bounds; wide: declared beyond 2^53 (clamped to it). */
static const struct idem_body ints = { (const struct idem_member[]){
	{ .name = "n", .type = IDEM_T_INTEGER },
	{ .name = "amount", .type = IDEM_T_INTEGER, .min = 1,
	  .max = 1000000000000LL },
	{ .name = "wide", .type = IDEM_T_INTEGER, .min = -4611686018427387904LL,
	  .max = 4611686018427387904LL },
	{ .name = NULL } }, 0, NULL, 0, 0 };

#define NOT_LITERAL	": must be an integer written without a fraction or " \
	"an exponent"
#define EXACT		": must be an integer from -9007199254740991 to " \
	"9007199254740991"
#define AMOUNT		"amount: must be an integer from 1 to 1000000000000"

static const struct {
	const char	*body;
	const char	*why;		/* NULL: valid */
	const char	*member;	/* valid: this member's value is... */
	long long	 value;		/* ...exactly this */
} icases[] = {
	{ "{\"n\":100}", NULL, "n", 100 },
	{ "{\"n\":-0}", NULL, "n", 0 },
	{ "{\"n\":0}", NULL, "n", 0 },
	{ "{\"n\":-42}", NULL, "n", -42 },
	{ "{\"n\":9007199254740991}", NULL, "n", 9007199254740991LL },
	{ "{\"n\":-9007199254740991}", NULL, "n", -9007199254740991LL },
	{ "{\"wide\":9007199254740991}", NULL, "wide", 9007199254740991LL },
	{ "{\"amount\":1000000000000}", NULL, "amount", 1000000000000LL },
	{ "{\"n\":100.000000000000001}", "n" NOT_LITERAL, NULL, 0 },
	{ "{\"n\":1e2}", "n" NOT_LITERAL, NULL, 0 },
	{ "{\"n\":1E2}", "n" NOT_LITERAL, NULL, 0 },
	{ "{\"n\":1.0}", "n" NOT_LITERAL, NULL, 0 },
	{ "{\"n\":100e-2}", "n" NOT_LITERAL, NULL, 0 },
	{ "{\"n\":-0.0}", "n" NOT_LITERAL, NULL, 0 },
	{ "{\"n\":1e400}", "n" NOT_LITERAL, NULL, 0 },
	{ "{\"n\":9007199254740992}", "n" EXACT, NULL, 0 },
	{ "{\"n\":9007199254740993}", "n" EXACT, NULL, 0 },
	{ "{\"n\":-9007199254740993}", "n" EXACT, NULL, 0 },
	{ "{\"n\":99999999999999999999}", "n" EXACT, NULL, 0 },
	{ "{\"wide\":9007199254740993}", "wide" EXACT, NULL, 0 },
	{ "{\"amount\":100.000000000000001}", "amount" NOT_LITERAL, NULL, 0 },
	{ "{\"amount\":999999999999.9999999}", "amount" NOT_LITERAL, NULL, 0 },
	{ "{\"amount\":1e2}", "amount" NOT_LITERAL, NULL, 0 },
	{ "{\"amount\":1.0}", "amount" NOT_LITERAL, NULL, 0 },
	{ "{\"amount\":-0}", AMOUNT, NULL, 0 },
	{ "{\"amount\":9007199254740993}", AMOUNT, NULL, 0 },
	{ "{\"amount\":1000000000001}", AMOUNT, NULL, 0 },
	{ "{\"n\":\"1\"}", "n: must be an integer", NULL, 0 },
};

static void
test_integers(void)
{
	char		 why[320];
	yajl_val	 v, m;
	size_t		 i;
	int		 rc;

	for (i = 0; i < sizeof(icases) / sizeof(icases[0]); i++) {
		v = yajl_tree_parse(icases[i].body, NULL, 0);
		rc = v != NULL ? idem_validate(v, &ints, why, sizeof(why)) : -2;
		if (icases[i].why == NULL) {
			TAP_OK(rc == 0, "integer valid: %s (%s)", icases[i].body,
			    why);
			m = v != NULL ? v->u.object.values[0] : NULL;
			TAP_OK(m != NULL && YAJL_IS_INTEGER(m) &&
			    YAJL_GET_INTEGER(m) == icases[i].value,
			    "  the value read is the literal's, %lld",
			    icases[i].value);
		} else {
			TAP_OK(rc == -1, "integer refused: %s", icases[i].body);
			TAP_STREQ(rc == -1 ? why : NULL, icases[i].why,
			    "  detail");
		}
		if (v != NULL)
			yajl_tree_free(v);
	}
}

/* --- every failure, by JSON Pointer ---------------------------------------- */

static const char *const many[] = { "alpha", "bravo", "charlie", "delta",
	"echo", "foxtrot", "golf", "hotel", "india", "juliett", "kilo",
	"lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
	"sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee",
	"zulu", NULL };
static const struct idem_body nato = { (const struct idem_member[]){
	{ .name = "word", .type = IDEM_T_STRING, .oneof = many },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static void
test_errors(void)
{
	static const struct {
		const struct idem_body	*schema;
		const char		*body;
		size_t			 n;
		const char		*errors;	/* pointer=detail|... */
	} t[] = {
		{ &schema, "{\"amount\":1}", 0, "" },
		{ &schema, "[]", 1, "=must be a JSON object" },
		{ &schema, "{\"amount\":\"1\",\"code\":\"ABC\",\"colour\":"
		  "\"blue\",\"flag\":1,\"extra\":2}", 5,
		  "/extra=unknown member|"
		  "/amount=must be an integer|"
		  "/code=is not in the expected format|"
		  "/colour=must be one of: \"red\", \"green\"|"
		  "/flag=must be true or false" },
		{ &schema, "{\"meta\":{\"a/b\":1,\"t~\":null},"
		  "\"inner\":{\"y\":1}}", 5,
		  "/amount=is required|"
		  "/meta/a~1b=must be a string|"
		  "/meta/t~0=must not be null|"
		  "/inner/y=unknown member|"
		  "/inner/x=is required" },
		/* Each item of an array has its pointer. */
		{ &schema, "{\"amount\":1,\"tags\":[\"blue\",null]}", 2,
		  "/tags/0=must be one of: \"red\", \"green\"|"
		  "/tags/1=must not be null" },
		/* One failure per member: the first rule it breaks. */
		{ &schema, "{\"amount\":1,\"code\":\"AB\"}", 1,
		  "/code=must be 3 characters long" },
		/* A long enum is listed as far as it fits. */
		{ &nato, "{\"word\":\"alfa\"}", 1,
		  "/word=must be one of: \"alpha\", \"bravo\", \"charlie\", "
		  "\"delta\", \"echo\", \"foxtrot\", \"golf\", \"hotel\", "
		  "\"india\", \"juliett\", \"kilo\", \"lima\", \"mike\", "
		  "\"november\", \"oscar\", \"papa\", \"quebec\", \"romeo\", "
		  "\"sierra\", \"tango\", ..." },
	};
	struct idem_validation_error	 errs[8];
	char				 got[2048], why[320];
	yajl_val			 v;
	size_t				 i, j, n, len;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v = yajl_tree_parse(t[i].body, NULL, 0);
		n = idem_validate_errors(v, t[i].schema, errs, 8);
		got[0] = '\0';
		for (j = 0, len = 0; j < n && j < 8; j++)
			len += (size_t)snprintf(got + len, sizeof(got) - len,
			    "%s%s=%s", j > 0 ? "|" : "", errs[j].pointer,
			    errs[j].detail);
		TAP_OK(n == t[i].n, "%s: %lu failures", t[i].body,
		    (unsigned long)t[i].n);
		TAP_STREQ(got, t[i].errors, "  listed by pointer");
		if (n > 0) {
			TAP_OK(idem_validate(v, t[i].schema, why, sizeof(why)) ==
			    -1 && strstr(why, errs[0].detail) != NULL,
			    "  idem_validate() names the first: %s", why);
		}
		yajl_tree_free(v);
	}

	/* More failures than room: all counted, the first max listed. */
	v = yajl_tree_parse("{\"a\":1,\"b\":1,\"c\":1,\"d\":1}", NULL, 0);
	n = idem_validate_errors(v, &schema, errs, 2);
	TAP_OK(n == 5 && strcmp(errs[0].pointer, "/a") == 0 &&
	    strcmp(errs[1].pointer, "/b") == 0, "5 failures, 2 listed "
	    "(%lu)", (unsigned long)n);
	TAP_OK(idem_validate_errors(v, &schema, NULL, 0) == 5,
	    "counted without a list");
	yajl_tree_free(v);
}

/* --- phases ------------------------------------------------------------- */

static char trail[64];

static int
ph(idem_req *req, void *arg)
{
	(void)req;
	strncat(trail, arg, sizeof(trail) - strlen(trail) - 1);
	return strcmp(arg, "E") == 0 ? IDEM_PHASE_END :
	    strcmp(arg, "X") == 0 ? -1 : IDEM_PHASE_NEXT;
}

static int
pa(idem_req *req, void *arg) { (void)arg; return ph(req, "a"); }
static int
pb(idem_req *req, void *arg) { (void)arg; return ph(req, "b"); }
static int
pc(idem_req *req, void *arg) { (void)arg; return ph(req, "c"); }
static int
pend(idem_req *req, void *arg) { (void)arg; return ph(req, "E"); }
static int
pfail(idem_req *req, void *arg) { (void)arg; return ph(req, "X"); }

static void
test_phases(void)
{
	static const struct idem_phase abc[] = { { "started", pa },
	    { "two", pb }, { "three", pc }, { NULL, NULL } };
	static const struct idem_phase early[] = { { "started", pa },
	    { "two", pend }, { "three", pc }, { NULL, NULL } };
	static const struct idem_phase bad[] = { { "started", pfail },
	    { "two", pb }, { NULL, NULL } };
	static const struct {
		const struct idem_phase	*t;
		const char		*point;	/* "": atomic, no point */
		int			 rc;
		const char		*trail;
	} pcases[] = {
		{ abc, "", 0, "abc" },
		{ abc, "two", 0, "bc" },
		{ abc, "three", 0, "c" },
		{ abc, "nowhere", -1, "" },
		{ early, "", 0, "aE" },
		{ bad, "", -1, "X" },
	};
	idem_req	req;
	size_t		i;
	int		rc;

	for (i = 0; i < sizeof(pcases) / sizeof(pcases[0]); i++) {
		memset(&req, 0, sizeof(req));
		strcpy(req.txn.recovery_point, pcases[i].point);
		trail[0] = '\0';
		rc = idem_req_phases(&req, pcases[i].t, NULL);
		TAP_OK(rc == pcases[i].rc && strcmp(trail, pcases[i].trail) == 0,
		    "phases from \"%s\": rc %d, ran \"%s\" (want %d, \"%s\")",
		    pcases[i].point, rc, trail, pcases[i].rc, pcases[i].trail);
	}
	memset(&req, 0, sizeof(req));
	TAP_OK(idem_req_phases(&req, NULL, NULL) == -1, "no table: -1");
}

/* --- the OpenAPI document of a small app ------------------------------- */

/* app's OpenAPI document (its JSON in *j), checked to hold each of the n
 * strings of want; NULL when there is none. */
static const char *
openapi_has(idem_app *app, idem_json **j, size_t *len,
    const char *const *want, size_t n)
{
	const char	*doc;
	size_t		 i;

	*j = idem_openapi(app);
	doc = idem_json_buf(*j, len);
	TAP_OK(doc != NULL, "openapi: a document");
	for (i = 0; doc != NULL && i < n; i++)
		TAP_OK(strstr(doc, want[i]) != NULL, "openapi has %s", want[i]);
	return doc;
}

/* The document shown when a check failed; then it and app freed. */
static void
openapi_done(idem_app *app, idem_json *j, const char *doc, size_t len)
{
	if (tap_failed && doc != NULL)
		printf("# %.*s\n", (int)len, doc);
	idem_json_free(j);
	idem_app_free(app);
}

static void
test_openapi(void)
{
	static const char conf[] = "[server]\nrequest_timeout = 1s\n"
	    "[idempotency]\nlease = 4500ms\n"
	    "ttl = 2d\n[route \"POST /x/:id\"]\nttl = 3d\n";
	static const char *const want[] = {
		"\"openapi\":\"3.1.0\"",
		"\"/x/{id}\":{\"post\":",
		"{\"name\":\"id\",\"in\":\"path\",\"required\":true",
		"{\"name\":\"Idempotency-Key\",\"in\":\"header\","
		    "\"required\":true",
		"\"x-idempotency\":{\"required\":true,\"retention_seconds\":"
		    "259200,\"lease_seconds\":4.500,\"lock_timeout_seconds\":"
		    "4.500}",
		"\"/y\":{\"post\":{\"operationId\":\"post_y\",\"summary\":"
		    "\"POST /y\",\"parameters\":[{\"name\":\"Idempotency-Key\"",
		"\"retention_seconds\":172800,",
		"\"required\":[\"amount\"],\"additionalProperties\":false",
		"\"meta\":{\"type\":[\"object\",\"null\"],\"minProperties\":0,"
		    "\"maxProperties\":2,\"properties\":{},\"required\":[],"
		    "\"additionalProperties\":{\"type\":\"string\",\"minLength\":"
		    "0,\"maxLength\":5},\"propertyNames\":"
		    "{\"minLength\":1,\"maxLength\":4}}",
		"\"colour\":{\"type\":[\"string\",\"null\"],\"enum\":"
		    "[\"red\",\"green\",null]}",
		"\"/z\":{\"get\":{\"operationId\":\"get_z\",\"summary\":"
		    "\"GET /z\",\"parameters\":[],\"responses\":{\"2XX\"",
		"\"security\":[]}",
		"{\"type\":\"/problems/validation-error\",\"status\":400,",
	};
	idem_app	*app = idem_app_new("t");
	idem_json	*j;
	const char	*doc;
	char		 err[256];
	size_t		 len;

	TAP_OK(app != NULL && idem_cfg_parse(&app->cfg, "t.ini", conf,
	    sizeof(conf) - 1, err, sizeof(err)) == 0, "openapi: a config (%s)",
	    err);
	idem_app_route(app, "POST", "/x/:id", IDEM_ROUTE_IDEMPOTENT, nop, NULL);
	idem_app_route(app, "POST", "/y", IDEM_ROUTE_IDEMPOTENT, nop, NULL);
	idem_app_route(app, "GET", "/z", IDEM_ROUTE_PUBLIC, nop, NULL);
	TAP_OK(idem_app_route_body(app, "POST", "/x/:id", &schema) == 0,
	    "openapi: a body declared");
	TAP_OK(idem_app_route_body(app, "POST", "/x/:id", &schema) == -1 &&
	    idem_app_route_body(app, "GET", "/z", &schema) == -1 &&
	    idem_app_route_body(app, "POST", "/nope", &schema) == -1,
	    "route_body: twice, on a route without JSON, on no route: -1");
	doc = openapi_has(app, &j, &len, want, sizeof(want) / sizeof(want[0]));
	/* No servers means "/" in OpenAPI: said, for linters' sake. */
	TAP_OK(doc != NULL && strstr(doc, "\"servers\":[{\"url\":\"/\"}]") !=
	    NULL && strstr(doc, "\"license\"") == NULL &&
	    strstr(doc, "\"webhooks\"") == NULL,
	    "openapi: servers \"/\", no license nor webhooks unless "
	    "configured");
	openapi_done(app, j, doc, len);
}

/*
 * What routes declare for the document (idem_app_route_response(),
 * _problems(), _summary()): refused when wrong, emitted when right; and
 * [openapi] server_url and license.
 */
static void
test_openapi_declared(void)
{
	static const char conf[] = "[openapi]\nserver_url = "
	    "https://api.example.org/v1\nlicense = MIT\n";
	static const struct idem_response made[] = {
		{ 201, &schema, IDEM_RESPONSE_LOCATION, "made" },
		{ 0, NULL, 0, NULL } };
	static const struct idem_response page[] = {
		{ 200, &inner, IDEM_RESPONSE_LIST, "a page" },
		{ 0, NULL, 0, NULL } };
	static const struct idem_response bad[][3] = {
		{ { 300, &schema, 0, NULL }, { 0, NULL, 0, NULL } },
		{ { 199, NULL, 0, NULL }, { 0, NULL, 0, NULL } },
		{ { 200, NULL, 0, NULL }, { 200, &inner, 0, NULL },
		  { 0, NULL, 0, NULL } },
		{ { 0, NULL, 0, NULL } } };
	static const char *const declined[] = { "declined", "busy", NULL };
	static const char *const unknown[] = { "nope", NULL };
	static const char *const library[] = { "not-found", NULL };
	static const char *const want[] = {
		"\"servers\":[{\"url\":\"https://api.example.org/v1\"}]",
		"\"license\":{\"name\":\"MIT\",\"identifier\":\"MIT\"}",
		"\"/p\":{\"post\":{\"operationId\":\"makeP\",\"summary\":"
		    "\"Make a p\",",
		"\"/p/{id}\":{\"get\":{\"operationId\":\"get_p_id\","
		    "\"summary\":\"GET /p/{id}\",",
		"\"201\":{\"description\":\"made\",\"headers\":{\"Location\":"
		    "{\"$ref\":\"#/components/headers/Location\"},"
		    "\"Idempotency-Key-Expires\":",
		"\"Idempotent-Replayed\":{\"$ref\":"
		    "\"#/components/headers/IdempotentReplayed\"}",
		/* in a response every member is present, optional ones null */
		"\"required\":[\"amount\",\"code\",\"colour\",\"note\","
		    "\"flag\",\"meta\",\"inner\",\"tags\"]",
		/* an array: its count, unique items, the items' schema */
		"\"tags\":{\"type\":[\"array\",\"null\"],\"minItems\":1,"
		    "\"maxItems\":2,\"uniqueItems\":true,\"items\":{\"type\":"
		    "\"string\",\"enum\":[\"red\",\"green\"]}}",
		"\"402\":{\"description\":\"Declined\",",
		"{\"enum\":[\"/problems/declined\"]}",
		/* the application's 409 beside the in-flight one: both types,
		 * Retry-After (the in-flight's) and a stored answer's headers
		 * (the application's) */
		"\"409\":{\"description\":\"A request with this "
		    "Idempotency-Key is in progress; Busy\",\"headers\":{"
		    "\"Retry-After\":{\"$ref\":\"#/components/headers/"
		    "RetryAfter\"},\"Idempotency-Key-Expires\":{\"$ref\":"
		    "\"#/components/headers/IdempotencyKeyExpires\"},"
		    "\"Idempotent-Replayed\":{\"$ref\":\"#/components/headers/"
		    "IdempotentReplayed\"}},",
		"{\"enum\":[\"/problems/idempotency-key-in-flight\","
		    "\"/problems/busy\"]}",
		"\"200\":{\"description\":\"a page\",\"content\":"
		    "{\"application/json\":{\"schema\":{\"type\":\"object\","
		    "\"properties\":{\"object\":{\"type\":\"string\",\"const\":"
		    "\"list\"},\"data\":{\"type\":\"array\",\"items\":"
		    "{\"type\":\"object\",\"properties\":{\"x\":",
		"\"/m\":{\"get\":{\"operationId\":\"get_m\"",
		/* derived alike: each made unique by its route's index */
		"\"/a-b\":{\"get\":{\"operationId\":\"get_a_b_4\",\"summary\":"
		    "\"GET /a-b\"",
		"\"/a_b\":{\"get\":{\"operationId\":\"get_a_b_5\",",
		/* the webhooks: after the paths, each a POST to a receiver */
		"},\"webhooks\":{\"p.made\":{\"post\":{\"operationId\":"
		    "\"webhook_p_made\",\"summary\":\"A p was made\",",
		"{\"name\":\"webhook-id\",\"in\":\"header\",\"required\":true,",
		"{\"name\":\"webhook-timestamp\",\"in\":\"header\",",
		"{\"name\":\"webhook-signature\",\"in\":\"header\",",
		"\"type\":{\"type\":\"string\",\"const\":\"p.made\"},"
		    "\"created\":{\"type\":\"integer\",",
		"\"data\":{\"type\":\"object\",\"properties\":{\"x\":"
		    "{\"type\":\"integer\"}},\"required\":[\"x\"],"
		    "\"additionalProperties\":false}},\"required\":[\"id\","
		    "\"type\",\"created\",\"data\"],\"additionalProperties\":"
		    "false}}}},\"responses\":{\"2XX\":",
		"\"webhook_p_made_2\"",
	};
	idem_app	*app = idem_app_new("t");
	idem_json	*j;
	const char	*doc, *m, *end;
	char		 err[256], long_type[IDEM_EVENT_TYPE_MAX + 2];
	size_t		 i, len, doclen;

	memset(long_type, 'a', sizeof(long_type) - 1);
	long_type[sizeof(long_type) - 1] = '\0';
	TAP_OK(app != NULL && idem_cfg_parse(&app->cfg, "t.ini", conf,
	    sizeof(conf) - 1, err, sizeof(err)) == 0, "openapi: [openapi] "
	    "server_url and license (%s)", err);
	TAP_OK(idem_app_problem(app, "declined", 402, "Declined", NULL) > 0 &&
	    idem_app_problem(app, "busy", 409, "Busy", NULL) > 0,
	    "openapi: application problem types (a 402, a 409)");
	idem_app_route(app, "POST", "/p", IDEM_ROUTE_IDEMPOTENT, nop, NULL);
	idem_app_route(app, "GET", "/p/:id", 0, nop, NULL);
	idem_app_route(app, "GET", "/p", 0, nop, NULL);
	idem_app_route(app, "GET", "/m", IDEM_ROUTE_LOCAL, nop, NULL);
	idem_app_route(app, "GET", "/a-b", 0, nop, NULL);
	idem_app_route(app, "GET", "/a_b", 0, nop, NULL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		TAP_OK(idem_app_route_response(app, "POST", "/p", bad[i]) == -1,
		    "route_response: bad list %lu refused", (unsigned long)i);
	TAP_OK(idem_app_route_response(app, "POST", "/nope", made) == -1 &&
	    idem_app_route_response(app, "POST", "/p", NULL) == -1,
	    "route_response: no route, no list: -1");
	TAP_OK(idem_app_route_response(app, "POST", "/p", made) == 0 &&
	    idem_app_route_response(app, "GET", "/p", page) == 0,
	    "route_response: declared");
	TAP_OK(idem_app_route_response(app, "POST", "/p", made) == -1,
	    "route_response: twice: -1");
	TAP_OK(idem_app_route_problems(app, "POST", "/p", unknown) == -1 &&
	    idem_app_route_problems(app, "POST", "/p", library) == -1 &&
	    idem_app_route_problems(app, "POST", "/nope", declined) == -1,
	    "route_problems: an unknown slug, a library type, no route: -1");
	TAP_OK(idem_app_route_problems(app, "POST", "/p", declined) == 0 &&
	    idem_app_route_problems(app, "POST", "/p", declined) == -1,
	    "route_problems: declared, then twice: -1");
	TAP_OK(idem_app_route_summary(app, "POST", "/p", "make p", "x") == -1 &&
	    idem_app_route_summary(app, "POST", "/p", "", "x") == -1 &&
	    idem_app_route_summary(app, "POST", "/p", "makeP", "a\nb") == -1 &&
	    idem_app_route_summary(app, "POST", "/p", "makeP", NULL) == -1,
	    "route_summary: bad operationId or summary: -1");
	TAP_OK(idem_app_route_summary(app, "POST", "/p", "makeP",
	    "Make a p") == 0, "route_summary: declared");
	TAP_OK(idem_app_route_summary(app, "GET", "/p", "makeP", "x") == -1 &&
	    idem_app_route_summary(app, "POST", "/p", "makeQ", "x") == -1,
	    "route_summary: an operationId taken, twice: -1");
	/* What idem_req_enqueue() accepts: 1 to 128 letters, digits, '.',
	 * '_' and '-'. */
	TAP_OK(idem_app_webhook(app, long_type, "x", &inner) == -1 &&
	    idem_app_webhook(app, "", "x", &inner) == -1 &&
	    idem_app_webhook(app, "p made", "x", &inner) == -1 &&
	    idem_app_webhook(app, "p.made", "a\nb", &inner) == -1 &&
	    idem_app_webhook(app, "p.made", "x", NULL) == -1,
	    "webhook: a bad type, summary or data: -1");
	TAP_OK(idem_app_webhook(app, "p.made", "A p was made", &inner) == 0 &&
	    idem_app_webhook(app, "p.made-2", "Another", &inner) == 0,
	    "webhook: declared");
	TAP_OK(idem_app_webhook(app, "p.made", "again", &inner) == -1,
	    "webhook: a type twice: -1");
	long_type[IDEM_EVENT_TYPE_MAX] = '\0';
	TAP_OK(idem_app_webhook(app, "Order.Placed_v2", "Upper case", &inner) ==
	    0 && idem_app_webhook(app, long_type, "128 long", &inner) == 0,
	    "webhook: upper case, 128 characters: declared");
	doc = openapi_has(app, &j, &doclen, want, sizeof(want) / sizeof(want[0]));
	/* GET /p/:id declares no problem type: no 402 there. */
	m = doc != NULL ? strstr(doc, "\"/p/{id}\":") : NULL;
	TAP_OK(m != NULL && strstr(m, "\"402\"") == NULL,
	    "openapi: 402 only where declared");
	/* A LOCAL route: no credentials, so no 401 and no security (its
	 * path item ends where the next one, /a-b, starts). */
	m = doc != NULL ? strstr(doc, "\"/m\":") : NULL;
	end = m != NULL ? strstr(m, "\"/a-b\":") : NULL;
	TAP_OK(end != NULL && (len = (size_t)(end - m)) > 0 &&
	    memmem(m, len, "\"401\"", 5) == NULL &&
	    memmem(m, len, "\"security\":[]", 13) != NULL,
	    "openapi: a LOCAL route asks no credentials");
	openapi_done(app, j, doc, doclen);
}

/* [server] problem_base: what the config accepts as the types' base. */
static void
test_problem_base(void)
{
	static const struct { const char *v; int ok; } bases[] = {
		{ "/problems/", 1 }, { "/api/errors/", 1 },
		{ "https://docs.example.org/problems/", 1 },
		{ "urn:example:problems:/", 1 },
		{ "/problems", 0 }, { "problems/", 0 },
		{ "/pro blems/", 0 }, { "/p\"/", 0 }, { "/p>/", 0 },
		{ "/p</", 0 }, { "/\xc3\xa9/", 0 }, { "https:/", 0 },
	};
	struct idem_cfg	cfg;
	char		text[128], err[256];
	size_t		i;
	int		rc;

	for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		idem_cfg_init(&cfg);
		snprintf(text, sizeof(text), "[server]\nproblem_base = %s\n",
		    bases[i].v);
		rc = idem_cfg_parse(&cfg, "t.ini", text, strlen(text), err,
		    sizeof(err));
		TAP_OK(bases[i].ok ? rc == 0 && strcmp(cfg.problem_base,
		    bases[i].v) == 0 : rc == -1 && strstr(err, "t.ini:2: "
		    "problem_base must be") != NULL,
		    "problem_base = \"%s\" %s (%s)", bases[i].v,
		    bases[i].ok ? "accepted" : "refused at its line", err);
		idem_cfg_free(&cfg);
	}
	idem_cfg_init(&cfg);
	TAP_STREQ(cfg.problem_base, "/problems/", "problem_base defaults to "
	    "the app's own /problems/");
	idem_cfg_free(&cfg);
}

int
main(void)
{
	test_cases();
	test_integers();
	test_errors();
	test_phases();
	test_openapi();
	test_openapi_declared();
	test_problem_base();
	return TAP_DONE();
}
