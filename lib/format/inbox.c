/*
 * inbox.c - [inbox "NAME"]: a signed source of webhooks (its scheme, its
 * secrets, several during a rotation), the section's strict parsing (the
 * tolerance, a duration, is config.c's), and the pure check of a received
 * message against each of its secrets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TOLERANCE_DEFAULT_MS	(5 * 60 * 1000LL)
#define SECRET_MAX		256

static const char *const scheme_names[] = {
	[IDEM_INBOX_SCHEME_NONE] = "none",
	[IDEM_INBOX_STANDARD] = "standard-webhooks",
	[IDEM_INBOX_STRIPE] = "stripe",
};

const char *
idem_inbox_scheme_name(enum idem_inbox_scheme s)
{
	return (size_t)s < sizeof(scheme_names) / sizeof(scheme_names[0]) ?
	    scheme_names[s] : "unknown";
}

/* A source's name: 1 to 64 of a-z, 0-9, '-', '_' (it names a tenant). */
static int
name_ok(const char *s, size_t n)
{
	return n > 0 && n <= IDEM_INBOX_NAME_MAX && strspn(s,
	    "abcdefghijklmnopqrstuvwxyz0123456789-_") >= n;
}

enum idem_inbox_sect_rc
idem_inbox_section(struct idem_cfg_inbox **list, const char *hdr,
    unsigned long line, struct idem_cfg_inbox **out, char *why, size_t whylen)
{
	struct idem_cfg_inbox	*ib, **tail;
	const char		*p, *e;

	if (strncmp(hdr, "inbox", 5) != 0 || (hdr[5] != '\0' &&
	    hdr[5] != ' ' && hdr[5] != '\t' && hdr[5] != '"'))
		return IDEM_INBOX_SECT_OTHER;
	/* Exactly: inbox "NAME" */
	p = hdr + 6;
	if (hdr[5] != ' ' || *p != '"' || (e = strchr(p + 1, '"')) == NULL ||
	    e[1] != '\0' || !name_ok(p + 1, (size_t)(e - p - 1))) {
		idem_errf(why, whylen, "bad inbox section, expected [inbox "
		    "\"NAME\"] (NAME: 1 to %d of a-z, 0-9, '-', '_')",
		    IDEM_INBOX_NAME_MAX);
		return IDEM_INBOX_SECT_ERROR;
	}
	for (tail = list; *tail != NULL; tail = &(*tail)->next)
		if (strlen((*tail)->name) == (size_t)(e - p - 1) &&
		    memcmp((*tail)->name, p + 1, (size_t)(e - p - 1)) == 0) {
			idem_errf(why, whylen, "duplicate section [inbox "
			    "\"%s\"] (first on line %lu)", (*tail)->name,
			    (*tail)->line);
			return IDEM_INBOX_SECT_ERROR;
		}
	if ((ib = calloc(1, sizeof(*ib))) == NULL ||
	    (ib->name = strndup(p + 1, (size_t)(e - p - 1))) == NULL) {
		free(ib);
		idem_errf(why, whylen, "out of memory");
		return IDEM_INBOX_SECT_ERROR;
	}
	ib->tolerance_ms = TOLERANCE_DEFAULT_MS;
	ib->line = line;
	*tail = ib;
	*out = ib;
	return IDEM_INBOX_SECT_OK;
}

/* Can scheme s sign with secret?  standard-webhooks: "[whsec_]base64";
 * stripe: the secret is the key as written. */
static int
secret_ok(enum idem_inbox_scheme s, const char *secret)
{
	char	sig[IDEM_WEBHOOK_SIGNATURE_MAX];

	if (strlen(secret) > SECRET_MAX)
		return 0;
	if (s == IDEM_INBOX_STRIPE)
		return idem_stripe_sign(secret, 0, "", 0, sig, sizeof(sig)) == 0;
	return idem_webhook_sign(secret, "m", 0, "", 0, sig, sizeof(sig)) == 0;
}

/* secret = a b ...: blank-separated, each kept for the check. */
static int
parse_secrets(struct idem_cfg_inbox *ib, const char *val, char *why,
    size_t whylen)
{
	const char	*p = val, *e;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return 0;
		for (e = p; *e != '\0' && *e != ' ' && *e != '\t'; e++)
			;
		if (ib->nsecrets == IDEM_INBOX_SECRETS_MAX) {
			idem_errf(why, whylen, "secret: at most %d secrets",
			    IDEM_INBOX_SECRETS_MAX);
			return -1;
		}
		if ((ib->secret[ib->nsecrets] = strndup(p, (size_t)(e - p))) ==
		    NULL) {
			idem_errf(why, whylen, "out of memory");
			return -1;
		}
		ib->nsecrets++;
		p = e;
	}
}

static int
parse_scheme(struct idem_cfg_inbox *ib, const char *val, char *why,
    size_t whylen)
{
	if (strcmp(val, "standard-webhooks") == 0)
		ib->scheme = IDEM_INBOX_STANDARD;
	else if (strcmp(val, "stripe") == 0)
		ib->scheme = IDEM_INBOX_STRIPE;
	else {
		idem_errf(why, whylen, "scheme must be standard-webhooks or "
		    "stripe");
		return -1;
	}
	return 0;
}

int
idem_inbox_key(struct idem_cfg_inbox *ib, const char *key, const char *val,
    unsigned long line, char *why, size_t whylen)
{
	unsigned long	*seen;

	if (strcmp(key, "scheme") == 0)
		seen = &ib->scheme_line;
	else if (strcmp(key, "secret") == 0)
		seen = &ib->secret_line;
	else {
		idem_errf(why, whylen, "unknown key %.64s in [inbox \"%s\"] "
		    "(scheme, secret or tolerance)", key, ib->name);
		return -1;
	}
	if (*seen != 0) {
		idem_errf(why, whylen, "duplicate key %s (first on line %lu)",
		    key, *seen);
		return -1;
	}
	*seen = line;
	if (seen == &ib->scheme_line)
		return parse_scheme(ib, val, why, whylen);
	return parse_secrets(ib, val, why, whylen);
}

int
idem_inbox_finish(const struct idem_cfg_inbox *list, unsigned long *line,
    char *why, size_t whylen)
{
	const struct idem_cfg_inbox	*ib;
	size_t				 i;

	for (ib = list; ib != NULL; ib = ib->next) {
		*line = ib->line;
		if (ib->scheme == IDEM_INBOX_SCHEME_NONE || ib->nsecrets == 0) {
			idem_errf(why, whylen, "[inbox \"%s\"] needs a scheme "
			    "and a secret", ib->name);
			return -1;
		}
		/* Checked once both are known, whatever their order. */
		for (i = 0; i < ib->nsecrets; i++)
			if (!secret_ok(ib->scheme, ib->secret[i])) {
				*line = ib->secret_line;
				idem_errf(why, whylen, "secret %zu of [inbox "
				    "\"%s\"] is not a %s secret%s", i + 1,
				    ib->name, scheme_names[ib->scheme],
				    ib->scheme == IDEM_INBOX_STANDARD ?
				    " (\"whsec_\" and base64)" : "");
				return -1;
			}
	}
	return 0;
}

void
idem_inbox_free(struct idem_cfg_inbox *list)
{
	struct idem_cfg_inbox	*ib, *next;
	size_t			 i;

	for (ib = list; ib != NULL; ib = next) {
		next = ib->next;
		for (i = 0; i < ib->nsecrets; i++) {
			/* Secrets do not outlive the config in memory. */
			memset(ib->secret[i], 0, strlen(ib->secret[i]));
			free(ib->secret[i]);
		}
		free(ib->name);
		free(ib);
	}
}

const struct idem_cfg_inbox *
idem_inbox_find(const struct idem_cfg_inbox *list, const char *name)
{
	for (; list != NULL && name != NULL; list = list->next)
		if (strcmp(list->name, name) == 0)
			return list;
	return NULL;
}

/* The verdict that says most: a match, else the timestamp's (the same
 * whatever the secret), else a mismatch. */
static int
rank(enum idem_webhook_verdict v)
{
	switch (v) {
	case IDEM_WEBHOOK_OK:		return 4;
	case IDEM_WEBHOOK_TOO_OLD:
	case IDEM_WEBHOOK_TOO_NEW:	return 3;
	case IDEM_WEBHOOK_BAD_HEADER:	return 2;
	case IDEM_WEBHOOK_MISMATCH:	return 1;
	case IDEM_WEBHOOK_BAD_SECRET:	break;
	}
	return 0;
}

enum idem_webhook_verdict
idem_inbox_check(const struct idem_cfg_inbox *ib,
    const struct idem_inbox_msg *m, long long now)
{
	enum idem_webhook_verdict	 best = IDEM_WEBHOOK_BAD_SECRET, v;
	long long			 tol = ib->tolerance_ms / 1000;
	size_t				 i;

	/* Each secret is tried (a rotation lists the old and the new). */
	for (i = 0; i < ib->nsecrets; i++) {
		if (ib->scheme == IDEM_INBOX_STRIPE)
			v = idem_stripe_verify(ib->secret[i],
			    m->stripe_signature, m->body, m->len, now, tol);
		else
			v = idem_webhook_verify(ib->secret[i], m->id,
			    m->timestamp, m->signature, m->body, m->len, now,
			    tol);
		if (rank(v) > rank(best))
			best = v;
	}
	return best;
}
