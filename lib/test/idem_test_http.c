/*
 * idem_test_http.c - libidem_test's HTTP stub (idem_test_http(3)): a
 * server on 127.0.0.1 and a thread of its own that plays a service an
 * application calls.  Each request is read whole (Content-Length or
 * chunked), recorded, then answered as the test scripted: a status,
 * headers and a body, after a delay; no answer (the connection held open);
 * or the connection closed.  Connections are served one at a time, one
 * request each ("Connection: close"), so the recorded order is the order
 * of arrival.  Uses libc and pthreads only.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "idem_test.h"
#include "idem_test_internal.h"
#include "fields.h"

#define HEAD_MAX	(64 * 1024)		/* request line and headers */
#define BODY_MAX	(16 * 1024 * 1024)	/* a request's body */
#define IO_TIMEOUT_MS	10000	/* a client that stops sending mid-request */

/* One recorded request; never moved once recorded. */
struct rec {
	char		*method, *path, *body;
	size_t		 bodylen;
	struct idem_fields h;	/* its header fields */
};

/* A scripted answer, copied. */
struct answer {
	enum idem_test_http_action	 action;
	int				 status;
	char				*headers;	/* "Name: v\r\n" lines */
	char				*body;
	long long			 delay_ms;
};

struct idem_test_http {
	int		 lfd;
	int		 wake[2];	/* written by free(): the thread stops */
	pthread_t	 th;
	char		 url[64];
	pthread_mutex_t	 mu;		/* what follows */
	pthread_cond_t	 cv;		/* a request was recorded */
	struct rec	**recs;
	size_t		 nrecs;
	struct answer	*queue;		/* scripted, the first next */
	size_t		 nqueue;
	struct answer	 dflt;
};

void
idem_test_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	if (err != NULL && errlen > 0)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void
answer_clear(struct answer *a)
{
	free(a->headers);
	free(a->body);
	memset(a, 0, sizeof(*a));
}

/* Copy the caller's answer: its header lines joined, each checked. */
static int
answer_copy(struct answer *to, const struct idem_test_http_answer *a)
{
	size_t	i, len = 1;
	char	*p;

	memset(to, 0, sizeof(*to));
	if (a->action != IDEM_TEST_HTTP_ANSWER &&
	    a->action != IDEM_TEST_HTTP_SILENT &&
	    a->action != IDEM_TEST_HTTP_CLOSE)
		return -1;
	if (a->action == IDEM_TEST_HTTP_ANSWER &&
	    (a->status < 100 || a->status > 999))
		return -1;
	for (i = 0; a->headers != NULL && a->headers[i] != NULL; i++) {
		if (strchr(a->headers[i], ':') == NULL ||
		    strpbrk(a->headers[i], "\r\n") != NULL)
			return -1;
		len += strlen(a->headers[i]) + 2;
	}
	if ((to->headers = p = malloc(len)) == NULL ||
	    (to->body = strdup(a->body != NULL ? a->body : "")) == NULL) {
		answer_clear(to);
		return -1;
	}
	*p = '\0';
	for (i = 0; a->headers != NULL && a->headers[i] != NULL; i++)
		p += sprintf(p, "%s\r\n", a->headers[i]);
	to->action = a->action;
	to->status = a->status;
	to->delay_ms = a->delay_ms < 0 ? 0 : a->delay_ms;
	return 0;
}

/*
 * Wait up to ms (-1: no bound) for fd to be readable: 1 readable, 0 the
 * time is up, -1 the stub is stopping.
 */
static int
await(struct idem_test_http *s, int fd, long long ms)
{
	struct pollfd	pf[2] = { { s->wake[0], POLLIN, 0 }, { fd, POLLIN, 0 } };
	int		n;

	do
		n = poll(pf, fd >= 0 ? 2 : 1, ms > 0x7fffffff ? 0x7fffffff :
		    (int)ms);
	while (n == -1 && errno == EINTR);
	if (n == -1 || pf[0].revents != 0)
		return -1;
	return n > 0 ? 1 : 0;
}

/* Read what comes, up to n bytes: the count, 0 at EOF, -1 (stopping, or
 * the client silent for IO_TIMEOUT_MS). */
static ssize_t
rd(struct idem_test_http *s, int fd, char *p, size_t n)
{
	ssize_t	k;

	if (await(s, fd, IO_TIMEOUT_MS) != 1)
		return -1;
	while ((k = read(fd, p, n)) == -1 && errno == EINTR)
		;
	return k;
}

/* A growable byte string. */
struct str {
	char	*p;
	size_t	 len, cap;
};

static int
str_add(struct str *b, const char *p, size_t n)
{
	char	*np;
	size_t	 cap;

	if (b->len + n + 1 > b->cap) {
		for (cap = b->cap ? b->cap : 1024; cap < b->len + n + 1;)
			cap *= 2;
		if ((np = realloc(b->p, cap)) == NULL)
			return -1;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/* The header lines of head (after the request line, each ending in
 * CRLF) into r: 0, or -1. */
static int
split_headers(struct rec *r, const char *head)
{
	const char	*l, *e;

	for (l = strstr(head, "\r\n") + 2; (e = strstr(l, "\r\n")) != NULL;
	    l = e + 2)
		if (idem_fields_add_line(&r->h, l, (size_t)(e - l)) ==
		    IDEM_FIELDS_NO_MEMORY)
			return -1;
	return 0;
}

/* The value of the first header of r named name (any case), or NULL. */
static const char *
rec_header(const struct rec *r, const char *name)
{
	return idem_fields_get(&r->h, name);
}

/* At least want bytes in b (reading more from fd): 0, or -1. */
static int
fill(struct idem_test_http *s, int fd, struct str *b, size_t want)
{
	char	buf[8192];
	ssize_t	k;

	while (b->len < want) {
		if ((k = rd(s, fd, buf, sizeof(buf))) <= 0 ||
		    str_add(b, buf, (size_t)k) == -1)
			return -1;
	}
	return 0;
}

/* The chunked body starting at in->p[off] into out: 0, or -1. */
static int
unchunk(struct idem_test_http *s, int fd, struct str *in, size_t off,
    struct str *out)
{
	char		*eol, *end;
	unsigned long	 n;

	for (;;) {
		while ((eol = strstr(in->p + off, "\r\n")) == NULL)
			if (in->len - off > 64 || fill(s, fd, in, in->len + 1))
				return -1;
		n = strtoul(in->p + off, &end, 16);
		if (end == in->p + off || n > BODY_MAX - out->len)
			return -1;
		off = (size_t)(eol + 2 - in->p);
		if (n == 0)	/* trailers are not read: none are sent */
			return 0;
		if (fill(s, fd, in, off + n + 2) == -1 ||
		    str_add(out, in->p + off, n) == -1)
			return -1;
		off += n + 2;
	}
}

static void
rec_free(struct rec *r)
{
	idem_fields_free(&r->h);
	free(r->method);
	free(r->path);
	free(r->body);
	free(r);
}

/* Read one request from fd: a new record, or NULL. */
static struct rec *
read_request(struct idem_test_http *s, int fd)
{
	struct str	 in = { 0 }, body = { 0 };
	struct rec	*r;
	const char	*v, *sp;
	char		*end;
	size_t		 hlen;
	unsigned long	 cl;

	while (in.p == NULL || (end = strstr(in.p, "\r\n\r\n")) == NULL)
		if (in.len > HEAD_MAX || fill(s, fd, &in, in.len + 1) == -1)
			goto fail;
	hlen = (size_t)(end - in.p) + 4;
	if ((r = calloc(1, sizeof(*r))) == NULL)
		goto fail;
	/* "METHOD SP target SP version" */
	end[2] = '\0';
	sp = strchr(in.p, ' ');
	if (sp == NULL || sp > end || split_headers(r, in.p) == -1 ||
	    (r->method = strndup(in.p, (size_t)(sp - in.p))) == NULL ||
	    (r->path = strndup(sp + 1, strcspn(sp + 1, " \r"))) == NULL)
		goto fail_rec;
	end[2] = '\r';
	if ((v = rec_header(r, "Transfer-Encoding")) != NULL &&
	    strcasecmp(v, "chunked") == 0) {
		if (unchunk(s, fd, &in, hlen, &body) == -1)
			goto fail_rec;
	} else if ((v = rec_header(r, "Content-Length")) != NULL) {
		if ((cl = strtoul(v, NULL, 10)) > BODY_MAX ||
		    fill(s, fd, &in, hlen + cl) == -1 ||
		    str_add(&body, in.p + hlen, cl) == -1)
			goto fail_rec;
	}
	if (body.p == NULL && str_add(&body, "", 0) == -1)
		goto fail_rec;
	r->body = body.p;
	r->bodylen = body.len;
	free(in.p);
	return r;
fail_rec:
	rec_free(r);
fail:
	free(body.p);
	free(in.p);
	return NULL;
}

static const char *
reason(int status)
{
	switch (status / 100) {
	case 1: return "Continue";
	case 2: return "OK";
	case 3: return "Redirect";
	case 4: return "Client Error";
	}
	return "Server Error";
}

static void
write_all(int fd, const char *p, size_t n)
{
	ssize_t	k;

	for (; n > 0; p += k, n -= (size_t)k)
		if ((k = send(fd, p, n, MSG_NOSIGNAL)) == -1 && errno == EINTR)
			k = 0;
		else if (k <= 0)
			return;
}

/* Answer the request just read on fd as a says. */
static void
respond(struct idem_test_http *s, int fd, const struct answer *a)
{
	char	head[256];
	int	n;

	if (a->delay_ms > 0 && await(s, -1, a->delay_ms) == -1)
		return;
	switch (a->action) {
	case IDEM_TEST_HTTP_CLOSE:
		return;
	case IDEM_TEST_HTTP_SILENT:
		/* Held until the client gives up (or the stub stops). */
		while (await(s, fd, -1) == 1 && read(fd, head, sizeof(head)) > 0)
			;
		return;
	case IDEM_TEST_HTTP_ANSWER:
		break;
	}
	n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Length: "
	    "%lu\r\nConnection: close\r\n", a->status, reason(a->status),
	    (unsigned long)strlen(a->body));
	write_all(fd, head, (size_t)n);
	write_all(fd, a->headers, strlen(a->headers));
	write_all(fd, "\r\n", 2);
	write_all(fd, a->body, strlen(a->body));
}

/* Record r; the answer it gets (the queue's first, or the default) into
 * *a: 0, or -1 (out of memory: closed). */
static int
record(struct idem_test_http *s, struct rec *r, struct answer *a)
{
	struct rec	**nr;
	int		  rc = 0;

	pthread_mutex_lock(&s->mu);
	if ((nr = realloc(s->recs, (s->nrecs + 1) * sizeof(*nr))) == NULL)
		rc = -1;
	else {
		s->recs = nr;
		s->recs[s->nrecs++] = r;
		pthread_cond_broadcast(&s->cv);
	}
	if (rc == 0 && s->nqueue > 0) {
		*a = s->queue[0];
		memmove(s->queue, s->queue + 1, --s->nqueue * sizeof(*a));
	} else if (rc == 0) {
		a->action = s->dflt.action;
		a->status = s->dflt.status;
		a->delay_ms = s->dflt.delay_ms;
		a->headers = strdup(s->dflt.headers);
		a->body = strdup(s->dflt.body);
		if (a->headers == NULL || a->body == NULL) {
			answer_clear(a);
			a->action = IDEM_TEST_HTTP_CLOSE;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void *
serve(void *arg)
{
	struct idem_test_http	*s = arg;
	struct answer		 a;
	struct rec		*r;
	int			 fd;

	while (await(s, s->lfd, -1) == 1) {
		if ((fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC)) == -1) {
			/* Out of descriptors: not a busy loop meanwhile. */
			if (errno != EINTR && errno != ECONNABORTED &&
			    await(s, -1, 100) == -1)
				break;
			continue;
		}
		if ((r = read_request(s, fd)) != NULL) {
			if (record(s, r, &a) == -1)
				rec_free(r);
			else {
				respond(s, fd, &a);
				answer_clear(&a);
			}
		}
		close(fd);
	}
	return NULL;
}

struct idem_test_http *
idem_test_http_new(char *err, size_t errlen)
{
	static const char *const hdr[] = { "Content-Type: text/plain", NULL };
	struct idem_test_http	*s;
	struct sockaddr_in	 sin;
	socklen_t		 sl = sizeof(sin);

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		idem_test_seterr(err, errlen, "out of memory");
		return NULL;
	}
	s->lfd = s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (answer_copy(&s->dflt, &(struct idem_test_http_answer){
	    .status = 500, .headers = hdr,
	    .body = "idem_test_http: no answer scripted\n" }) == -1) {
		idem_test_seterr(err, errlen, "out of memory");
		goto fail;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (pipe2(s->wake, O_CLOEXEC) == -1 ||
	    (s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    bind(s->lfd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(s->lfd, 64) == -1 ||
	    getsockname(s->lfd, (struct sockaddr *)&sin, &sl) == -1) {
		idem_test_seterr(err, errlen, "cannot listen on 127.0.0.1: %s",
		    strerror(errno));
		goto fail;
	}
	snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%u",
	    (unsigned)ntohs(sin.sin_port));
	if (pthread_create(&s->th, NULL, serve, s) != 0) {
		idem_test_seterr(err, errlen, "cannot start a thread");
		goto fail;
	}
	return s;
fail:
	if (s->lfd != -1)
		close(s->lfd);
	if (s->wake[0] != -1) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	answer_clear(&s->dflt);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return NULL;
}

const char *
idem_test_http_url(const struct idem_test_http *s)
{
	return s->url;
}

int
idem_test_http_push(struct idem_test_http *s,
    const struct idem_test_http_answer *a)
{
	struct answer	c, *nq;

	if (a == NULL || answer_copy(&c, a) == -1)
		return -1;
	pthread_mutex_lock(&s->mu);
	if ((nq = realloc(s->queue, (s->nqueue + 1) * sizeof(*nq))) == NULL) {
		pthread_mutex_unlock(&s->mu);
		answer_clear(&c);
		return -1;
	}
	s->queue = nq;
	s->queue[s->nqueue++] = c;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int
idem_test_http_default(struct idem_test_http *s,
    const struct idem_test_http_answer *a)
{
	struct answer	c;

	if (a == NULL || answer_copy(&c, a) == -1)
		return -1;
	pthread_mutex_lock(&s->mu);
	answer_clear(&s->dflt);
	s->dflt = c;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

size_t
idem_test_http_count(struct idem_test_http *s)
{
	size_t	n;

	pthread_mutex_lock(&s->mu);
	n = s->nrecs;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int
idem_test_http_wait(struct idem_test_http *s, size_t n, long long timeout_ms)
{
	struct timespec	dl;
	int		rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += (time_t)(timeout_ms / 1000);
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mu);
	while (s->nrecs < n && rc == 0)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0 &&
		    s->nrecs < n)
			rc = -1;
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* The i-th record, or NULL; stable once recorded. */
static const struct rec *
rec_at(struct idem_test_http *s, size_t i)
{
	const struct rec	*r;

	pthread_mutex_lock(&s->mu);
	r = i < s->nrecs ? s->recs[i] : NULL;
	pthread_mutex_unlock(&s->mu);
	return r;
}

const char *
idem_test_http_method(struct idem_test_http *s, size_t i)
{
	const struct rec	*r = rec_at(s, i);

	return r != NULL ? r->method : NULL;
}

const char *
idem_test_http_path(struct idem_test_http *s, size_t i)
{
	const struct rec	*r = rec_at(s, i);

	return r != NULL ? r->path : NULL;
}

const char *
idem_test_http_body(struct idem_test_http *s, size_t i, size_t *len)
{
	const struct rec	*r = rec_at(s, i);

	if (len != NULL)
		*len = r != NULL ? r->bodylen : 0;
	return r != NULL ? r->body : NULL;
}

const char *
idem_test_http_header(struct idem_test_http *s, size_t i, const char *name)
{
	const struct rec	*r = rec_at(s, i);

	return r != NULL ? rec_header(r, name) : NULL;
}

void
idem_test_http_free(struct idem_test_http *s)
{
	size_t	i;

	if (s == NULL)
		return;
	(void)!write(s->wake[1], "x", 1);
	pthread_join(s->th, NULL);
	close(s->lfd);
	close(s->wake[0]);
	close(s->wake[1]);
	for (i = 0; i < s->nrecs; i++)
		rec_free(s->recs[i]);
	free(s->recs);
	for (i = 0; i < s->nqueue; i++)
		answer_clear(&s->queue[i]);
	free(s->queue);
	answer_clear(&s->dflt);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
