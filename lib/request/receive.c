/*
 * receive.c - the receiving stage of a signed source's route
 * (idem_app_inbox()): the message's signature checked before anything
 * else (inbox.c), its id made the idempotency key, and the source's
 * tenant resolved, so that the exactly-once middleware runs it like any
 * idempotent request: its effect and its record in one transaction.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "private.h"

#define RETENTION_DEFAULT_MS	(7 * 24 * 3600 * 1000LL)
#define RETENTION_MIN_MS	(3600 * 1000LL)

int
idem_app_inbox(idem_app *app, const char *pattern, const char *source,
    const struct idem_body *body, long long retention_ms, idem_handler_fn fn,
    void *arg)
{
	struct idem_inbox_route	*ir;
	struct idem_route	*rt;

	if (app == NULL || pattern == NULL || source == NULL || fn == NULL ||
	    (retention_ms != 0 && retention_ms < RETENTION_MIN_MS))
		return -1;
	if ((ir = calloc(1, sizeof(*ir))) == NULL ||
	    (ir->source = strdup(source)) == NULL ||
	    pthread_mutex_init(&ir->mu, NULL) != 0) {
		if (ir != NULL)
			free(ir->source);
		free(ir);
		return -1;
	}
	ir->retention_ms = retention_ms != 0 ? retention_ms :
	    RETENTION_DEFAULT_MS;
	ir->next = app->inboxes;
	app->inboxes = ir;
	/* The source is the credential: no API key. */
	if (idem_router_add(&app->router, "POST", pattern,
	    IDEM_ROUTE_IDEMPOTENT | IDEM_ROUTE_JSON | IDEM_ROUTE_PUBLIC, fn,
	    arg) == -1 || (rt = idem_route_of(app, "POST", pattern)) == NULL)
		return -1;
	rt->inbox = ir;
	if (body != NULL && idem_app_route_body(app, "POST", pattern,
	    body) == -1)
		return -1;
	if (idem_inbox_find(app->cfg.inboxes, source) == NULL)
		idem_log(IDEM_LOG_WARN, "config: no [inbox \"%s\"]: route POST "
		    "%s answers 404 until it is configured", source, pattern);
	return 0;
}

void
idem_inbox_routes_free(idem_app *app)
{
	struct idem_inbox_route	*ir, *next;

	for (ir = app->inboxes; ir != NULL; ir = next) {
		next = ir->next;
		pthread_mutex_destroy(&ir->mu);
		free(ir->source);
		free(ir);
	}
	app->inboxes = NULL;
}

const char *
idem_req_inbox(const idem_req *req)
{
	return req != NULL && req->route != NULL && req->route->inbox != NULL ?
	    req->route->inbox->source : NULL;
}

/* Take a message id as the request's idempotency key, as the sender
 * wrote it (not an RFC 8941 Item: "12345" is an id like another): 1 to
 * IDEM_KEY_MAX visible ASCII characters.  0, or -1 answered. */
static int
set_key(idem_req *req, const char *what, const char *key)
{
	size_t	n = key != NULL ? strlen(key) : 0, i;

	for (i = 0; i < n; i++)
		if (key[i] <= 0x20 || key[i] >= 0x7f)
			break;
	if (n == 0 || n > IDEM_KEY_MAX || i < n) {
		idem_resp_problem(req, IDEM_P_VALIDATION, "%s must be 1 to %d "
		    "visible ASCII characters", what, IDEM_KEY_MAX);
		return -1;
	}
	memcpy(req->key, key, n + 1);
	req->has_key = 1;
	return 0;
}

int
idem_inbox_receive(idem_req *req)
{
	const struct idem_cfg_inbox	*ib;
	struct idem_inbox_msg		 m;
	enum idem_webhook_verdict	 v;

	ib = idem_inbox_find(req->app->cfg.inboxes, idem_req_inbox(req));
	if (ib == NULL) {
		idem_resp_problem(req, IDEM_P_NOT_FOUND, "no such resource");
		return -1;
	}
	m.id = idem_req_header(req, "webhook-id");
	m.timestamp = idem_req_header(req, "webhook-timestamp");
	m.signature = idem_req_header(req, "webhook-signature");
	m.stripe_signature = idem_req_header(req, "Stripe-Signature");
	m.body = req->body;
	m.len = req->bodylen;
	v = idem_inbox_check(ib, &m, (long long)time(NULL));
	switch (v) {
	case IDEM_WEBHOOK_OK:
		break;
	case IDEM_WEBHOOK_TOO_OLD:
	case IDEM_WEBHOOK_TOO_NEW:
		idem_resp_problem(req, IDEM_P_WEBHOOK_TIMESTAMP, "the message's "
		    "timestamp is %s than [inbox \"%s\"] tolerance (%llds) "
		    "allows", v == IDEM_WEBHOOK_TOO_OLD ? "older" : "further "
		    "ahead", ib->name, ib->tolerance_ms / 1000);
		return -1;
	default:
		idem_resp_problem(req, IDEM_P_WEBHOOK_SIGNATURE, "%s: %s",
		    ib->scheme == IDEM_INBOX_STRIPE ? "Stripe-Signature" :
		    "webhook-id, webhook-timestamp, webhook-signature",
		    v == IDEM_WEBHOOK_BAD_HEADER ? "missing or malformed" :
		    "no signature matches a secret of the source");
		return -1;
	}
	if (ib->scheme == IDEM_INBOX_STANDARD)
		return set_key(req, "webhook-id", m.id);
	return 0;
}

/* The source's tenant into req->secret_hash, resolved once per process
 * (sql/functions/idem_inbox_tenant.sql): 0, or -1 answered (503). */
static int
source_tenant(idem_req *req)
{
	struct idem_inbox_route	*ir = req->route->inbox;
	unsigned char		 secret[32], cand[IDEM_SECRET_HASH_LEN];
	const char		*vals[2];
	int			 lens[2] = { 0, IDEM_SECRET_HASH_LEN };
	int			 fmts[2] = { 0, 1 }, ok;
	PGresult		*r;

	pthread_mutex_lock(&ir->mu);
	if ((ok = ir->resolved))
		memcpy(req->secret_hash, ir->hash, IDEM_SECRET_HASH_LEN);
	pthread_mutex_unlock(&ir->mu);
	if (ok)
		return 0;
	/* A hash of random bytes no one keeps: no API key has it.  The
	 * first process to get there makes the row; the others read it. */
	if (idem_random_bytes(secret, sizeof(secret)) == -1)
		return idem_resp_problem(req, IDEM_P_INTERNAL,
		    "no random bytes"), -1;
	idem_sha256(secret, sizeof(secret), cand);
	vals[0] = ir->source;
	vals[1] = (const char *)cand;
	r = idem_req_conn(req) == NULL ? NULL : PQexecParams(req->db,
	    "SELECT idem_inbox_tenant($1, $2)", 2, NULL, vals, lens, fmts, 1);
	req->round_trips++;
	ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    PQgetlength(r, 0, 0) == IDEM_SECRET_HASH_LEN;
	if (ok) {
		memcpy(req->secret_hash, PQgetvalue(r, 0, 0),
		    IDEM_SECRET_HASH_LEN);
		pthread_mutex_lock(&ir->mu);
		memcpy(ir->hash, req->secret_hash, IDEM_SECRET_HASH_LEN);
		ir->resolved = 1;
		pthread_mutex_unlock(&ir->mu);
	} else if (r != NULL)
		idem_log(IDEM_LOG_ERROR, "inbox %s: its tenant: %s", ir->source,
		    PQresultStatus(r) == PGRES_TUPLES_OK ? "revoked" :
		    PQerrorMessage(req->db));
	PQclear(r);
	if (!ok)
		idem_resp_problem(req, IDEM_P_UNAVAILABLE,
		    "the database is not available; retry later");
	return ok ? 0 : -1;
}

int
idem_inbox_claimant(idem_req *req)
{
	const struct idem_cfg_inbox	*ib;
	yajl_val			 id;

	ib = idem_inbox_find(req->app->cfg.inboxes, idem_req_inbox(req));
	if (ib != NULL && ib->scheme == IDEM_INBOX_STRIPE) {
		/* Stripe's event id: the body's top-level "id". */
		id = idem_req_member(req, "id");
		if (set_key(req, "the body's id", id != NULL &&
		    YAJL_IS_STRING(id) ? YAJL_GET_STRING(id) : NULL) == -1)
			return -1;
	}
	return source_tenant(req);
}

long long
idem_inbox_ttl_ms(const struct idem_cfg *cfg, const struct idem_route *rt,
    long long ttl_ms)
{
	const struct idem_cfg_route	*c;

	if (rt == NULL || rt->inbox == NULL)
		return ttl_ms;
	for (c = cfg->routes; c != NULL; c = c->next)
		if (c->ttl_ms > 0 && strcmp(c->method, rt->method) == 0 &&
		    strcmp(c->path, rt->pattern) == 0)
			return ttl_ms;
	return rt->inbox->retention_ms;
}

/* One required header parameter. */
static void
header_param(idem_json *j, const char *name, const char *doc)
{
	idem_json_object(j);
	idem_json_kstr(j, "name", name);
	idem_json_kstr(j, "in", "header");
	idem_json_key(j, "required");
	idem_json_bool(j, 1);
	idem_json_kstr(j, "description", doc);
	idem_json_key(j, "schema");
	idem_json_object(j);
	idem_json_kstr(j, "type", "string");
	idem_json_object_end(j);
	idem_json_object_end(j);
}

void
idem_inbox_openapi_params(idem_json *j, const struct idem_cfg *cfg,
    const struct idem_route *rt)
{
	const struct idem_cfg_inbox	*ib;

	ib = idem_inbox_find(cfg->inboxes, rt->inbox->source);
	if (ib != NULL && ib->scheme == IDEM_INBOX_STRIPE) {
		header_param(j, "Stripe-Signature", "t=TIMESTAMP,v1=HEX: "
		    "HMAC-SHA256 of \"t.body\" with the source's secret; the "
		    "body's id is the message's idempotency key");
		return;
	}
	header_param(j, "webhook-id", "the message id (Standard Webhooks): "
	    "its idempotency key");
	header_param(j, "webhook-timestamp", "Unix seconds, within the "
	    "source's tolerance");
	header_param(j, "webhook-signature", "v1,BASE64 entries, "
	    "blank-separated: HMAC-SHA256 of \"id.timestamp.body\"");
}
