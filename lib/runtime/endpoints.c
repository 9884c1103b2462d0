/*
 * endpoints.c - the webhook endpoint routes every application gets with
 * one call (idem_app_webhook_routes()): a tenant registers the URLs its
 * events are POSTed to, pages through them, reads one with its health,
 * deletes one, turns a disabled one back on, and recovers its failed and
 * dead deliveries; with their bodies, answers and problem types declared
 * for validation and /openapi.json.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "outbox.h"

#define ENDPOINTS_PATH		"/v1/webhook_endpoints"
#define ENDPOINTS_PATH_MAX	200	/* the collection's path, in bytes */
/* recover's since: from the epoch to the end of year 9999 (PostgreSQL's
 * to_timestamp() refuses what lies far beyond). */
#define SINCE_MAX		253402300799LL

/* --- the routes' handlers ------------------------------------------------- */

/* :id as an endpoint id: digits, no leading zero, an exact integer; 0
 * when it cannot be one (the route answers 404, as for no such id). */
static int64_t
endpoint_id(const idem_req *req)
{
	const char	*s = idem_req_param(req, "id");
	size_t		 i, n = s != NULL ? strlen(s) : 0;
	long long	 id;

	for (i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	if (n == 0 || n > 16 || s[0] == '0' ||
	    (id = strtoll(s, NULL, 10)) > IDEM_INT_EXACT_MAX)
		return 0;
	return (int64_t)id;
}

static int
not_found(idem_req *req)
{
	return idem_resp_problem(req, IDEM_P_NOT_FOUND,
	    "no such webhook endpoint");
}

/* The endpoint :id of the request's tenant, alive, through sql ($1 the
 * id, $2 the tenant), as the answer (200): the row it returns, with its
 * health, or 404 when it returns none. */
static int
send_endpoint(idem_req *req, const char *sql)
{
	int64_t		 id = endpoint_id(req);
	idem_args	*a;
	idem_json	*j;
	PGresult	*r;

	if (id == 0)
		return not_found(req);
	a = idem_args_new();
	idem_args_int(a, (long long)id);
	idem_args_tenant(a, req);
	if ((r = idem_req_exec(req, sql, a)) == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		PQclear(r);
		return not_found(req);
	}
	j = idem_json_new();
	idem_json_pg_row(j, r, 0);
	PQclear(r);
	return idem_json_send(j, req, 200);
}

/* POST: idempotent, so a retry gets the same endpoint and secret (the
 * stored answer) rather than a second one.  {id, url, events, secret}: a
 * new endpoint's health is that of any (enabled, nulls). */
static int
endpoint_create(idem_req *req, void *arg)
{
	yajl_val	 events = idem_req_member(req, "events");
	const char	*types[IDEM_APP_WEBHOOKS_MAX];
	char		 secret[IDEM_WEBHOOK_SECRET_MAX];
	idem_json	*j;
	int64_t		 id;
	size_t		 i, n;

	(void)arg;
	/* Validated: 1 to nwebhooks distinct declared types. */
	if ((n = events->u.array.len) > IDEM_APP_WEBHOOKS_MAX)
		return -1;
	for (i = 0; i < n; i++)
		types[i] = events->u.array.values[i]->u.string;
	switch (idem_req_endpoint_create(req, idem_req_str(req, "url"), types,
	    n, &id, secret, sizeof(secret))) {
	case IDEM_ENDPOINT_CREATED:
		break;
	case IDEM_ENDPOINT_LIMIT:
		return idem_resp_problem(req, IDEM_P_WEBHOOK_ENDPOINT_LIMIT,
		    "the tenant has %ld webhook endpoints, the most it may "
		    "have: delete one first",
		    idem_req_app(req)->cfg.wh_max_endpoints);
	default:
		return -1;
	}
	j = idem_json_new();
	idem_json_object(j);
	idem_json_kint(j, "id", (long long)id);
	idem_json_kstr(j, "url", idem_req_str(req, "url"));
	idem_json_key(j, "events");
	idem_json_value(j, events);
	idem_json_kstr(j, "secret", secret);
	idem_json_object_end(j);
	return idem_json_send(j, req, 201);
}

/* GET: newest first, a page at a time, like the other lists.  The
 * cursor: one of the tenant's endpoints, deleted or not (a client paging
 * while deleting keeps its place). */
static int
endpoint_list(idem_req *req, void *arg)
{
	(void)arg;
	return idem_resp_page(req, "SELECT 1 FROM idem_webhook_endpoints "
	    "WHERE id = $1 AND api_key_id = $2", "SELECT " IDEM_ENDPOINT_COLS
	    " FROM idem_webhook_endpoints WHERE api_key_id = $1 AND deleted_at "
	    "IS NULL AND ($2::bigint IS NULL OR id < $2::bigint) ORDER BY id "
	    "DESC LIMIT $3::int", idem_req_qparam(req, "starting_after"),
	    (long)idem_req_qparam_int(req, "limit", 10), "webhook endpoint");
}

static int
endpoint_get(idem_req *req, void *arg)
{
	(void)arg;
	return send_endpoint(req, "SELECT " IDEM_ENDPOINT_COLS " FROM "
	    "idem_webhook_endpoints WHERE id = $1 AND api_key_id = $2 AND "
	    "deleted_at IS NULL");
}

static int
endpoint_delete(idem_req *req, void *arg)
{
	int64_t	id = endpoint_id(req);

	(void)arg;
	if (id == 0)
		return not_found(req);
	switch (idem_req_endpoint_delete(req, id)) {
	case IDEM_ENDPOINT_DELETED:
		return idem_resp_body(req, 204, NULL, NULL, 0);
	case IDEM_ENDPOINT_NOT_FOUND:
		return not_found(req);
	default:
		return -1;
	}
}

/* POST .../enable: on again, its failing streak forgotten (the
 * dispatcher counts [webhooks] disable_after from the next failure).
 * Enabling an enabled endpoint changes nothing: no key needed. */
static int
endpoint_enable(idem_req *req, void *arg)
{
	(void)arg;
	return send_endpoint(req, "UPDATE idem_webhook_endpoints SET "
	    "disabled_at = NULL, disabled_reason = NULL, failing_since = NULL "
	    "WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL "
	    "RETURNING " IDEM_ENDPOINT_COLS);
}

/* POST .../recover: idempotent, so a retry does not requeue twice. */
static int
endpoint_recover(idem_req *req, void *arg)
{
	int64_t			 id = endpoint_id(req);
	enum idem_recover_rc	 rc;
	idem_args		*a;
	idem_json		*j;
	PGresult		*r;
	long long		 n = 0;

	(void)arg;
	if (id == 0)
		return not_found(req);
	a = idem_args_new();
	idem_args_int(a, (long long)id);
	idem_args_tenant(a, req);
	idem_args_int(a, idem_req_int(req, "since", 0));
	if ((r = idem_req_exec(req, IDEM_RECOVER_SQL, a)) == NULL)
		return -1;
	rc = idem_recover_result(r, &n);
	PQclear(r);
	switch (rc) {
	case IDEM_RECOVER_REQUEUED:
		break;
	case IDEM_RECOVER_NOT_FOUND:
		return not_found(req);
	case IDEM_RECOVER_DISABLED:
		return idem_resp_problem(req, IDEM_P_VALIDATION, "the webhook "
		    "endpoint is disabled: enable it first (POST .../enable), "
		    "then recover with a new Idempotency-Key");
	default:
		return -1;
	}
	j = idem_json_new();
	idem_json_object(j);
	idem_json_kint(j, "requeued", n);
	idem_json_object_end(j);
	return idem_json_send(j, req, 202);
}

/* --- their declarations --------------------------------------------------- */

static const struct idem_param list_params[] = {
	{ .name = "limit", .type = IDEM_T_INTEGER, .min = 1, .max = 100,
	  .def = "10", .doc = "how many endpoints, 1 to 100" },
	{ .name = "starting_after", .type = IDEM_T_INTEGER, .min = 1,
	  .max = IDEM_INT_EXACT_MAX, .doc = "the last endpoint id of the "
	  "previous page: the next page starts after it" },
	{ .name = NULL } };

static const struct idem_body recover_body = { (const struct idem_member[]){
	{ .name = "since", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 0, .max = SINCE_MAX, .doc = "Unix time, seconds: the "
	  "deliveries created since then" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static const struct idem_body recovered_view = { (const struct idem_member[]){
	{ .name = "requeued", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 0, .doc = "how many deliveries are due again" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static const struct idem_response deleted[] = {
	{ 204, NULL, 0, "deleted: nothing more is delivered there" },
	{ 0, NULL, 0, NULL } };
static const struct idem_response recovered[] = {
	{ 202, &recovered_view, 0, "the failed and dead deliveries since "
	  "then are due again, each under its original webhook-id" },
	{ 0, NULL, 0, NULL } };

static const char *const limit_problem[] = { "webhook-endpoint-limit",
	NULL };

/* The members an endpoint's JSON shows (IDEM_ENDPOINT_COLS) into m, or
 * with_secret those of the create's answer (id, url, events, secret);
 * then the NULL end. */
static void
view_members(struct idem_endpoint_decls *d, struct idem_member *m,
    int with_secret)
{
	const struct idem_member members[] = {
		{ .name = "id", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
		  .min = 1, .max = IDEM_INT_EXACT_MAX },
		{ .name = "url", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED },
		{ .name = "events", .type = IDEM_T_ARRAY,
		  .flags = IDEM_REQUIRED | IDEM_UNIQUE, .items = &d->type },
		{ .name = "created", .type = IDEM_T_INTEGER,
		  .flags = IDEM_REQUIRED, .doc = "Unix time, seconds" },
		{ .name = "enabled", .type = IDEM_T_BOOLEAN,
		  .flags = IDEM_REQUIRED, .doc = "false: disabled (a 410 "
		  "answer, or failing for [webhooks] disable_after); nothing "
		  "is delivered until enabled again" },
		{ .name = "disabled_reason", .type = IDEM_T_STRING,
		  .doc = "why it was disabled; null while enabled" },
		{ .name = "last_success", .type = IDEM_T_INTEGER,
		  .doc = "Unix time, seconds, of its last 2xx; null: none yet" },
		{ .name = "failing_since", .type = IDEM_T_INTEGER,
		  .doc = "Unix time, seconds, of its first failure since its "
		  "last success; null: not failing" },
		{ .name = NULL } };
	const struct idem_member secret = { .name = "secret",
	    .type = IDEM_T_STRING, .flags = IDEM_REQUIRED, .doc = "whsec_ "
	    "and base64: verifies webhook-signature; shown only here" };

	memcpy(m, members, sizeof(members));
	if (with_secret) {
		m[3] = secret;
		m[4] = members[sizeof(members) / sizeof(members[0]) - 1];
	}
}

/* The declarations that name the application's event types. */
static void
decls_fill(idem_app *app, struct idem_endpoint_decls *d)
{
	size_t	i;

	for (i = 0; i < app->nwebhooks; i++)
		d->types[i] = app->webhooks[i].type;
	d->types[i] = NULL;
	d->type = (struct idem_member){ .name = "*", .type = IDEM_T_STRING,
	    .oneof = d->types };
	d->create[0] = (struct idem_member){ .name = "url",
	    .type = IDEM_T_STRING, .flags = IDEM_REQUIRED, .min = 1,
	    .max = IDEM_URL_MAX, .check = idem_webhook_url_check,
	    .doc = "http or https, where the events are POSTed" };
	d->create[1] = (struct idem_member){ .name = "events",
	    .type = IDEM_T_ARRAY, .flags = IDEM_REQUIRED | IDEM_UNIQUE,
	    .min = 1, .max = (long long)app->nwebhooks, .items = &d->type,
	    .doc = "the event types sent there" };
	d->create[2] = (struct idem_member){ .name = NULL };
	d->create_body = (struct idem_body){ d->create, 0, NULL, 0, 0 };
	view_members(d, d->view, 1);
	view_members(d, d->item, 0);
	d->view_body = (struct idem_body){ d->view, 0, NULL, 0, 0 };
	d->item_body = (struct idem_body){ d->item, 0, NULL, 0, 0 };
	d->created[0] = (struct idem_response){ 201, &d->view_body, 0,
	    "the endpoint, with its signing secret" };
	d->page[0] = (struct idem_response){ 200, &d->item_body,
	    IDEM_RESPONSE_LIST, "the tenant's endpoints, newest first, "
	    "without their secrets" };
	d->read[0] = (struct idem_response){ 200, &d->item_body, 0,
	    "the endpoint and its health, without its secret" };
	d->enabled[0] = (struct idem_response){ 200, &d->item_body, 0,
	    "the endpoint, enabled" };
}

/* The routes, under the collection's path; their answers by index. */
static const struct endpoint_route {
	const char	*method, *suffix;
	unsigned	 flags;
	idem_handler_fn	 fn;
	const char	*operation_id, *summary;
} endpoint_routes[] = {
	{ "POST", "", IDEM_ROUTE_IDEMPOTENT, endpoint_create,
	  "createWebhookEndpoint", "Register a URL for the tenant's events" },
	{ "GET", "", 0, endpoint_list, "listWebhookEndpoints",
	  "List the tenant's webhook endpoints, newest first" },
	{ "GET", "/:id", 0, endpoint_get, "getWebhookEndpoint",
	  "Read a webhook endpoint and its health" },
	{ "DELETE", "/:id", 0, endpoint_delete, "deleteWebhookEndpoint",
	  "Delete a webhook endpoint" },
	{ "POST", "/:id/enable", 0, endpoint_enable, "enableWebhookEndpoint",
	  "Turn a disabled webhook endpoint back on" },
	{ "POST", "/:id/recover", IDEM_ROUTE_IDEMPOTENT, endpoint_recover,
	  "recoverWebhookEndpoint", "Deliver the endpoint's failed and dead "
	  "deliveries since a time again" },
};
#define NROUTES	(sizeof(endpoint_routes) / sizeof(endpoint_routes[0]))

int
idem_app_webhook_routes(idem_app *app, const char *path)
{
	struct idem_endpoint_decls	*d;
	const struct endpoint_route	*e;
	struct idem_route		*rt;
	const struct idem_response	*resp[NROUTES];
	const struct idem_body		*body[NROUTES] = { NULL };
	char				 pat[ENDPOINTS_PATH_MAX + 16];
	size_t				 i;

	if (path == NULL)
		path = ENDPOINTS_PATH;
	if (app == NULL || app->endpoints.done || app->nwebhooks == 0 ||
	    path[0] != '/' || strlen(path) > ENDPOINTS_PATH_MAX)
		return -1;
	d = &app->endpoints;
	/* The library's own event, subscribable like the application's
	 * (the dispatcher announces a disabled endpoint with it; its data:
	 * the endpoint as GET shows it, filled in by decls_fill()). */
	if (idem_app_webhook(app, IDEM_EV_ENDPOINT_DISABLED, "A webhook "
	    "endpoint of the tenant was disabled: it answered 410 Gone, or "
	    "every attempt failed for [webhooks] disable_after", &d->item_body)
	    == -1)
		return -1;
	decls_fill(app, d);
	resp[0] = d->created;
	resp[1] = d->page;
	resp[2] = d->read;
	resp[3] = deleted;
	resp[4] = d->enabled;
	resp[5] = recovered;
	body[0] = &d->create_body;
	body[5] = &recover_body;
	d->done = 1;
	for (i = 0; i < NROUTES; i++) {
		e = &endpoint_routes[i];
		snprintf(pat, sizeof(pat), "%s%s", path, e->suffix);
		if (idem_app_route(app, e->method, pat, e->flags, e->fn,
		    NULL) == -1 || (body[i] != NULL && idem_app_route_body(app,
		    e->method, pat, body[i]) == -1) ||
		    idem_app_route_response(app, e->method, pat, resp[i]) ==
		    -1 || idem_app_route_summary(app, e->method, pat,
		    e->operation_id, e->summary) == -1)
			return -1;
	}
	/* The library's own type, declared as an application's would be. */
	if (idem_app_route_query(app, "GET", path, list_params) == -1 ||
	    (rt = idem_route_of(app, "POST", path)) == NULL)
		return -1;
	rt->problems = limit_problem;
	return 0;
}
