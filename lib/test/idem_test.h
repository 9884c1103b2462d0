/*
 * idem_test.h - libidem_test: run requests through an application's
 * routes in-process, middleware included, against a real PostgreSQL
 * (idem_test(3)); see the events they enqueued (idem_test_events(3));
 * play the HTTP services the application calls (idem_test_http(3)).
 */
#ifndef IDEM_TEST_H
#define IDEM_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <idem.h>

#ifdef __cplusplus
extern "C" {
#endif

struct idem_test;		/* one application under test */
struct idem_test_resp;		/* one response */

/*
 * Prepare app (its routes registered) as idem_app_run() would, from the
 * configuration file config (NULL: none, libpq's PG* environment), without
 * listening, and create an API key for the requests.  Once per app.  The
 * harness, or NULL with the reason in err.
 */
struct idem_test *idem_test_new(idem_app *app, const char *config,
		    char *err, size_t errlen);
/*
 * One request: FastCGI records through the runtime's own reader, then
 * routing, authentication, the idempotency middleware, the handler.
 * headers: "Name: value" strings, NULL-terminated (NULL: none); an
 * Authorization header replaces the harness's own bearer key.  body: a
 * NUL-terminated string, or NULL.  0 with *resp set, or -1
 * (idem_test_error() says why).
 */
int		 idem_test_request(struct idem_test *t, const char *method,
		    const char *path, const char *const headers[],
		    const char *body, struct idem_test_resp **resp);
/* Why the last call on t failed. */
const char	*idem_test_error(const struct idem_test *t);
/* The harness's API key: its secret ("Bearer ..."), its id (the tenant). */
const char	*idem_test_secret(const struct idem_test *t);
int64_t		 idem_test_tenant(const struct idem_test *t);
void		 idem_test_free(struct idem_test *t);

int		 idem_test_status(const struct idem_test_resp *r);
/* The first header of that name (any case), or NULL. */
const char	*idem_test_header(const struct idem_test_resp *r,
		    const char *name);
/* The body (NUL-terminated too); its length in *len unless NULL. */
const char	*idem_test_body(const struct idem_test_resp *r, size_t *len);
void		 idem_test_response_free(struct idem_test_resp *r);
/* 1 when r is an application/problem+json answer of that status whose
 * body contains text (its type's slug, say), else 0. */
int		 idem_test_problem(const struct idem_test_resp *r, int status,
		    const char *text);

/*
 * Where the log lines of the application under test go from now on
 * (process-wide; the default is stderr, never stdout, where the test's
 * TAP goes): to f (NULL: nowhere), each line written and flushed whole.
 */
void		 idem_test_log_file(FILE *f);
/* Or each line (a JSON object, with its "\n") to fn(arg, line, len),
 * never two calls at once (fn NULL: nowhere). */
typedef void (*idem_test_log_fn)(void *arg, const char *line, size_t len);
void		 idem_test_log_callback(idem_test_log_fn fn, void *arg);

/* --- the outbox as a test sees it: idem_test_events(3) ------------------- */

struct idem_test_events;	/* the events, as read at one moment */

/*
 * The events the harness's requests enqueued (its tenant's), oldest
 * first, each with its deliveries (one per subscribed endpoint), as the
 * database holds them now: 0 with *ev set, or -1 (idem_test_error()).
 */
int		 idem_test_events(struct idem_test *t,
		    struct idem_test_events **ev);
size_t		 idem_test_events_count(const struct idem_test_events *ev);
/*
 * One run of the outbox's dispatcher, as the program's "deliver" command
 * does it (the harness runs none of its own): each delivery due now is
 * signed and POSTed to its endpoint, up to max (0: all), and its attempt
 * recorded.  An endpoint on 127.0.0.1 (idem_test_http(3)) needs
 * [webhooks] allow_private = on.  The deliveries answered 2xx, or -1
 * (idem_test_error()).
 */
long		 idem_test_deliver(struct idem_test *t, long max);
/* Of the i-th event (from 0; NULL when out of range): its type; its id
 * ("evt_..."); the body its deliveries send ({"id", "type", "created",
 * "data"}); the traceparent they send (NULL: none). */
const char	*idem_test_event_type(const struct idem_test_events *ev,
		    size_t i);
const char	*idem_test_event_id(const struct idem_test_events *ev,
		    size_t i);
const char	*idem_test_event_body(const struct idem_test_events *ev,
		    size_t i);
const char	*idem_test_event_traceparent(
		    const struct idem_test_events *ev, size_t i);
/* How many deliveries the i-th event has; of its j-th: the endpoint's
 * URL, the state ("pending", "delivered", "dead"; NULL: out of range),
 * the attempts made, the last answer's status (0: none). */
size_t		 idem_test_event_deliveries(const struct idem_test_events *ev,
		    size_t i);
const char	*idem_test_delivery_url(const struct idem_test_events *ev,
		    size_t i, size_t j);
const char	*idem_test_delivery_state(const struct idem_test_events *ev,
		    size_t i, size_t j);
int		 idem_test_delivery_attempts(
		    const struct idem_test_events *ev, size_t i, size_t j);
int		 idem_test_delivery_status(const struct idem_test_events *ev,
		    size_t i, size_t j);
void		 idem_test_events_free(struct idem_test_events *ev);

/* --- an HTTP service played by the test: idem_test_http(3) --------------- */

struct idem_test_http;		/* a stub server on 127.0.0.1 */

/* What the stub does with a request it has read and recorded. */
enum idem_test_http_action {
	IDEM_TEST_HTTP_ANSWER = 0,	/* status, headers, body */
	IDEM_TEST_HTTP_SILENT,		/* no answer: the connection is held
					 * until the client closes it */
	IDEM_TEST_HTTP_CLOSE		/* closed without an answer */
};

struct idem_test_http_answer {
	enum idem_test_http_action	 action;
	int				 status;	/* 100 to 999 */
	/* "Name: value" lines, NULL-terminated (NULL: none) */
	const char *const		*headers;
	const char			*body;		/* NULL: empty */
	long long			 delay_ms;	/* before acting */
};

/*
 * A stub listening on a free port of 127.0.0.1, served by a thread of its
 * own, one connection and one request at a time: NULL with the reason in
 * err.  A request with no answer scripted gets the default (500, until
 * idem_test_http_default()).
 */
struct idem_test_http *idem_test_http_new(char *err, size_t errlen);
/* "http://127.0.0.1:PORT", for the application's configuration. */
const char	*idem_test_http_url(const struct idem_test_http *s);
/* The answer of the next request that has none yet (a queue; copied). 0,
 * or -1 for a bad answer (status, a header line without ':' or with CR or
 * LF). */
int		 idem_test_http_push(struct idem_test_http *s,
		    const struct idem_test_http_answer *a);
/* The answer when the queue is empty (copied): 0, or -1. */
int		 idem_test_http_default(struct idem_test_http *s,
		    const struct idem_test_http_answer *a);
/* How many requests were recorded so far; wait until at least n were,
 * within timeout_ms: 0, or -1. */
size_t		 idem_test_http_count(struct idem_test_http *s);
int		 idem_test_http_wait(struct idem_test_http *s, size_t n,
		    long long timeout_ms);
/* The i-th request recorded (from 0; NULL when out of range): its method,
 * its target (path and query), its first header of that name (any case,
 * blanks around the value cut; NULL: none), its body (NUL-terminated, the
 * length in *len unless NULL; chunked ones decoded).  Valid until
 * idem_test_http_free(). */
const char	*idem_test_http_method(struct idem_test_http *s, size_t i);
const char	*idem_test_http_path(struct idem_test_http *s, size_t i);
const char	*idem_test_http_header(struct idem_test_http *s, size_t i,
		    const char *name);
const char	*idem_test_http_body(struct idem_test_http *s, size_t i,
		    size_t *len);
/* Stop it (a connection held by SILENT is closed) and free it. */
void		 idem_test_http_free(struct idem_test_http *s);

#ifdef __cplusplus
}
#endif

#endif /* IDEM_TEST_H */
