/*
 * main.c - payments.fcgi: the sample payments API on libidem.
 */
#include <stdio.h>
#include <string.h>

#include <idem.h>

#include "payments.h"

/* A benchmark's route: the create's handler, body and answer at path. */
static void
bench_route(idem_app *app, const char *path, unsigned kind, void *arg,
    const char *opid, const char *summary)
{
	idem_app_route(app, "POST", path, kind, payments_create, arg);
	idem_app_route_body(app, "POST", path, &payment_body);
	idem_app_route_response(app, "POST", path, payment_created);
	idem_app_route_summary(app, "POST", path, opid, summary);
}

/* Print why a setup call refused (idem_app_error()), free app: 1. */
static int
setup_refused(idem_app *app)
{
	fprintf(stderr, "payments.fcgi: %s\n", idem_app_error(app));
	idem_app_free(app);
	return 1;
}

int
main(int argc, char *argv[])
{
	static const char *const declined[] = { "payment-declined", NULL };
	idem_app	*app;
	const char	*acquirer, *bench;
	int		 rc;

	if ((app = idem_app_new("payments")) == NULL)
		return 1;
	idem_app_config_key(app, "payments", "acquirer_url");
	idem_app_config_key(app, "payments", "bench_routes");
	idem_app_config_key_type(app, "payments", "acquirer_timeout",
	    IDEM_CONFIG_DURATION);
	/* The sample's own problem type: the card was declined. */
	if ((payments_p_declined = idem_app_problem(app, "payment-declined",
	    402, "Payment declined", "The card was declined; the answer is "
	    "stored for this key.")) == -1)
		return setup_refused(app);
	if ((rc = idem_app_init(app, argc, argv)) != 0) {
		idem_app_free(app);
		return rc;
	}
	/* The longest one acquirer call may take (default 5s). */
	(void)idem_app_config_duration_ms(app, "payments", "acquirer_timeout",
	    &payments_acquirer_timeout_ms);
	/* With an acquirer the create has an external effect: phases. */
	acquirer = idem_app_config(app, "payments", "acquirer_url");
	if (acquirer != NULL)
		idem_app_route(app, "POST", "/v1/payments",
		    IDEM_ROUTE_IDEMPOTENT | IDEM_ROUTE_PHASED,
		    payments_create_phased, (void *)acquirer);
	else
		idem_app_route(app, "POST", "/v1/payments",
		    IDEM_ROUTE_IDEMPOTENT, payments_create, NULL);
	idem_app_route_body(app, "POST", "/v1/payments", &payment_body);
	idem_app_route_response(app, "POST", "/v1/payments", payment_created);
	idem_app_route_summary(app, "POST", "/v1/payments", "createPayment",
	    "Create a payment");
	/* Only the acquirer declines a card. */
	if (acquirer != NULL)
		idem_app_route_problems(app, "POST", "/v1/payments",
		    declined);
	idem_app_route(app, "GET", "/v1/payments", 0, payments_list, NULL);
	idem_app_route_query(app, "GET", "/v1/payments", list_params);
	idem_app_route_response(app, "GET", "/v1/payments", payment_page);
	idem_app_route_summary(app, "GET", "/v1/payments", "listPayments",
	    "List payments, newest first");
	idem_app_route(app, "GET", "/v1/payments/:id", 0, payments_get, NULL);
	idem_app_route_response(app, "GET", "/v1/payments/:id", payment_read);
	idem_app_route_summary(app, "GET", "/v1/payments/:id", "getPayment",
	    "Read a payment");
	idem_app_route(app, "POST", "/v1/payments/:id/refunds",
	    IDEM_ROUTE_IDEMPOTENT, refunds_create, NULL);
	idem_app_route_body(app, "POST", "/v1/payments/:id/refunds",
	    &refund_body);
	idem_app_route_response(app, "POST", "/v1/payments/:id/refunds",
	    refund_created);
	idem_app_route_summary(app, "POST", "/v1/payments/:id/refunds",
	    "createRefund", "Refund a payment, in full or in part");
	/* Webhooks: the events the sample sends, then the library's routes
	 * where a tenant's events go (for those types). */
	idem_app_webhook(app, PAYMENTS_EV_SUCCEEDED, "A payment succeeded",
	    &payment_view);
	idem_app_webhook(app, PAYMENTS_EV_FAILED, "A payment failed (the "
	    "card was declined)", &payment_view);
	idem_app_webhook(app, PAYMENTS_EV_REFUNDED, "A refund was created",
	    &refund_view);
	idem_app_webhook(app, PAYMENTS_EV_DISPUTED, "A payment was disputed "
	    "(the acquirer's event)", &payment_view);
	/* The acquirer's events, signed ([inbox "acquirer"]): exactly once
	 * per message id, remembered 7 days (its retries last 3). */
	idem_app_inbox(app, "/v1/acquirer/events", "acquirer",
	    &acquirer_event_body, 0, acquirer_events, NULL);
	idem_app_route_response(app, "POST", "/v1/acquirer/events",
	    acquirer_event_received);
	idem_app_route_summary(app, "POST", "/v1/acquirer/events",
	    "receiveAcquirerEvent", "Receive an event of the acquirer "
	    "(signed; no API key)");
	if (idem_app_webhook_routes(app, "/v1/webhook_endpoints") == -1) {
		idem_app_free(app);
		return 1;
	}
	idem_app_route(app, "GET", "/healthz", IDEM_ROUTE_PUBLIC, healthz,
	    NULL);
	idem_app_route_response(app, "GET", "/healthz", health);
	idem_app_route_summary(app, "GET", "/healthz", "getHealth",
	    "Whether the database answers");
	/* The benchmark's reference: the same handler, no middleware. */
	bench = idem_app_config(app, "payments", "bench_routes");
	if (bench != NULL && strcmp(bench, "on") == 0) {
		bench_route(app, "/bench/payments-plain", IDEM_ROUTE_JSON,
		    NULL, "createPaymentPlain", "Create a payment without "
		    "the middleware (the benchmark's reference)");
		/* The create with the middleware and without its event: the
		 * reference of the outbox's cost. */
		bench_route(app, "/bench/payments-noevent",
		    IDEM_ROUTE_IDEMPOTENT, &payments_no_event,
		    "createPaymentNoEvent", "Create a payment without its "
		    "payment.succeeded event (the benchmark's reference)");
		/* POST /v1/payments again, under a path of its own, so that a
		 * config can give it [route] remember alone: the cost of
		 * remember, against POST /v1/payments in the same run. */
		bench_route(app, "/bench/payments-remember",
		    IDEM_ROUTE_IDEMPOTENT, NULL, "createPaymentRemember",
		    "Create a payment on a route that may remember its keys "
		    "(the benchmark's)");
	}
	/* A declaration refused above (a pattern mistyped, a route twice):
	 * the program does not start, and says which and why. */
	if (idem_app_error(app)[0] != '\0')
		return setup_refused(app);
	rc = idem_app_run(app);
	idem_app_free(app);
	return rc;
}
