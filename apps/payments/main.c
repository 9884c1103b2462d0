/*
 * main.c - payments.fcgi: the sample payments API on libidem.
 */
#include <idem.h>

#include "payments.h"

int
main(int argc, char *argv[])
{
	idem_app	*app;
	int		 rc;

	if ((app = idem_app_new("payments")) == NULL)
		return 1;
	idem_app_config_key(app, "payments", "acquirer_url");
	idem_app_config_key(app, "payments", "bench_routes");
	idem_app_route(app, "POST", "/v1/payments", IDEM_ROUTE_IDEMPOTENT,
	    payments_create, NULL);
	idem_app_route(app, "GET", "/v1/payments", 0, payments_list, NULL);
	idem_app_route(app, "GET", "/v1/payments/:id", 0, payments_get, NULL);
	idem_app_route(app, "POST", "/v1/payments/:id/refunds",
	    IDEM_ROUTE_IDEMPOTENT, refunds_create, NULL);
	idem_app_route(app, "GET", "/healthz", IDEM_ROUTE_PUBLIC, healthz,
	    NULL);
	/*
	 * The benchmark's reference: the same handler with the middleware
	 * off.  Routes are fixed before the config is read, so the handler
	 * itself refuses unless [payments] bench_routes = on.
	 */
	idem_app_route(app, "POST", "/bench/payments-plain", IDEM_ROUTE_JSON,
	    payments_create_plain, NULL);
	rc = idem_app_main(app, argc, argv);
	idem_app_free(app);
	return rc;
}
