/*
 * payments.c - handlers of the sample payments API.  Creating a payment
 * and a refund are idempotent routes: the middleware has already opened
 * the transaction that records the key, so the effect written here commits
 * or rolls back with it.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>
#include <yajl/yajl_gen.h>

#include "acquirer.h"
#include "payments.h"

int	payments_p_declined = -1;

#define AMOUNT_MAX	1000000000000LL	/* 10^12 minor units */
#define DESC_MAX	1000
#define CUSTOMER_MAX	255
#define META_KEYS_MAX	50
#define META_KEY_MAX	40
#define META_VAL_MAX	500

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

struct payment {
	char		 id[32];
	long long	 amount;
	char		 currency[4];
	const char	*status;
	long long	 refunded;
	const char	*description;	/* NULL: none */
	const char	*customer;
	yajl_val	 metadata;	/* object or NULL */
	long long	 created;
};

static int
new_id(const char *prefix, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char	  r[12];
	size_t		  i, o;

	if (RAND_bytes(r, sizeof(r)) != 1 ||
	    outlen < strlen(prefix) + 2 * sizeof(r) + 1)
		return -1;
	o = (size_t)snprintf(out, outlen, "%s", prefix);
	for (i = 0; i < sizeof(r); i++) {
		out[o++] = hex[r[i] >> 4];
		out[o++] = hex[r[i] & 0xf];
	}
	out[o] = '\0';
	return 0;
}

/* Count UTF-8 characters (the body is already known to be valid UTF-8). */
static size_t
u8len(const char *s)
{
	size_t	n = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

static void
gen_str(yajl_gen g, const char *s)
{
	yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

static void
gen_opt(yajl_gen g, const char *k, const char *v)
{
	gen_str(g, k);
	if (v != NULL)
		gen_str(g, v);
	else
		yajl_gen_null(g);
}

static void
gen_metadata(yajl_gen g, yajl_val m)
{
	size_t	i;

	yajl_gen_map_open(g);
	if (m != NULL && YAJL_IS_OBJECT(m))
		for (i = 0; i < m->u.object.len; i++) {
			gen_str(g, m->u.object.keys[i]);
			gen_str(g, YAJL_GET_STRING(m->u.object.values[i]));
		}
	yajl_gen_map_close(g);
}

static void
gen_payment(yajl_gen g, const struct payment *p)
{

	yajl_gen_map_open(g);
	gen_str(g, "id");	gen_str(g, p->id);
	gen_str(g, "object");	gen_str(g, "payment");
	gen_str(g, "amount");	yajl_gen_integer(g, p->amount);
	gen_str(g, "currency");	gen_str(g, p->currency);
	gen_str(g, "status");	gen_str(g, p->status);
	gen_str(g, "amount_refunded"); yajl_gen_integer(g, p->refunded);
	gen_opt(g, "description", p->description);
	gen_opt(g, "customer", p->customer);
	gen_str(g, "metadata");
	gen_metadata(g, p->metadata);
	gen_str(g, "created");	yajl_gen_integer(g, p->created);
	yajl_gen_map_close(g);
}

static int
send_gen(idem_req *req, int status, yajl_gen g)
{
	const unsigned char	*buf;
	size_t			 len;
	int			 rc;

	if (yajl_gen_get_buf(g, &buf, &len) != yajl_gen_status_ok) {
		yajl_gen_free(g);
		return -1;
	}
	rc = idem_resp_json(req, status, (const char *)buf, len);
	yajl_gen_free(g);
	return rc;
}

static yajl_gen
gen_new(void)
{
	yajl_gen	g = yajl_gen_alloc(NULL);

	if (g != NULL)
		yajl_gen_config(g, yajl_gen_validate_utf8, 1);
	return g;
}

/* The tenant id as a statement parameter. */
static void
tenant_str(const idem_req *req, char out[24])
{
	snprintf(out, 24, "%lld", (long long)idem_req_tenant(req));
}

/*
 * One payment row of this tenant: 0 with *r set, 1 when there is none (the
 * 404 is set), -1 on a database error.
 */
static int
fetch_payment(idem_req *req, const char *sql, const char *const *vals,
    PGresult **r)
{
	PGconn	*db;

	if ((db = idem_req_db(req)) == NULL)
		return -1;
	*r = PQexecParams(db, sql, 2, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(*r) != PGRES_TUPLES_OK) {
		PQclear(*r);
		return -1;
	}
	if (PQntuples(*r) == 0) {
		PQclear(*r);
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such payment") == 0 ? 1 : -1;
	}
	return 0;
}

static const char *
str_of(yajl_val v)
{
	return v != NULL && YAJL_IS_STRING(v) ? v->u.string : NULL;
}

static int
valid_currency(const char *c)
{
	const char	*hit;

	if (c == NULL || strlen(c) != 3 || !islower((unsigned char)c[0]) ||
	    !islower((unsigned char)c[1]) || !islower((unsigned char)c[2]))
		return 0;
	/* Entries are 4 bytes apart: a match must start on an entry. */
	hit = strstr(currencies, c);
	return hit != NULL && (hit - currencies) % 4 == 0;
}

/* Body member name must be one of the allowed (NULL-terminated). */
static const char *
unknown_member(yajl_val obj, const char *const *allowed)
{
	size_t	i, j;

	for (i = 0; i < obj->u.object.len; i++) {
		for (j = 0; allowed[j] != NULL; j++)
			if (strcmp(obj->u.object.keys[i], allowed[j]) == 0)
				break;
		if (allowed[j] == NULL)
			return obj->u.object.keys[i];
	}
	return NULL;
}

static yajl_val
member(yajl_val obj, const char *name)
{
	size_t	i;

	for (i = 0; i < obj->u.object.len; i++)
		if (strcmp(obj->u.object.keys[i], name) == 0)
			return YAJL_IS_NULL(obj->u.object.values[i]) ?
			    NULL : obj->u.object.values[i];
	return NULL;
}

/* Fill p from the body; 0, or -1 with the 400 response set. */
static int
validate_payment(idem_req *req, yajl_val b, struct payment *p)
{
	static const char *const allowed[] = { "amount", "currency",
	    "description", "customer", "metadata", NULL };
	const char	*bad;
	yajl_val	 v;
	size_t		 i;

	if (!YAJL_IS_OBJECT(b))
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "the body must be a JSON object"), -1;
	if ((bad = unknown_member(b, allowed)) != NULL)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "unknown field '%.40s'", bad), -1;
	v = member(b, "amount");
	if (v == NULL || !YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) <= 0 ||
	    YAJL_GET_INTEGER(v) > AMOUNT_MAX)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "amount must be an integer from 1 to %lld (minor units)",
		    AMOUNT_MAX), -1;
	p->amount = YAJL_GET_INTEGER(v);
	v = member(b, "currency");
	if (v == NULL || !valid_currency(str_of(v)))
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "currency must be a lower-case ISO 4217 code such as "
		    "\"eur\""), -1;
	memcpy(p->currency, str_of(v), 4);
	if ((v = member(b, "description")) != NULL) {
		if (!YAJL_IS_STRING(v) || u8len(YAJL_GET_STRING(v)) > DESC_MAX)
			return idem_resp_problem(req, IDEM_P_VALIDATION,
			    "description must be a string of at most %d "
			    "characters", DESC_MAX), -1;
		p->description = YAJL_GET_STRING(v);
	}
	if ((v = member(b, "customer")) != NULL) {
		if (!YAJL_IS_STRING(v) || *YAJL_GET_STRING(v) == '\0' ||
		    u8len(YAJL_GET_STRING(v)) > CUSTOMER_MAX)
			return idem_resp_problem(req, IDEM_P_VALIDATION,
			    "customer must be a string of 1 to %d characters",
			    CUSTOMER_MAX), -1;
		p->customer = YAJL_GET_STRING(v);
	}
	if ((v = member(b, "metadata")) != NULL) {
		if (!YAJL_IS_OBJECT(v) || v->u.object.len > META_KEYS_MAX)
			return idem_resp_problem(req, IDEM_P_VALIDATION,
			    "metadata must be an object of at most %d string "
			    "values", META_KEYS_MAX), -1;
		for (i = 0; i < v->u.object.len; i++)
			if (!YAJL_IS_STRING(v->u.object.values[i]) ||
			    u8len(v->u.object.keys[i]) > META_KEY_MAX ||
			    *v->u.object.keys[i] == '\0' ||
			    u8len(YAJL_GET_STRING(v->u.object.values[i])) >
			    META_VAL_MAX)
				return idem_resp_problem(req, IDEM_P_VALIDATION,
				    "metadata values must be strings (keys 1 "
				    "to %d, values up to %d characters)",
				    META_KEY_MAX, META_VAL_MAX), -1;
		p->metadata = v;
	}
	return 0;
}

/* Queue the INSERT of p; record: the phased key record, or 0. */
static int
defer_insert(idem_req *req, const struct payment *p, int64_t record)
{
	char		 amount[24], tenant[24], created[24], rec[24];
	const char	*vals[10];
	const unsigned char *meta;
	size_t		 metalen;
	yajl_gen	 mg;
	int		 rc;

	/* The metadata column gets the same compact object as the body. */
	if ((mg = gen_new()) == NULL)
		return -1;
	gen_metadata(mg, p->metadata);
	yajl_gen_get_buf(mg, &meta, &metalen);
	snprintf(amount, sizeof(amount), "%lld", p->amount);
	tenant_str(req, tenant);
	snprintf(created, sizeof(created), "%lld", p->created);
	snprintf(rec, sizeof(rec), "%lld", (long long)record);
	vals[0] = p->id;
	vals[1] = tenant;
	vals[2] = amount;
	vals[3] = p->currency;
	vals[4] = p->status;
	vals[5] = p->description;
	vals[6] = p->customer;
	vals[7] = (const char *)meta;
	vals[8] = created;
	vals[9] = record != 0 ? rec : NULL;
	rc = idem_req_defer(req, "INSERT INTO payments (id, api_key_id, "
	    "amount, currency, status, description, customer, metadata, "
	    "created_at, idem_key_id) VALUES ($1, $2, $3, $4, $5, $6, $7, "
	    "$8::jsonb, to_timestamp($9), $10)", 10, vals);
	yajl_gen_free(mg);
	return rc;
}

int
payments_create(idem_req *req, void *arg)
{
	struct payment	 p;
	yajl_gen	 g;
	char		 loc[64];

	(void)arg;
	memset(&p, 0, sizeof(p));
	if (validate_payment(req, idem_req_json(req), &p) == -1)
		return 0;	/* a 400, stored with the key */
	if (new_id("pay_", p.id, sizeof(p.id)) == -1)
		return -1;
	p.status = "succeeded";
	p.created = (long long)time(NULL);

	/* Validated above, so it cannot fail for a reason of the client's:
	 * it goes out with the commit, in one round trip. */
	if (defer_insert(req, &p, 0) == -1)
		return -1;

	if ((g = gen_new()) == NULL)
		return -1;
	gen_payment(g, &p);
	snprintf(loc, sizeof(loc), "/v1/payments/%s", p.id);
	if (send_gen(req, 201, g) == -1)
		return -1;
	return idem_resp_header(req, "Location", loc);
}

static const char payment_cols[] =
	"id, amount, currency, status, amount_refunded, description, "
	"customer, metadata::text, extract(epoch FROM created_at)::bigint";

/* Render row i of r (payment_cols) into g; status may be overridden. */
static int
gen_row(yajl_gen g, const PGresult *r, int i, const char *status)
{
	struct payment	p;

	memset(&p, 0, sizeof(p));
	snprintf(p.id, sizeof(p.id), "%s", PQgetvalue(r, i, 0));
	p.amount = strtoll(PQgetvalue(r, i, 1), NULL, 10);
	snprintf(p.currency, sizeof(p.currency), "%s", PQgetvalue(r, i, 2));
	p.status = status != NULL ? status : PQgetvalue(r, i, 3);
	p.refunded = strtoll(PQgetvalue(r, i, 4), NULL, 10);
	p.description = PQgetisnull(r, i, 5) ? NULL : PQgetvalue(r, i, 5);
	p.customer = PQgetisnull(r, i, 6) ? NULL : PQgetvalue(r, i, 6);
	p.metadata = yajl_tree_parse(PQgetvalue(r, i, 7), NULL, 0);
	p.created = strtoll(PQgetvalue(r, i, 8), NULL, 10);
	gen_payment(g, &p);
	if (p.metadata != NULL)
		yajl_tree_free(p.metadata);
	return 0;
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

int
payments_get(idem_req *req, void *arg)
{
	char		 sql[512], tenant[24];
	const char	*vals[2];
	PGresult	*r;
	yajl_gen	 g;
	int		 rc;

	(void)arg;
	if (!valid_id(idem_req_param(req, "id"), "pay_"))
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such payment");
	tenant_str(req, tenant);
	vals[0] = idem_req_param(req, "id");
	vals[1] = tenant;
	snprintf(sql, sizeof(sql), "SELECT %s FROM payments WHERE id = $1 "
	    "AND api_key_id = $2", payment_cols);
	if ((rc = fetch_payment(req, sql, vals, &r)) != 0)
		return rc == 1 ? 0 : -1;
	if ((g = gen_new()) == NULL) {
		PQclear(r);
		return -1;
	}
	gen_row(g, r, 0, NULL);
	PQclear(r);
	rc = send_gen(req, 200, g);
	return rc;
}

int
payments_list(idem_req *req, void *arg)
{
	char		 sql[768], tenant[24], lim[8];
	const char	*vals[3], *l, *after;
	PGconn		*db;
	PGresult	*r;
	yajl_gen	 g;
	long		 limit = 10;
	char		*end;
	int		 i, n;

	(void)arg;
	if ((l = idem_req_query(req, "limit")) != NULL) {
		limit = strtol(l, &end, 10);
		if (*l == '\0' || *end != '\0' || limit < 1 || limit > 100)
			return idem_resp_problem(req, IDEM_P_VALIDATION,
			    "limit must be an integer from 1 to 100");
	}
	after = idem_req_query(req, "starting_after");
	if (after != NULL && !valid_id(after, "pay_"))
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "starting_after must be a payment id");
	if ((db = idem_req_db(req)) == NULL)
		return -1;
	tenant_str(req, tenant);
	snprintf(lim, sizeof(lim), "%ld", limit + 1);
	vals[0] = tenant;
	vals[1] = after;
	vals[2] = lim;
	if (after != NULL) {
		r = PQexecParams(db, "SELECT 1 FROM payments WHERE id = $1 AND "
		    "api_key_id = $2", 2, NULL, (const char *[]){ after,
		    tenant }, NULL, NULL, 0);
		n = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : -1;
		PQclear(r);
		if (n == -1)
			return -1;
		if (n == 0)
			return idem_resp_problem(req, IDEM_P_VALIDATION,
			    "starting_after: no such payment");
	}
	snprintf(sql, sizeof(sql), "SELECT %s FROM payments WHERE "
	    "api_key_id = $1 AND ($2::text IS NULL OR seq < (SELECT seq FROM "
	    "payments WHERE id = $2 AND api_key_id = $1)) ORDER BY seq DESC "
	    "LIMIT $3::int", payment_cols);
	r = PQexecParams(db, sql, 3, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		PQclear(r);
		return -1;
	}
	if ((g = gen_new()) == NULL) {
		PQclear(r);
		return -1;
	}
	n = PQntuples(r);
	yajl_gen_map_open(g);
	gen_str(g, "object");
	gen_str(g, "list");
	gen_str(g, "data");
	yajl_gen_array_open(g);
	for (i = 0; i < n && i < limit; i++)
		gen_row(g, r, i, NULL);
	yajl_gen_array_close(g);
	gen_str(g, "has_more");
	yajl_gen_bool(g, n > limit);
	yajl_gen_map_close(g);
	PQclear(r);
	return send_gen(req, 200, g);
}

int
refunds_create(idem_req *req, void *arg)
{
	static const char *const allowed[] = { "amount", NULL };
	const char	*pid = idem_req_param(req, "id"), *bad;
	const char	*vals[4];
	char		 tenant[24], amt[24], rid[32];
	yajl_val	 b = idem_req_json(req), v;
	long long	 amount = 0, total, refunded, left;
	PGresult	*r;
	yajl_gen	 g;
	int		 rc;

	(void)arg;
	if (!YAJL_IS_OBJECT(b))
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "the body must be a JSON object");
	if ((bad = unknown_member(b, allowed)) != NULL)
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "unknown field '%.40s'", bad);
	if ((v = member(b, "amount")) != NULL) {
		if (!YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) <= 0 ||
		    YAJL_GET_INTEGER(v) > AMOUNT_MAX)
			return idem_resp_problem(req, IDEM_P_VALIDATION,
			    "amount must be a positive integer");
		amount = YAJL_GET_INTEGER(v);
	}
	if (!valid_id(pid, "pay_"))
		return idem_resp_problem(req, IDEM_P_NOT_FOUND,
		    "no such payment");
	tenant_str(req, tenant);
	vals[0] = pid;
	vals[1] = tenant;
	/* The row lock serialises concurrent refunds of one payment. */
	if ((rc = fetch_payment(req, "SELECT amount, amount_refunded, status "
	    "FROM payments WHERE id = $1 AND api_key_id = $2 FOR UPDATE",
	    vals, &r)) != 0)
		return rc == 1 ? 0 : -1;
	total = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	refunded = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	if (strcmp(PQgetvalue(r, 0, 2), "succeeded") != 0) {
		PQclear(r);
		return idem_resp_problem(req, IDEM_P_VALIDATION,
		    "payment: only a succeeded payment can be refunded");
	}
	PQclear(r);
	left = total - refunded;
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
	snprintf(amt, sizeof(amt), "%lld", amount);
	vals[0] = pid;
	vals[1] = tenant;
	vals[2] = amt;
	vals[3] = rid;
	if (idem_req_defer(req, "UPDATE payments SET amount_refunded = "
	    "amount_refunded + $3::bigint WHERE id = $1 AND api_key_id = $2",
	    3, vals) == -1 ||
	    idem_req_defer(req, "INSERT INTO refunds (id, payment_id, "
	    "api_key_id, amount) VALUES ($4, $1, $2, $3)", 4, vals) == -1)
		return -1;
	if ((g = gen_new()) == NULL)
		return -1;
	yajl_gen_map_open(g);
	gen_str(g, "id");	gen_str(g, rid);
	gen_str(g, "object");	gen_str(g, "refund");
	gen_str(g, "payment");	gen_str(g, pid);
	gen_str(g, "amount");	yajl_gen_integer(g, amount);
	gen_str(g, "created");	yajl_gen_integer(g, (long long)time(NULL));
	yajl_gen_map_close(g);
	return send_gen(req, 201, g);
}

int
healthz(idem_req *req, void *arg)
{
	static const char ok[] = "{\"status\":\"ok\"}";
	PGconn		*db;
	PGresult	*r;
	int		 up;

	(void)arg;
	if ((db = idem_req_db(req)) == NULL)
		return idem_resp_problem(req, IDEM_P_UNAVAILABLE,
		    "the database is not available");
	r = PQexec(db, "SELECT 1");
	up = PQresultStatus(r) == PGRES_TUPLES_OK;
	PQclear(r);
	if (!up)
		return idem_resp_problem(req, IDEM_P_UNAVAILABLE,
		    "the database is not available");
	return idem_resp_json(req, 200, ok, sizeof(ok) - 1);
}

/* --- phased create: an external acquirer ---------------------------------- */

#define ACQUIRER_TIMEOUT_MS	5000

/* The payment that phase 1 of this key record inserted. */
static PGresult *
phased_payment(idem_req *req)
{
	char		 sql[512], tenant[24], rec[24];
	const char	*vals[2] = { rec, tenant };
	PGresult	*r;

	tenant_str(req, tenant);
	snprintf(rec, sizeof(rec), "%lld", (long long)idem_req_record_id(req));
	snprintf(sql, sizeof(sql), "SELECT %s, acquirer_status FROM payments "
	    "WHERE idem_key_id = $1 AND api_key_id = $2", payment_cols);
	r = PQexecParams(idem_req_db(req), sql, 2, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		PQclear(r);
		return NULL;
	}
	return r;
}

/* Phase 1: the payment, pending. */
static int
phase_insert(idem_req *req, const struct payment *p)
{
	if (defer_insert(req, p, idem_req_record_id(req)) == -1)
		return -1;
	return idem_req_phase_commit(req, "payment_created");
}

/* Phase 2: the charge; the acquirer dedups on our derived key. */
static int
phase_charge(idem_req *req, const char *url)
{
	struct acquirer_result	 res;
	char			 key[64];
	const char		*vals[3];
	PGresult		*r;
	long long		 tmo;
	int			 rc;

	if ((r = phased_payment(req)) == NULL)
		return -1;
	/* No transaction stays open while the acquirer takes its time, and
	 * the lease is renewed for it (-1: this request lost the key). */
	if (idem_req_phase_pause(req) == -1) {
		PQclear(r);
		return -1;
	}
	/* The call ends within the phase's deadline, so within the lease. */
	tmo = idem_req_time_left_ms(req);
	if (tmo > ACQUIRER_TIMEOUT_MS)
		tmo = ACQUIRER_TIMEOUT_MS;
	if (idem_req_derived_key(req, "charge", key, sizeof(key)) == -1 ||
	    acquirer_charge(url, key, PQgetvalue(r, 0, 0),
	    strtoll(PQgetvalue(r, 0, 1), NULL, 10), PQgetvalue(r, 0, 2),
	    tmo, &res) == -1) {
		if (res.http_status == 422) {
			/*
			 * The derived key charged another payment of this same
			 * operation (tenant, key and body) before its record
			 * expired: definitive, stored, and no second charge.
			 */
			vals[0] = PQgetvalue(r, 0, 0);
			rc = idem_req_defer(req, "UPDATE payments SET status = "
			    "'failed' WHERE id = $1", 1, vals);
			PQclear(r);
			return rc == -1 ? -1 : idem_resp_problem(req,
			    IDEM_P_KEY_REUSED, "this Idempotency-Key was "
			    "already used for this payment, and its window has "
			    "passed; use a new key");
		}
		PQclear(r);
		/* Not stored: the retry resumes here, with the same key. */
		return idem_resp_problem(req, IDEM_P_UNAVAILABLE,
		    "the card acquirer did not answer; retry later");
	}
	vals[0] = PQgetvalue(r, 0, 0);
	vals[1] = res.charge;
	vals[2] = res.approved ? "approved" : "declined";
	rc = idem_req_defer(req, "UPDATE payments SET acquirer_charge = $2, "
	    "acquirer_status = $3 WHERE id = $1", 3, vals);
	PQclear(r);
	return rc == 0 ? idem_req_phase_commit(req, "charged") : -1;
}

/* Phase 3: the outcome, and the response stored with it. */
static int
phase_finish(idem_req *req)
{
	const char	*vals[2];
	PGresult	*r;
	yajl_gen	 g;
	char		 loc[64];
	int		 approved;

	if ((r = phased_payment(req)) == NULL)
		return -1;
	approved = strcmp(PQgetvalue(r, 0, 9), "approved") == 0;
	vals[0] = PQgetvalue(r, 0, 0);
	vals[1] = approved ? "succeeded" : "failed";
	if (idem_req_defer(req, "UPDATE payments SET status = $2 WHERE id = $1",
	    2, vals) == -1) {
		PQclear(r);
		return -1;
	}
	if (!approved) {
		idem_resp_problem(req, (enum idem_problem)payments_p_declined,
		    "the card was declined (payment %s)", PQgetvalue(r, 0, 0));
		PQclear(r);
		return 0;
	}
	if ((g = gen_new()) == NULL) {
		PQclear(r);
		return -1;
	}
	/* Render as the row will read after commit. */
	gen_row(g, r, 0, "succeeded");
	snprintf(loc, sizeof(loc), "/v1/payments/%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	if (send_gen(req, 201, g) == -1)
		return -1;
	return idem_resp_header(req, "Location", loc);
}

int
payments_create_phased(idem_req *req, void *arg)
{
	const char	*url = arg, *rp = idem_req_recovery_point(req);
	struct payment	 p;

	/* A resumed request enters at its recovery point. */
	if (rp != NULL && strcmp(rp, "started") == 0) {
		memset(&p, 0, sizeof(p));
		if (validate_payment(req, idem_req_json(req), &p) == -1)
			return 0;	/* a 400, stored with the key */
		p.status = "pending";
		p.created = (long long)time(NULL);
		if (new_id("pay_", p.id, sizeof(p.id)) == -1 ||
		    phase_insert(req, &p) == -1)
			return -1;
		rp = idem_req_recovery_point(req);
	}
	if (rp != NULL && strcmp(rp, "payment_created") == 0) {
		if (phase_charge(req, url) == -1)
			return -1;
		rp = idem_req_recovery_point(req);
		if (strcmp(rp, "charged") != 0)
			return 0;	/* the 503 set by phase_charge */
	}
	if (rp != NULL && strcmp(rp, "charged") == 0)
		return phase_finish(req);
	return -1;
}
