/*
 * idem_test.c - libidem_test: an application's requests served in-process
 * (idem_test(3)), for the tests of programs written against libidem.
 *
 * A request is encoded as the web server would send it (BEGIN_REQUEST,
 * PARAMS, STDIN records) and written into one end of a socketpair; the
 * other end is served by the runtime's own one-connection path
 * (idem_conns_serve_one: idem's FastCGI reader, then request.c with its
 * routing, authentication, idempotency middleware and handler), and the
 * STDOUT records are read back up to END_REQUEST.  Nothing below the
 * FastCGI stream is stubbed, so "middleware included" holds by
 * construction.  This file links the shared libidem and uses only what it
 * exports (idem.h, and idem_app_prepare/idem_conns_serve_one, exported for
 * this library alone and declared in idem_test_private.h): it is a layer
 * above app.c, and nothing calls it.
 */
#include <sys/socket.h>

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <idem_admin.h>	/* idem_db_open, idem_api_key_create */

#include "idem_test.h"
#include "idem_test_private.h"
#include "idem_test_internal.h"
#include "fields.h"

#define FCGI_BEGIN_REQUEST	1
#define FCGI_END_REQUEST	3
#define FCGI_PARAMS		4
#define FCGI_STDIN		5
#define FCGI_STDOUT		6
#define REC_MAX			65535	/* a record's content, at most */

struct idem_test {
	idem_app	*app;
	char		*config;	/* its file, or NULL */
	PGconn		*db;		/* for idem_test_events(), once asked */
	char		 secret[128];
	char		 auth[160];	/* "Bearer <secret>" */
	int64_t		 tenant;
	char		 err[256];
};

struct idem_test_resp {
	int		 status;
	struct idem_fields h;
	char		*body;
	size_t		 bodylen;
};

/* A growable buffer of our own: libidem's is not exported. */
struct tbuf {
	char		*p;
	size_t		 len, cap;
	int		 oom;
};

static void
tb_add(struct tbuf *b, const void *p, size_t n)
{
	char	*np;
	size_t	 cap;

	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		if ((np = realloc(b->p, cap)) == NULL) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* The configuration as the program's -c would load it. */
static int
init_with(idem_app *app, const char *config)
{
	char			*argv[4];
	int			 argc = 1, saved = optind, rc;

	argv[0] = (char *)"idem_test";
	if (config != NULL) {
		argv[argc++] = (char *)"-c";
		argv[argc++] = (char *)config;
	}
	argv[argc] = NULL;
	/* The program may have run getopt() already: start it afresh. */
#ifdef __GLIBC__
	optind = 0;
#else
	optind = 1;
#endif
	rc = idem_app_init(app, argc, argv);
	optind = saved;
	return rc;
}

/* A key of its own per harness: tests do not share tenants. */
static int
own_key(struct idem_test *t, const char *config, char *err, size_t errlen)
{
	char			 name[96];
	PGconn			*db;
	static unsigned		 nkeys;

	if ((db = idem_db_open(config, NULL, err, errlen)) == NULL)
		return -1;
	snprintf(name, sizeof(name), "idem_test-%ld-%u", (long)getpid(),
	    nkeys++);
	if (idem_api_key_create(db, name, t->secret, sizeof(t->secret),
	    &t->tenant) != 0) {
		idem_test_seterr(err, errlen, "cannot create an API key: %s "
		    "(is the schema migrated?)", PQerrorMessage(db));
		PQfinish(db);
		return -1;
	}
	PQfinish(db);
	return 0;
}

struct idem_test *
idem_test_new(idem_app *app, const char *config, char *err, size_t errlen)
{
	struct idem_test	*t;

	if (app == NULL) {
		idem_test_seterr(err, errlen, "no application");
		return NULL;
	}
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		idem_test_seterr(err, errlen, "out of memory");
		return NULL;
	}
	t->app = app;
	if (init_with(app, config) != 0) {
		idem_test_seterr(err, errlen,
		    "%s: the configuration is refused (the "
		    "reason is on stderr)", config ? config : "(none)");
		goto fail;
	}
	/* What idem_app_run() does before it listens: the framework's
	 * routes, the routes' checks, the pool, the metrics. */
	if (idem_app_prepare(app) != 0) {
		idem_test_seterr(err, errlen,
		    "the application cannot be prepared "
		    "(the reason is on stderr)");
		goto fail;
	}
	if (own_key(t, config, err, errlen) != 0)
		goto fail;
	snprintf(t->auth, sizeof(t->auth), "Bearer %s", t->secret);
	if (config != NULL && (t->config = strdup(config)) == NULL) {
		idem_test_seterr(err, errlen, "out of memory");
		goto fail;
	}
	return t;
fail:
	free(t);
	return NULL;
}

void
idem_test_free(struct idem_test *t)
{
	if (t == NULL)
		return;
	if (t->db != NULL)
		PQfinish(t->db);
	free(t->config);
	free(t);
}

const char *
idem_test_error(const struct idem_test *t)
{
	return t->err;
}

const char *
idem_test_secret(const struct idem_test *t)
{
	return t->secret;
}

int64_t
idem_test_tenant(const struct idem_test *t)
{
	return t->tenant;
}

/* --- the web server's side: records out --------------------------------- */

static void
put_record(struct tbuf *b, int type, const void *p, size_t len)
{
	unsigned char	h[8] = { 1, (unsigned char)type, 0, 1,
			    (unsigned char)(len >> 8), (unsigned char)len, 0, 0 };

	tb_add(b, h, 8);
	tb_add(b, p, len);
}

static void
put_len(struct tbuf *b, size_t n)
{
	unsigned char	l[4];

	/* Under 128 in one byte, else four with the high bit set. */
	if (n < 128) {
		l[0] = (unsigned char)n;
		tb_add(b, l, 1);
		return;
	}
	l[0] = (unsigned char)(0x80 | n >> 24);
	l[1] = (unsigned char)(n >> 16);
	l[2] = (unsigned char)(n >> 8);
	l[3] = (unsigned char)n;
	tb_add(b, l, 4);
}

static void
put_param(struct tbuf *b, const char *n, const char *v, size_t vl)
{
	put_len(b, strlen(n));
	put_len(b, vl);
	tb_add(b, n, strlen(n));
	tb_add(b, v, vl);
}

/* "Content-Type" -> CONTENT_TYPE, "Idempotency-Key" -> HTTP_IDEMPOTENCY_KEY:
 * the CGI names a web server gives them.  -1 when not a header line. */
static int
cgi_name(const char *line, char *out, size_t outlen, const char **value)
{
	const char	*colon = strchr(line, ':');
	size_t		 n, i, o = 0;

	if (colon == NULL || colon == line)
		return -1;
	n = (size_t)(colon - line);
	if (!(n == 12 && strncasecmp(line, "Content-Type", 12) == 0) &&
	    !(n == 14 && strncasecmp(line, "Content-Length", 14) == 0)) {
		if (outlen < 6)
			return -1;
		memcpy(out, "HTTP_", 5);
		o = 5;
	}
	if (o + n + 1 > outlen)
		return -1;
	for (i = 0; i < n; i++)
		out[o++] = line[i] == '-' ? '_' :
		    (char)toupper((unsigned char)line[i]);
	out[o] = '\0';
	for (*value = colon + 1; **value == ' ' || **value == '\t'; (*value)++)
		;
	return 0;
}

static int
encode(struct idem_test *t, const char *method, const char *path,
    const char *const headers[], const char *body, struct tbuf *out)
{
	static const unsigned char begin[8] = { 0, 1, 0, 0, 0, 0, 0, 0 };
	struct tbuf	 p = { 0 };
	const char	*q, *v;
	char		 name[256], len[24];
	size_t		 i, blen = body ? strlen(body) : 0, off, n;
	int		 auth = 0, type = 0;

	q = strchr(path, '?');
	put_param(&p, "REQUEST_METHOD", method, strlen(method));
	put_param(&p, "REQUEST_URI", path, strlen(path));
	put_param(&p, "SCRIPT_NAME", path, q ? (size_t)(q - path) :
	    strlen(path));
	put_param(&p, "QUERY_STRING", q ? q + 1 : "", q ? strlen(q + 1) : 0);
	put_param(&p, "SERVER_PROTOCOL", "HTTP/1.1", 8);
	put_param(&p, "REMOTE_ADDR", "127.0.0.1", 9);
	snprintf(len, sizeof(len), "%lu", (unsigned long)blen);
	put_param(&p, "CONTENT_LENGTH", len, strlen(len));
	for (i = 0; headers != NULL && headers[i] != NULL; i++) {
		if (cgi_name(headers[i], name, sizeof(name), &v) == -1) {
			idem_test_seterr(t->err, sizeof(t->err),
			    "not a header line: "
			    "\"%s\"", headers[i]);
			free(p.p);
			return -1;
		}
		if (strcmp(name, "CONTENT_LENGTH") == 0)
			continue;	/* the body's own */
		auth |= strcmp(name, "HTTP_AUTHORIZATION") == 0;
		type |= strcmp(name, "CONTENT_TYPE") == 0;
		put_param(&p, name, v, strlen(v));
	}
	if (!auth)
		put_param(&p, "HTTP_AUTHORIZATION", t->auth, strlen(t->auth));
	if (body != NULL && !type)
		put_param(&p, "CONTENT_TYPE", "application/json", 16);

	put_record(out, FCGI_BEGIN_REQUEST, begin, 8);
	for (off = 0; off < p.len; off += n) {
		n = p.len - off > REC_MAX ? REC_MAX : p.len - off;
		put_record(out, FCGI_PARAMS, p.p + off, n);
	}
	put_record(out, FCGI_PARAMS, "", 0);
	for (off = 0; off < blen; off += n) {
		n = blen - off > REC_MAX ? REC_MAX : blen - off;
		put_record(out, FCGI_STDIN, body + off, n);
	}
	put_record(out, FCGI_STDIN, "", 0);
	free(p.p);
	if (p.oom || out->oom) {
		idem_test_seterr(t->err, sizeof(t->err), "out of memory");
		return -1;
	}
	return 0;
}

/* --- the client thread: write the request, read the answer -------------- */

struct client {
	int		 fd;
	struct tbuf	*in;		/* the records to write */
	struct tbuf	 out;		/* STDOUT's content */
	int		 ended;		/* END_REQUEST seen */
};

static int
read_all(int fd, void *p, size_t n)
{
	ssize_t	k;

	while (n > 0) {
		if ((k = read(fd, p, n)) == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p = (char *)p + k;
		n -= (size_t)k;
	}
	return 0;
}

/*
 * Its own thread: the request may be larger than the socket's buffer and
 * the answer too, so writing and reading cannot wait for the server to be
 * done.  The server (idem_conns_serve_one) runs on the caller's thread, as
 * a handler would run on a worker: thread-local state stays the caller's.
 */
static void *
client(void *arg)
{
	struct client	*c = arg;
	unsigned char	 h[8];
	char		*rec;
	size_t		 off = 0, n;
	ssize_t		 k;

	while (off < c->in->len) {
		k = send(c->fd, c->in->p + off, c->in->len - off, MSG_NOSIGNAL);
		if (k == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			break;	/* the server answered early and closed */
		off += (size_t)k;
	}
	if ((rec = malloc(REC_MAX + 256)) == NULL) {
		/* Unread, the answer could fill the socket and block the
		 * server for good: make its writes fail instead. */
		shutdown(c->fd, SHUT_RDWR);
		return NULL;
	}
	while (read_all(c->fd, h, 8) == 0) {
		n = (size_t)(h[4] << 8 | h[5]) + h[6];
		if (read_all(c->fd, rec, n) == -1)
			break;
		if (h[1] == FCGI_END_REQUEST) {
			c->ended = 1;
			break;
		}
		if (h[1] == FCGI_STDOUT)
			tb_add(&c->out, rec, n - h[6]);
	}
	free(rec);
	return NULL;
}

/* --- the answer -------------------------------------------------------- */

static int
add_header(struct idem_test_resp *r, const char *line, size_t len)
{
	return idem_fields_add_line(&r->h, line, len) == IDEM_FIELDS_ADDED ?
	    0 : -1;
}

/* CGI output: header lines, an empty line, the body. */
static struct idem_test_resp *
parse(const struct tbuf *b)
{
	struct idem_test_resp	*r;
	const char		*p = b->p, *end = b->p + b->len, *eol, *s;

	if (b->p == NULL || (r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	for (;;) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
			goto bad;
		s = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
		if (s == p)
			break;
		if (add_header(r, p, (size_t)(s - p)) == -1)
			goto bad;
		p = eol + 1;
	}
	p = eol + 1;
	r->bodylen = (size_t)(end - p);
	if ((r->body = malloc(r->bodylen + 1)) == NULL)
		goto bad;
	memcpy(r->body, p, r->bodylen);
	r->body[r->bodylen] = '\0';
	if ((s = idem_test_header(r, "Status")) == NULL ||
	    sscanf(s, "%d", &r->status) != 1)
		goto bad;
	return r;
bad:
	idem_test_response_free(r);
	return NULL;
}

int
idem_test_request(struct idem_test *t, const char *method, const char *path,
    const char *const headers[], const char *body,
    struct idem_test_resp **resp)
{
	struct tbuf	 in = { 0 };
	struct client	 c;
	pthread_t	 th;
	int		 sv[2], rc = -1;

	*resp = NULL;
	t->err[0] = '\0';
	if (method == NULL || path == NULL || path[0] != '/') {
		idem_test_seterr(t->err, sizeof(t->err), "a method and a path "
		    "starting with / are needed");
		return -1;
	}
	if (encode(t, method, path, headers, body, &in) == -1)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
		idem_test_seterr(t->err, sizeof(t->err), "socketpair: %s",
		    strerror(errno));
		free(in.p);
		return -1;
	}
	memset(&c, 0, sizeof(c));
	c.fd = sv[0];
	c.in = &in;
	if (pthread_create(&th, NULL, client, &c) != 0) {
		idem_test_seterr(t->err, sizeof(t->err),
		    "cannot start a thread");
		close(sv[0]);
		close(sv[1]);
		free(in.p);
		return -1;
	}
	/* What a runtime worker does with a connection; then EOF for the
	 * client, should the server have stopped short of END_REQUEST. */
	(void)idem_conns_serve_one(t->app, sv[1]);
	close(sv[1]);
	pthread_join(th, NULL);
	close(sv[0]);
	free(in.p);
	if (c.out.oom)
		idem_test_seterr(t->err, sizeof(t->err), "out of memory");
	else if (!c.ended)
		idem_test_seterr(t->err, sizeof(t->err),
		    "the application closed the "
		    "connection without an answer (the reason is on stderr)");
	else if ((*resp = parse(&c.out)) == NULL)
		idem_test_seterr(t->err, sizeof(t->err),
		    "the answer is not CGI output "
		    "with a Status line");
	else
		rc = 0;
	free(c.out.p);
	return rc;
}

int
idem_test_status(const struct idem_test_resp *r)
{
	return r->status;
}

const char *
idem_test_header(const struct idem_test_resp *r, const char *name)
{
	return idem_fields_get(&r->h, name);
}

const char *
idem_test_body(const struct idem_test_resp *r, size_t *len)
{
	if (len != NULL)
		*len = r->bodylen;
	return r->body;
}

void
idem_test_response_free(struct idem_test_resp *r)
{
	if (r == NULL)
		return;
	idem_fields_free(&r->h);
	free(r->body);
	free(r);
}

int
idem_test_problem(const struct idem_test_resp *r, int status,
    const char *text)
{
	const char	*ct = idem_test_header(r, "Content-Type");

	return r->status == status && ct != NULL &&
	    strcmp(ct, "application/problem+json") == 0 &&
	    strstr(r->body, text) != NULL;
}

/* --- where the application's log lines go ---------------------------------- */

static struct {
	FILE		*f;
	idem_test_log_fn fn;
	void		*arg;
} logto;

/* libidem's output (whole lines, under its lock) cut into lines. */
static void
log_lines(void *arg, const char *p, size_t len)
{
	const char	*nl;
	size_t		 n;

	(void)arg;
	for (; len > 0; p += n, len -= n) {
		nl = memchr(p, '\n', len);
		n = nl != NULL ? (size_t)(nl - p) + 1 : len;
		if (logto.fn != NULL)
			logto.fn(logto.arg, p, n);
		else if (logto.f != NULL) {
			fwrite(p, 1, n, logto.f);
			fflush(logto.f);
		}
	}
}

void
idem_test_log_file(FILE *f)
{
	/* Off while the target changes: no line sees half of it. */
	idem_log_output(NULL, NULL);
	logto.f = f;
	logto.fn = NULL;
	logto.arg = NULL;
	idem_log_output(f == stderr ? NULL : log_lines, NULL);
}

void
idem_test_log_callback(idem_test_log_fn fn, void *arg)
{
	idem_log_output(NULL, NULL);
	logto.f = NULL;
	logto.fn = fn;
	logto.arg = arg;
	idem_log_output(log_lines, NULL);
}

/* --- the outbox, read ------------------------------------------------------ */

/* Columns of the query below: one row per delivery, or per event that has
 * none (its delivery columns NULL). */
enum { E_ID, E_TYPE, E_BODY, E_TRACE, D_URL, D_STATE, D_ATTEMPTS,
	D_STATUS };

struct idem_test_events {
	PGresult	*r;
	size_t		 n;
	int		*first;		/* each event's first row */
	int		*ndel;		/* and its deliveries */
};

int
idem_test_events(struct idem_test *t, struct idem_test_events **ev)
{
	struct idem_test_events	*e;
	char			 tenant[24];
	const char		*vals[1] = { tenant };
	int			 i;

	*ev = NULL;
	t->err[0] = '\0';
	if (t->db == NULL && (t->db = idem_db_open(t->config, NULL, t->err,
	    sizeof(t->err))) == NULL)
		return -1;
	if ((e = calloc(1, sizeof(*e))) == NULL) {
		idem_test_seterr(t->err, sizeof(t->err), "out of memory");
		return -1;
	}
	snprintf(tenant, sizeof(tenant), "%lld", (long long)t->tenant);
	e->r = PQexecParams(t->db, "SELECT e.event_id, e.type, e.body, "
	    "e.traceparent, w.url, d.state, d.attempts, d.last_status "
	    "FROM idem_events e LEFT JOIN idem_deliveries d ON d.event = e.id "
	    "LEFT JOIN idem_webhook_endpoints w ON w.id = d.endpoint "
	    "WHERE e.api_key_id = $1 ORDER BY e.id, d.id", 1, NULL, vals,
	    NULL, NULL, 0);
	if (PQresultStatus(e->r) != PGRES_TUPLES_OK) {
		idem_test_seterr(t->err, sizeof(t->err), "the outbox: %s",
		    PQerrorMessage(t->db));
		idem_test_events_free(e);
		return -1;
	}
	if ((e->first = calloc((size_t)PQntuples(e->r) + 1, sizeof(int))) ==
	    NULL || (e->ndel = calloc((size_t)PQntuples(e->r) + 1,
	    sizeof(int))) == NULL) {
		idem_test_seterr(t->err, sizeof(t->err), "out of memory");
		idem_test_events_free(e);
		return -1;
	}
	for (i = 0; i < PQntuples(e->r); i++) {
		if (i == 0 || strcmp(PQgetvalue(e->r, i, E_ID),
		    PQgetvalue(e->r, i - 1, E_ID)) != 0)
			e->first[e->n++] = i;
		e->ndel[e->n - 1] += !PQgetisnull(e->r, i, D_STATE);
	}
	*ev = e;
	return 0;
}

long
idem_test_deliver(struct idem_test *t, long max)
{
	struct idem_deliver_counts	c;

	t->err[0] = '\0';
	if (idem_deliver_run(t->app, max < 0 ? 0 : max, &c) != 0) {
		idem_test_seterr(t->err, sizeof(t->err), "deliver: the "
		    "database is not available");
		return -1;
	}
	return c.delivered;
}

size_t
idem_test_events_count(const struct idem_test_events *ev)
{
	return ev->n;
}

/* Column c of event i (delivery j), or NULL. */
static const char *
ev_value(const struct idem_test_events *ev, size_t i, size_t j, int c)
{
	int	row;

	if (i >= ev->n || (c >= D_URL && j >= (size_t)ev->ndel[i]))
		return NULL;
	row = ev->first[i] + (c >= D_URL ? (int)j : 0);
	return PQgetisnull(ev->r, row, c) ? NULL : PQgetvalue(ev->r, row, c);
}

const char *
idem_test_event_type(const struct idem_test_events *ev, size_t i)
{
	return ev_value(ev, i, 0, E_TYPE);
}

const char *
idem_test_event_id(const struct idem_test_events *ev, size_t i)
{
	return ev_value(ev, i, 0, E_ID);
}

const char *
idem_test_event_body(const struct idem_test_events *ev, size_t i)
{
	return ev_value(ev, i, 0, E_BODY);
}

const char *
idem_test_event_traceparent(const struct idem_test_events *ev, size_t i)
{
	return ev_value(ev, i, 0, E_TRACE);
}

size_t
idem_test_event_deliveries(const struct idem_test_events *ev, size_t i)
{
	return i < ev->n ? (size_t)ev->ndel[i] : 0;
}

const char *
idem_test_delivery_url(const struct idem_test_events *ev, size_t i,
    size_t j)
{
	return ev_value(ev, i, j, D_URL);
}

const char *
idem_test_delivery_state(const struct idem_test_events *ev, size_t i,
    size_t j)
{
	return ev_value(ev, i, j, D_STATE);
}

int
idem_test_delivery_attempts(const struct idem_test_events *ev, size_t i,
    size_t j)
{
	const char	*v = ev_value(ev, i, j, D_ATTEMPTS);

	return v != NULL ? atoi(v) : 0;
}

int
idem_test_delivery_status(const struct idem_test_events *ev, size_t i,
    size_t j)
{
	const char	*v = ev_value(ev, i, j, D_STATUS);

	return v != NULL ? atoi(v) : 0;
}

void
idem_test_events_free(struct idem_test_events *ev)
{
	if (ev == NULL)
		return;
	PQclear(ev->r);
	free(ev->first);
	free(ev->ndel);
	free(ev);
}
