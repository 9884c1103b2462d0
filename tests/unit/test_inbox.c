/*
 * test_inbox.c - signed sources: the stripe scheme (lib/format/stripe.c:
 * a vector of Stripe's own library, then a table of Stripe-Signature
 * headers), [inbox "NAME"] sections (lib/format/config.c, inbox.c) from a
 * table of files, and the check of a message against a source's secrets
 * during a rotation (idem_inbox_check()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tap.h"

/* From the npm package stripe (webhooks.generateTestHeaderString). */
#define S_SECRET	"whsec_test_secret"
#define S_OTHER		"whsec_other"
#define S_TS		1700000000LL
#define S_BODY		"{\"id\":\"evt_1\",\"type\":\"payment.disputed\"}"
#define S_V1		"bb5a62be7b9a5849076e6c140d104664f38661590c9a2ddcc7adccbfa30fc4ec"
#define S_V1_OTHER	"b3daa3b8a18a7beec7da0b24528975816f2ccf429ab541e77a0394d60f046c39"
#define S_HDR		"t=1700000000,v1=" S_V1

static const struct {
	const char	*name, *secret, *header, *body;
	long long	 now, tolerance;
	enum idem_webhook_verdict want;
} stripe_checks[] = {
	{ "the vector", S_SECRET, S_HDR, S_BODY, S_TS, 300, IDEM_WEBHOOK_OK },
	{ "5 min late: in time", S_SECRET, S_HDR, S_BODY, S_TS + 300, 300,
	    IDEM_WEBHOOK_OK },
	{ "5 min 1 s late: too old", S_SECRET, S_HDR, S_BODY, S_TS + 301, 300,
	    IDEM_WEBHOOK_TOO_OLD },
	{ "5 min 1 s early: too new", S_SECRET, S_HDR, S_BODY, S_TS - 301, 300,
	    IDEM_WEBHOOK_TOO_NEW },
	{ "another secret", S_OTHER, S_HDR, S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_MISMATCH },
	{ "body changed", S_SECRET, S_HDR, "{\"id\":\"evt_1\"}", S_TS, 300,
	    IDEM_WEBHOOK_MISMATCH },
	{ "t changed (in time)", S_SECRET, "t=1700000001,v1=" S_V1, S_BODY,
	    S_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "rotation: the second v1", S_SECRET,
	    "t=1700000000,v1=" S_V1_OTHER ",v1=" S_V1, S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_OK },
	{ "rotation: the first v1", S_OTHER,
	    "t=1700000000,v1=" S_V1_OTHER ",v1=" S_V1, S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_OK },
	{ "v0 is skipped", S_SECRET, "t=1700000000,v0=" S_V1, S_BODY, S_TS,
	    300, IDEM_WEBHOOK_MISMATCH },
	{ "v0 beside a v1", S_SECRET, "t=1700000000,v0=abc,v1=" S_V1, S_BODY,
	    S_TS, 300, IDEM_WEBHOOK_OK },
	{ "t after the v1", S_SECRET, "v1=" S_V1 ",t=1700000000", S_BODY, S_TS,
	    300, IDEM_WEBHOOK_OK },
	{ "upper-case hex", S_SECRET, "t=1700000000,v1="
	    "BB5A62BE7B9A5849076E6C140D104664F38661590C9A2DDCC7ADCCBFA30FC4EC",
	    S_BODY, S_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "v1 a digit short", S_SECRET, "t=1700000000,v1="
	    "bb5a62be7b9a5849076e6c140d104664f38661590c9a2ddcc7adccbfa30fc4e",
	    S_BODY, S_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "v1 empty", S_SECRET, "t=1700000000,v1=", S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_MISMATCH },
	{ "no v1", S_SECRET, "t=1700000000", S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_MISMATCH },
	{ "no t", S_SECRET, "v1=" S_V1, S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "two t", S_SECRET, "t=1700000000,t=1700000000,v1=" S_V1, S_BODY,
	    S_TS, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "t empty", S_SECRET, "t=,v1=" S_V1, S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "t signed", S_SECRET, "t=+1700000000,v1=" S_V1, S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "t overflowing", S_SECRET, "t=9223372036854775808,v1=" S_V1, S_BODY,
	    S_TS, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "blank after the comma", S_SECRET, "t=1700000000, v1=" S_V1, S_BODY,
	    S_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "no header", S_SECRET, NULL, S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "empty header", S_SECRET, "", S_BODY, S_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "no secret", "", S_HDR, S_BODY, S_TS, 300, IDEM_WEBHOOK_BAD_SECRET },
	{ "time before the signature", S_SECRET, "t=1700000000,v1=00", S_BODY,
	    S_TS + 1000, 300, IDEM_WEBHOOK_TOO_OLD },
};

/* [inbox] sections: the file, and the error's start (NULL: parses). */
static const struct {
	const char	*name, *text, *err;
} cfgs[] = {
	{ "standard-webhooks, two secrets, tolerance",
	    "[inbox \"acquirer\"]\nscheme = standard-webhooks\nsecret = "
	    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw "
	    "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\ntolerance = 2m\n", NULL },
	{ "stripe", "[inbox \"psp\"]\nscheme = stripe\nsecret = whsec_x\n",
	    NULL },
	{ "two sources", "[inbox \"a\"]\nscheme = stripe\nsecret = s\n"
	    "[inbox \"b\"]\nscheme = stripe\nsecret = t\n", NULL },
	{ "the secret before the scheme", "[inbox \"a\"]\nsecret = "
	    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\nscheme = "
	    "standard-webhooks\n", NULL },
	{ "no scheme", "[inbox \"a\"]\nsecret = s\n", "t.ini:1: [inbox \"a\"] "
	    "needs a scheme" },
	{ "no secret", "[inbox \"a\"]\nscheme = stripe\n", "t.ini:1: [inbox "
	    "\"a\"] needs a scheme and a secret" },
	{ "unknown scheme", "[inbox \"a\"]\nscheme = adyen\n", "t.ini:2: "
	    "scheme must be" },
	{ "not a whsec_ secret", "[inbox \"a\"]\nscheme = standard-webhooks\n"
	    "secret = whsec_not!base64\n", "t.ini:3: secret 1 of [inbox" },
	{ "the second secret bad", "[inbox \"a\"]\nscheme = "
	    "standard-webhooks\nsecret = whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw "
	    "x\n", "t.ini:3: secret 2 of [inbox" },
	{ "nine secrets", "[inbox \"a\"]\nscheme = stripe\nsecret = 1 2 3 4 5 "
	    "6 7 8 9\n", "t.ini:3: secret: at most 8" },
	{ "duplicate key", "[inbox \"a\"]\nscheme = stripe\nscheme = stripe\n",
	    "t.ini:3: duplicate key scheme (first on line 2)" },
	{ "duplicate section", "[inbox \"a\"]\nscheme = stripe\nsecret = s\n"
	    "[inbox \"a\"]\n", "t.ini:4: duplicate section [inbox \"a\"]" },
	{ "unknown key", "[inbox \"a\"]\nretention = 7d\n", "t.ini:2: unknown "
	    "key retention in [inbox \"a\"]" },
	{ "tolerance 0", "[inbox \"a\"]\ntolerance = 0s\n", "t.ini:2: "
	    "tolerance must be" },
	{ "tolerance 2h", "[inbox \"a\"]\ntolerance = 2h\n", "t.ini:2: "
	    "tolerance must be" },
	{ "tolerance twice", "[inbox \"a\"]\ntolerance = 1m\ntolerance = 1m\n",
	    "t.ini:3: duplicate key tolerance" },
	{ "name upper case", "[inbox \"Acq\"]\n", "t.ini:1: bad inbox section" },
	{ "name unquoted", "[inbox acq]\n", "t.ini:1: bad inbox section" },
	{ "name empty", "[inbox \"\"]\n", "t.ini:1: bad inbox section" },
	{ "text after the name", "[inbox \"a\" x]\n",
	    "t.ini:1: bad inbox section" },
	{ "inbox alone", "[inbox]\n", "t.ini:1: bad inbox section" },
	{ "inboxes is another section", "[inboxes]\n",
	    "t.ini:1: unknown section [inboxes]" },
};

static void
test_stripe(void)
{
	enum idem_webhook_verdict	 got;
	char				 sig[IDEM_STRIPE_SIGNATURE_MAX];
	long long			 t;
	size_t				 i, n;

	TAP_OK(idem_stripe_sign(S_SECRET, S_TS, S_BODY, sizeof(S_BODY) - 1, sig,
	    sizeof(sig)) == 0, "stripe: sign the vector");
	TAP_STREQ(sig, S_HDR, "stripe: the header Stripe's library makes");
	TAP_OK(idem_stripe_sign(S_SECRET, S_TS, S_BODY, sizeof(S_BODY) - 1, sig,
	    strlen(S_HDR)) == -1, "stripe: a byte short of out: -1");
	TAP_OK(idem_stripe_sign("", S_TS, S_BODY, 1, sig, sizeof(sig)) == -1,
	    "stripe: no secret: -1");
	for (i = 0; i < sizeof(stripe_checks) / sizeof(stripe_checks[0]); i++) {
		got = idem_stripe_verify(stripe_checks[i].secret,
		    stripe_checks[i].header, stripe_checks[i].body,
		    strlen(stripe_checks[i].body), stripe_checks[i].now,
		    stripe_checks[i].tolerance);
		TAP_OK(got == stripe_checks[i].want, "stripe verify: %s: %s",
		    stripe_checks[i].name, idem_webhook_verdict_name(got));
	}
	TAP_OK(idem_stripe_header_parse("t=5,v1=a,v0=b,v1=c", &t, &n) ==
	    IDEM_STRIPE_HEADER_OK && t == 5 && n == 2,
	    "stripe header: t and the number of v1");
}

static void
test_config(void)
{
	struct idem_cfg	 cfg;
	char		 err[256];
	size_t		 i;
	int		 rc;

	for (i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		idem_cfg_init(&cfg);
		rc = idem_cfg_parse(&cfg, "t.ini", cfgs[i].text,
		    strlen(cfgs[i].text), err, sizeof(err));
		if (cfgs[i].err == NULL)
			TAP_OK(rc == 0, "config: %s", cfgs[i].name);
		else
			TAP_OK(rc == -1 && strncmp(err, cfgs[i].err,
			    strlen(cfgs[i].err)) == 0, "config: %s: %s",
			    cfgs[i].name, err);
		if (i == 0)
			TAP_OK(rc == 0 && cfg.inboxes != NULL &&
			    cfg.inboxes->scheme == IDEM_INBOX_STANDARD &&
			    cfg.inboxes->nsecrets == 2 &&
			    cfg.inboxes->tolerance_ms == 120000 &&
			    idem_inbox_find(cfg.inboxes, "acquirer") ==
			    cfg.inboxes && idem_inbox_find(cfg.inboxes, "x") ==
			    NULL, "config: the values read");
		idem_cfg_free(&cfg);
	}
	idem_cfg_init(&cfg);
	rc = idem_cfg_parse(&cfg, "t.ini", cfgs[1].text, strlen(cfgs[1].text),
	    err, sizeof(err));
	TAP_OK(rc == 0 && cfg.inboxes->tolerance_ms == 300000,
	    "config: tolerance defaults to 5m");
	idem_cfg_free(&cfg);
}

/* A rotation: the old secret and the new one both verify. */
static void
test_check(void)
{
	struct idem_cfg_inbox	 ib = { .scheme = IDEM_INBOX_STRIPE,
				    .secret = { (char *)S_OTHER,
				    (char *)S_SECRET }, .nsecrets = 2,
				    .tolerance_ms = 300000 };
	struct idem_inbox_msg	 m = { .stripe_signature = S_HDR,
				    .body = S_BODY, .len = sizeof(S_BODY) - 1 };
	char			 sig[IDEM_WEBHOOK_SIGNATURE_MAX];
	char			 ts[32];

	TAP_OK(idem_inbox_check(&ib, &m, S_TS) == IDEM_WEBHOOK_OK,
	    "check: the new secret of two");
	ib.nsecrets = 1;
	TAP_OK(idem_inbox_check(&ib, &m, S_TS) == IDEM_WEBHOOK_MISMATCH,
	    "check: the old one alone does not match");
	ib.nsecrets = 2;
	TAP_OK(idem_inbox_check(&ib, &m, S_TS + 400) == IDEM_WEBHOOK_TOO_OLD,
	    "check: an old timestamp says so whatever the secret");
	m.stripe_signature = NULL;
	TAP_OK(idem_inbox_check(&ib, &m, S_TS) == IDEM_WEBHOOK_BAD_HEADER,
	    "check: no header");
	/* standard-webhooks: the message signed with the old secret. */
	ib.scheme = IDEM_INBOX_STANDARD;
	ib.secret[0] = (char *)"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
	ib.secret[1] = (char *)"whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
	idem_webhook_sign(ib.secret[0], "msg_1", S_TS, S_BODY,
	    sizeof(S_BODY) - 1, sig, sizeof(sig));
	snprintf(ts, sizeof(ts), "%lld", S_TS);
	m.id = "msg_1";
	m.timestamp = ts;
	m.signature = sig;
	TAP_OK(idem_inbox_check(&ib, &m, S_TS) == IDEM_WEBHOOK_OK,
	    "check: standard-webhooks, the old secret of two");
	m.id = "msg_2";
	TAP_OK(idem_inbox_check(&ib, &m, S_TS) == IDEM_WEBHOOK_MISMATCH,
	    "check: standard-webhooks, another id");
}

int
main(void)
{
	test_stripe();
	test_config();
	test_check();
	return TAP_DONE();
}
