/*
 * test_defer.c - idem_req_defer() queues a statement whole or not at all:
 * a value that cannot be copied must not become an SQL NULL in the commit
 * flight.  strdup() is wrapped (-Wl,--wrap=strdup) to fail on demand.
 */
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "tap.h"

char	*__real_strdup(const char *);
char	*__wrap_strdup(const char *);

static int	fail_at;	/* the n-th strdup() from now fails; 0: none */

char *
__wrap_strdup(const char *s)
{
	if (fail_at > 0 && --fail_at == 0)
		return NULL;
	return __real_strdup(s);
}

int
main(void)
{
	static const char *const vals[3] = { "pay_1", "charge", "approved" };
	idem_req	 req;
	int		 n;

	memset(&req, 0, sizeof(req));
	req.txn.in_txn = 1;		/* under the middleware: statements queue */

	/* strdup #1 is the SQL text, #2..#4 the values. */
	for (n = 1; n <= 4; n++) {
		fail_at = n;
		TAP_OK(idem_req_defer(&req, "UPDATE t SET a = $2 WHERE id = $1",
		    3, vals) == -1, "copy %d of 4 fails: the call fails", n);
		TAP_OK(req.txn.ndefer == 0, "  and nothing is queued (ndefer %zu)",
		    req.txn.ndefer);
	}
	fail_at = 0;
	TAP_OK(idem_req_defer(&req, "UPDATE t SET a = $2 WHERE id = $1", 3,
	    vals) == 0 && req.txn.ndefer == 1, "no failure: queued once");
	TAP_OK(req.txn.defer[0].n == 3 &&
	    strcmp(req.txn.defer[0].vals[0], "pay_1") ==
	    0 && strcmp(req.txn.defer[0].vals[2], "approved") == 0 &&
	    req.txn.defer[0].vals[3] == NULL, "  with every value copied");
	TAP_OK(idem_req_defer(&req, "x", 65, vals) == -1 && req.txn.ndefer == 1,
	    "more than 64 parameters: refused, nothing queued");
	idem_defer_free(&req);
	TAP_OK(req.txn.ndefer == 0, "freed");
	return TAP_DONE();
}
