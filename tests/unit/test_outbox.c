/*
 * test_outbox.c - the outbox's pure rules (lib/runtime/outbox.c): a webhook URL's
 * verdict, an event type, and what becomes of a delivery attempt, one
 * table row per case.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "outbox.h"
#include "tap.h"

static const struct {
	const char		*url;
	enum idem_url_verdict	 want;
} urls[] = {
	{ "https://example.com/hook", IDEM_URL_OK },
	{ "http://example.com", IDEM_URL_OK },
	{ "HTTPS://EXAMPLE.COM/", IDEM_URL_OK },
	{ "https://example.com:8443/a?b=c&d=e", IDEM_URL_OK },
	{ "https://example.com?x=1", IDEM_URL_OK },
	{ "http://127.0.0.1:8080/h", IDEM_URL_OK },	/* refused at delivery */
	{ "http://[::1]:8080/h", IDEM_URL_OK },
	{ "http://[2001:db8::1]/h", IDEM_URL_OK },
	{ "https://xn--bcher-kva.example/", IDEM_URL_OK },
	{ "https://a/%20", IDEM_URL_OK },
	{ "https://example.com:1/", IDEM_URL_OK },
	{ "https://example.com:65535/", IDEM_URL_OK },
	{ NULL, IDEM_URL_EMPTY },
	{ "", IDEM_URL_EMPTY },
	{ "ftp://example.com/", IDEM_URL_SCHEME },
	{ "file:///etc/passwd", IDEM_URL_SCHEME },
	{ "gopher://example.com", IDEM_URL_SCHEME },
	{ "example.com/hook", IDEM_URL_SCHEME },
	{ "https:/example.com", IDEM_URL_SCHEME },
	{ "//example.com", IDEM_URL_SCHEME },
	{ "https://", IDEM_URL_NO_HOST },
	{ "https:///path", IDEM_URL_NO_HOST },
	{ "https://?q", IDEM_URL_NO_HOST },
	{ "https://:443/", IDEM_URL_NO_HOST },
	{ "https://user:pw@example.com/", IDEM_URL_USERINFO },
	{ "https://user@example.com/", IDEM_URL_USERINFO },
	{ "https://example.com/a@b", IDEM_URL_OK },	/* @ in the path */
	{ "https://example.com/#frag", IDEM_URL_FRAGMENT },
	{ "https://example.com#", IDEM_URL_FRAGMENT },
	{ "https://exa mple.com/", IDEM_URL_CHAR },
	{ "https://example.com/\x01", IDEM_URL_CHAR },
	{ "https://example.com/\r\nX: y", IDEM_URL_CHAR },
	{ "https://ex\xc3\xa4mple.com/", IDEM_URL_CHAR },
	{ "https://example.com:0/", IDEM_URL_PORT },
	{ "https://example.com:65536/", IDEM_URL_PORT },
	{ "https://example.com:123456/", IDEM_URL_PORT },
	{ "https://example.com:/", IDEM_URL_PORT },
	{ "https://example.com:8a/", IDEM_URL_PORT },
	{ "https://example.com:-1/", IDEM_URL_PORT },
	{ "https://[::1/", IDEM_URL_HOST },
	{ "https://[]/", IDEM_URL_HOST },
	{ "https://[::1]x/", IDEM_URL_HOST },
	{ "https://exa]mple.com/", IDEM_URL_HOST },
	{ "https://[::1]:0/", IDEM_URL_PORT },
};

static const struct {
	const char	*type;
	int		 want;
} types[] = {
	{ "payment.succeeded", 1 },
	{ "refund.created", 1 },
	{ "a", 1 },
	{ "A-Z_0.9", 1 },
	{ "", 0 },
	{ NULL, 0 },
	{ "payment succeeded", 0 },
	{ "payment\"x", 0 },
	{ "type*", 0 },
	{ "caf\xc3\xa9", 0 },
	{ "a\nb", 0 },
};

static const struct {
	int			 status, hopeless;
	long			 attempts, max_attempts;
	long long		 age, max_age;
	enum idem_attempt	 want;
	enum idem_giveup	 why;
} outcomes[] = {
	{ 200, 0, 1, 3, 0, 1000, IDEM_ATTEMPT_DELIVERED, IDEM_GIVEUP_RETRY },
	{ 204, 0, 1, 3, 0, 1000, IDEM_ATTEMPT_DELIVERED, IDEM_GIVEUP_RETRY },
	{ 299, 0, 3, 3, 5000, 1000, IDEM_ATTEMPT_DELIVERED,
	    IDEM_GIVEUP_RETRY },			/* a 2xx beats the limits */
	{ 300, 0, 1, 3, 0, 1000, IDEM_ATTEMPT_RETRY, IDEM_GIVEUP_RETRY },
	{ 199, 0, 1, 3, 0, 1000, IDEM_ATTEMPT_RETRY, IDEM_GIVEUP_RETRY },
	{ 500, 0, 1, 3, 0, 1000, IDEM_ATTEMPT_RETRY, IDEM_GIVEUP_RETRY },
	{ 410, 0, 2, 3, 999, 1000, IDEM_ATTEMPT_RETRY, IDEM_GIVEUP_RETRY },
	{ 0, 0, 1, 3, 0, 1000, IDEM_ATTEMPT_RETRY, IDEM_GIVEUP_RETRY },
	{ 500, 0, 3, 3, 0, 1000, IDEM_ATTEMPT_DEAD, IDEM_GIVEUP_ATTEMPTS },
	{ 0, 0, 4, 3, 0, 1000, IDEM_ATTEMPT_DEAD, IDEM_GIVEUP_ATTEMPTS },
	{ 500, 0, 1, 3, 1000, 1000, IDEM_ATTEMPT_DEAD, IDEM_GIVEUP_AGE },
	{ 500, 0, 1000, 0, 1LL << 40, 0, IDEM_ATTEMPT_RETRY,
	    IDEM_GIVEUP_RETRY },			/* no limits */
	{ 0, 1, 1, 3, 0, 1000, IDEM_ATTEMPT_DEAD, IDEM_GIVEUP_HOPELESS },
	{ 200, 1, 1, 3, 0, 1000, IDEM_ATTEMPT_DEAD, IDEM_GIVEUP_HOPELESS },
};

/* s with control bytes as \xNN, for a TAP line. */
static const char *
shown(const char *s)
{
	static char	buf[4 * 80 + 1];
	size_t		o = 0;

	if (s == NULL)
		return "NULL";
	for (; *s != '\0' && o + 5 < sizeof(buf); s++) {
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			o += (size_t)snprintf(buf + o, sizeof(buf) - o,
			    "\\x%02x", (unsigned char)*s);
		else
			buf[o++] = *s;
	}
	buf[o] = '\0';
	return buf;
}

int
main(void)
{
	enum idem_url_verdict	 v;
	enum idem_attempt	 at;
	enum idem_giveup	 g;
	char			 big[IDEM_URL_MAX + 2], why[128];
	size_t			 i;
	yajl_val		 tree;

	for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		v = idem_url_verdict(urls[i].url);
		TAP_OK(v == urls[i].want, "url %s: %s (got %s)",
		    shown(urls[i].url),
		    idem_url_reason(urls[i].want), idem_url_reason(v));
	}
	/* 2048 bytes pass, 2049 do not. */
	memset(big, 'a', sizeof(big));
	memcpy(big, "https://example.com/", 20);
	big[IDEM_URL_MAX] = '\0';
	TAP_OK(idem_url_verdict(big) == IDEM_URL_OK, "a URL of 2048 bytes");
	big[IDEM_URL_MAX] = 'a';
	big[IDEM_URL_MAX + 1] = '\0';
	TAP_OK(idem_url_verdict(big) == IDEM_URL_TOO_LONG,
	    "a URL of 2049 bytes is too long");

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		TAP_OK(idem_event_type_ok(types[i].type) == types[i].want,
		    "event type \"%s\": %s", shown(types[i].type),
		    types[i].want ? "valid" : "refused");
	memset(big, 'a', IDEM_EVENT_TYPE_MAX + 1);
	big[IDEM_EVENT_TYPE_MAX] = '\0';
	TAP_OK(idem_event_type_ok(big), "a type of 128 characters");
	big[IDEM_EVENT_TYPE_MAX] = 'a';
	big[IDEM_EVENT_TYPE_MAX + 1] = '\0';
	TAP_OK(!idem_event_type_ok(big), "a type of 129 is refused");

	for (i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++) {
		at = idem_attempt_outcome(outcomes[i].status,
		    outcomes[i].hopeless, outcomes[i].attempts,
		    outcomes[i].max_attempts, outcomes[i].age,
		    outcomes[i].max_age, &g);
		TAP_OK(at == outcomes[i].want && g == outcomes[i].why,
		    "status %d, hopeless %d, %ld/%ld attempts, age %lld/%lld: "
		    "%s (%s) (got %s, %s)", outcomes[i].status,
		    outcomes[i].hopeless, outcomes[i].attempts,
		    outcomes[i].max_attempts, outcomes[i].age,
		    outcomes[i].max_age, idem_attempt_name(outcomes[i].want),
		    idem_giveup_name(outcomes[i].why), idem_attempt_name(at),
		    idem_giveup_name(g));
	}

	/* As a body member's rule: a string, its reason in why. */
	tree = yajl_tree_parse("[\"https://example.com/\", "
	    "\"ftp://example.com/\", 12]", NULL, 0);
	TAP_OK(tree != NULL && idem_webhook_url_check(
	    tree->u.array.values[0], why, sizeof(why)) == 0,
	    "the member check passes a good URL");
	TAP_OK(tree != NULL && idem_webhook_url_check(
	    tree->u.array.values[1], why, sizeof(why)) == -1 &&
	    strcmp(why, "must be an http or https URL") == 0,
	    "and refuses ftp with its reason: %s", why);
	TAP_OK(tree != NULL && idem_webhook_url_check(
	    tree->u.array.values[2], why, sizeof(why)) == -1 &&
	    strcmp(why, "must be a string") == 0, "and a number: %s", why);
	yajl_tree_free(tree);
	return TAP_DONE();
}
