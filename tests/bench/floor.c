/*
 * floor.c - the floor of the benchmark (tests/bench/floor-run): POST
 * /v1/payments with an Idempotency-Key done by a C program with no
 * framework, to tell what idem itself costs per request.  libfcgi accepts
 * the requests (one thread, FCGI_KEEP_CONN honoured), libpq sends the
 * statements payments.fcgi sends, in the same two round trips (pipeline
 * mode, statements prepared once), OpenSSL hashes the secret, the request
 * and the lock id with SHA-256, yajl parses the body and builds the
 * response.  The SQL comes from the app's source (floor_sql.h, generated
 * by floorsql.py).  Not installed, not part of the suite: no validation
 * beyond what the statements need, no logging, one connection.
 *
 *   floor -l SOCKET -d CONNINFO
 *
 * Replies 201 (created), the stored response (replay), 409 (the key's
 * lock is held), 401 (unknown secret) or 400/500.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <fcgiapp.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "floor_sql.h"

/* The app's limits for POST /v1/payments (tests/lib/idem.sh's config:
 * ttl 7d on the route, lease 5m, remember 30d). */
#define TTL_MS		"604800000"
#define LEASE_MS	"300000"
#define REMEMBER_MS	"2592000000"

enum { C_TENANT, C_SECRET, C_GOT, C_CLAIMED, C_INSERTED, C_ID, C_METHOD,
	C_PATH, C_FPR, C_STATE, C_STATUS, C_HEADERS, C_BODY };

static PGconn	*db;
static int	 rollback_pending;	/* a ROLLBACK's answer not read yet */
static EVP_MD	*sha256;
static EVP_MD_CTX *mdctx;
static unsigned char rnd[4096];
static size_t	 rnd_used = sizeof(rnd);

static void
digest(const void *a, size_t alen, const void *b, size_t blen,
    const void *c, size_t clen, unsigned char out[32])
{
	EVP_DigestInit_ex(mdctx, sha256, NULL);
	EVP_DigestUpdate(mdctx, a, alen);
	if (b != NULL)
		EVP_DigestUpdate(mdctx, b, blen);
	if (c != NULL)
		EVP_DigestUpdate(mdctx, c, clen);
	EVP_DigestFinal_ex(mdctx, out, NULL);
}

static int
random_bytes(unsigned char *out, size_t n)
{
	if (rnd_used + n > sizeof(rnd)) {
		if (RAND_bytes(rnd, sizeof(rnd)) != 1)
			return -1;
		rnd_used = 0;
	}
	memcpy(out, rnd + rnd_used, n);
	rnd_used += n;
	return 0;
}

/* Read every result up to the pipeline's sync; keep those of interest. */
static int
drain(PGresult **keep, int nkeep)
{
	PGresult	*r;
	int		 i = 0, ok = 1;

	for (;;) {
		r = PQgetResult(db);
		if (r == NULL)
			continue;	/* end of one statement's results */
		switch (PQresultStatus(r)) {
		case PGRES_PIPELINE_SYNC:
			PQclear(r);
			return ok ? 0 : -1;
		case PGRES_COMMAND_OK:
		case PGRES_TUPLES_OK:
			break;
		default:
			fprintf(stderr, "floor: %s", PQresultErrorMessage(r));
			ok = 0;
		}
		if (i < nkeep && keep != NULL)
			keep[i] = r;
		else
			PQclear(r);
		i++;
	}
}

static int
flush_rollback(void)
{
	if (!rollback_pending)
		return 0;
	rollback_pending = 0;
	return drain(NULL, 0);
}

static void
reply(FCGX_Request *rq, const char *status, const char *headers,
    const unsigned char *body, size_t len)
{
	char	 h[512];
	int	 n;

	n = snprintf(h, sizeof(h), "Status: %s\r\n%sContent-Length: %zu\r\n\r\n",
	    status, headers, len);
	/* One buffer: libfcgi writes it with the end of the request. */
	FCGX_PutStr(h, n, rq->out);
	if (len > 0)
		FCGX_PutStr((const char *)body, (int)len, rq->out);
}

static void
problem(FCGX_Request *rq, const char *status)
{
	reply(rq, status, "Content-Type: application/problem+json\r\n",
	    (const unsigned char *)"{}", 2);
}

static const char *
member_str(yajl_val v, const char *name)
{
	const char	*path[] = { name, NULL };
	yajl_val	 m = yajl_tree_get(v, path, yajl_t_string);

	return m != NULL ? YAJL_GET_STRING(m) : NULL;
}

static int64_t
get_i64(const PGresult *r, int col)
{
	uint32_t	hi, lo;

	if (PQgetisnull(r, 0, col))
		return 0;
	memcpy(&hi, PQgetvalue(r, 0, col), 4);
	memcpy(&lo, PQgetvalue(r, 0, col) + 4, 4);
	return (int64_t)((uint64_t)ntohl(hi) << 32 | ntohl(lo));
}

/* The stored response, as idem replays it: status, headers, body. */
static void
replay(FCGX_Request *rq, const PGresult *r)
{
	char		 st[16], hdr[512], err[64];
	yajl_val	 h;
	size_t		 i, n = 0;
	uint32_t	 s;

	memcpy(&s, PQgetvalue(r, 0, C_STATUS), 4);
	snprintf(st, sizeof(st), "%u", ntohl(s));
	hdr[0] = '\0';
	h = yajl_tree_parse(PQgetvalue(r, 0, C_HEADERS), err, sizeof(err));
	if (h != NULL && YAJL_IS_OBJECT(h))
		for (i = 0; i < h->u.object.len; i++)
			if (YAJL_IS_STRING(h->u.object.values[i]))
				n += (size_t)snprintf(hdr + n, sizeof(hdr) - n,
				    "%s: %s\r\n", h->u.object.keys[i],
				    YAJL_GET_STRING(h->u.object.values[i]));
	yajl_tree_free(h);
	if (n < sizeof(hdr))
		snprintf(hdr + n, sizeof(hdr) - n, "Idempotent-Replayed: true\r\n");
	reply(rq, st, hdr, (const unsigned char *)PQgetvalue(r, 0, C_BODY),
	    (size_t)PQgetlength(r, 0, C_BODY));
}

static void
handle(FCGX_Request *rq)
{
	const char	*auth = FCGX_GetParam("HTTP_AUTHORIZATION", rq->envp);
	const char	*key = FCGX_GetParam("HTTP_IDEMPOTENCY_KEY", rq->envp);
	const char	*method = FCGX_GetParam("REQUEST_METHOD", rq->envp);
	const char	*path = FCGX_GetParam("PATH_INFO", rq->envp);
	const char	*cl = FCGX_GetParam("CONTENT_LENGTH", rq->envp);
	char		 body[65536], err[128], lock[24], tenant[24], id[40];
	char		 amount[24], created[24], hj[160], loc[80];
	char		 evid[48], ev[1024], tp[64];
	unsigned char	 secret[32], fpr[32], lk[32], r16[12];
	const unsigned char *out;
	const char	*vals[11];
	int		 lens[11] = { 32, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0 };
	int		 fmts[11] = { 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0 };
	PGresult	*res[5] = { NULL };
	yajl_val	 doc = NULL, amt;
	yajl_gen	 g = NULL;
	const char	*apath[] = { "amount", NULL };
	const char	*cur, *desc, *cust;
	long long	 now;
	size_t		 outlen;
	int64_t		 v = 0;
	int		 n, i;

	if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0 ||
	    key == NULL || method == NULL || path == NULL) {
		problem(rq, "401 Unauthorized");
		return;
	}
	n = cl != NULL ? atoi(cl) : 0;
	if (n < 0 || n >= (int)sizeof(body) ||
	    FCGX_GetStr(body, n, rq->in) != n) {
		problem(rq, "400 Bad Request");
		return;
	}
	body[n] = '\0';
	if ((doc = yajl_tree_parse(body, err, sizeof(err))) == NULL ||
	    (amt = yajl_tree_get(doc, apath, yajl_t_number)) == NULL ||
	    !YAJL_IS_INTEGER(amt) || (cur = member_str(doc, "currency")) == NULL) {
		problem(rq, "400 Bad Request");
		goto out;
	}
	desc = member_str(doc, "description");
	cust = member_str(doc, "customer");
	digest(auth + 7, strlen(auth + 7), NULL, 0, NULL, 0, secret);
	/* method NUL path NUL body, as the middleware's fingerprint */
	digest(method, strlen(method) + 1, path, strlen(path) + 1, body,
	    (size_t)n, fpr);
	digest(secret, 32, key, strlen(key), NULL, 0, lk);
	for (i = 0; i < 8; i++)
		v = (int64_t)((uint64_t)v << 8 | lk[i]);
	snprintf(lock, sizeof(lock), "%lld", (long long)v);

	if (flush_rollback() == -1)
		goto fail;
	vals[0] = (const char *)secret;
	vals[1] = key;
	vals[2] = method;
	vals[3] = path;
	vals[4] = (const char *)fpr;
	vals[5] = TTL_MS;
	vals[6] = lock;
	vals[7] = LEASE_MS;
	vals[8] = "false";
	vals[9] = NULL;
	vals[10] = REMEMBER_MS;
	/* Flight 1: BEGIN and the claim. */
	if (!PQsendQueryParams(db, "BEGIN", 0, NULL, NULL, NULL, NULL, 0) ||
	    !PQsendQueryPrepared(db, "lookup", 11, vals, lens, fmts, 1) ||
	    !PQpipelineSync(db) || drain(res, 2) == -1)
		goto fail;
	if (PQntuples(res[1]) != 1 || PQgetisnull(res[1], 0, C_TENANT) ||
	    PQgetlength(res[1], 0, C_SECRET) != 32 ||
	    CRYPTO_memcmp(PQgetvalue(res[1], 0, C_SECRET), secret, 32) != 0) {
		problem(rq, "401 Unauthorized");
		goto end;
	}
	snprintf(tenant, sizeof(tenant), "%lld",
	    (long long)get_i64(res[1], C_TENANT));
	if (!PQgetisnull(res[1], 0, C_ID)) {
		if (strcmp(PQgetvalue(res[1], 0, C_STATE), "completed") == 0 &&
		    PQgetlength(res[1], 0, C_FPR) == 32 &&
		    memcmp(PQgetvalue(res[1], 0, C_FPR), fpr, 32) == 0)
			replay(rq, res[1]);
		else
			problem(rq, "409 Conflict");
		goto end;
	}
	if (PQgetisnull(res[1], 0, C_GOT) || PQgetvalue(res[1], 0, C_GOT)[0] == 0) {
		problem(rq, "409 Conflict");
		goto end;
	}

	/* The handler: a payment id, the row, the response. */
	if (random_bytes(r16, sizeof(r16)) == -1)
		goto fail;
	n = snprintf(id, sizeof(id), "pay_");
	for (i = 0; i < (int)sizeof(r16); i++)
		n += snprintf(id + n, sizeof(id) - (size_t)n, "%02x", r16[i]);
	now = (long long)time(NULL);
	snprintf(amount, sizeof(amount), "%lld", YAJL_GET_INTEGER(amt));
	snprintf(created, sizeof(created), "%lld", now);
	g = yajl_gen_alloc(NULL);
#define GS(s) yajl_gen_string(g, (const unsigned char *)(s), strlen(s))
	yajl_gen_map_open(g);
	GS("id"); GS(id);
	GS("object"); GS("payment");
	GS("amount"); yajl_gen_integer(g, YAJL_GET_INTEGER(amt));
	GS("currency"); GS(cur);
	GS("status"); GS("succeeded");
	GS("amount_refunded"); yajl_gen_integer(g, 0);
	GS("description"); if (desc) GS(desc); else yajl_gen_null(g);
	GS("customer"); if (cust) GS(cust); else yajl_gen_null(g);
	GS("metadata"); yajl_gen_map_open(g); yajl_gen_map_close(g);
	GS("created"); yajl_gen_integer(g, now);
	yajl_gen_map_close(g);
#undef GS
	yajl_gen_get_buf(g, &out, &outlen);
	snprintf(loc, sizeof(loc), "/v1/payments/%s", id);
	snprintf(hj, sizeof(hj), "{\"Content-Type\":\"application/json\","
	    "\"Location\":\"%s\"}", loc);

	/*
	 * The payment.succeeded event, as the app enqueues it: an id derived
	 * from the key and the fingerprint, the body around the response,
	 * a W3C traceparent (the app stores the request's trace with it).
	 */
	{
		unsigned char	ed[32];
		int		k;

		digest(key, strlen(key), fpr, 32, "event:payment.succeeded:1",
		    25, ed);
		n = snprintf(evid, sizeof(evid), "evt_");
		for (k = 0; k < 20; k++)
			n += snprintf(evid + n, sizeof(evid) - (size_t)n,
			    "%02x", ed[k]);
		n = snprintf(tp, sizeof(tp), "00-");
		for (k = 0; k < 24; k++)
			n += snprintf(tp + n, sizeof(tp) - (size_t)n, "%s%02x",
			    k == 16 ? "-" : "", ed[k]);
		snprintf(tp + n, sizeof(tp) - (size_t)n, "-01");
		snprintf(ev, sizeof(ev), "{\"id\":\"%s\",\"type\":"
		    "\"payment.succeeded\",\"created\":%lld,\"data\":%.*s}",
		    evid, now, (int)outlen, (const char *)out);
	}

	/* Flight 2: the row, the event, the key record, COMMIT. */
	{
		const char *ev5[5] = { evid, tenant, "payment.succeeded", ev,
		    tp };
		const char *iv[10] = { id, tenant, amount, cur, "succeeded",
		    desc, cust, NULL, created, NULL };
		const char *cv[10] = { tenant, key, method, path,
		    (const char *)fpr, TTL_MS, "201", hj, (const char *)out,
		    REMEMBER_MS };
		int cl9[10] = { 0, 0, 0, 0, 32, 0, 0, 0, (int)outlen, 0 };
		int cf9[10] = { 0, 0, 0, 0, 1, 0, 0, 0, 1, 0 };

		if (!PQsendQueryPrepared(db, "insert", 10, iv, NULL, NULL, 0) ||
		    !PQsendQueryPrepared(db, "enqueue", 5, ev5, NULL, NULL,
		    0) ||
		    !PQsendQueryPrepared(db, "complete", 10, cv, cl9, cf9, 1) ||
		    !PQsendQueryParams(db, "COMMIT", 0, NULL, NULL, NULL, NULL,
		    0) || !PQpipelineSync(db) || drain(NULL, 0) == -1)
			goto fail;
	}
	{
		char	h[160];

		snprintf(h, sizeof(h), "Content-Type: application/json\r\n"
		    "Location: %s\r\n", loc);
		reply(rq, "201 Created", h, out, outlen);
	}
	goto out;
end:
	/* Nothing written: end the transaction without waiting. */
	if (!PQsendQueryParams(db, "ROLLBACK", 0, NULL, NULL, NULL, NULL, 0) ||
	    !PQpipelineSync(db))
		goto fail;
	PQflush(db);
	rollback_pending = 1;
	goto out;
fail:
	fprintf(stderr, "floor: %s", PQerrorMessage(db));
	problem(rq, "500 Internal Server Error");
out:
	for (i = 0; i < 5; i++)
		PQclear(res[i]);
	if (g != NULL)
		yajl_gen_free(g);
	yajl_tree_free(doc);
}

/* Exit on SIGTERM through exit_group, so that callgrind writes its totals. */
static void
on_term(int sig)
{
	(void)sig;
	_exit(0);
}

int
main(int argc, char **argv)
{
	FCGX_Request	 rq;
	const char	*sock = NULL, *conninfo = NULL;
	PGresult	*r;
	int		 c, fd;

	signal(SIGTERM, on_term);
	while ((c = getopt(argc, argv, "l:d:")) != -1)
		switch (c) {
		case 'l': sock = optarg; break;
		case 'd': conninfo = optarg; break;
		default: goto usage;
		}
	if (sock == NULL || conninfo == NULL)
		goto usage;
	db = PQconnectdb(conninfo);
	if (PQstatus(db) != CONNECTION_OK) {
		fprintf(stderr, "floor: %s", PQerrorMessage(db));
		return 1;
	}
	/* Prepared once, as the app's pool does on first use. */
	{
		static const char *const names[] = { "lookup", "insert",
		    "enqueue", "complete" };
		static const char *const sqls[] = { FLOOR_SQL_LOOKUP,
		    FLOOR_SQL_INSERT, FLOOR_SQL_ENQUEUE, FLOOR_SQL_COMPLETE };
		for (c = 0; c < 4; c++) {
			r = PQprepare(db, names[c], sqls[c], 0, NULL);
			if (PQresultStatus(r) != PGRES_COMMAND_OK) {
				fprintf(stderr, "floor: prepare %s: %s", names[c],
				    PQresultErrorMessage(r));
				return 1;
			}
			PQclear(r);
		}
	}
	if (!PQenterPipelineMode(db))
		return 1;
	if ((sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL ||
	    (mdctx = EVP_MD_CTX_new()) == NULL)
		return 1;
	if (FCGX_Init() != 0 || (fd = FCGX_OpenSocket(sock, 64)) < 0) {
		fprintf(stderr, "floor: cannot listen on %s\n", sock);
		return 1;
	}
	FCGX_InitRequest(&rq, fd, 0);
	while (FCGX_Accept_r(&rq) >= 0) {
		handle(&rq);
		FCGX_Finish_r(&rq);
	}
	return 0;
usage:
	fprintf(stderr, "usage: floor -l SOCKET -d CONNINFO\n");
	return 2;
}
