/*
 * r_outbox.c - events are enqueued in the request's transaction: one
 * event and a delivery per subscribed endpoint when it commits, none when
 * it rolls back, none more on a replay; the same operation gives the same
 * event id (run again after its key was evicted, or resumed after a
 * takeover at its phase); webhook endpoints are created, listed (without
 * their secret) and deleted per tenant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regress.h"
#include "tap.h"

/* The id the phased route's second phase enqueued last (the application
 * runs in this process). */
static char	 last_phase_id[IDEM_EVENT_ID_MAX];
static int	 fail_second_phase;

static const char *
member(idem_req *req, const char *name)
{
	const char	*s = idem_req_str(req, name);

	return s != NULL ? s : "";
}

/* POST /hooks {"url", "events": [...]}: 201 {"id", "secret"}. */
static int
hooks_create(idem_req *req, void *arg)
{
	yajl_val	 ev = idem_req_member(req, "events");
	const char	*types[8];
	char		 secret[IDEM_WEBHOOK_SECRET_MAX], json[256];
	int64_t		 id;
	size_t		 i, n = 0;

	(void)arg;
	if (ev != NULL && YAJL_IS_ARRAY(ev))
		for (i = 0; i < ev->u.array.len && n < 8; i++)
			if (YAJL_IS_STRING(ev->u.array.values[i]))
				types[n++] = ev->u.array.values[i]->u.string;
	if (idem_req_endpoint_create(req, member(req, "url"), types, n, &id,
	    secret, sizeof(secret)) != IDEM_ENDPOINT_CREATED)
		return idem_resp_problem(req, IDEM_P_VALIDATION, "bad endpoint");
	snprintf(json, sizeof(json), "{\"id\":%lld,\"secret\":\"%s\"}",
	    (long long)id, secret);
	return idem_resp_json(req, 201, json, strlen(json));
}

static int
hooks_list(idem_req *req, void *arg)
{
	idem_json	*j = idem_json_new();

	(void)arg;
	if (idem_req_endpoint_list(req, j) == -1) {
		idem_json_free(j);
		return -1;
	}
	return idem_json_send(j, req, 200);
}

static int
hooks_delete(idem_req *req, void *arg)
{
	(void)arg;
	switch (idem_req_endpoint_delete(req,
	    strtoll(idem_req_param(req, "id"), NULL, 10))) {
	case IDEM_ENDPOINT_DELETED:
		return idem_resp_json(req, 200, "{\"deleted\":true}", 16);
	case IDEM_ENDPOINT_NOT_FOUND:
		return idem_resp_problem(req, IDEM_P_NOT_FOUND, "no endpoint");
	default:
		return -1;
	}
}

/*
 * POST /events {"note", "n"}: enqueues n "thing.created" events, then
 * answers 201 {"ids": [...]}.  note "fail": -1 after enqueueing (the
 * transaction rolls back); "baddata": data that is not JSON.
 */
static int
events_create(idem_req *req, void *arg)
{
	const char	*note = member(req, "note");
	char		 id[IDEM_EVENT_ID_MAX], data[128];
	struct idem_buf	 b = { 0 };
	long long	 i, n = idem_req_int(req, "n", 1);
	int		 rc;

	(void)arg;
	if (strcmp(note, "baddata") == 0)
		snprintf(data, sizeof(data), "{\"note\": ");
	else
		snprintf(data, sizeof(data), "{\"note\": \"%s\", \"n\": 1.50}",
		    note);
	idem_buf_adds(&b, "{\"ids\":[");
	for (i = 0; i < n; i++) {
		if (idem_req_enqueue(req, "thing.created", data, strlen(data),
		    id, sizeof(id)) == -1) {
			idem_buf_free(&b);
			return -1;
		}
		idem_buf_addf(&b, "%s\"%s\"", i > 0 ? "," : "", id);
	}
	idem_buf_adds(&b, "]}");
	if (strcmp(note, "fail") == 0)
		rc = -1;
	else
		rc = idem_resp_json(req, 201, b.p, b.len);
	idem_buf_free(&b);
	return rc;
}

/* POST /phased-events: phase "started" enqueues and commits "sent"; the
 * next phase enqueues (and fails when fail_second_phase is set). */
static int
events_phased(idem_req *req, void *arg)
{
	const char	*rp = idem_req_recovery_point(req);
	char		 id[IDEM_EVENT_ID_MAX], json[160];

	(void)arg;
	if (rp == NULL || strcmp(rp, "started") == 0) {
		if (idem_req_enqueue(req, "thing.created", "{}", 2, NULL, 0) ==
		    -1 || idem_req_phase_commit(req, "sent") == -1)
			return -1;
	}
	if (idem_req_enqueue(req, "thing.created", "[1]", 3, id,
	    sizeof(id)) == -1)
		return -1;
	snprintf(last_phase_id, sizeof(last_phase_id), "%s", id);
	if (fail_second_phase) {
		fail_second_phase = 0;
		return -1;
	}
	snprintf(json, sizeof(json), "{\"id\":\"%s\"}", id);
	return idem_resp_json(req, 201, json, strlen(json));
}

/* GET /events-get: not idempotent, so no event id can be derived. */
static int
events_get(idem_req *req, void *arg)
{
	(void)arg;
	if (idem_req_enqueue(req, "thing.created", "{}", 2, NULL, 0) == -1)
		return -1;
	return idem_resp_json(req, 200, "{}", 2);
}

static void
routes(idem_app *a)
{
	idem_app_route(a, "POST", "/hooks", IDEM_ROUTE_IDEMPOTENT |
	    IDEM_ROUTE_JSON, hooks_create, NULL);
	idem_app_route(a, "GET", "/hooks", 0, hooks_list, NULL);
	idem_app_route(a, "DELETE", "/hooks/:id", 0, hooks_delete, NULL);
	idem_app_route(a, "POST", "/events", IDEM_ROUTE_IDEMPOTENT |
	    IDEM_ROUTE_JSON, events_create, NULL);
	idem_app_route(a, "POST", "/phased-events", IDEM_ROUTE_IDEMPOTENT |
	    IDEM_ROUTE_PHASED | IDEM_ROUTE_JSON, events_phased, NULL);
	idem_app_route(a, "GET", "/events-get", 0, events_get, NULL);
}

/* The number of events of this run's tenant with a condition. */
static const char *
count_events(const char *where, char *v, size_t len)
{
	char	sql[512];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM idem_events e "
	    "WHERE e.api_key_id = $1 %s", where);
	return rg_scalar(sql, rg_tenant(), v, len);
}

/* The first event's request again under key: its ids, still one event. */
static void
same_event(const char *key, const char *first, const char *ids,
    const char *one)
{
	struct rg_resp	 r;
	char		 v[32];

	TAP_OK(rg_request("POST", "/events", key, "{\"note\":\"one\"}", &r) ==
	    0 && r.status == 201 && strstr(r.body, first) != NULL, "%s", ids);
	rg_resp_free(&r);
	TAP_STREQ(count_events("", v, sizeof(v)), "1", "%s", one);
}

int
main(void)
{
	struct rg_resp	 r;
	char		 key[96], k2[96], v[512], hook1[24], hook2[24];
	char		 path[64], first[IDEM_EVENT_ID_MAX];
	char		*p;

	rg_setup("r_outbox", routes);

	/* Endpoints: one for thing.created, one for another type. */
	TAP_OK(rg_request("POST", "/hooks", rg_key(key, sizeof(key), "h1"),
	    "{\"url\":\"https://example.com/hook?a=1\",\"events\":"
	    "[\"thing.created\",\"thing.deleted\"]}", &r) == 0 &&
	    r.status == 201, "an endpoint is created: 201 (got %d %s)",
	    r.status, r.body);
	TAP_OK(strstr(r.body, "\"secret\":\"whsec_") != NULL,
	    "its secret is a whsec_ one: %s", r.body);
	snprintf(hook1, sizeof(hook1), "%lld", strtoll(r.body + 6, NULL, 10));
	rg_resp_free(&r);
	TAP_OK(rg_request("POST", "/hooks", rg_key(key, sizeof(key), "h2"),
	    "{\"url\":\"http://[::1]:8080/other\",\"events\":"
	    "[\"other.type\"]}", &r) == 0 && r.status == 201,
	    "a second endpoint: 201 (got %d)", r.status);
	snprintf(hook2, sizeof(hook2), "%lld", strtoll(r.body + 6, NULL, 10));
	rg_resp_free(&r);
	TAP_OK(rg_request("POST", "/hooks", rg_key(key, sizeof(key), "h3"),
	    "{\"url\":\"ftp://example.com/\",\"events\":[\"thing.created\"]}",
	    &r) == 0 && r.status == 400, "an ftp URL is refused (got %d)",
	    r.status);
	rg_resp_free(&r);
	TAP_OK(rg_request("POST", "/hooks", rg_key(key, sizeof(key), "h4"),
	    "{\"url\":\"https://example.com/\",\"events\":[\"bad type\"]}",
	    &r) == 0 && r.status == 400, "a bad event type is refused "
	    "(got %d)", r.status);
	rg_resp_free(&r);
	TAP_STREQ(rg_scalar("SELECT count(*) FROM idem_webhook_endpoints "
	    "WHERE api_key_id = $1", rg_tenant(), v, sizeof(v)), "2",
	    "only the two valid endpoints are stored");

	TAP_OK(rg_request("GET", "/hooks", NULL, NULL, &r) == 0 &&
	    r.status == 200, "the list: 200 (got %d)", r.status);
	snprintf(v, sizeof(v), "[{\"id\":%s,\"url\":\"http://[::1]:8080/"
	    "other\",\"events\":[\"other.type\"],\"created\":", hook2);
	TAP_OK(strncmp(r.body, v, strlen(v)) == 0, "newest first, with its "
	    "events: %s", r.body);
	TAP_OK(strstr(r.body, "secret") == NULL && strstr(r.body,
	    "\"url\":\"https://example.com/hook?a=1\",\"events\":"
	    "[\"thing.created\",\"thing.deleted\"]") != NULL,
	    "both, without their secret");
	rg_resp_free(&r);

	/* An event of a committed request: one delivery, to hook1. */
	rg_key(key, sizeof(key), "e1");
	TAP_OK(rg_request("POST", "/events", key, "{\"note\":\"one\"}", &r) ==
	    0 && r.status == 201, "a request enqueues: 201 (got %d)",
	    r.status);
	TAP_OK(strncmp(r.body, "{\"ids\":[\"evt_", 13) == 0 &&
	    strlen(r.body) == 13 + 40 + 3, "its event id is evt_ and 40 hex "
	    "digits: %s", r.body);
	snprintf(first, sizeof(first), "%.44s", r.body + 9);
	rg_resp_free(&r);
	snprintf(v, sizeof(v), "{\"id\":\"%s\",\"type\":\"thing.created\","
	    "\"created\":", first);
	{
		char	body[512];

		rg_scalar("SELECT body FROM idem_events WHERE event_id = $1",
		    first, body, sizeof(body));
		TAP_OK(strncmp(body, v, strlen(v)) == 0 && (p = strstr(body,
		    ",\"data\":{\"note\": \"one\", \"n\": 1.50}}")) != NULL &&
		    p[strlen(p) - 1] == '}', "its body: id, type, created, "
		    "data byte for byte as written: %s", body);
	}
	TAP_STREQ(rg_scalar("SELECT string_agg(d.endpoint::text || ' ' || "
	    "d.state || ' ' || d.attempts, ',') FROM idem_deliveries d JOIN "
	    "idem_events e ON e.id = d.event WHERE e.event_id = $1", first,
	    v, sizeof(v)), strcat(strcpy(path, hook1), " pending 0"),
	    "one pending delivery, to the subscribed endpoint only");

	/* A replay enqueues nothing. */
	same_event(key, first, "the replay answers the same ids",
	    "a replay enqueues nothing");

	/* Run again after its key is gone: the same id, still one event. */
	rg_scalar("DELETE FROM idempotency_keys WHERE key = $1 RETURNING 1",
	    key, v, sizeof(v));
	same_event(key, first, "executed again after its key was evicted: "
	    "the same event id", "and no second event");

	/* Two events of one type in one request: two ids. */
	TAP_OK(rg_request("POST", "/events", rg_key(k2, sizeof(k2), "e2"),
	    "{\"note\":\"two\",\"n\":2}", &r) == 0 && r.status == 201 &&
	    strlen(r.body) == 8 + 2 * 46 + 1 + 2 &&
	    strncmp(r.body + 9, r.body + 56, 44) != 0,
	    "two events of one type: two ids (%s)", r.body);
	rg_resp_free(&r);
	TAP_STREQ(count_events("", v, sizeof(v)), "3", "three events now");

	/* A rolled-back request leaves nothing. */
	TAP_OK(rg_request("POST", "/events", rg_key(k2, sizeof(k2), "e3"),
	    "{\"note\":\"fail\",\"n\":3}", &r) == 0 && r.status == 500,
	    "a handler that fails after enqueueing: 500 (got %d)", r.status);
	rg_resp_free(&r);
	TAP_OK(rg_request("POST", "/events", rg_key(k2, sizeof(k2), "e4"),
	    "{\"note\":\"baddata\"}", &r) == 0 && r.status == 500,
	    "data that is not JSON: 500 (got %d)", r.status);
	rg_resp_free(&r);
	TAP_STREQ(count_events("", v, sizeof(v)), "3",
	    "neither left an event");
	TAP_OK(rg_request("GET", "/events-get", NULL, NULL, &r) == 0 &&
	    r.status == 500, "a route without a key cannot enqueue: 500 "
	    "(got %d)", r.status);
	rg_resp_free(&r);

	/* Phased: the phase's event stays; the re-run phase's id repeats. */
	rg_key(k2, sizeof(k2), "p1");
	fail_second_phase = 1;
	TAP_OK(rg_request("POST", "/phased-events", k2, "{}", &r) == 0 &&
	    r.status == 500, "a phased request fails in its second phase "
	    "(got %d)", r.status);
	rg_resp_free(&r);
	snprintf(first, sizeof(first), "%s", last_phase_id);
	TAP_STREQ(count_events("", v, sizeof(v)), "4",
	    "the first phase's event committed, the second's did not");
	TAP_STREQ(rg_scalar("SELECT count(*) FROM idem_events WHERE "
	    "event_id = $1", first, v, sizeof(v)), "0",
	    "the failed phase's event is not there");
	TAP_OK(rg_request("POST", "/phased-events", k2, "{}", &r) == 0 &&
	    r.status == 201, "the retry resumes: 201 (got %d)", r.status);
	TAP_OK(strstr(r.body, first) != NULL, "the resumed phase's event has "
	    "the id of the failed run's: %s", r.body);
	rg_resp_free(&r);
	TAP_STREQ(count_events("", v, sizeof(v)), "5",
	    "one event per phase in all");

	/* Deleted: its pending deliveries die; a second delete finds none. */
	snprintf(path, sizeof(path), "/hooks/%s", hook1);
	TAP_OK(rg_request("DELETE", path, NULL, NULL, &r) == 0 &&
	    r.status == 200, "the endpoint is deleted: 200 (got %d)",
	    r.status);
	rg_resp_free(&r);
	TAP_OK(rg_request("DELETE", path, NULL, NULL, &r) == 0 &&
	    r.status == 404, "deleted again: 404 (got %d)", r.status);
	rg_resp_free(&r);
	TAP_STREQ(rg_scalar("SELECT string_agg(DISTINCT state || ' ' || "
	    "last_error, ',') FROM idem_deliveries WHERE endpoint = $1", hook1,
	    v, sizeof(v)), "dead endpoint deleted",
	    "its pending deliveries are dead");
	TAP_OK(rg_request("POST", "/events", rg_key(k2, sizeof(k2), "e5"),
	    "{\"note\":\"after\"}", &r) == 0 && r.status == 201,
	    "an event after the delete (got %d)", r.status);
	rg_resp_free(&r);
	TAP_STREQ(rg_scalar("SELECT count(*) FROM idem_deliveries d JOIN "
	    "idem_events e ON e.id = d.event WHERE e.api_key_id = $1 AND "
	    "d.state = 'pending'", rg_tenant(), v, sizeof(v)), "0",
	    "goes to no deleted endpoint");
	TAP_OK(rg_request("GET", "/hooks", NULL, NULL, &r) == 0 &&
	    r.status == 200 && strstr(r.body, "example.com") == NULL &&
	    strstr(r.body, "[::1]") != NULL, "the list leaves it out: %s",
	    r.body);
	rg_resp_free(&r);
	rg_teardown();
	return TAP_DONE();
}
