/*
 * outbox.c - the transactional outbox's request helpers: events enqueued
 * in the request's own transaction, the tenant's webhook endpoints, and
 * the pure rules they and the dispatcher (dispatcher.c) follow.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yajl/yajl_parse.h>

#include "private.h"
#include "idempotency.h"
#include "outbox.h"

/* Types one endpoint may subscribe to. */
#define ENDPOINT_TYPES_MAX	64

enum idem_url_verdict
idem_url_verdict(const char *url)
{
	const char	*p, *host, *end;
	size_t		 len;
	long		 port;

	if (url == NULL || *url == '\0')
		return IDEM_URL_EMPTY;
	if ((len = strlen(url)) > IDEM_URL_MAX)
		return IDEM_URL_TOO_LONG;
	for (p = url; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return IDEM_URL_CHAR;
	if (strncasecmp(url, "http://", 7) == 0)
		host = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else
		return IDEM_URL_SCHEME;
	if (strchr(url, '#') != NULL)
		return IDEM_URL_FRAGMENT;
	end = host + strcspn(host, "/?");
	if (end == host)
		return IDEM_URL_NO_HOST;
	if (memchr(host, '@', (size_t)(end - host)) != NULL)
		return IDEM_URL_USERINFO;
	/* The host: a bracketed IPv6 literal or a name without ':' or '['. */
	if (*host == '[') {
		if ((p = memchr(host, ']', (size_t)(end - host))) == NULL ||
		    p == host + 1)
			return IDEM_URL_HOST;
		p++;
	} else {
		p = host;
		while (p < end && *p != ':') {
			if (*p == '[' || *p == ']')
				return IDEM_URL_HOST;
			p++;
		}
		if (p == host)
			return IDEM_URL_NO_HOST;
	}
	if (p == end)
		return IDEM_URL_OK;
	if (*p != ':')
		return IDEM_URL_HOST;
	/* A port: 1 to 5 digits, 1 to 65535. */
	if (end - ++p < 1 || end - p > 5)
		return IDEM_URL_PORT;
	for (port = 0; p < end; p++) {
		if (*p < '0' || *p > '9')
			return IDEM_URL_PORT;
		port = port * 10 + (*p - '0');
	}
	return port >= 1 && port <= 65535 ? IDEM_URL_OK : IDEM_URL_PORT;
}

const char *
idem_url_reason(enum idem_url_verdict v)
{
	switch (v) {
	case IDEM_URL_OK:
		return "is a valid URL";
	case IDEM_URL_EMPTY:
		return "must not be empty";
	case IDEM_URL_TOO_LONG:
		return "must be at most 2048 bytes";
	case IDEM_URL_SCHEME:
		return "must be an http or https URL";
	case IDEM_URL_NO_HOST:
		return "must name a host";
	case IDEM_URL_USERINFO:
		return "must not carry a user name or password";
	case IDEM_URL_FRAGMENT:
		return "must not have a fragment";
	case IDEM_URL_CHAR:
		return "must be printable ASCII without spaces";
	case IDEM_URL_PORT:
		return "must have a port from 1 to 65535";
	case IDEM_URL_HOST:
		return "must have a well-formed host";
	}
	return "is not a valid URL";
}

int
idem_event_type_ok(const char *type)
{
	size_t	n = type != NULL ? strnlen(type, IDEM_EVENT_TYPE_MAX + 1) : 0;

	return n > 0 && n <= IDEM_EVENT_TYPE_MAX &&
	    strspn(type, IDEM_EVENT_TYPE_CHARS) == n;
}

enum idem_attempt
idem_attempt_outcome(int status, int hopeless, long attempts,
    long max_attempts, long long age_ms, long long max_age_ms,
    enum idem_giveup *giveup)
{
	enum idem_giveup	g = IDEM_GIVEUP_RETRY;

	if (status >= 200 && status <= 299 && !hopeless) {
		if (giveup != NULL)
			*giveup = g;
		return IDEM_ATTEMPT_DELIVERED;
	}
	g = idem_giveup(hopeless, attempts, max_attempts, age_ms, max_age_ms);
	if (giveup != NULL)
		*giveup = g;
	return g == IDEM_GIVEUP_RETRY ? IDEM_ATTEMPT_RETRY : IDEM_ATTEMPT_DEAD;
}

const char *
idem_attempt_name(enum idem_attempt a)
{
	switch (a) {
	case IDEM_ATTEMPT_DELIVERED:
		return "delivered";
	case IDEM_ATTEMPT_RETRY:
		return "retry";
	case IDEM_ATTEMPT_DEAD:
		return "dead";
	}
	return "?";
}

int
idem_webhook_url_check(yajl_val v, char *why, size_t whylen)
{
	enum idem_url_verdict	u;

	if (v == NULL || v->type != yajl_t_string) {
		snprintf(why, whylen, "must be a string");
		return -1;
	}
	if ((u = idem_url_verdict(v->u.string)) != IDEM_URL_OK) {
		snprintf(why, whylen, "%s", idem_url_reason(u));
		return -1;
	}
	return 0;
}

/*
 * How many events of type this request enqueued before in its current
 * phase (recorded in req->events as "point\0type\0" pairs): the n of the
 * event's derived id, so that the same operation numbers its events alike
 * in every run, a takeover's included (which starts at its phase).
 */
static unsigned
events_before(const idem_req *req, const char *point, const char *type)
{
	const char	*p = req->events.p, *end = p + req->events.len, *t;
	unsigned	 n = 0;

	while (p != NULL && p < end) {
		t = p + strlen(p) + 1;
		if (strcmp(p, point) == 0 && strcmp(t, type) == 0)
			n++;
		p = t + strlen(t) + 1;
	}
	return n;
}

/*
 * The body sent: {"id", "type", "created", "data"} with data as the handler
 * wrote it (checked to be one JSON value, not parsed into a tree and
 * written again: an event per create).  id and type need no escaping
 * (hex; idem_event_type_ok()).  NULL when data is not JSON.
 */
static char *
event_body(const char *evid, const char *type, const char *data,
    size_t len)
{
	struct idem_buf	 b = { 0 };
	char		 d[IDEM_INT_LEN];
	yajl_handle	 h;
	int		 ok;

	if (memchr(data, '\0', len) != NULL ||
	    (h = yajl_alloc(NULL, NULL, NULL)) == NULL)
		return NULL;
	ok = yajl_parse(h, (const unsigned char *)data, len) ==
	    yajl_status_ok && yajl_complete_parse(h) == yajl_status_ok;
	yajl_free(h);
	if (!ok)
		return NULL;
	idem_buf_adds(&b, "{\"id\":\"");
	idem_buf_adds(&b, evid);
	idem_buf_adds(&b, "\",\"type\":\"");
	idem_buf_adds(&b, type);
	idem_buf_adds(&b, "\",\"created\":");
	idem_buf_add(&b, d, idem_fmt_int(d, (long long)time(NULL)));
	idem_buf_adds(&b, ",\"data\":");
	idem_buf_add(&b, data, len);
	idem_buf_addc(&b, '}');
	if (idem_buf_nul(&b) == -1) {
		idem_buf_free(&b);
		return NULL;
	}
	return b.p;
}

int
idem_req_enqueue(idem_req *req, const char *type, const char *data,
    size_t len, char *id, size_t idlen)
{
	return idem_req_enqueue_tenant(req, req != NULL ? req->tenant : 0,
	    type, data, len, id, idlen);
}

int
idem_req_enqueue_tenant(idem_req *req, int64_t tenant, const char *type,
    const char *data, size_t len, char *id, size_t idlen)
{
	char		 phase[IDEM_EVENT_TYPE_MAX + 100], key[41];
	char		 evid[IDEM_EVENT_ID_MAX], *body;
	char		 tp[IDEM_TRACEPARENT_LEN + 1];
	const char	*point;
	idem_args	*a;
	unsigned	 n;
	int		 phased;

	if (req == NULL)
		return -1;
	if (!idem_event_type_ok(type)) {
		idem_req_log(req, IDEM_LOG_ERROR, "outbox: bad event type "
		    "(1 to %d letters, digits, '.', '_', '-')",
		    IDEM_EVENT_TYPE_MAX);
		return -1;
	}
	/* The phase's recovery point on a phased route: a takeover starts
	 * there and numbers the phase's events from 1 again. */
	phased = idem_txn_phased(req);
	point = phased && idem_req_recovery_point(req) != NULL ?
	    idem_req_recovery_point(req) : "";
	n = events_before(req, point, type) + 1;
	if (phased)
		snprintf(phase, sizeof(phase), "event:%s:%u:%s", type, n, point);
	else
		snprintf(phase, sizeof(phase), "event:%s:%u", type, n);
	if (idem_req_derived_key(req, phase, key, sizeof(key)) == -1) {
		idem_req_log(req, IDEM_LOG_ERROR, "outbox: events are "
		    "enqueued on idempotent routes only");
		return -1;
	}
	snprintf(evid, sizeof(evid), "evt_%s", key);
	if (data == NULL || (body = event_body(evid, type, data, len)) ==
	    NULL) {
		idem_req_log(req, IDEM_LOG_ERROR, "outbox: the data of a %s "
		    "event is not JSON", type);
		return -1;
	}
	a = idem_args_new();
	idem_args_str(a, evid);
	idem_args_int(a, tenant);
	idem_args_str(a, type);
	idem_args_str(a, body);
	free(body);
	/* The request's trace, a span of the event's own: its deliveries
	 * send it (dispatcher.c). */
	idem_args_str(a, idem_trace_child(req, tp) == 0 ? tp : NULL);
	/* With the commit, in its round trip: an event costs the request
	 * no flight of its own (tests/direct/roundtrips.py). */
	if (idem_req_defer_args(req, "SELECT idem_outbox_enqueue($1, $2, $3, "
	    "$4, $5)", a) == -1)
		return -1;
	if (idem_buf_adds(&req->events, point) == -1 ||
	    idem_buf_addc(&req->events, '\0') == -1 ||
	    idem_buf_adds(&req->events, type) == -1 ||
	    idem_buf_addc(&req->events, '\0') == -1)
		return -1;
	if (id != NULL && idlen > 0)
		snprintf(id, idlen, "%s", evid);
	return 0;
}

/* '{"a","b"}': a text[] literal of checked types (nothing to escape). */
static int
types_array(const char *const *types, size_t ntypes, struct idem_buf *b)
{
	size_t	i;

	if (types == NULL || ntypes == 0 || ntypes > ENDPOINT_TYPES_MAX)
		return -1;
	idem_buf_addc(b, '{');
	for (i = 0; i < ntypes; i++) {
		if (!idem_event_type_ok(types[i]))
			return -1;
		idem_buf_addf(b, "%s\"%s\"", i > 0 ? "," : "", types[i]);
	}
	return idem_buf_adds(b, "}");
}

enum idem_endpoint_rc
idem_req_endpoint_create(idem_req *req, const char *url,
    const char *const *types, size_t ntypes, int64_t *id, char *secret,
    size_t secretlen)
{
	struct idem_buf		 arr = { 0 };
	char			 sec[IDEM_WEBHOOK_SECRET_MAX];
	enum idem_url_verdict	 u;
	idem_args		*a;
	PGresult		*r;
	int			 n;

	if (req == NULL || idem_req_tenant(req) == 0)
		return IDEM_ENDPOINT_ERROR;
	if ((u = idem_url_verdict(url)) != IDEM_URL_OK) {
		idem_req_log(req, IDEM_LOG_ERROR, "outbox: endpoint URL %s",
		    idem_url_reason(u));
		return IDEM_ENDPOINT_ERROR;
	}
	if (types_array(types, ntypes, &arr) == -1 || idem_buf_nul(&arr) ==
	    -1) {
		idem_buf_free(&arr);
		idem_req_log(req, IDEM_LOG_ERROR, "outbox: endpoint types: 1 "
		    "to %d event types", ENDPOINT_TYPES_MAX);
		return IDEM_ENDPOINT_ERROR;
	}
	if (idem_webhook_secret_new(sec, sizeof(sec)) == -1 ||
	    (secret != NULL && strlen(sec) >= secretlen)) {
		idem_buf_free(&arr);
		return IDEM_ENDPOINT_ERROR;
	}
	a = idem_args_new();
	idem_args_tenant(a, req);
	idem_args_str(a, url);
	idem_args_str(a, arr.p);
	idem_args_str(a, sec);
	idem_args_int(a, req->app->cfg.wh_max_endpoints);
	idem_buf_free(&arr);
	/* No row: the tenant has [webhooks] max_endpoints already. */
	if ((r = idem_req_exec(req, "SELECT id FROM "
	    "idem_webhook_endpoint_create($1, $2, $3, $4, $5)", a)) == NULL)
		return IDEM_ENDPOINT_ERROR;
	if ((n = PQntuples(r)) == 1 && id != NULL)
		*id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	if (n != 1)
		return n == 0 ? IDEM_ENDPOINT_LIMIT : IDEM_ENDPOINT_ERROR;
	if (secret != NULL)
		memcpy(secret, sec, strlen(sec) + 1);
	return IDEM_ENDPOINT_CREATED;
}

enum idem_endpoint_rc
idem_req_endpoint_delete(idem_req *req, int64_t id)
{
	idem_args	*a;
	PGresult	*r;
	int		 n;

	if (req == NULL || idem_req_tenant(req) == 0)
		return IDEM_ENDPOINT_ERROR;
	a = idem_args_new();
	idem_args_int(a, (long long)id);
	idem_args_tenant(a, req);
	/* Its pending deliveries die with it: nobody is to receive them. */
	r = idem_req_exec(req, "WITH w AS (UPDATE idem_webhook_endpoints "
	    "SET deleted_at = now() WHERE id = $1 AND api_key_id = $2 "
	    "AND deleted_at IS NULL RETURNING id), "
	    "d AS (UPDATE idem_deliveries d SET state = 'dead', "
	    "last_error = 'endpoint deleted', ended_at = clock_timestamp() "
	    "FROM w WHERE d.endpoint = w.id AND d.state = 'pending' "
	    "RETURNING 1) "
	    "SELECT count(*) FROM w", a);
	if (r == NULL)
		return IDEM_ENDPOINT_ERROR;
	n = PQntuples(r) == 1 ? atoi(PQgetvalue(r, 0, 0)) : -1;
	PQclear(r);
	if (n == -1)
		return IDEM_ENDPOINT_ERROR;
	return n == 1 ? IDEM_ENDPOINT_DELETED : IDEM_ENDPOINT_NOT_FOUND;
}

int
idem_req_endpoint_list(idem_req *req, idem_json *j)
{
	idem_args	*a;
	PGresult	*r;
	int		 i, rc = 0;

	if (req == NULL || j == NULL || idem_req_tenant(req) == 0)
		return -1;
	a = idem_args_new();
	idem_args_tenant(a, req);
	r = idem_req_exec(req, "SELECT " IDEM_ENDPOINT_COLS " FROM "
	    "idem_webhook_endpoints WHERE api_key_id = $1 AND deleted_at IS "
	    "NULL ORDER BY id DESC", a);
	if (r == NULL)
		return -1;
	if (idem_json_array(j) == -1)
		rc = -1;
	for (i = 0; rc == 0 && i < PQntuples(r); i++)
		rc = idem_json_pg_row(j, r, i);
	if (rc == 0)
		rc = idem_json_array_end(j);
	PQclear(r);
	return rc;
}
