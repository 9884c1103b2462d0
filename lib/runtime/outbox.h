/*
 * outbox.h - the outbox's pure rules (outbox.c): what a webhook URL and an
 * event type may be, and what becomes of a delivery attempt.  No clock, no
 * randomness, no database, so that tables can test them.
 */
#ifndef IDEM_OUTBOX_H
#define IDEM_OUTBOX_H

#include <stddef.h>

#include "backoff.h"

/* Why a webhook endpoint's URL is refused at create. */
enum idem_url_verdict {
	IDEM_URL_OK = 0,
	IDEM_URL_EMPTY,		/* NULL or "" */
	IDEM_URL_TOO_LONG,	/* over IDEM_URL_MAX bytes */
	IDEM_URL_SCHEME,	/* not http:// or https:// */
	IDEM_URL_NO_HOST,	/* nothing between :// and the path */
	IDEM_URL_USERINFO,	/* user:password@ in the authority */
	IDEM_URL_FRAGMENT,	/* a #fragment */
	IDEM_URL_CHAR,		/* a space, control or non-ASCII byte */
	IDEM_URL_PORT,		/* a port that is not 1 to 65535 */
	IDEM_URL_HOST		/* a malformed host ([v6] unclosed, empty) */
};
#define IDEM_URL_MAX	2048

enum idem_url_verdict idem_url_verdict(const char *url);
/* A sentence for the problem's detail ("must be an http or https URL"). */
const char	*idem_url_reason(enum idem_url_verdict v);

/* The event the dispatcher announces a disabled endpoint with
 * (sql/functions/idem_outbox_disable.sql), declared by
 * idem_app_webhook_routes() so that a tenant can subscribe to it. */
#define IDEM_EV_ENDPOINT_DISABLED	"webhook_endpoint.disabled"

/* An event type: 1 to IDEM_EVENT_TYPE_MAX of IDEM_EVENT_TYPE_CHARS (what
 * idem_req_enqueue() sends and idem_app_webhook() declares alike). */
#define IDEM_EVENT_TYPE_MAX	128
#define IDEM_EVENT_TYPE_CHARS	"abcdefghijklmnopqrstuvwxyz" \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
int		 idem_event_type_ok(const char *type);

/* What one delivery attempt's outcome means. */
enum idem_attempt {
	IDEM_ATTEMPT_DELIVERED,	/* a 2xx answer */
	IDEM_ATTEMPT_RETRY,	/* failed: again after the backoff */
	IDEM_ATTEMPT_DEAD	/* failed: given up */
};

/*
 * status: the answer's HTTP status, 0 when there was none; hopeless: the
 * attempt cannot succeed by itself (the endpoint was deleted); attempts
 * made (this one included), the event's age; limits <= 0: none.  A 2xx
 * is delivered whatever the limits; giveup (may be NULL) gets why a
 * failure is dead.
 */
enum idem_attempt idem_attempt_outcome(int status, int hopeless,
		    long attempts, long max_attempts, long long age_ms,
		    long long max_age_ms, enum idem_giveup *giveup);
const char	*idem_attempt_name(enum idem_attempt a);

/*
 * An endpoint of idem_webhook_endpoints as its JSON shows it (the select
 * list; no secret): its health from sql/015's columns, times in Unix
 * seconds or null.  outbox.c's list and endpoints.c's routes.
 */
#define IDEM_ENDPOINT_COLS \
	"id, url, to_json(types) AS events, " \
	"extract(epoch FROM created_at)::bigint AS created, " \
	"disabled_at IS NULL AS enabled, disabled_reason, " \
	"extract(epoch FROM last_success_at)::bigint AS last_success, " \
	"extract(epoch FROM failing_since)::bigint AS failing_since"

#endif /* IDEM_OUTBOX_H */
