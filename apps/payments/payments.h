/*
 * payments.h - the sample payments application's handlers.
 */
#ifndef PAYMENTS_H
#define PAYMENTS_H

#include <idem.h>

/* The "payment-declined" problem type (402), defined by main(). */
extern int	payments_p_declined;
extern long long	payments_acquirer_timeout_ms;	/* [payments] acquirer_timeout */

/* The events the sample sends (idem_req_enqueue()), and what their data
 * is: the payment or the refund as the API shows it. */
#define PAYMENTS_EV_SUCCEEDED	"payment.succeeded"
#define PAYMENTS_EV_FAILED	"payment.failed"
#define PAYMENTS_EV_REFUNDED	"refund.created"
#define PAYMENTS_EV_DISPUTED	"payment.disputed"

/* A payment's columns as the API shows it. */
#define PAYMENT_COLS "id, 'payment' AS object, amount, currency, status, " \
	"amount_refunded, description, customer, metadata, " \
	"extract(epoch FROM created_at)::bigint AS created"
extern const struct idem_body payment_view, refund_view;

/* The declared bodies of the create and refund routes. */
extern const struct idem_body payment_body, refund_body;
extern const struct idem_param list_params[];
/* What the routes answer, for /openapi.json. */
extern const struct idem_response payment_created[], payment_read[],
	payment_page[], refund_created[], health[];

/* arg: NULL, or &payments_no_event (the benchmark's route that enqueues
 * nothing: the create without its event, tests/bench/run's outbox rows) */
extern int payments_no_event;
int	payments_create(idem_req *req, void *arg);
/* arg: the acquirer URL */
int	payments_create_phased(idem_req *req, void *arg);
int	payments_get(idem_req *req, void *arg);
int	payments_list(idem_req *req, void *arg);
int	refunds_create(idem_req *req, void *arg);
int	healthz(idem_req *req, void *arg);

/* POST /v1/acquirer/events: the acquirer's signed events (disputes.c). */
extern const struct idem_body acquirer_event_body;
extern const struct idem_response acquirer_event_received[];
int	acquirer_events(idem_req *req, void *arg);

#endif
