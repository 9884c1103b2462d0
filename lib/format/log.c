/*
 * log.c - structured logs: one JSON object per line on stderr.  Request
 * lines carry a hash of the idempotency key, never the key itself, the
 * body or the Authorization header.  Every string from outside (even the
 * method, which a direct FastCGI peer may set to anything) is written as
 * an escaped JSON string.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "private.h"

static enum idem_log_level min_level = IDEM_LOG_INFO;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void
idem_log_lines(enum idem_log_level lvl, const char *text)
{
	size_t	 n;

	while (*text != '\0') {
		n = strcspn(text, "\n");
		idem_log(lvl, "%.*s", (int)n, text);
		text += n + (text[n] == '\n');
	}
}

void
idem_log_set_level(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (name != NULL && strcmp(name, level_names[i]) == 0)
			min_level = (enum idem_log_level)i;
}

/* A whole number in decimal (a line per request: no printf). */
static void
add_int(struct idem_buf *b, long long v)
{
	char	d[IDEM_INT_LEN];

	idem_buf_add(b, d, idem_fmt_int(d, v));
}

/*
 * {"time":"2026-12-04T14:07:20.123Z","level":"info" -- the date part is
 * formatted once a second per thread (gmtime_r and strftime cost more
 * than the rest of a request line).
 */
static void
log_prefix(struct idem_buf *b, enum idem_log_level lvl)
{
	static __thread time_t	 sec = -1;
	static __thread char	 date[24];
	struct timespec		 ts;
	struct tm		 tm;
	char			 ms[4];
	long			 m;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != sec) {
		gmtime_r(&ts.tv_sec, &tm);
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
		sec = ts.tv_sec;
	}
	m = ts.tv_nsec / 1000000L;
	ms[0] = (char)('0' + m / 100);
	ms[1] = (char)('0' + m / 10 % 10);
	ms[2] = (char)('0' + m % 10);
	ms[3] = '\0';
	idem_buf_adds(b, "{\"time\":\"");
	idem_buf_adds(b, date);
	idem_buf_addc(b, '.');
	idem_buf_adds(b, ms);
	idem_buf_adds(b, "Z\",\"level\":\"");
	idem_buf_adds(b, level_names[lvl]);
	idem_buf_addc(b, '"');
}

/*
 * While the runtime serves, lines are gathered and written at most
 * FLUSH_MS after the first of them (by a thread of their own), or at once
 * when they reach FLUSH_BYTES or a warning or an error comes: a request
 * then costs no write(2) of its own.  What a kill -9 can lose is the last
 * FLUSH_MS of info lines; a drain flushes everything.  Outside the runtime
 * (idemctl, tests, startup) each line is written when it is made.
 */
#define FLUSH_MS	100
#define FLUSH_BYTES	(16 * 1024)

static struct {
	pthread_mutex_t	 mu;	/* pending, stop */
	pthread_mutex_t	 wmu;	/* taken under mu: writes in pending's order */
	pthread_cond_t	 cv;
	struct idem_buf	 pending;
	int		 stop;
	pthread_t	 th;
} lg = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
	PTHREAD_COND_INITIALIZER, { 0 }, 0, 0 };
static atomic_int gathering;

/* Where lines go: stderr, or what libidem_test set (idem_log_output()). */
static idem_log_output_fn out_fn;
static void *out_arg;

void
idem_log_output(idem_log_output_fn fn, void *arg)
{
	pthread_mutex_lock(&lg.wmu);
	out_fn = fn;
	out_arg = arg;
	pthread_mutex_unlock(&lg.wmu);
}

/* Whole lines out; called with lg.wmu held. */
static void
output(const char *p, size_t len)
{
	if (out_fn != NULL)
		out_fn(out_arg, p, len);
	else
		fwrite(p, 1, len, stderr);
}

/* Write what is pending; called with lg.mu held, returns with it free. */
static void
flush_locked(void)
{
	struct idem_buf	out = lg.pending;

	memset(&lg.pending, 0, sizeof(lg.pending));
	pthread_mutex_lock(&lg.wmu);
	pthread_mutex_unlock(&lg.mu);
	if (out.len > 0)
		output(out.p, out.len);
	pthread_mutex_unlock(&lg.wmu);
	idem_buf_free(&out);
}

static void *
flusher(void *arg)
{
	struct timespec	dl;

	(void)arg;
	pthread_mutex_lock(&lg.mu);
	while (!lg.stop) {
		if (lg.pending.len == 0) {
			pthread_cond_wait(&lg.cv, &lg.mu);
			continue;
		}
		/* The first line of a batch waits at most FLUSH_MS. */
		idem_deadline(CLOCK_MONOTONIC, FLUSH_MS, &dl);
		while (!lg.stop && lg.pending.len > 0 &&
		    pthread_cond_timedwait(&lg.cv, &lg.mu, &dl) == 0)
			;
		flush_locked();
		pthread_mutex_lock(&lg.mu);
	}
	flush_locked();
	return NULL;
}

static void
flush_at_exit(void)
{
	idem_log_flush();
}

static void
register_exit_flush(void)
{
	atexit(flush_at_exit);
}

int
idem_log_gather_start(void)
{
	static pthread_once_t	once = PTHREAD_ONCE_INIT;
	pthread_condattr_t	ca;

	pthread_once(&once, register_exit_flush);

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&lg.cv);
	pthread_cond_init(&lg.cv, &ca);
	pthread_condattr_destroy(&ca);
	lg.stop = 0;
	if (pthread_create(&lg.th, NULL, flusher, NULL) != 0)
		return -1;
	atomic_store(&gathering, 1);
	return 0;
}

void
idem_log_flush(void)
{
	if (!atomic_load(&gathering))
		return;
	pthread_mutex_lock(&lg.mu);
	flush_locked();
}

void
idem_log_gather_stop(void)
{
	if (!atomic_load(&gathering))
		return;
	pthread_mutex_lock(&lg.mu);
	lg.stop = 1;
	pthread_cond_signal(&lg.cv);
	pthread_mutex_unlock(&lg.mu);
	pthread_join(lg.th, NULL);
	atomic_store(&gathering, 0);
	/* A line made while the flusher stopped is pending still. */
	pthread_mutex_lock(&lg.mu);
	flush_locked();
}

static void
log_write(struct idem_buf *b, enum idem_log_level lvl)
{
	int	was_empty;

	if (b->p == NULL)
		return;
	if (!atomic_load(&gathering)) {
		/* One write per line: lines of threads never interleave. */
		pthread_mutex_lock(&lg.wmu);
		output(b->p, b->len);
		pthread_mutex_unlock(&lg.wmu);
		idem_buf_free(b);
		return;
	}
	pthread_mutex_lock(&lg.mu);
	was_empty = lg.pending.len == 0;
	idem_buf_add(&lg.pending, b->p, b->len);
	idem_buf_free(b);
	if (lvl >= IDEM_LOG_WARN || lg.pending.len >= FLUSH_BYTES ||
	    lg.pending.p == NULL) {
		flush_locked();
		return;
	}
	if (was_empty)
		pthread_cond_signal(&lg.cv);
	pthread_mutex_unlock(&lg.mu);
}

static void
log_emit(struct idem_buf *b, enum idem_log_level lvl)
{
	idem_buf_adds(b, "}\n");
	log_write(b, lvl);
}

/* ,"name":"value" with value escaped. */
static void
add_field(struct idem_buf *b, const char *name, const char *value)
{
	idem_buf_adds(b, ",\"");
	idem_buf_adds(b, name);
	idem_buf_adds(b, "\":");
	idem_buf_add_jstr(b, value, strlen(value));
}

/* The request the calling thread serves (idem_log_bind()). */
static __thread const char *bound_request_id, *bound_trace_id;

void
idem_log_bind(const char *request_id, const char *trace_id)
{
	bound_request_id = request_id;
	bound_trace_id = trace_id;
}

/* ,"request_id":...,"trace_id":... of a request, those it has. */
static void
add_request_fields(struct idem_buf *b, const char *request_id,
    const char *trace_id)
{
	if (request_id != NULL && request_id[0] != '\0')
		add_field(b, "request_id", request_id);
	if (trace_id != NULL && trace_id[0] != '\0')
		add_field(b, "trace_id", trace_id);
}

/* A line with msg (trailing blanks and newlines cut: libpq ends its
 * messages in one) and, when there is one, the request's id and trace. */
static void
log_line(enum idem_log_level lvl, const char *request_id,
    const char *trace_id, const char *fmt, va_list ap)
{
	struct idem_buf	 b = { 0 };
	char		 msg[1024];
	int		 n;

	if (lvl < min_level || (unsigned)lvl > IDEM_LOG_ERROR)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r' ||
	    msg[n - 1] == ' ' || msg[n - 1] == '\t'))
		n--;
	log_prefix(&b, lvl);
	idem_buf_adds(&b, ",\"msg\":");
	idem_buf_add_jstr(&b, msg, (size_t)n);
	add_request_fields(&b, request_id, trace_id);
	log_emit(&b, lvl);
}

void
idem_log(enum idem_log_level lvl, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_line(lvl, bound_request_id, bound_trace_id, fmt, ap);
	va_end(ap);
}

void
idem_req_log(const idem_req *req, enum idem_log_level lvl, const char *fmt,
    ...)
{
	va_list	ap;

	va_start(ap, fmt);
	if (req != NULL)
		log_line(lvl, req->request_id, req->trace.trace_id, fmt, ap);
	else
		log_line(lvl, bound_request_id, bound_trace_id, fmt, ap);
	va_end(ap);
}

void
idem_log_db_result(idem_req *req, const PGresult *r)
{
	const char	*st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	const char	*m = r != NULL ? PQresultErrorMessage(r) : "no result";
	size_t		 n = strlen(m);

	if (req != NULL)
		snprintf(req->db_sqlstate, sizeof(req->db_sqlstate), "%s",
		    st != NULL ? st : "");
	while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
		n--;
	idem_req_log(req, IDEM_LOG_ERROR, "db: %.*s%s%s%s", (int)(n < 900 ?
	    n : 900), m, st != NULL ? " (SQLSTATE " : "", st != NULL ? st :
	    "", st != NULL ? ")" : "");
}

static const char *const outcome_names[IDEM_OUT__COUNT] = {
	[IDEM_OUT_NONE] = NULL, [IDEM_OUT_CREATED] = "created",
	[IDEM_OUT_REPLAYED] = "replayed", [IDEM_OUT_IN_FLIGHT] = "in_flight",
	[IDEM_OUT_REUSED] = "reused", [IDEM_OUT_EXPIRED] = "expired",
	[IDEM_OUT_REJECTED] = "rejected",
	[IDEM_OUT_ERROR] = "error",
};

const char *
idem_outcome_name(enum idem_outcome o)
{
	return (unsigned)o < IDEM_OUT__COUNT ? outcome_names[o] : NULL;
}

void
idem_log_request_line(const idem_req *req, long long duration_us,
    struct idem_buf *b)
{
	unsigned char	 h[32];
	char		 kh[17];

	log_prefix(b, IDEM_LOG_INFO);
	add_field(b, "msg", "request");
	add_field(b, "request_id", req->request_id);
	if (req->trace.trace_id[0] != '\0')
		add_field(b, "trace_id", req->trace.trace_id);
	add_field(b, "method", req->method);
	idem_buf_adds(b, ",\"route\":");
	if (req->route != NULL)
		idem_buf_add_jstr(b, req->route->pattern,
		    strlen(req->route->pattern));
	else
		idem_buf_adds(b, "null");
	idem_buf_adds(b, ",\"status\":");
	add_int(b, req->status);
	/* %.3f of duration_us / 1000, exactly: milliseconds, 3 decimals. */
	if (duration_us < 0)
		duration_us = 0;
	idem_buf_adds(b, ",\"duration_ms\":");
	add_int(b, duration_us / 1000);
	idem_buf_addc(b, '.');
	idem_buf_addc(b, (char)('0' + duration_us % 1000 / 100));
	idem_buf_addc(b, (char)('0' + duration_us % 100 / 10));
	idem_buf_addc(b, (char)('0' + duration_us % 10));
	if (idem_outcome_name(req->outcome) != NULL)
		add_field(b, "outcome", idem_outcome_name(req->outcome));
	if (req->has_key) {
		/* The digest the advisory lock is taken from: tenant-scoped,
		 * so equal keys of two tenants differ. */
		idem_key_digest(req->secret_hash, req->key, h);
		idem_hex(h, 8, kh);
		add_field(b, "key_hash", kh);
	}
	if (req->round_trips > 0) {
		idem_buf_adds(b, ",\"db_round_trips\":");
		add_int(b, (long long)req->round_trips);
	}
	if (req->tenant != 0) {
		idem_buf_adds(b, ",\"tenant\":");
		add_int(b, (long long)req->tenant);
	}
	idem_buf_adds(b, "}\n");
}

void
idem_log_request(const idem_req *req, long long duration_us)
{
	struct idem_buf	 b = { 0 };

	if (IDEM_LOG_INFO < min_level)
		return;
	idem_log_request_line(req, duration_us, &b);
	log_write(&b, IDEM_LOG_INFO);
}
