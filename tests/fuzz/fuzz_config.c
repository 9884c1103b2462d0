/*
 * fuzz_config.c - libFuzzer harness for the INI config parser
 * (idem_cfg_init, idem_cfg_allow, idem_cfg_parse, idem_cfg_free in
 * lib/format/config.c).
 *
 * The input is the text of a config file (an exact-size heap copy, so a
 * read beyond len is caught).  It is parsed as payments.fcgi would (the
 * application keys of apps/payments/main.c and one more section), and
 * everything is freed again: LeakSanitizer reports whatever is not.
 * Properties (abort() on violation):
 *   - an error message is non-empty and starts with "NAME:" (the name
 *     given to idem_cfg_parse);
 *   - with a small error buffer the result is the same and the message is
 *     the start of the full one, cut to the buffer;
 *   - a text accepted without any_app_keys is accepted with it too;
 *   - after success every route has a method and a path, and the getters
 *     work.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "fuzz.h"

#define NAME	"fuzz.ini"

static void
fail(const char *what, const char *err)
{
	fuzz_fail("fuzz_config", what, "error", err);
}

static void
setup(struct idem_cfg *cfg, int any_app_keys)
{
	idem_cfg_init(cfg);
	if (idem_cfg_allow(cfg, "payments", "acquirer_url") == -1 ||
	    idem_cfg_allow(cfg, "payments", "bench_routes") == -1 ||
	    idem_cfg_allow(cfg, "payments", "acquirer_url") == -1 ||
	    idem_cfg_allow(cfg, "ledger", "url") == -1)
		abort();
	/* Built-in sections are never application sections. */
	if (idem_cfg_allow(cfg, "server", "threads") != -1)
		fail("idem_cfg_allow accepts a built-in section", NULL);
	cfg->any_app_keys = any_app_keys;
}

static int
parse(const uint8_t *data, size_t size, int any_app_keys, char *err,
    size_t errlen, int check)
{
	struct idem_cfg			 cfg;
	const struct idem_cfg_route	*r;
	char				*text;
	int				 rc;

	setup(&cfg, any_app_keys);
	text = fuzz_copy(data, size);
	rc = idem_cfg_parse(&cfg, NAME, text, size, err, errlen);
	free(text);
	if (rc != 0 && rc != -1)
		fail("result neither 0 nor -1", NULL);
	if (check && rc == 0) {
		for (r = cfg.routes; r != NULL; r = r->next) {
			if (r->method == NULL || r->path == NULL)
				fail("a route without method or path", NULL);
			(void)idem_cfg_route_ttl(&cfg, r->method, r->path);
		}
		(void)idem_cfg_route_ttl(&cfg, "POST", "/v1/payments");
		(void)idem_cfg_app_get(&cfg, "payments", "acquirer_url");
		(void)idem_cfg_app_get(&cfg, "ledger", "url");
		if (idem_cfg_app_get(&cfg, "nosuch", "key") != NULL)
			fail("a value for a key never allowed", NULL);
		if (cfg.log_level == NULL || cfg.metrics_allow == NULL)
			fail("log_level or metrics_allow lost", NULL);
	}
	idem_cfg_free(&cfg);
	return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	 err[512], *small;
	size_t	 smalllen, n, want;
	int	 rc, rc2;

	memset(err, 'x', sizeof(err));
	rc = parse(data, size, 0, err, sizeof(err), 1);
	if (memchr(err, '\0', sizeof(err)) == NULL)
		fail("error message not NUL-terminated", NULL);
	if (rc == -1) {
		if (strncmp(err, NAME ":", strlen(NAME ":")) != 0)
			fail("error message does not start with the name",
			    err);
		if (strlen(err) <= strlen(NAME ":"))
			fail("error message says nothing", err);
	}

	/* The same with an error buffer of 1..32 bytes. */
	smalllen = 1 + size % 32;
	if ((small = malloc(smalllen)) == NULL)
		abort();
	memset(small, 'x', smalllen);
	rc2 = parse(data, size, 0, small, smalllen, 0);
	if (rc2 != rc)
		fail("the size of the error buffer changes the result", NULL);
	if (memchr(small, '\0', smalllen) == NULL)
		fail("small error message not NUL-terminated", NULL);
	n = strlen(small);
	want = rc == -1 ? strlen(err) : 0;
	if (want > smalllen - 1)
		want = smalllen - 1;
	if (n != want || strncmp(small, err, n) != 0)
		fail("small error message is not the start of the full one",
		    small);
	free(small);

	/* any_app_keys only loosens. */
	if (parse(data, size, 1, err, sizeof(err), 1) != 0 && rc == 0)
		fail("any_app_keys refuses what is accepted without it", err);
	return 0;
}
