/*
 * webhook_tool.c - idem's Standard Webhooks functions from the command
 * line, for tests/direct/webhook_sig.py to check against the
 * specification's reference library.  A client of idem.h only.
 *
 *   webhook_tool sign SECRET ID TIMESTAMP <BODY       the signature
 *   webhook_tool verify SECRET ID TIMESTAMP SIGNATURES NOW TOLERANCE <BODY
 *                                                     the verdict's name
 *   webhook_tool secret                               a new secret
 *
 * Exit 0, or 1 (sign or secret failed, a verdict other than ok), 2 (usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem.h"

/* All of stdin (the body may hold any bytes); NULL when out of memory. */
static char *
slurp(size_t *len)
{
	char	*p = NULL, *q;
	size_t	 cap = 0, n;

	*len = 0;
	for (;;) {
		if (*len == cap) {
			cap = cap ? cap * 2 : 4096;
			if ((q = realloc(p, cap)) == NULL) {
				free(p);
				return NULL;
			}
			p = q;
		}
		if ((n = fread(p + *len, 1, cap - *len, stdin)) == 0)
			break;
		*len += n;
	}
	return p;
}

int
main(int argc, char **argv)
{
	char			 out[IDEM_WEBHOOK_SIGNATURE_MAX];
	char			 secret[IDEM_WEBHOOK_SECRET_MAX];
	enum idem_webhook_verdict v;
	char			*body;
	size_t			 len;
	int			 rc;

	if (argc == 2 && strcmp(argv[1], "secret") == 0) {
		if (idem_webhook_secret_new(secret, sizeof(secret)) == -1)
			return 1;
		printf("%s\n", secret);
		return 0;
	}
	if (!(argc == 5 && strcmp(argv[1], "sign") == 0) &&
	    !(argc == 8 && strcmp(argv[1], "verify") == 0)) {
		fprintf(stderr, "usage: webhook_tool sign|verify|secret ...\n");
		return 2;
	}
	if ((body = slurp(&len)) == NULL)
		return 1;
	if (argc == 5) {
		rc = idem_webhook_sign(argv[2], argv[3], strtoll(argv[4], NULL,
		    10), body, len, out, sizeof(out));
		if (rc == 0)
			printf("%s\n", out);
	} else {
		v = idem_webhook_verify(argv[2], argv[3], argv[4], argv[5],
		    body, len, strtoll(argv[6], NULL, 10),
		    strtoll(argv[7], NULL, 10));
		printf("%s\n", idem_webhook_verdict_name(v));
		rc = v == IDEM_WEBHOOK_OK ? 0 : -1;
	}
	free(body);
	return rc == 0 ? 0 : 1;
}
