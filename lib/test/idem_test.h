/*
 * idem_test.h - libidem_test: run requests through an application's
 * routes in-process, middleware included, against a real PostgreSQL.
 * See idem_test(3).
 */
#ifndef IDEM_TEST_H
#define IDEM_TEST_H

#include <stddef.h>
#include <stdint.h>

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

#ifdef __cplusplus
}
#endif

#endif /* IDEM_TEST_H */
