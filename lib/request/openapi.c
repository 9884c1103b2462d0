/*
 * openapi.c - GET /openapi.json: an OpenAPI 3.1 document generated from
 * the route table, the declared bodies, responses and problem types
 * (idem_app_route_response(), idem_app_route_problems(),
 * idem_app_route_summary()) and, for each idempotent route, the retention
 * the running config enforces; the webhooks the application sends
 * (idem_app_webhook()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "outbox.h"

/* Seconds as a JSON number, exact for any millisecond value. */
static int
seconds(idem_json *j, long long ms)
{
	char	buf[32];

	if (ms % 1000 == 0)
		return idem_json_int(j, ms / 1000);
	snprintf(buf, sizeof(buf), "%lld.%03lld", ms / 1000, ms % 1000);
	return idem_json_number(j, buf);
}

static void schema_of_body(idem_json *j, const struct idem_body *b,
    int response);

static void
bounds(idem_json *j, const struct idem_member *m, const char *lo,
    const char *hi)
{
	if (m->min == 0 && m->max == 0)
		return;
	idem_json_kint(j, lo, m->min);
	idem_json_kint(j, hi, m->max);
}

/* A string member's bounds, pattern and choices. */
static void
string_schema(idem_json *j, const struct idem_member *m, int nullable)
{
	const char *const	*e;

	bounds(j, m, "minLength", "maxLength");
	if (m->pattern != NULL)
		idem_json_kstr(j, "pattern", m->pattern);
	if (m->oneof != NULL) {
		idem_json_key(j, "enum");
		idem_json_array(j);
		for (e = m->oneof; *e != NULL; e++)
			idem_json_str(j, *e);
		if (nullable)
			idem_json_null(j);
		idem_json_array_end(j);
	}
}

/* A member's JSON Schema; optional ones also accept null (as absent).
 * response: the schema of an answer's member (see struct idem_response). */
static void
schema_of_member(idem_json *j, const struct idem_member *m, int nullable,
    int response)
{
	static const char *const types[] = { [IDEM_T_INTEGER] = "integer",
	    [IDEM_T_STRING] = "string", [IDEM_T_BOOLEAN] = "boolean",
	    [IDEM_T_OBJECT] = "object", [IDEM_T_ARRAY] = "array" };
	const char		*t = m->type >= IDEM_T_INTEGER &&
	    m->type <= IDEM_T_ARRAY ? types[m->type] : "null";

	idem_json_object(j);
	idem_json_key(j, "type");
	if (nullable) {
		idem_json_array(j);
		idem_json_str(j, t);
		idem_json_str(j, "null");
		idem_json_array_end(j);
	} else
		idem_json_str(j, t);
	if (m->doc != NULL)
		idem_json_kstr(j, "description", m->doc);
	switch (m->type) {
	case IDEM_T_INTEGER:
		bounds(j, m, "minimum", "maximum");
		break;
	case IDEM_T_STRING:
		string_schema(j, m, nullable);
		break;
	case IDEM_T_OBJECT:
		bounds(j, m, "minProperties", "maxProperties");
		if (m->object != NULL)
			schema_of_body(j, m->object, response);
		break;
	case IDEM_T_ARRAY:
		bounds(j, m, "minItems", "maxItems");
		if (m->flags & IDEM_UNIQUE) {
			idem_json_key(j, "uniqueItems");
			idem_json_bool(j, 1);
		}
		if (m->items != NULL) {
			idem_json_key(j, "items");
			schema_of_member(j, m->items, 0, response);
		}
		break;
	default:
		break;
	}
	idem_json_object_end(j);
}

/*
 * The members of an object schema (properties, required, the rest).  In a
 * request an optional member may be absent or null; in a response
 * (response != 0) every member is present, an optional one maybe null.
 */
static void
schema_of_body(idem_json *j, const struct idem_body *b, int response)
{
	const struct idem_member	*m;

	idem_json_key(j, "properties");
	idem_json_object(j);
	for (m = b->members; m != NULL && m->name != NULL; m++) {
		idem_json_key(j, m->name);
		schema_of_member(j, m, !(m->flags & IDEM_REQUIRED), response);
	}
	idem_json_object_end(j);
	idem_json_key(j, "required");
	idem_json_array(j);
	for (m = b->members; m != NULL && m->name != NULL; m++)
		if (response || (m->flags & IDEM_REQUIRED))
			idem_json_str(j, m->name);
	idem_json_array_end(j);
	idem_json_key(j, "additionalProperties");
	if (!(b->flags & IDEM_BODY_OPEN))
		idem_json_bool(j, 0);
	else if (b->rest != NULL)
		schema_of_member(j, b->rest, 0, response);
	else
		idem_json_bool(j, 1);
	if ((b->flags & IDEM_BODY_OPEN) && (b->name_min || b->name_max)) {
		idem_json_key(j, "propertyNames");
		idem_json_object(j);
		idem_json_kint(j, "minLength", b->name_min);
		idem_json_kint(j, "maxLength", b->name_max);
		idem_json_object_end(j);
	}
}

/* Is slug one of the application problem types route rt declared? */
static int
declared(const struct idem_route *rt, const char *slug)
{
	const char *const	*s;

	for (s = rt->problems; s != NULL && *s != NULL; s++)
		if (strcmp(*s, slug) == 0)
			return 1;
	return 0;
}

/* Can route rt answer with problem p? */
static int
answers(const idem_app *app, const struct idem_route *rt,
    enum idem_problem p)
{
	struct idem_route_limits	l;
	unsigned			f = rt->flags;

	switch (p) {
	case IDEM_P_KEY_MISSING: case IDEM_P_KEY_INVALID:
		/* A signed source's key is its message id (receive.c). */
		return (f & IDEM_ROUTE_IDEMPOTENT) != 0 && rt->inbox == NULL;
	case IDEM_P_KEY_IN_FLIGHT: case IDEM_P_KEY_REUSED:
		return (f & IDEM_ROUTE_IDEMPOTENT) != 0;
	case IDEM_P_WEBHOOK_SIGNATURE: case IDEM_P_WEBHOOK_TIMESTAMP:
		return rt->inbox != NULL;
	case IDEM_P_KEY_EXPIRED:
		/* Only a route that remembers its keys past their expiry. */
		idem_cfg_route_limits(&app->cfg, rt->method, rt->pattern, &l);
		return (f & IDEM_ROUTE_IDEMPOTENT) != 0 && l.remember_ms > 0;
	case IDEM_P_INVALID_JSON: case IDEM_P_MEDIA_TYPE:
		return (f & IDEM_ROUTE_JSON) != 0;
	case IDEM_P_VALIDATION:
		/* Any route: a query string over request.c's bound, a
		 * Content-Length that is not a number. */
		return 1;
	case IDEM_P_TOO_LARGE:
		/* Any route: a Content-Length over [server] max_body. */
		return 1;
	case IDEM_P_UNAUTHORIZED:
		return !(f & (IDEM_ROUTE_PUBLIC | IDEM_ROUTE_LOCAL));
	case IDEM_P_NOT_FOUND:
		/* An inbox route without its [inbox] section: 404. */
		return strchr(rt->pattern, ':') != NULL ||
		    (f & IDEM_ROUTE_LOCAL) != 0 || rt->inbox != NULL;
	case IDEM_P_UNAVAILABLE: case IDEM_P_INTERNAL:
		return 1;
	default:
		/* The application's own, and the library's routes' own
		 * (webhook-endpoint-limit): those the route declared. */
		return declared(rt, idem_problem_type(app, p)->slug);
	}
}

/* A reference to components/headers/name, under key (the header). */
static void
header_ref(idem_json *j, const char *key, const char *name)
{
	char	ref[64];

	snprintf(ref, sizeof(ref), "#/components/headers/%s", name);
	idem_json_key(j, key);
	idem_json_object(j);
	idem_json_kstr(j, "$ref", ref);
	idem_json_object_end(j);
}

/* A body's content of one media type, open at its schema's members;
 * content_end() closes what it opened. */
static void
content(idem_json *j, const char *media)
{
	idem_json_key(j, "content");
	idem_json_object(j);
	idem_json_key(j, media);
	idem_json_object(j);
	idem_json_key(j, "schema");
	idem_json_object(j);
}

static void
content_end(idem_json *j)
{
	idem_json_object_end(j);
	idem_json_object_end(j);
	idem_json_object_end(j);
}

/*
 * The library's own routes: what they are and answer (a media type, its
 * JSON type).  The application's routes declare theirs.
 */
static const struct builtin {
	idem_handler_fn	 fn;
	const char	*operation_id, *summary, *media, *type;
} builtins[] = {
	{ idem_metrics_handler, "getMetrics", "Prometheus metrics (only to "
	  "[metrics] allow addresses, without credentials)",
	  "text/plain", "string" },
	{ idem_openapi_handler, "getOpenApi", "This OpenAPI document",
	  "application/json", "object" },
	{ idem_problem_doc_handler, "getProblemType", "The documentation page "
	  "of a problem type", "text/html", "string" },
};

static const struct builtin *
builtin(const struct idem_route *rt)
{
	size_t	i;

	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (builtins[i].fn == rt->fn)
			return &builtins[i];
	return NULL;
}

/* The headers of an answer stored under the key: the first answer and
 * every replay. */
static void
stored_refs(idem_json *j)
{
	header_ref(j, "Idempotency-Key-Expires", "IdempotencyKeyExpires");
	header_ref(j, "Idempotent-Replayed", "IdempotentReplayed");
}

/* The headers of a success (or a stored 4xx) of route rt. */
static void
success_headers(idem_json *j, const struct idem_route *rt, int location)
{
	if (!location && !(rt->flags & IDEM_ROUTE_IDEMPOTENT))
		return;
	idem_json_key(j, "headers");
	idem_json_object(j);
	if (location)
		header_ref(j, "Location", "Location");
	if (rt->flags & IDEM_ROUTE_IDEMPOTENT)
		stored_refs(j);
	idem_json_object_end(j);
}

/* name: {"type": type} and, unless key is NULL, key: value: a member of
 * one of the library's own objects. */
static void
typed(idem_json *j, const char *name, const char *type, const char *key,
    const char *value)
{
	idem_json_key(j, name);
	idem_json_object(j);
	idem_json_kstr(j, "type", type);
	if (key != NULL)
		idem_json_kstr(j, key, value);
	idem_json_object_end(j);
}

/* name: an object of body b's members, as a response has them. */
static void
body_object(idem_json *j, const char *name, const struct idem_body *b)
{
	idem_json_key(j, name);
	idem_json_object(j);
	idem_json_kstr(j, "type", "object");
	schema_of_body(j, b, 1);
	idem_json_object_end(j);
}

/* An object's members all required (names, NULL-ended), no others. */
static void
closed(idem_json *j, const char *const *names)
{
	idem_json_key(j, "required");
	idem_json_array(j);
	for (; *names != NULL; names++)
		idem_json_str(j, *names);
	idem_json_array_end(j);
	idem_json_key(j, "additionalProperties");
	idem_json_bool(j, 0);
}

/* idem_resp_list()'s envelope of body b's objects. */
static void
list_schema(idem_json *j, const struct idem_body *b)
{
	static const char *const members[] = { "object", "data", "has_more",
	    NULL };

	idem_json_key(j, "properties");
	idem_json_object(j);
	typed(j, "object", "string", "const", "list");
	idem_json_key(j, "data");
	idem_json_object(j);
	idem_json_kstr(j, "type", "array");
	body_object(j, "items", b);
	idem_json_object_end(j);
	typed(j, "has_more", "boolean", NULL, NULL);
	idem_json_object_end(j);
	closed(j, members);
}

/* A declared success: its schema from the route's struct idem_body. */
static void
success(idem_json *j, const struct idem_route *rt,
    const struct idem_response *r)
{
	char	code[8];

	snprintf(code, sizeof(code), "%d", r->status);
	idem_json_key(j, code);
	idem_json_object(j);
	idem_json_kstr(j, "description", r->doc != NULL ? r->doc :
	    "the handler's answer");
	success_headers(j, rt, (r->flags & IDEM_RESPONSE_LOCATION) != 0);
	if (r->body != NULL) {
		content(j, "application/json");
		idem_json_kstr(j, "type", "object");
		if (r->flags & IDEM_RESPONSE_LIST)
			list_schema(j, r->body);
		else
			schema_of_body(j, r->body, 1);
		content_end(j);
	}
	idem_json_object_end(j);
}

/* Does route rt answer problem p with this status? */
static int
lists(const idem_app *app, const struct idem_route *rt, int p, int status)
{
	return idem_problem_type(app, p)->status == status &&
	    answers(app, rt, p);
}

/* The problem schema with the type URIs of this status, for a client to
 * act on. */
static void
problem_types_of(idem_json *j, const idem_app *app,
    const struct idem_route *rt, int status)
{
	char		 uri[512];
	int		 p;

	idem_json_key(j, "allOf");
	idem_json_array(j);
	idem_json_object(j);
	idem_json_kstr(j, "$ref", "#/components/schemas/Problem");
	idem_json_object_end(j);
	idem_json_object(j);
	idem_json_key(j, "properties");
	idem_json_object(j);
	idem_json_key(j, "type");
	idem_json_object(j);
	idem_json_key(j, "enum");
	idem_json_array(j);
	for (p = 0; p < idem_problem_count(app); p++)
		if (lists(app, rt, p, status)) {
			snprintf(uri, sizeof(uri), "%s%s", idem_problem_base(app),
			    idem_problem_type(app, p)->slug);
			idem_json_str(j, uri);
		}
	idem_json_array_end(j);		/* enum */
	idem_json_object_end(j);	/* type */
	idem_json_object_end(j);	/* properties */
	idem_json_object_end(j);
	idem_json_array_end(j);		/* allOf */
}

/*
 * The headers of the problems of one status: Retry-After on 503 and on
 * idempotency-key-in-flight's 409; those of a stored answer on what a
 * handler answers on an idempotent route (a 4xx, but 401, 413 and 415,
 * the middleware's alone, and 409, the key protocol's, unless an
 * application type of that status is listed; a 5xx is never stored).
 */
static void
problem_headers(idem_json *j, const idem_app *app,
    const struct idem_route *rt, int status)
{
	int	retry, stored, app_type = 0, p;

	for (p = IDEM_P__MAX; p < idem_problem_count(app); p++)
		app_type |= lists(app, rt, p, status);
	retry = status == 503 || lists(app, rt, IDEM_P_KEY_IN_FLIGHT, status);
	stored = (rt->flags & IDEM_ROUTE_IDEMPOTENT) && status < 500 &&
	    (app_type || (status != 401 && status != 409 && status != 413 &&
	    status != 415));
	if (!retry && !stored)
		return;
	idem_json_key(j, "headers");
	idem_json_object(j);
	if (retry)
		header_ref(j, "Retry-After", "RetryAfter");
	if (stored)
		stored_refs(j);
	idem_json_object_end(j);
}

/*
 * The problems of one status that route rt can answer, if any: their
 * titles as the description, their type URIs as the schema's enum.
 */
static void
problems(idem_json *j, const idem_app *app, const struct idem_route *rt,
    int status)
{
	char		 code[8], desc[2048];
	int		 p, n = 0;

	desc[0] = '\0';
	for (p = 0; p < idem_problem_count(app); p++)
		if (lists(app, rt, p, status))
			snprintf(desc + strlen(desc), sizeof(desc) - strlen(desc),
			    "%s%s", n++ ? "; " : "",
			    idem_problem_type(app, p)->title);
	if (n == 0)
		return;
	if (status == 404 && (rt->flags & IDEM_ROUTE_LOCAL))
		snprintf(desc + strlen(desc), sizeof(desc) - strlen(desc),
		    " (also the answer to a client outside [metrics] allow)");
	snprintf(code, sizeof(code), "%d", status);
	idem_json_key(j, code);
	idem_json_object(j);
	idem_json_kstr(j, "description", desc);
	problem_headers(j, app, rt, status);
	content(j, "application/problem+json");
	problem_types_of(j, app, rt, status);
	content_end(j);
	idem_json_object_end(j);	/* the response */
}

static void
responses(idem_json *j, const idem_app *app, const struct idem_route *rt)
{
	const struct builtin		*bi = builtin(rt);
	const struct idem_response	*r;
	int				 status;

	idem_json_key(j, "responses");
	idem_json_object(j);
	if (rt->responses != NULL)
		for (r = rt->responses; r->status != 0; r++)
			success(j, rt, r);
	else if (bi != NULL) {
		idem_json_key(j, "200");
		idem_json_object(j);
		idem_json_kstr(j, "description", bi->summary);
		content(j, bi->media);
		idem_json_kstr(j, "type", bi->type);
		content_end(j);
		idem_json_object_end(j);
	} else {
		idem_json_key(j, "2XX");
		idem_json_object(j);
		idem_json_kstr(j, "description", "the handler's answer "
		    "(undeclared: see idem_app_route_response(3))");
		success_headers(j, rt, 0);
		idem_json_object_end(j);
	}
	for (status = 400; status < 600; status++)
		problems(j, app, rt, status);
	idem_json_object_end(j);
}

/*
 * The Idempotency-Key field value as key.c parses it (ECMA-262): SP
 * around; an sf-string of 1 to 255 characters; an sf-token; or the
 * compatibility form, a bare value starting with a digit, "-" or "_" that
 * is not a number.  At most 2 + 2 * 255 characters (all escaped).
 */
static const char key_pattern[] =
	"^ *(?:\"(?:[ !#-\\[\\]-~]|\\\\[\"\\\\]){1,255}\""
	"|[A-Za-z*][!#$%&'*+.^_`|~:/0-9A-Za-z-]{0,254}"
	"|(?!-?[0-9]+(?:\\.[0-9]*)? *$)[0-9_-][!#$%&'*+.^_`|~:/0-9A-Za-z-]"
	"{0,254}) *$";

static const char key_doc[] =
	"An RFC 8941 Item that is a String (\"abc\") or a Token (abc), "
	"without parameters; the key is its value, 1 to 255 characters, so "
	"\"abc\" and abc are one key.  Also accepted bare: a value starting "
	"with a digit, '-' or '_' (a UUID) made of token characters that is "
	"not a number.  Refused (400 idempotency-key-invalid, the reason in "
	"the detail): parameters, lists, inner lists, Integers, Decimals, "
	"Booleans, Byte Sequences, Dates, Display Strings, empty values.";

static void
parameter(idem_json *j, const char *name, const char *in, const char *pat,
    const char *doc, long maxlen)
{
	idem_json_object(j);
	idem_json_kstr(j, "name", name);
	idem_json_kstr(j, "in", in);
	idem_json_key(j, "required");
	idem_json_bool(j, 1);
	if (doc != NULL)
		idem_json_kstr(j, "description", doc);
	idem_json_key(j, "schema");
	idem_json_object(j);
	idem_json_kstr(j, "type", "string");
	if (maxlen > 0)
		idem_json_kint(j, "maxLength", maxlen);
	idem_json_kstr(j, "pattern", pat);
	idem_json_object_end(j);
	idem_json_object_end(j);
}

/* A declared query parameter (struct idem_param), as its schema. */
static void
query_parameter(idem_json *j, const struct idem_param *p)
{
	size_t	 i;

	idem_json_object(j);
	idem_json_kstr(j, "name", p->name);
	idem_json_kstr(j, "in", "query");
	idem_json_key(j, "required");
	idem_json_bool(j, (p->flags & IDEM_REQUIRED) != 0);
	if (p->doc != NULL)
		idem_json_kstr(j, "description", p->doc);
	idem_json_key(j, "schema");
	idem_json_object(j);
	switch (p->type) {
	case IDEM_T_INTEGER:
		idem_json_kstr(j, "type", "integer");
		if (p->min != 0 || p->max != 0) {
			idem_json_kint(j, "minimum", p->min);
			idem_json_kint(j, "maximum", p->max);
		}
		if (p->def != NULL)
			idem_json_kint(j, "default", strtoll(p->def, NULL, 10));
		break;
	case IDEM_T_BOOLEAN:
		idem_json_kstr(j, "type", "boolean");
		if (p->def != NULL) {
			idem_json_key(j, "default");
			idem_json_bool(j, strcmp(p->def, "true") == 0);
		}
		break;
	default:
		idem_json_kstr(j, "type", "string");
		if (p->oneof != NULL) {
			idem_json_key(j, "enum");
			idem_json_array(j);
			for (i = 0; p->oneof[i] != NULL; i++)
				idem_json_str(j, p->oneof[i]);
			idem_json_array_end(j);
		} else if (p->min != 0 || p->max != 0) {
			idem_json_kint(j, "minLength", p->min);
			idem_json_kint(j, "maxLength", p->max);
		}
		if (p->def != NULL)
			idem_json_kstr(j, "default", p->def);
		break;
	}
	idem_json_object_end(j);
	idem_json_object_end(j);
}

/* The method of route rt in lower case, as an operation's key. */
static void
lower_method(const struct idem_route *rt, char *buf, size_t len)
{
	size_t	i;

	for (i = 0; rt->method[i] != '\0' && i < len - 1; i++)
		buf[i] = (char)(rt->method[i] - 'A' + 'a');
	buf[i] = '\0';
}

/* "/v1/orders/:id" as "/v1/orders/{id}", into buf. */
static void
path_template(const char *pattern, char *buf, size_t len)
{
	size_t	o = 0;

	for (; *pattern != '\0' && o < len - 3; pattern++) {
		if (*pattern == ':') {
			buf[o++] = '{';
			while (pattern[1] != '\0' && pattern[1] != '/' &&
			    o < len - 3)
				buf[o++] = *++pattern;
			buf[o++] = '}';
		} else
			buf[o++] = *pattern;
	}
	buf[o] = '\0';
}

/*
 * The operationId of route rt: declared (idem_app_route_summary()), the
 * library's for its own routes, else derived into buf from the method and
 * the pattern ("get_v1_payments_id").
 */
static const char *
operation_id(const struct idem_route *rt, char *buf, size_t len)
{
	const struct builtin	*bi = builtin(rt);
	const char		*p;
	size_t			 o;

	if (rt->operation_id != NULL)
		return rt->operation_id;
	if (bi != NULL)
		return bi->operation_id;
	lower_method(rt, buf, len);
	for (o = strlen(buf), p = rt->pattern; *p != '\0' && o < len - 2;
	    p++) {
		if (*p == '/' || *p == '.' || *p == '~' || *p == '-') {
			if (buf[o - 1] != '_')
				buf[o++] = '_';
		} else if (*p != ':')
			buf[o++] = *p;
	}
	while (o > 1 && buf[o - 1] == '_')
		o--;
	buf[o] = '\0';
	return buf;
}

/*
 * operationId and summary: declared, the library's, or derived ("GET
 * /v1/payments/{id}"); a derived operationId another route has too
 * ("/a-b" and "/a_b") gets the route's index appended, so each is unique.
 */
static void
summary(idem_json *j, const idem_app *app, const struct idem_route *rt)
{
	const struct builtin	*bi = builtin(rt);
	const char		*id;
	char			 buf[256], other[256], tmpl[512], sum[600];
	size_t			 i, me = (size_t)(rt - app->router.routes);

	id = operation_id(rt, buf, sizeof(buf));
	for (i = 0; id == buf && i < app->router.nroutes; i++)
		if (i != me && strcmp(operation_id(&app->router.routes[i],
		    other, sizeof(other)), id) == 0) {
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			    "_%lu", (unsigned long)me);
			break;
		}
	idem_json_kstr(j, "operationId", id);
	if (rt->summary != NULL || bi != NULL) {
		idem_json_kstr(j, "summary", rt->summary != NULL ? rt->summary :
		    bi->summary);
		return;
	}
	path_template(rt->pattern, tmpl, sizeof(tmpl));
	snprintf(sum, sizeof(sum), "%s %s", rt->method, tmpl);
	idem_json_kstr(j, "summary", sum);
}

/* An operation's parameters: its path's, its key, its query. */
static void
operation_parameters(idem_json *j, const idem_app *app,
    const struct idem_route *rt)
{
	const char			*s;
	char				 name[64];
	size_t				 i;

	idem_json_key(j, "parameters");
	idem_json_array(j);
	/* The pattern is stored twice, the copy cut at each '/'. */
	for (s = rt->pattern; *s != '\0'; s++)
		if (*s == ':' && s[-1] == '/') {
			i = strcspn(s + 1, "/");
			snprintf(name, sizeof(name), "%.*s", (int)i, s + 1);
			parameter(j, name, "path", "^[A-Za-z0-9._~-]+$", NULL,
			    0);
		}
	if (rt->inbox != NULL)
		idem_inbox_openapi_params(j, &app->cfg, rt);
	else if (rt->flags & IDEM_ROUTE_IDEMPOTENT)
		parameter(j, "Idempotency-Key", "header", key_pattern,
		    key_doc, 2 + 2 * IDEM_KEY_MAX);
	for (i = 0; rt->query != NULL && rt->query[i].name != NULL; i++)
		query_parameter(j, &rt->query[i]);
	idem_json_array_end(j);
}

/* What the middleware enforces for an idempotent route, from the same
 * function it uses. */
static void
x_idempotency(idem_json *j, const idem_app *app, const struct idem_route *rt)
{
	struct idem_route_limits	 l;
	const char *const		*exclude;
	size_t				 i, nexclude;

	idem_cfg_route_limits(&app->cfg, rt->method, rt->pattern, &l);
	l.ttl_ms = idem_inbox_ttl_ms(&app->cfg, rt, l.ttl_ms);
	idem_json_key(j, "x-idempotency");
	idem_json_object(j);
	idem_json_key(j, "required");
	idem_json_bool(j, 1);
	idem_json_key(j, "retention_seconds");
	seconds(j, l.ttl_ms);
	idem_json_key(j, "lease_seconds");
	seconds(j, l.lock_timeout_ms);
	/* The lease's name before it was one: kept for old readers. */
	idem_json_key(j, "lock_timeout_seconds");
	seconds(j, l.lock_timeout_ms);
	exclude = idem_cfg_route_exclude(&app->cfg, rt->method,
	    rt->pattern, &nexclude);
	if (nexclude > 0) {
		/* Members a retry may change: not fingerprinted. */
		idem_json_key(j, "fingerprint_exclude");
		idem_json_array(j);
		for (i = 0; i < nexclude; i++)
			idem_json_str(j, exclude[i]);
		idem_json_array_end(j);
	}
	if (l.remember_ms > 0) {
		/* A retry this long after expiry is still
		 * recognised: 410 idempotency-key-expired. */
		idem_json_key(j, "remember_seconds");
		seconds(j, l.remember_ms);
	}
	idem_json_object_end(j);
}

static void
operation(idem_json *j, const idem_app *app, const struct idem_route *rt)
{
	char				 lower[16];

	lower_method(rt, lower, sizeof(lower));
	idem_json_key(j, lower);
	idem_json_object(j);
	summary(j, app, rt);
	operation_parameters(j, app, rt);
	if (rt->flags & IDEM_ROUTE_JSON) {
		idem_json_key(j, "requestBody");
		idem_json_object(j);
		idem_json_key(j, "required");
		idem_json_bool(j, 1);
		content(j, "application/json");
		if (rt->body != NULL) {
			idem_json_kstr(j, "type", "object");
			schema_of_body(j, rt->body, 0);
		}
		content_end(j);
		idem_json_object_end(j);
	}
	responses(j, app, rt);
	idem_json_key(j, "security");
	idem_json_array(j);
	/* A LOCAL route is refused by address (404), not by credentials. */
	if (!(rt->flags & (IDEM_ROUTE_PUBLIC | IDEM_ROUTE_LOCAL))) {
		idem_json_object(j);
		idem_json_key(j, "bearer");
		idem_json_array(j);
		idem_json_array_end(j);
		idem_json_object_end(j);
	}
	idem_json_array_end(j);
	if (rt->flags & IDEM_ROUTE_IDEMPOTENT)
		x_idempotency(j, app, rt);
	idem_json_object_end(j);
}

/* A path item's key: the pattern as a template. */
static void
path_key(idem_json *j, const char *pattern)
{
	char	buf[512];

	path_template(pattern, buf, sizeof(buf));
	idem_json_key(j, buf);
}

/* The response headers' components. */
static void
header_components(idem_json *j)
{
	/* The response headers: component name, JSON type, description. */
	static const char *const headers[][3] = {
	    { "Location", "string", "the URI of the resource created" },
	    { "IdempotencyKeyExpires", "string", "until when the key and this "
	      "answer are remembered (the record's expiry, an IMF-fixdate); a "
	      "retry after it executes afresh" },
	    { "IdempotentReplayed", "string", "present (\"true\") when this "
	      "is the stored answer of an earlier request with this key, "
	      "replayed" },
	    { "RetryAfter", "integer", "seconds to wait before retrying, with "
	      "the same Idempotency-Key" } };
	size_t	i;

	idem_json_key(j, "headers");
	idem_json_object(j);
	for (i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
		idem_json_key(j, headers[i][0]);
		idem_json_object(j);
		idem_json_kstr(j, "description", headers[i][2]);
		idem_json_key(j, "schema");
		idem_json_object(j);
		idem_json_kstr(j, "type", headers[i][1]);
		if (strcmp(headers[i][0], "IdempotentReplayed") == 0) {
			idem_json_key(j, "enum");
			idem_json_array(j);
			idem_json_str(j, "true");
			idem_json_array_end(j);
		} else if (strcmp(headers[i][0], "RetryAfter") == 0)
			idem_json_kint(j, "minimum", 0);
		idem_json_object_end(j);
		idem_json_object_end(j);
	}
	idem_json_object_end(j);
}

/* The RFC 9457 problem's schema. */
static void
problem_schema(idem_json *j)
{
	static const char *const members[][2] = { { "type", "string" },
	    { "title", "string" }, { "status", "integer" },
	    { "detail", "string" }, { "instance", "string" } };
	size_t	i;

	idem_json_key(j, "schemas");
	idem_json_object(j);
	idem_json_key(j, "Problem");
	idem_json_object(j);
	idem_json_kstr(j, "type", "object");
	idem_json_key(j, "properties");
	idem_json_object(j);
	for (i = 0; i < sizeof(members) / sizeof(members[0]); i++)
		typed(j, members[i][0], members[i][1], NULL, NULL);
	idem_json_object_end(j);
	idem_json_key(j, "required");
	idem_json_array(j);
	for (i = 0; i < 3; i++)
		idem_json_str(j, members[i][0]);
	idem_json_array_end(j);
	idem_json_object_end(j);
	idem_json_object_end(j);
}

static void
components(idem_json *j)
{
	idem_json_key(j, "components");
	idem_json_object(j);
	idem_json_key(j, "securitySchemes");
	idem_json_object(j);
	idem_json_key(j, "bearer");
	idem_json_object(j);
	idem_json_kstr(j, "type", "http");
	idem_json_kstr(j, "scheme", "bearer");
	idem_json_object_end(j);
	idem_json_object_end(j);
	header_components(j);
	problem_schema(j);
	idem_json_object_end(j);
}

/* What a receiver gets, and what it must do with it. */
static const char webhook_doc[] =
	"Sent to each webhook endpoint of the tenant subscribed to this type "
	"(POST /v1/webhook_endpoints or the application's equivalent), once "
	"the transaction that made the event has committed: never for a "
	"request rolled back.  Signed per Standard Webhooks: verify "
	"webhook-signature with the endpoint's secret (idem_webhook_verify(3) "
	"or any Standard Webhooks library) and reject a stale "
	"webhook-timestamp.  Delivered at least once: a 2xx ends it; any other "
	"answer, or none in time, is retried with backoff under the same "
	"webhook-id, so deduplicate on webhook-id.";

/* The Standard Webhooks headers of a delivery. */
static void
webhook_parameters(idem_json *j)
{
	idem_json_key(j, "parameters");
	idem_json_array(j);
	parameter(j, "webhook-id", "header", "^[A-Za-z0-9_-]+$", "the "
	    "event's id, the same on every attempt: deduplicate on it", 255);
	parameter(j, "webhook-timestamp", "header", "^[0-9]+$", "this "
	    "attempt's time, Unix seconds", 20);
	parameter(j, "webhook-signature", "header",
	    "^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$", "v1, and the base64 "
	    "HMAC-SHA256 of id.timestamp.body under the endpoint's secret "
	    "(several separated by spaces)", 0);
	idem_json_array_end(j);
}

/* A delivery's body: the event, its data declared by the application. */
static void
webhook_body(idem_json *j, const struct idem_webhook_decl *w)
{
	static const char *const members[] = { "id", "type", "created",
	    "data", NULL };

	idem_json_key(j, "requestBody");
	idem_json_object(j);
	idem_json_key(j, "required");
	idem_json_bool(j, 1);
	content(j, "application/json");
	idem_json_kstr(j, "type", "object");
	idem_json_key(j, "properties");
	idem_json_object(j);
	typed(j, "id", "string", "description", "the event's id (webhook-id)");
	typed(j, "type", "string", "const", w->type);
	typed(j, "created", "integer", "description", "when the event was "
	    "made, Unix seconds");
	body_object(j, "data", w->data);
	idem_json_object_end(j);	/* properties */
	closed(j, members);
	content_end(j);
	idem_json_object_end(j);	/* requestBody */
}

/* What a receiver's answers mean. */
static void
webhook_responses(idem_json *j)
{
	static const char *const fails[] = { "4XX", "5XX" };
	size_t	i;

	idem_json_key(j, "responses");
	idem_json_object(j);
	idem_json_key(j, "2XX");
	idem_json_object(j);
	idem_json_kstr(j, "description", "received: the delivery is done");
	idem_json_object_end(j);
	for (i = 0; i < sizeof(fails) / sizeof(fails[0]); i++) {
		idem_json_key(j, fails[i]);
		idem_json_object(j);
		idem_json_kstr(j, "description", "not received: retried later, "
		    "with the same webhook-id");
		idem_json_object_end(j);
	}
	idem_json_object_end(j);	/* responses */
}

/* One webhook event: the POST its receivers get. */
static void
webhook(idem_json *j, const struct idem_webhook_decl *w)
{
	char	id[16 + IDEM_EVENT_TYPE_MAX];
	size_t	i;

	idem_json_key(j, w->type);
	idem_json_object(j);
	idem_json_key(j, "post");
	idem_json_object(j);
	/* The type's '.' and '-' are not an operationId's. */
	snprintf(id, sizeof(id), "webhook_%s", w->type);
	for (i = 0; id[i] != '\0'; i++)
		if (id[i] == '.' || id[i] == '-')
			id[i] = '_';
	idem_json_kstr(j, "operationId", id);
	idem_json_kstr(j, "summary", w->summary);
	idem_json_kstr(j, "description", webhook_doc);
	webhook_parameters(j);
	webhook_body(j, w);
	webhook_responses(j);
	/* The receiver checks the signature, not credentials. */
	idem_json_key(j, "security");
	idem_json_array(j);
	idem_json_array_end(j);
	idem_json_object_end(j);	/* post */
	idem_json_object_end(j);
}

/* What is stored, and what a client does with each answer. */
static const char api_doc[] =
	"Operations with x-idempotency take an Idempotency-Key.  Only what "
	"the handler answers is stored under the key (2xx and 4xx, replayed "
	"byte for byte while the key is kept; such answers carry "
	"Idempotency-Key-Expires).  A refusal before the handler (401, 404, "
	"405, 413, 415, 400 invalid-json, 400 validation-error of the "
	"declared body, 400 idempotency-key-missing or -invalid) stores "
	"nothing and leaves the key free: the corrected retry with the same "
	"key executes, once.  A 5xx stores nothing: retry with the same key.  "
	"409 idempotency-key-in-flight: retry with the same key after "
	"Retry-After.  422 idempotency-key-reused: the key holds another "
	"request; use a new key for a new one.  Decide by the type, not the "
	"status: an application's own type of 409 or 422 is the handler's "
	"answer, stored and replayed (Idempotent-Replayed: true) like any "
	"4xx it answers.  410 idempotency-key-expired "
	"(routes whose x-idempotency has remember_seconds): the same request "
	"was executed under the key before its record expired; do not retry: "
	"the operation happened; look it up.  Integer members accept only "
	"integer literals (no fraction, no exponent) within +-(2^53-1).";

/* info, and servers when configured. */
static void
info(idem_json *j, const idem_app *app)
{
	idem_json_key(j, "info");
	idem_json_object(j);
	idem_json_kstr(j, "title", app->name);
	idem_json_kstr(j, "version", IDEM_VERSION);
	idem_json_kstr(j, "description", api_doc);
	/* An SPDX identifier, when configured: the API's terms. */
	if (app->cfg.openapi_license != NULL) {
		idem_json_key(j, "license");
		idem_json_object(j);
		idem_json_kstr(j, "name", app->cfg.openapi_license);
		idem_json_kstr(j, "identifier", app->cfg.openapi_license);
		idem_json_object_end(j);
	}
	idem_json_object_end(j);
	/* A client resolves paths against it; unset, "/" (the document's
	 * own server), which is what OpenAPI means by no servers. */
	idem_json_key(j, "servers");
	idem_json_array(j);
	idem_json_object(j);
	idem_json_kstr(j, "url", app->cfg.openapi_server_url != NULL ?
	    app->cfg.openapi_server_url : "/");
	idem_json_object_end(j);
	idem_json_array_end(j);
}

/* One path item per pattern, its methods together. */
static void
paths(idem_json *j, const idem_app *app)
{
	const struct idem_route	*rt, *o;
	size_t			 i, k;

	idem_json_key(j, "paths");
	idem_json_object(j);
	for (i = 0; i < app->router.nroutes; i++) {
		rt = &app->router.routes[i];
		for (k = 0; k < i; k++)
			if (strcmp(app->router.routes[k].pattern,
			    rt->pattern) == 0)
				break;
		if (k < i)
			continue;
		path_key(j, rt->pattern);
		idem_json_object(j);
		for (k = i; k < app->router.nroutes; k++) {
			o = &app->router.routes[k];
			if (strcmp(o->pattern, rt->pattern) == 0)
				operation(j, app, o);
		}
		idem_json_object_end(j);
	}
	idem_json_object_end(j);
}

/* The library's problem types, then the application's
 * (idem_app_problem()). */
static void
problem_types(idem_json *j, const idem_app *app)
{
	char			 type[512];
	int			 p;

	idem_json_key(j, "x-problem-types");
	idem_json_array(j);
	for (p = 0; p < idem_problem_count(app); p++) {
		snprintf(type, sizeof(type), "%s%s", idem_problem_base(app),
		    idem_problem_type(app, p)->slug);
		idem_json_object(j);
		idem_json_kstr(j, "type", type);
		idem_json_kint(j, "status", idem_problem_type(app, p)->status);
		idem_json_kstr(j, "title", idem_problem_type(app, p)->title);
		idem_json_object_end(j);
	}
	idem_json_array_end(j);
}

idem_json *
idem_openapi(const idem_app *app)
{
	idem_json		*j;
	size_t			 i;

	if ((j = idem_json_new()) == NULL)
		return NULL;
	idem_json_object(j);
	idem_json_kstr(j, "openapi", "3.1.0");
	info(j, app);
	paths(j, app);
	/* OpenAPI 3.1's own section for what the API sends. */
	if (app->nwebhooks > 0) {
		idem_json_key(j, "webhooks");
		idem_json_object(j);
		for (i = 0; i < app->nwebhooks; i++)
			webhook(j, &app->webhooks[i]);
		idem_json_object_end(j);
	}
	components(j);
	problem_types(j, app);
	idem_json_object_end(j);
	return j;
}

int
idem_openapi_handler(idem_req *req, void *arg)
{
	(void)arg;
	return idem_json_send(idem_openapi(req->app), req, 200);
}

/* --- the declarations ----------------------------------------------------- */

/* Is s 1 to max characters of the set (NULL: printable ASCII, no CR/LF)? */
static int
text_ok(const char *s, size_t max, const char *set)
{
	size_t	n = s != NULL ? strlen(s) : 0, i;

	if (n == 0 || n > max)
		return 0;
	if (set != NULL)
		return strspn(s, set) == n;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < ' ' || s[i] == 0x7f)
			return 0;
	return 1;
}

/* The route a declaration is for (call names it in the reason), or NULL
 * with the reason set. */
static struct idem_route *
declared_route(idem_app *app, const char *call, const char *method,
    const char *pattern)
{
	struct idem_route	*rt;

	if (method == NULL || pattern == NULL) {
		idem_app_refuse(app, "%s: no method or pattern", call);
		return NULL;
	}
	if ((rt = idem_route_of(app, method, pattern)) == NULL)
		idem_app_refuse(app, "%s(%.32s %.256s): no such route "
		    "(idem_app_route() first)", call, method, pattern);
	return rt;
}

/* Each kind of declaration is made once for a route: 0, or -1 with the
 * reason set when the route has one (already). */
static int
twice(idem_app *app, const char *call, const char *method,
    const char *pattern, int already)
{
	return already ? idem_app_refuse(app, "%s(%s %.256s): declared "
	    "already", call, method, pattern) : 0;
}

int
idem_app_route_summary(idem_app *app, const char *method,
    const char *pattern, const char *operation_id, const char *summary)
{
	static const char	 call[] = "idem_app_route_summary";
	struct idem_route	*rt;
	size_t			 i;

	if (app == NULL || (rt = declared_route(app, call, method,
	    pattern)) == NULL || twice(app, call, method, pattern,
	    rt->operation_id != NULL))
		return -1;
	if (!text_ok(operation_id, 64, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"))
		return idem_app_refuse(app, "%s(%s %.256s): the operation id "
		    "must be 1 to 64 letters, digits, '_' and '-'", call,
		    method, pattern);
	if (!text_ok(summary, 200, NULL))
		return idem_app_refuse(app, "%s(%s %.256s): the summary must be "
		    "1 to 200 printable characters", call, method, pattern);
	for (i = 0; i < app->router.nroutes; i++)
		if (app->router.routes[i].operation_id != NULL &&
		    strcmp(app->router.routes[i].operation_id,
		    operation_id) == 0)
			return idem_app_refuse(app, "%s(%s %.256s): operation id "
			    "%s is another route's", call, method, pattern,
			    operation_id);
	rt->operation_id = operation_id;
	rt->summary = summary;
	return 0;
}

int
idem_app_route_response(idem_app *app, const char *method,
    const char *pattern, const struct idem_response *responses)
{
	static const char	 call[] = "idem_app_route_response";
	struct idem_route	*rt;
	size_t			 i, k;

	if (app == NULL || (rt = declared_route(app, call, method,
	    pattern)) == NULL || twice(app, call, method, pattern,
	    rt->responses != NULL))
		return -1;
	if (responses == NULL || responses[0].status == 0)
		return idem_app_refuse(app, "%s(%s %.256s): no response "
		    "declared", call, method, pattern);
	for (i = 0; responses[i].status != 0; i++) {
		if (responses[i].status < 200 || responses[i].status > 299)
			return idem_app_refuse(app, "%s(%s %.256s): status %d "
			    "is not a success (200 to 299; problems are "
			    "idem_app_route_problems()'s)", call, method,
			    pattern, responses[i].status);
		for (k = 0; k < i; k++)
			if (responses[k].status == responses[i].status)
				return idem_app_refuse(app, "%s(%s %.256s): "
				    "status %d twice", call, method, pattern,
				    responses[i].status);
	}
	rt->responses = responses;
	return 0;
}

int
idem_app_route_problems(idem_app *app, const char *method,
    const char *pattern, const char *const *slugs)
{
	static const char	 call[] = "idem_app_route_problems";
	struct idem_route	*rt;
	const char *const	*s;
	int			 p;

	if (app == NULL || (rt = declared_route(app, call, method,
	    pattern)) == NULL || twice(app, call, method, pattern,
	    rt->problems != NULL))
		return -1;
	if (slugs == NULL)
		return idem_app_refuse(app, "%s(%s %.256s): no slugs", call,
		    method, pattern);
	for (s = slugs; *s != NULL; s++) {
		for (p = IDEM_P__MAX; p < idem_problem_count(app); p++)
			if (strcmp(idem_problem_type(app, p)->slug, *s) == 0)
				break;
		if (p == idem_problem_count(app))
			return idem_app_refuse(app, "%s(%s %.256s): %.64s is no "
			    "application problem type (idem_app_problem() "
			    "first; the library's are listed by what the "
			    "route is)", call, method, pattern, *s);
	}
	rt->problems = slugs;
	return 0;
}

int
idem_app_webhook(idem_app *app, const char *type, const char *summary,
    const struct idem_body *data)
{
	size_t	i;

	if (app == NULL)
		return -1;
	/* The types idem_req_enqueue() accepts (outbox.h). */
	if (!text_ok(type, IDEM_EVENT_TYPE_MAX, IDEM_EVENT_TYPE_CHARS))
		return idem_app_refuse(app, "idem_app_webhook: the type must be "
		    "1 to %d letters, digits, '.', '_' and '-'",
		    IDEM_EVENT_TYPE_MAX);
	if (!text_ok(summary, 200, NULL) || data == NULL)
		return idem_app_refuse(app, "idem_app_webhook(%s): the summary "
		    "must be 1 to 200 printable characters, and data a body",
		    type);
	if (app->nwebhooks == IDEM_APP_WEBHOOKS_MAX)
		return idem_app_refuse(app, "idem_app_webhook(%s): more than %d "
		    "events", type, IDEM_APP_WEBHOOKS_MAX);
	for (i = 0; i < app->nwebhooks; i++)
		if (strcmp(app->webhooks[i].type, type) == 0)
			return idem_app_refuse(app, "idem_app_webhook(%s): "
			    "declared already", type);
	app->webhooks[app->nwebhooks].type = type;
	app->webhooks[app->nwebhooks].summary = summary;
	app->webhooks[app->nwebhooks].data = data;
	app->nwebhooks++;
	return 0;
}
