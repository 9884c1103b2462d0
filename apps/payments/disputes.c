/*
 * disputes.c - POST /v1/acquirer/events: the acquirer's signed events
 * ([inbox "acquirer"], idem_app_inbox()).  The library has verified the
 * signature and runs this once per message id, in the transaction of the
 * message's record: a dispute marks the payment and enqueues the sample's
 * own payment.disputed for the payment's tenant, all or nothing.  What
 * changes nothing (an unknown payment or type) still answers 200, so that
 * the sender stops; it is logged and counted (acquirer_events_ignored).
 */
#include <stdlib.h>
#include <string.h>

#include "payments.h"

static const struct idem_body event_data = { (const struct idem_member[]){
	{ .name = "payment", .type = IDEM_T_STRING, .min = 1, .max = 64,
	  .doc = "the payment concerned (pay_...)" },
	{ .name = NULL } }, IDEM_BODY_OPEN, NULL, 0, 0 };

/* Open: the acquirer may add members; a type it adds must not be a 400
 * (the sender would retry it for days). */
const struct idem_body acquirer_event_body = { (const struct idem_member[]){
	{ .name = "id", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 255, .doc = "the event's id (the sender's)" },
	{ .name = "type", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .min = 1, .max = 64, .doc = "payment.disputed; others are ignored" },
	{ .name = "data", .type = IDEM_T_OBJECT, .flags = IDEM_REQUIRED,
	  .object = &event_data },
	{ .name = NULL } }, IDEM_BODY_OPEN, NULL, 0, 0 };

static const struct idem_body received_view = { (const struct idem_member[]){
	{ .name = "received", .type = IDEM_T_BOOLEAN, .flags = IDEM_REQUIRED },
	{ .name = NULL } }, 0, NULL, 0, 0 };

const struct idem_response acquirer_event_received[] = {
	{ 200, &received_view, 0, "the event is applied, or ignored (an "
	  "unknown payment or type): either way, do not send it again" },
	{ 0, NULL, 0, NULL } };

static int
received(idem_req *req)
{
	static const char	body[] = "{\"received\":true}";

	return idem_resp_json(req, 200, body, sizeof(body) - 1);
}

/* An event that changes nothing: logged, counted, answered 200. */
static int
ignored(idem_req *req, const char *type, const char *payment,
    const char *reason)
{
	idem_args	*a = idem_args_new();

	idem_req_log(req, IDEM_LOG_WARN, "acquirer event %s (%s) ignored: %s",
	    idem_req_str(req, "id"), type, reason);
	idem_args_str(a, idem_req_str(req, "id"));
	idem_args_str(a, type);
	idem_args_str(a, payment);
	idem_args_str(a, reason);
	if (idem_req_defer_args(req, "INSERT INTO acquirer_events_ignored "
	    "(event_id, type, payment, reason) VALUES ($1, $2, $3, $4) "
	    "ON CONFLICT (event_id) DO NOTHING", a) == -1)
		return -1;
	return received(req);
}

/* The payment's row (PAYMENT_COLS, then its tenant) as the event's data:
 * every column but the last. */
static int
enqueue_disputed(idem_req *req, const PGresult *r)
{
	idem_json	*j = idem_json_new();
	const char	*doc;
	size_t		 len;
	int		 c, rc = -1;

	idem_json_object(j);
	for (c = 0; c < PQnfields(r) - 1; c++) {
		idem_json_key(j, PQfname(r, c));
		idem_json_pg(j, r, 0, c);
	}
	idem_json_object_end(j);
	if ((doc = idem_json_buf(j, &len)) != NULL)
		rc = idem_req_enqueue_tenant(req, strtoll(PQgetvalue(r, 0,
		    PQnfields(r) - 1), NULL, 10), PAYMENTS_EV_DISPUTED, doc,
		    len, NULL, 0);
	idem_json_free(j);
	return rc;
}

int
acquirer_events(idem_req *req, void *arg)
{
	const char	*type = idem_req_str(req, "type"), *payment;
	yajl_val	 data = idem_req_member(req, "data"), v;
	const char	*path[] = { "payment", NULL };
	idem_args	*a;
	PGresult	*r;
	int		 rc;

	(void)arg;
	v = data != NULL ? yajl_tree_get(data, path, yajl_t_string) : NULL;
	payment = v != NULL ? YAJL_GET_STRING(v) : NULL;
	if (strcmp(type, PAYMENTS_EV_DISPUTED) != 0)
		return ignored(req, type, payment, "unknown type");
	if (payment == NULL)
		return ignored(req, type, NULL, "no data.payment");
	/* Only a succeeded payment is disputed; the row lock orders this
	 * against a refund of it. */
	a = idem_args_new();
	idem_args_str(a, payment);
	if ((r = idem_req_exec(req, "UPDATE payments SET status = 'disputed' "
	    "WHERE id = $1 AND status = 'succeeded' RETURNING " PAYMENT_COLS
	    ", api_key_id", a)) == NULL)
		return -1;
	if (PQntuples(r) == 0) {
		PQclear(r);
		a = idem_args_new();
		idem_args_str(a, payment);
		if ((r = idem_req_exec(req, "SELECT status FROM payments WHERE "
		    "id = $1", a)) == NULL)
			return -1;
		rc = ignored(req, type, payment, PQntuples(r) == 0 ?
		    "unknown payment" : strcmp(PQgetvalue(r, 0, 0),
		    "disputed") == 0 ? "already disputed" :
		    "payment not succeeded");
		PQclear(r);
		return rc;
	}
	rc = enqueue_disputed(req, r);
	PQclear(r);
	return rc == -1 ? -1 : received(req);
}
