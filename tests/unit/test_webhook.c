/*
 * test_webhook.c - Standard Webhooks signatures (lib/format/webhook.c): the
 * specification's published vector, then a table of receiver checks (each
 * header, the tolerance's edges, rotation lists, malformed values) and new
 * secrets.
 */
#include <stdlib.h>

#include "idem.h"
#include "tap.h"

/* The specification's example (standard-webhooks.md, "Signature scheme"),
 * also the reference libraries' test vector. */
#define V_SECRET	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define V_ID		"msg_p5jXN8AQM9LWM0D4loKWxJek"
#define V_TS		1614265330LL
#define V_TSS		"1614265330"
#define V_BODY		"{\"test\": 2432232314}"
#define V_SIG		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
/* V_SIG with its first base64 character changed. */
#define V_BADSIG	"v1,h0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static const struct {
	const char	*name;
	const char	*secret, *id, *ts, *sigs, *body;
	long long	 now, tolerance;
	enum idem_webhook_verdict want;
} checks[] = {
	{ "the vector", V_SECRET, V_ID, V_TSS, V_SIG, V_BODY,
	    V_TS, 300, IDEM_WEBHOOK_OK },
	{ "the secret without whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	    V_ID, V_TSS, V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_OK },
	{ "5 min late: still in time", V_SECRET, V_ID, V_TSS, V_SIG, V_BODY,
	    V_TS + 300, 300, IDEM_WEBHOOK_OK },
	{ "5 min 1 s late: too old", V_SECRET, V_ID, V_TSS, V_SIG, V_BODY,
	    V_TS + 301, 300, IDEM_WEBHOOK_TOO_OLD },
	{ "5 min early: still in time", V_SECRET, V_ID, V_TSS, V_SIG, V_BODY,
	    V_TS - 300, 300, IDEM_WEBHOOK_OK },
	{ "5 min 1 s early: too new", V_SECRET, V_ID, V_TSS, V_SIG, V_BODY,
	    V_TS - 301, 300, IDEM_WEBHOOK_TOO_NEW },
	{ "tolerance 0, same second", V_SECRET, V_ID, V_TSS, V_SIG, V_BODY,
	    V_TS, 0, IDEM_WEBHOOK_OK },
	{ "negative tolerance read as 0", V_SECRET, V_ID, V_TSS, V_SIG,
	    V_BODY, V_TS + 1, -5, IDEM_WEBHOOK_TOO_OLD },
	{ "a far past now does not overflow", V_SECRET, V_ID, V_TSS, V_SIG,
	    V_BODY, -9223372036854775807LL - 1, 300, IDEM_WEBHOOK_TOO_NEW },
	{ "a far future now does not overflow", V_SECRET, V_ID, V_TSS, V_SIG,
	    V_BODY, 9223372036854775807LL, 300, IDEM_WEBHOOK_TOO_OLD },
	/* tampering: each signed part */
	{ "body changed", V_SECRET, V_ID, V_TSS, V_SIG,
	    "{\"test\": 2432232315}", V_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "body with a blank more", V_SECRET, V_ID, V_TSS, V_SIG,
	    "{\"test\":  2432232314}", V_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "id changed", V_SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJeK", V_TSS, V_SIG,
	    V_BODY, V_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "timestamp changed (in time)", V_SECRET, V_ID, "1614265331", V_SIG,
	    V_BODY, V_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "signature changed", V_SECRET, V_ID, V_TSS, V_BADSIG, V_BODY,
	    V_TS, 300, IDEM_WEBHOOK_MISMATCH },
	{ "another secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx", V_ID,
	    V_TSS, V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_MISMATCH },
	/* the signature list */
	{ "rotation: the second of two", V_SECRET, V_ID, V_TSS,
	    V_BADSIG " " V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_OK },
	{ "rotation: the first of two", V_SECRET, V_ID, V_TSS,
	    V_SIG " " V_BADSIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_OK },
	{ "blanks around and between", V_SECRET, V_ID, V_TSS,
	    "  " V_BADSIG "   " V_SIG "  ", V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_OK },
	{ "another version is skipped", V_SECRET, V_ID, V_TSS,
	    "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", V_BODY, V_TS,
	    300, IDEM_WEBHOOK_MISMATCH },
	{ "no version", V_SECRET, V_ID, V_TSS,
	    "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_MISMATCH },
	{ "v1 in upper case is another version", V_SECRET, V_ID, V_TSS,
	    "V1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", V_BODY, V_TS,
	    300, IDEM_WEBHOOK_MISMATCH },
	{ "signature without its padding", V_SECRET, V_ID, V_TSS,
	    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", V_BODY, V_TS,
	    300, IDEM_WEBHOOK_MISMATCH },
	{ "signature with a byte more", V_SECRET, V_ID, V_TSS,
	    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=AAAA", V_BODY, V_TS,
	    300, IDEM_WEBHOOK_MISMATCH },
	{ "signature not base64", V_SECRET, V_ID, V_TSS,
	    "v1,g0hM9SsE*OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", V_BODY, V_TS,
	    300, IDEM_WEBHOOK_MISMATCH },
	{ "v1, and nothing", V_SECRET, V_ID, V_TSS, "v1,", V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_MISMATCH },
	{ "empty signature list", V_SECRET, V_ID, V_TSS, "", V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_MISMATCH },
	/* headers */
	{ "no webhook-id", V_SECRET, NULL, V_TSS, V_SIG, V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "empty webhook-id", V_SECRET, "", V_TSS, V_SIG, V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "no webhook-timestamp", V_SECRET, V_ID, NULL, V_SIG, V_BODY, V_TS,
	    300, IDEM_WEBHOOK_BAD_HEADER },
	{ "no webhook-signature", V_SECRET, V_ID, V_TSS, NULL, V_BODY, V_TS,
	    300, IDEM_WEBHOOK_BAD_HEADER },
	{ "timestamp empty", V_SECRET, V_ID, "", V_SIG, V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_BAD_HEADER },
	{ "timestamp in ms is too new", V_SECRET, V_ID, "1614265330000", V_SIG,
	    V_BODY, V_TS, 300, IDEM_WEBHOOK_TOO_NEW },
	{ "timestamp signed", V_SECRET, V_ID, "+1614265330", V_SIG, V_BODY,
	    V_TS, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "timestamp negative", V_SECRET, V_ID, "-1614265330", V_SIG, V_BODY,
	    V_TS, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "timestamp with a blank", V_SECRET, V_ID, " 1614265330", V_SIG,
	    V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "timestamp fractional", V_SECRET, V_ID, "1614265330.5", V_SIG,
	    V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "timestamp overflowing", V_SECRET, V_ID, "9223372036854775808",
	    V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "leading zeros: the same second", V_SECRET, V_ID, "01614265330",
	    V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_OK },
	/* secrets */
	{ "secret NULL", NULL, V_ID, V_TSS, V_SIG, V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_BAD_SECRET },
	{ "secret empty", "", V_ID, V_TSS, V_SIG, V_BODY, V_TS, 300,
	    IDEM_WEBHOOK_BAD_SECRET },
	{ "secret whsec_ only", "whsec_", V_ID, V_TSS, V_SIG, V_BODY, V_TS,
	    300, IDEM_WEBHOOK_BAD_SECRET },
	{ "secret not base64", "whsec_MfKQ9r8GKYqrTwjUPD8I-PZIo2LaLaSw", V_ID,
	    V_TSS, V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_SECRET },
	{ "secret truncated", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", V_ID,
	    V_TSS, V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_SECRET },
	{ "secret with a trailing blank", V_SECRET " ", V_ID, V_TSS, V_SIG,
	    V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_SECRET },
	{ "secret with padding inside", "whsec_MfKQ9r8G=YqrTwjUPD8ILPZIo2LaLaSw",
	    V_ID, V_TSS, V_SIG, V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_SECRET },
	{ "secret checked before the headers", "whsec_!", NULL, NULL, NULL,
	    V_BODY, V_TS, 300, IDEM_WEBHOOK_BAD_SECRET },
	{ "headers checked before the time", V_SECRET, NULL, V_TSS, V_SIG,
	    V_BODY, V_TS + 1000, 300, IDEM_WEBHOOK_BAD_HEADER },
	{ "time checked before the signature", V_SECRET, V_ID, V_TSS,
	    V_BADSIG, V_BODY, V_TS + 1000, 300, IDEM_WEBHOOK_TOO_OLD },
};

int
main(void)
{
	char			 sig[IDEM_WEBHOOK_SIGNATURE_MAX];
	char			 s1[IDEM_WEBHOOK_SECRET_MAX];
	char			 s2[IDEM_WEBHOOK_SECRET_MAX];
	enum idem_webhook_verdict got;
	size_t			 i;

	/* Sending: the vector, then with the body's bytes as received. */
	TAP_OK(idem_webhook_sign(V_SECRET, V_ID, V_TS, V_BODY,
	    sizeof(V_BODY) - 1, sig, sizeof(sig)) == 0, "sign the vector");
	TAP_STREQ(sig, V_SIG, "the vector's signature");
	TAP_OK(idem_webhook_sign(V_SECRET, V_ID, V_TS, V_BODY,
	    sizeof(V_BODY) - 2, sig, sizeof(sig)) == 0 &&
	    strcmp(sig, V_SIG) != 0, "a byte less of body, another signature");
	TAP_OK(idem_webhook_sign(V_SECRET, V_ID, V_TS, V_BODY,
	    sizeof(V_BODY) - 1, sig, strlen(V_SIG) + 1) == 0,
	    "out of exactly its length is enough");
	TAP_OK(idem_webhook_sign(V_SECRET, V_ID, V_TS, V_BODY,
	    sizeof(V_BODY) - 1, sig, strlen(V_SIG)) == -1,
	    "a byte less of out: -1");
	TAP_OK(idem_webhook_sign("whsec_not base64", V_ID, V_TS, V_BODY,
	    sizeof(V_BODY) - 1, sig, sizeof(sig)) == -1, "bad secret: -1");
	TAP_OK(idem_webhook_sign(V_SECRET, NULL, V_TS, V_BODY,
	    sizeof(V_BODY) - 1, sig, sizeof(sig)) == -1, "no id: -1");
	TAP_OK(idem_webhook_sign(V_SECRET, V_ID, V_TS, NULL, 0, sig,
	    sizeof(sig)) == 0 && idem_webhook_verify(V_SECRET, V_ID, V_TSS,
	    sig, "", 0, V_TS, 300) == IDEM_WEBHOOK_OK,
	    "an empty body signs and verifies");
	/* A body with a NUL inside is signed whole. */
	TAP_OK(idem_webhook_sign(V_SECRET, V_ID, V_TS, "a\0b", 3, sig,
	    sizeof(sig)) == 0 && idem_webhook_verify(V_SECRET, V_ID, V_TSS,
	    sig, "a\0b", 3, V_TS, 300) == IDEM_WEBHOOK_OK &&
	    idem_webhook_verify(V_SECRET, V_ID, V_TSS, sig, "a\0c", 3, V_TS,
	    300) == IDEM_WEBHOOK_MISMATCH, "the body's length, not its NUL");

	for (i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		got = idem_webhook_verify(checks[i].secret, checks[i].id,
		    checks[i].ts, checks[i].sigs, checks[i].body,
		    strlen(checks[i].body), checks[i].now, checks[i].tolerance);
		TAP_OK(got == checks[i].want, "verify: %s: %s", checks[i].name,
		    idem_webhook_verdict_name(got));
		if (got != checks[i].want)
			printf("#   want %s\n",
			    idem_webhook_verdict_name(checks[i].want));
	}

	/* New secrets: the format, usable, and not twice the same. */
	TAP_OK(idem_webhook_secret_new(s1, sizeof(s1)) == 0 &&
	    idem_webhook_secret_new(s2, sizeof(s2)) == 0, "two new secrets");
	TAP_OK(strncmp(s1, "whsec_", 6) == 0 && strlen(s1) == 6 + 32 &&
	    strspn(s1 + 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789+/") == 32, "whsec_ and 32 base64 characters: %s", s1);
	TAP_OK(strcmp(s1, s2) != 0, "two secrets differ");
	TAP_OK(idem_webhook_sign(s1, V_ID, V_TS, V_BODY, sizeof(V_BODY) - 1,
	    sig, sizeof(sig)) == 0 && idem_webhook_verify(s1, V_ID, V_TSS, sig,
	    V_BODY, sizeof(V_BODY) - 1, V_TS, 300) == IDEM_WEBHOOK_OK &&
	    idem_webhook_verify(s2, V_ID, V_TSS, sig, V_BODY,
	    sizeof(V_BODY) - 1, V_TS, 300) == IDEM_WEBHOOK_MISMATCH,
	    "a new secret signs; the other one does not verify it");
	TAP_OK(idem_webhook_secret_new(s1, 39) == 0 && strlen(s1) == 38,
	    "out of exactly its length is enough");
	TAP_OK(idem_webhook_secret_new(s1, 38) == -1, "a byte less: -1");
	TAP_OK(idem_webhook_secret_new(NULL, 64) == -1, "no out: -1");
	TAP_OK(38 < IDEM_WEBHOOK_SECRET_MAX &&
	    sizeof(V_SIG) <= IDEM_WEBHOOK_SIGNATURE_MAX,
	    "the MAX constants hold a secret and a signature");
	TAP_STREQ(idem_webhook_verdict_name(IDEM_WEBHOOK_TOO_NEW), "too_new",
	    "verdict names");
	TAP_STREQ(idem_webhook_verdict_name((enum idem_webhook_verdict)99),
	    "unknown", "an unknown verdict's name");
	return TAP_DONE();
}
