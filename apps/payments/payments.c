/*
 * payments.c - handlers of the sample payments API.  Creating a payment
 * and a refund are idempotent routes: the middleware has already opened
 * the transaction that records the key, and validated the body against
 * the declarations below, so the effect written here commits or rolls
 * back with it, and so does each event enqueued for the tenant's webhook
 * endpoints (its data: the object as the API shows it, from the same
 * writer as the answer).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#include "acquirer.h"
#include "payments.h"

int	payments_p_declined = -1;

#define AMOUNT_MAX	1000000000000LL	/* 10^12 minor units */

/* ISO 4217 active codes, lower case. */
static const char currencies[] =
    "aed afn all amd ang aoa ars aud awg azn bam bbd bdt bgn bhd bif bmd "
    "bnd bob bov brl bsd btn bwp byn bzd cad cdf che chf chw clf clp cny "
    "cop cou crc cuc cup cve czk djf dkk dop dzd egp ern etb eur fjd fkp "
    "gbp gel ghs gip gmd gnf gtq gyd hkd hnl htg huf idr ils inr iqd irr "
    "isk jmd jod jpy kes kgs khr kmf kpw krw kwd kyd kzt lak lbp lkr lrd "
    "lsl lyd mad mdl mga mkd mmk mnt mop mru mur mvr mwk mxn mxv myr mzn "
    "nad ngn nio nok npr nzd omr pab pen pgk php pkr pln pyg qar ron rsd "
    "rub rwf sar sbd scr sdg sek sgd shp sle sll sos srd ssp stn svc syp "
    "szl thb tjs tmt tnd top try ttd twd tzs uah ugx usd usn uyi uyu uyw "
    "uzs ved ves vnd vuv wst xaf xag xau xcd xdr xof xpd xpf xpt xsu xua "
    "yer zar zmw zwl";

/* The pattern has made it three lower-case letters already. */
static int
iso4217(yajl_val v, char *why, size_t whylen)
{
	const char	*hit = strstr(currencies, v->u.string);

	/* Entries are 4 bytes apart: a match must start on an entry. */
	if (hit != NULL && (hit - currencies) % 4 == 0)
		return 0;
	snprintf(why, whylen, "must be a lower-case ISO 4217 code such as "
	    "\"eur\"");
	return -1;
}

static const struct idem_member meta_value = { .name = "*",
	.type = IDEM_T_STRING, .max = 500 };
static const struct idem_body metadata = { .flags = IDEM_BODY_OPEN,
	.rest = &meta_value, .name_min = 1, .name_max = 40 };

const struct idem_body payment_body = { (const struct idem_member[]){
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 1, .max = AMOUNT_MAX, .doc = "in minor units" },
	{ .name = "currency", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .pattern = "^[a-z]{3}$", .check = iso4217,
	  .doc = "ISO 4217, lower case" },
	{ .name = "description", .type = IDEM_T_STRING, .max = 1000 },
	{ .name = "customer", .type = IDEM_T_STRING, .min = 1, .max = 255 },
	{ .name = "metadata", .type = IDEM_T_OBJECT, .max = 50,
	  .object = &metadata, .doc = "string values" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

const struct idem_body refund_body = { (const struct idem_member[]){
	{ .name = "amount", .type = IDEM_T_INTEGER, .min = 1, .max = AMOUNT_MAX,
	  .doc = "default: what remains to refund" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

/* What the routes answer (idem_app_route_response()): every member is
 * present, those without IDEM_REQUIRED maybe null. */
static const char *const payment_statuses[] = { "pending", "succeeded",
	"failed", "disputed", NULL };
static const char *const payment_object[] = { "payment", NULL };
static const char *const refund_object[] = { "refund", NULL };

const struct idem_body payment_view = { (const struct idem_member[]){
	{ .name = "id", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .doc = "pay_ and 24 hex digits" },
	{ .name = "object", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .oneof = payment_object },
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 1, .max = AMOUNT_MAX, .doc = "in minor units" },
	{ .name = "currency", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .pattern = "^[a-z]{3}$", .doc = "ISO 4217, lower case" },
	{ .name = "status", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .oneof = payment_statuses },
	{ .name = "amount_refunded", .type = IDEM_T_INTEGER,
	  .flags = IDEM_REQUIRED, .min = 0, .max = AMOUNT_MAX },
	{ .name = "description", .type = IDEM_T_STRING },
	{ .name = "customer", .type = IDEM_T_STRING },
	{ .name = "metadata", .type = IDEM_T_OBJECT, .flags = IDEM_REQUIRED,
	  .object = &metadata, .doc = "string values" },
	{ .name = "created", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .doc = "Unix time, seconds" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

const struct idem_body refund_view = { (const struct idem_member[]){
	{ .name = "id", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .doc = "re_ and 24 hex digits" },
	{ .name = "object", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .oneof = refund_object },
	{ .name = "payment", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .doc = "the payment refunded" },
	{ .name = "amount", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .min = 1, .max = AMOUNT_MAX },
	{ .name = "created", .type = IDEM_T_INTEGER, .flags = IDEM_REQUIRED,
	  .doc = "Unix time, seconds" },
	{ .name = NULL } }, 0, NULL, 0, 0 };

static const struct idem_body health_view = { (const struct idem_member[]){
	{ .name = "status", .type = IDEM_T_STRING, .flags = IDEM_REQUIRED,
	  .oneof = (const char *const[]){ "ok", NULL } },
	{ .name = NULL } }, 0, NULL, 0, 0 };

const struct idem_response payment_created[] = {
	{ 201, &payment_view, IDEM_RESPONSE_LOCATION, "the payment created" },
	{ 0, NULL, 0, NULL } };
const struct idem_response payment_read[] = {
	{ 200, &payment_view, 0, "the payment" }, { 0, NULL, 0, NULL } };
const struct idem_response payment_page[] = {
	{ 200, &payment_view, IDEM_RESPONSE_LIST, "a page of payments, "
	  "newest first" }, { 0, NULL, 0, NULL } };
const struct idem_response refund_created[] = {
	{ 201, &refund_view, 0, "the refund created" }, { 0, NULL, 0, NULL } };
const struct idem_response health[] = {
	{ 200, &health_view, 0, "the database answers" },
	{ 0, NULL, 0, NULL } };

/* A payment as the API shows it, straight from its row. */
/* prefix and 24 random hex digits, from the library's random buffer
 * (RAND_bytes here would cost a getpid() per id: OpenSSL's fork check). */
static int
new_id(const char *prefix, char *out, size_t outlen)
{
	size_t	o = strlen(prefix);

	if (outlen <= o)
		return -1;
	memcpy(out, prefix, o);
	return idem_random_id(out + o, outlen - o, 12);
}

/* Enqueue event type with j's document (the object the response shows)
 * as its data, in the request's transaction: 0, or -1. */
static int
enqueue(idem_req *req, const char *type, const idem_json *j)
{
	const char	*doc;
	size_t		 len;

	if ((doc = idem_json_buf(j, &len)) == NULL)
		return -1;
	return idem_req_enqueue(req, type, doc, len, NULL, 0);
}

/* Enqueue event type with row 0 of r (PAYMENT_COLS) as its data: the
 * payment as GET shows it.  0, or -1. */
static int
payment_event(idem_req *req, const char *type, const PGresult *r)
{
	idem_json	*j = idem_json_new();
	int		 rc;

	idem_json_pg_row(j, r, 0);
	rc = enqueue(req, type, j);
	idem_json_free(j);
	return rc;
}

/* 201 with row 0 of r (PAYMENT_COLS) and its Location; frees r. */
static int
send_created(idem_req *req, PGresult *r)
{
	idem_json	*j = idem_json_new();
	char		 loc[96];

	idem_json_pg_row(j, r, 0);
	snprintf(loc, sizeof(loc), "/v1/payments/%.64s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (idem_json_send(j, req, 201) == -1)
		return -1;
	return idem_resp_header(req, "Location", loc);
}

/* Queue the INSERT of the body's payment; record: the phased key record,
 * or 0.  It goes out with the commit, in one round trip. */
static int
defer_insert(idem_req *req, const char *id, const char *status,
    long long created, int64_t record)
{
	idem_args	*a = idem_args_new();

	idem_args_str(a, id);
	idem_args_tenant(a, req);
	idem_args_member(a, req, "amount");
	idem_args_member(a, req, "currency");
	idem_args_str(a, status);
	idem_args_member(a, req, "description");
	idem_args_member(a, req, "customer");
	idem_args_member(a, req, "metadata");
	idem_args_int(a, created);
	if (record != 0)
		idem_args_int(a, record);
	else
		idem_args_str(a, NULL);
	return idem_req_defer_args(req, "INSERT INTO payments (id, api_key_id, "
	    "amount, currency, status, description, customer, metadata, "
	    "created_at, idem_key_id) VALUES ($1, $2, $3, $4, $5, $6, $7, "
	    "coalesce($8::jsonb, '{}'), to_timestamp($9), $10)", a);
}

int payments_no_event;

int
payments_create(idem_req *req, void *arg)
{
	idem_json	*j;
	yajl_val	 meta = idem_req_member(req, "metadata");
	char		 id[32], loc[64];
	long long	 now = (long long)time(NULL);

	if (new_id("pay_", id, sizeof(id)) == -1 ||
	    defer_insert(req, id, "succeeded", now, 0) == -1)
		return -1;
	/* As the row will read: the body's values, validated. */
	j = idem_json_new();
	idem_json_object(j);
	idem_json_kstr(j, "id", id);
	idem_json_kstr(j, "object", "payment");
	idem_json_kint(j, "amount", idem_req_int(req, "amount", 0));
	idem_json_kstr(j, "currency", idem_req_str(req, "currency"));
	idem_json_kstr(j, "status", "succeeded");
	idem_json_kint(j, "amount_refunded", 0);
	idem_json_kstr(j, "description", idem_req_str(req, "description"));
	idem_json_kstr(j, "customer", idem_req_str(req, "customer"));
	idem_json_key(j, "metadata");
	if (meta != NULL)
		idem_json_value(j, meta);
	else {
		idem_json_object(j);
		idem_json_object_end(j);
	}
	idem_json_kint(j, "created", now);
	idem_json_object_end(j);
	/* Only in a key's transaction: the benchmark's plain route (no
	 * middleware, no transaction) sends nothing, nor does its route
	 * without the event. */
	if (arg != &payments_no_event &&
	    idem_req_idempotency_key(req) != NULL &&
	    enqueue(req, PAYMENTS_EV_SUCCEEDED, j) == -1) {
		idem_json_free(j);
		return -1;
	}
	/* id is "pay_" and 24 hex digits (new_id): it fits. */
	memcpy(loc, "/v1/payments/", 13);
	memcpy(loc + 13, id, strlen(id) + 1);
	if (idem_json_send(j, req, 201) == -1)
		return -1;
	return idem_resp_header(req, "Location", loc);
}

static int
valid_id(const char *id, const char *prefix)
{
	size_t	n = strlen(prefix), i;

	if (id == NULL || strncmp(id, prefix, n) != 0 || strlen(id) > 64)
		return 0;
	for (i = n; id[i] != '\0'; i++)
		if (!isalnum((unsigned char)id[i]))
			return 0;
	return id[n] != '\0';
}

/* This tenant's payment :id: its row, or NULL with the response (404) or
 * -1 in *rc. */
static PGresult *
fetch_payment(idem_req *req, const char *cols, const char *lock, int *rc)
{
	idem_args	*a = idem_args_new();
	PGresult	*r;
	char		 sql[512];

	*rc = -1;
	if (!valid_id(idem_req_param(req, "id"), "pay_")) {
		idem_args_free(a);
		*rc = idem_resp_problem(req, IDEM_P_NOT_FOUND, "no such payment");
		return NULL;
	}
	idem_args_str(a, idem_req_param(req, "id"));
	idem_args_tenant(a, req);
	snprintf(sql, sizeof(sql), "SELECT %s FROM payments WHERE id = $1 AND "
	    "api_key_id = $2%s", cols, lock);
	if ((r = idem_req_exec(req, sql, a)) != NULL && PQntuples(r) == 0) {
		PQclear(r);
		*rc = idem_resp_problem(req, IDEM_P_NOT_FOUND, "no such payment");
		return NULL;
	}
	return r;
}

int
payments_get(idem_req *req, void *arg)
{
	idem_json	*j;
	PGresult	*r;
	int		 rc;

	(void)arg;
	if ((r = fetch_payment(req, PAYMENT_COLS, "", &rc)) == NULL)
		return rc;
	j = idem_json_new();
	idem_json_pg_row(j, r, 0);
	PQclear(r);
	return idem_json_send(j, req, 200);
}

/* GET /v1/payments: newest first, a page at a time. */
const struct idem_param list_params[] = {
	{ .name = "limit", .type = IDEM_T_INTEGER, .min = 1, .max = 100,
	  .def = "10", .doc = "how many payments, 1 to 100" },
	{ .name = "starting_after", .type = IDEM_T_STRING, .min = 1,
	  .max = 64, .doc = "the last payment id of the previous page: the "
	  "next page starts after it" },
	{ .name = NULL } };

int
payments_list(idem_req *req, void *arg)
{
	const char	*after = idem_req_qparam(req, "starting_after");

	(void)arg;
	if (after != NULL && !valid_id(after, "pay_"))
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "starting_after must be a payment id");
	return idem_resp_page(req, "SELECT 1 FROM payments WHERE id = $1 AND "
	    "api_key_id = $2", "SELECT " PAYMENT_COLS " FROM payments WHERE "
	    "api_key_id = $1 AND ($2::text IS NULL OR seq < (SELECT seq FROM "
	    "payments WHERE id = $2 AND api_key_id = $1)) ORDER BY seq DESC "
	    "LIMIT $3::int", after, (long)idem_req_qparam_int(req, "limit", 10),
	    "payment");
}

int
refunds_create(idem_req *req, void *arg)
{
	long long	 amount = idem_req_int(req, "amount", 0), left;
	idem_args	*a;
	idem_json	*j;
	PGresult	*r;
	char		 rid[32];
	int		 rc, succeeded;

	(void)arg;
	/* The row lock serialises concurrent refunds of one payment. */
	if ((r = fetch_payment(req, "amount - amount_refunded, status",
	    " FOR UPDATE", &rc)) == NULL)
		return rc;
	left = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	succeeded = strcmp(PQgetvalue(r, 0, 1), "succeeded") == 0;
	PQclear(r);
	if (!succeeded)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "payment: only a succeeded payment can be refunded");
	if (amount == 0)
		amount = left;
	if (left == 0)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "amount: the payment is already fully refunded");
	if (amount > left)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "amount %lld exceeds the %lld that remains to refund",
		    amount, left);
	if (new_id("re_", rid, sizeof(rid)) == -1)
		return -1;
	a = idem_args_new();
	idem_args_str(a, idem_req_param(req, "id"));
	idem_args_tenant(a, req);
	idem_args_int(a, amount);
	if (idem_req_defer_args(req, "UPDATE payments SET amount_refunded = "
	    "amount_refunded + $3::bigint WHERE id = $1 AND api_key_id = $2",
	    a) == -1)
		return -1;
	a = idem_args_new();
	idem_args_str(a, rid);
	idem_args_str(a, idem_req_param(req, "id"));
	idem_args_tenant(a, req);
	idem_args_int(a, amount);
	if (idem_req_defer_args(req, "INSERT INTO refunds (id, payment_id, "
	    "api_key_id, amount) VALUES ($1, $2, $3, $4)", a) == -1)
		return -1;
	j = idem_json_new();
	idem_json_object(j);
	idem_json_kstr(j, "id", rid);
	idem_json_kstr(j, "object", "refund");
	idem_json_kstr(j, "payment", idem_req_param(req, "id"));
	idem_json_kint(j, "amount", amount);
	idem_json_kint(j, "created", (long long)time(NULL));
	idem_json_object_end(j);
	if (enqueue(req, PAYMENTS_EV_REFUNDED, j) == -1) {
		idem_json_free(j);
		return -1;
	}
	return idem_json_send(j, req, 201);
}

int
healthz(idem_req *req, void *arg)
{
	PGresult	*r;
	idem_json	*j;

	(void)arg;
	if ((r = idem_req_exec(req, "SELECT 1", idem_args_new())) == NULL)
		return idem_resp_problem(req, IDEM_P_UNAVAILABLE,
		    "the database is not available");
	PQclear(r);
	j = idem_json_new();
	idem_json_object(j);
	idem_json_kstr(j, "status", "ok");
	idem_json_object_end(j);
	return idem_json_send(j, req, 200);
}

/* --- phased create: an external acquirer ---------------------------------- */

/* [payments] acquirer_timeout (main.c); bounded by the time left too. */
long long	payments_acquirer_timeout_ms = 5000;

/* The payment that phase 1 of this key record inserted (cols), or NULL. */
static PGresult *
phased_payment(idem_req *req, const char *sql)
{
	idem_args	*a = idem_args_new();
	PGresult	*r;

	idem_args_int(a, (long long)idem_req_record_id(req));
	idem_args_tenant(a, req);
	if ((r = idem_req_exec(req, sql, a)) != NULL && PQntuples(r) != 1) {
		PQclear(r);
		return NULL;
	}
	return r;
}

/* Phase 1: the payment, pending. */
static int
phase_insert(idem_req *req, void *arg)
{
	char	id[32];

	(void)arg;
	if (new_id("pay_", id, sizeof(id)) == -1 ||
	    defer_insert(req, id, "pending", (long long)time(NULL),
	    idem_req_record_id(req)) == -1)
		return -1;
	return IDEM_PHASE_NEXT;
}

/* Phase 2: the charge; the acquirer dedups on our derived key. */
static int
phase_charge(idem_req *req, void *arg)
{
	struct acquirer_result	 res;
	const char		*url = arg;
	idem_args		*a;
	PGresult		*r;
	int			 ok;

	memset(&res, 0, sizeof(res));
	if ((r = phased_payment(req, "SELECT id, amount, currency FROM "
	    "payments WHERE idem_key_id = $1 AND api_key_id = $2")) == NULL)
		return -1;
	/* No transaction stays open while the acquirer takes its time, and
	 * the lease is renewed for it (-1: this request lost the key). */
	if (idem_req_phase_pause(req) == -1) {
		PQclear(r);
		return -1;
	}
	/* The call ends within the phase's deadline, so within the lease
	 * (idem_http_send() bounds it by the request's time left). */
	ok = acquirer_charge(req, url, PQgetvalue(r, 0, 0),
	    strtoll(PQgetvalue(r, 0, 1), NULL, 10), PQgetvalue(r, 0, 2),
	    payments_acquirer_timeout_ms, &res) == 0;
	a = idem_args_new();
	idem_args_str(a, PQgetvalue(r, 0, 0));
	PQclear(r);
	if (!ok && res.http_status == 422) {
		/*
		 * The derived key charged another payment of this same
		 * operation (tenant, key and body) before its record expired:
		 * definitive, stored, and no second charge.  The payment
		 * failed, and its event commits with that.
		 */
		if ((r = idem_req_exec(req, "UPDATE payments SET status = "
		    "'failed' WHERE id = $1 RETURNING " PAYMENT_COLS, a)) ==
		    NULL)
			return -1;
		ok = payment_event(req, PAYMENTS_EV_FAILED, r);
		PQclear(r);
		if (ok == -1)
			return -1;
		return idem_resp_problem(req, IDEM_P_KEY_REUSED, "this "
		    "Idempotency-Key was already used for this payment, and its "
		    "window has passed; use a new key") == 0 ? IDEM_PHASE_END :
		    -1;
	}
	if (!ok) {
		idem_args_free(a);
		idem_req_log(req, IDEM_LOG_WARN, "acquirer: no usable answer "
		    "(%s, HTTP %d)", idem_http_rc_name(res.rc),
		    res.http_status);
		/* Not stored: the retry resumes here, with the same key. */
		return idem_resp_problem(req, IDEM_P_UNAVAILABLE, "the card "
		    "acquirer did not answer; retry later") == 0 ?
		    IDEM_PHASE_END : -1;
	}
	idem_args_str(a, res.charge);
	idem_args_str(a, res.approved ? "approved" : "declined");
	return idem_req_defer_args(req, "UPDATE payments SET acquirer_charge = "
	    "$2, acquirer_status = $3 WHERE id = $1", a) == 0 ?
	    IDEM_PHASE_NEXT : -1;
}

/* Phase 3: the outcome, its event, and the response stored with them. */
static int
phase_finish(idem_req *req, void *arg)
{
	PGresult	*r;
	int		 succeeded;

	(void)arg;
	if ((r = phased_payment(req, "UPDATE payments SET status = CASE WHEN "
	    "acquirer_status = 'approved' THEN 'succeeded' ELSE 'failed' END "
	    "WHERE idem_key_id = $1 AND api_key_id = $2 RETURNING "
	    PAYMENT_COLS)) == NULL)
		return -1;
	succeeded = strcmp(PQgetvalue(r, 0, 4), "succeeded") == 0;
	/* This phase's commit records the outcome: its event is in it. */
	if (payment_event(req, succeeded ? PAYMENTS_EV_SUCCEEDED :
	    PAYMENTS_EV_FAILED, r) == -1) {
		PQclear(r);
		return -1;
	}
	if (succeeded)
		return send_created(req, r);
	idem_resp_problem(req, (enum idem_problem)payments_p_declined,
	    "the card was declined (payment %s)", PQgetvalue(r, 0, 0));
	PQclear(r);
	return IDEM_PHASE_END;
}

static const struct idem_phase create_phases[] = {
	{ "started", phase_insert },
	{ "payment_created", phase_charge },
	{ "charged", phase_finish },
	{ NULL, NULL },
};

int
payments_create_phased(idem_req *req, void *arg)
{
	/* A resumed request enters at its recovery point. */
	return idem_req_phases(req, create_phases, arg);
}
