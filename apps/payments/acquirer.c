/*
 * acquirer.c - the client of the card acquirer: one POST per charge on
 * idem_http(3), carrying our derived Idempotency-Key so that the acquirer
 * answers a repeated call with the same charge instead of a second one.
 */
#include <stdio.h>
#include <string.h>

#include "acquirer.h"

int
acquirer_charge(idem_req *req, const char *url, const char *payment,
    long long amount, const char *currency, long long timeout_ms,
    struct acquirer_result *res)
{
	const char	*idp[] = { "id", NULL }, *stp[] = { "status", NULL };
	idem_http_resp	*resp = NULL;
	idem_http	*h = NULL;
	idem_json	*j;
	yajl_val	 doc, v;
	char		 target[1024];
	size_t		 n;
	int		 rc = -1;

	memset(res, 0, sizeof(*res));
	res->rc = IDEM_HTTP_FAIL;
	/* url may end in a slash: we append /charges. */
	n = strlen(url);
	if (n > 0 && url[n - 1] == '/')
		n--;
	if (n > sizeof(target) - sizeof("/charges") ||
	    snprintf(target, sizeof(target), "%.*s/charges", (int)n, url) < 0)
		return -1;
	if ((j = idem_json_new()) == NULL)
		return -1;
	idem_json_object(j);
	idem_json_kint(j, "amount", amount);
	idem_json_kstr(j, "currency", currency);
	idem_json_kstr(j, "reference", payment);
	idem_json_object_end(j);
	if ((h = idem_http_new("POST", target)) == NULL ||
	    idem_http_json(h, j) == -1 ||
	    idem_http_derived_key(h, req, "Idempotency-Key", "charge") == -1)
		goto out;
	/* Bounded: the phase must end within its deadline (send lowers
	 * this to the request's time left). */
	idem_http_timeout_ms(h, timeout_ms);
	idem_http_max_body(h, 65536);
	res->rc = idem_http_send(h, req, &resp, NULL, 0);
	res->http_status = idem_http_resp_status(resp);
	if (res->rc != IDEM_HTTP_OK || res->http_status != 200 ||
	    (doc = idem_http_resp_json(resp)) == NULL)
		goto out;
	if ((v = yajl_tree_get(doc, idp, yajl_t_string)) == NULL ||
	    strlen(v->u.string) >= sizeof(res->charge))
		goto out;
	snprintf(res->charge, sizeof(res->charge), "%s", v->u.string);
	if ((v = yajl_tree_get(doc, stp, yajl_t_string)) == NULL)
		goto out;
	if (strcmp(v->u.string, "approved") == 0)
		res->approved = 1;
	else if (strcmp(v->u.string, "declined") != 0)
		goto out;
	rc = 0;
out:
	idem_http_resp_free(resp);
	idem_http_free(h);
	idem_json_free(j);
	return rc;
}
