/*
 * acquirer.h - the card acquirer client of the payments app.
 */
#ifndef ACQUIRER_H
#define ACQUIRER_H

#include <idem.h>

struct acquirer_result {
	enum idem_http_rc rc;		/* what became of the call */
	int	http_status;		/* 0: no answer */
	int	approved;		/* else declined */
	char	charge[128];
};

/*
 * POST url/charges for the payment, under the key derived from req's
 * Idempotency-Key, within timeout_ms and req's time left: 0 with res
 * filled, or -1 (no usable answer; res says why).
 */
int	acquirer_charge(idem_req *req, const char *url, const char *payment,
	    long long amount, const char *currency, long long timeout_ms,
	    struct acquirer_result *res);

#endif
