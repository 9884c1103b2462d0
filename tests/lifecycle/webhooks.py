"""webhooks.py - the outbox through a PostgreSQL restart: a delivery held
in flight by the receiver (tests/lib/webhook_receiver.py, on loopback; the
lifecycle configs have [webhooks] allow_private = on) while the server is
restarted, every session cut.  The dispatcher cannot record the 2xx it
then gets, so it delivers again once the database is back: nothing is
lost, the same webhook-id comes again, and a receiver deduplicating on it
applies the event once.  Run through the "main" fixture (lighttpd and the
phased payments.fcgi)."""

from harness import check
from lcenv import subscribed_tenant, tenant_payment, wait_until
from webhook_receiver import Receiver

DEADLINE = 30


@check("webhooks: PostgreSQL restarted while a payment.succeeded delivery "
       "is in flight -> delivered after the restart, the same webhook-id, "
       "applied once; the event's delivery recorded delivered",
       needs=("pg_restart",))
def _(t):
    env = t.env
    rcv = Receiver()
    ep = None
    try:
        tenant, ep = subscribed_tenant(t, rcv.url, "wh")
        rcv.hold()
        pid = tenant_payment(t, tenant, "wh")
        wait_until(lambda: rcv.waiting == 1, DEADLINE,
                   "the delivery arrived and is held")
        wid = env.db.scalar("select event_id from idem_events where "
                            "api_key_id = %d" % tenant.id)
        env.pg_restart()
        rcv.release()
        env.fx["main"].wait_ready()
        wait_until(lambda: env.db.scalar(
            "select d.state from idem_deliveries d join idem_events e on "
            "e.id = d.event where e.api_key_id = %d" % tenant.id)
            == "delivered", DEADLINE, "the delivery recorded delivered")
        got = rcv.of_object(pid, "payment.succeeded")
        t.expect(got, "no delivery of %s" % pid)
        t.expect_eq({d.id for d in got}, {wid}, "webhook-ids delivered")
        t.expect_eq(rcv.applied_ids(), [wid], "events applied")
        t.expect_eq(env.db.int("select count(*) from idem_events where "
                               "api_key_id = %d" % tenant.id), 1,
                    "the tenant's events")
        t.note("%d attempt(s) reached the receiver" % len(got))
    finally:
        rcv.release()
        if ep is not None:
            t.request("DELETE", "/v1/webhook_endpoints/%s" % ep["id"],
                      token=tenant.secret)
        rcv.stop()
