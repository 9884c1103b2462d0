/*
 * endpoints.c - the sample's webhook endpoints: a tenant registers the URL
 * its events are POSTed to (/v1/webhook_endpoints), lists and deletes
 * them.  The library keeps them and delivers (idem_req_endpoint_*(),
 * idem_req_enqueue()); the handlers here declare and answer.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "payments.h"

/* The events a tenant may subscribe to, as payments.c enqueues them. */
static const char *const event_types[] = { PAYMENTS_EV_SUCCEEDED,
	PAYMENTS_EV_FAILED, PAYMENTS_EV_REFUNDED, NULL };
#define EVENT_TYPES	3

static const struct idem_member event_type = { .name = "*",
	.type = IDEM_T_STRING, .oneof = event_types };

const struct idem_body endpoint_body = { (const struct idem_member[]){
	{ .name = "url", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 2048, .check = idem_webhook_url_check,
	  .doc = "http or https, where the events are POSTed" },
	{ .name = "events", .type = IDEM_T_ARRAY,
	  .flags = IDEM_REQUIRED | IDEM_UNIQUE, .min = 1, .max = EVENT_TYPES,
	  .items = &event_type, .doc = "the event types sent there" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

/* The members both views share. */
#define ENDPOINT_MEMBERS \
	{ .name = "id", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED, \
	  .min = 1, .max = IDEM_INT_EXACT_MAX }, \
	{ .name = "url", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED }, \
	{ .name = "events", .type = IDEM_T_ARRAY, \
	  .flags = IDEM_REQUIRED | IDEM_UNIQUE, .items = &event_type }

static const struct idem_body endpoint_view = { (const struct idem_member[]){
	ENDPOINT_MEMBERS,
	{ .name = "secret", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .doc = "whsec_ and base64: verifies webhook-signature; shown "
	  "only here" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static const struct idem_body endpoint_item = { (const struct idem_member[]){
	ENDPOINT_MEMBERS,
	{ .name = "created", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .doc = "Unix time, seconds" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

const struct idem_response endpoint_created[] = {
	{ 201, &endpoint_view, 0, "the endpoint, with its signing secret" },
	{ 0, NULL, 0, NULL } };
const struct idem_response endpoint_page[] = {
	{ 200, &endpoint_item, IDEM_RESPONSE_LIST, "the tenant's endpoints, "
	  "newest first, without their secrets" }, { 0, NULL, 0, NULL } };
const struct idem_response endpoint_deleted[] = {
	{ 204, NULL, 0, "deleted: nothing more is delivered there" },
	{ 0, NULL, 0, NULL } };

/* POST /v1/webhook_endpoints: idempotent, so a retry gets the same
 * endpoint and secret (the stored answer) rather than a second one. */
int
endpoints_create(idem_req *req, void *arg)
{
	yajl_val	 events = idem_req_member(req, "events");
	const char	*types[EVENT_TYPES];
	char		 secret[IDEM_WEBHOOK_SECRET_MAX];
	idem_json	*j;
	int64_t		 id;
	size_t		 i, n;

	(void)arg;
	/* Validated: an array of 1 to EVENT_TYPES distinct known types. */
	n = events->u.array.len;
	for (i = 0; i < n; i++)
		types[i] = events->u.array.values[i]->u.string;
	if (idem_req_endpoint_create(req, idem_req_str(req, "url"), types, n,
	    &id, secret, sizeof(secret)) == -1)
		return -1;
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

/* GET /v1/webhook_endpoints: all of them (a tenant has few), in the
 * envelope of the other lists. */
int
endpoints_list(idem_req *req, void *arg)
{
	idem_json	*j = idem_json_new();

	(void)arg;
	idem_json_object(j);
	idem_json_kstr(j, "object", "list");
	idem_json_key(j, "data");
	if (idem_req_endpoint_list(req, j) == -1) {
		idem_json_free(j);
		return -1;
	}
	idem_json_key(j, "has_more");
	idem_json_bool(j, 0);
	idem_json_object_end(j);
	return idem_json_send(j, req, 200);
}

/* DELETE /v1/webhook_endpoints/:id */
int
endpoints_delete(idem_req *req, void *arg)
{
	const char	*s = idem_req_param(req, "id");
	long long	 id;
	size_t		 i, n = s != NULL ? strlen(s) : 0;

	(void)arg;
	/* Digits only, no leading zero, within the exact integers. */
	for (i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			break;
	if (n == 0 || n > 16 || i < n || s[0] == '0' ||
	    (id = strtoll(s, NULL, 10)) > IDEM_INT_EXACT_MAX)
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such webhook endpoint");
	switch (idem_req_endpoint_delete(req, (int64_t)id)) {
	case IDEM_ENDPOINT_DELETED:
		return idem_resp_body(req, 204, NULL, NULL, 0);
	case IDEM_ENDPOINT_NOT_FOUND:
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such webhook endpoint");
	case IDEM_ENDPOINT_ERROR:
	default:
		return -1;
	}
}
