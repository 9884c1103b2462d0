"""inbox.py - a signed source's message through a PostgreSQL restart
between its commit and its answer: the acquirer's payment.disputed
(POST /v1/acquirer/events, [inbox "acquirer"] in the lifecycle configs),
signed by the npm package standardwebhooks, sent through the fixture whose
app holds each answer 6 s after its commit (IDEM_FAULT=stall-after:stored).
The sender gives up waiting, the server is restarted meanwhile, and the
sender's retries (as a provider retries: the same message) get the stored
answer, replayed: the dispute is applied once and the sample's own
payment.disputed delivered once (tests/lib/webhook_receiver.py)."""

import json
import time

from harness import check
from inbox_sender import Signer
from lcenv import (INBOX_SECRET, subscribed_tenant, tenant_payment,
                   wait_until)
from webhook_receiver import Receiver

DEADLINE = 30
SEND_TIMEOUT = 3        # the sender's, below the 6 s stall


@check("inbox: PostgreSQL restarted between a signed message's commit and "
       "its answer -> the sender's retry gets the replay, the payment "
       "disputed once, one payment.disputed delivered",
       needs=("pg_restart", "f-ast"))
def _(t):
    env = t.env
    signer = Signer(env.srcdir)
    why = signer.why_not()
    t.expect(why is None, "the senders cannot run: %s" % why)
    rcv = Receiver()
    try:
        tenant, _ = subscribed_tenant(t, rcv.url, "ib")
        # The sample's endpoint route lists its own types
        # (apps/payments/endpoints.c): subscribed in the database.
        env.db.scalar("update idem_webhook_endpoints set types = "
                      "'{payment.disputed}' where api_key_id = %d "
                      "returning id" % tenant.id)
        pid = tenant_payment(t, tenant, "ib")
        mid = "msg_lc_%s" % env.new_key("ib")
        body = json.dumps({"id": "evt_" + mid, "type": "payment.disputed",
                           "data": {"payment": pid}}).encode()
        heads = list(signer.sign([{
            "scheme": "standard-webhooks", "secret": INBOX_SECRET,
            "id": mid, "ts": int(time.time()), "body": body}])[0].items())
        try:
            r = env.post("/v1/acquirer/events", body, fx="f-ast", token=None,
                         headers=heads, timeout=SEND_TIMEOUT)
            t.fail("the held answer arrived within %d s: %s"
                   % (SEND_TIMEOUT, r.status))
        except OSError:
            pass            # the sender gave up: no answer
        t.expect_eq(env.db.scalar(
            "select k.state from idempotency_keys k join api_keys a on "
            "a.id = k.api_key_id where a.inbox = 'acquirer' and k.key = "
            "'%s'" % mid), "completed", "the message's record, committed "
            "before the answer")
        env.pg_restart()
        env.fx["main"].wait_ready()
        answers = []

        def replayed():
            try:
                r = env.post("/v1/acquirer/events", body, token=None,
                             headers=heads, timeout=10)
            except OSError as e:
                answers.append(type(e).__name__)
                return None
            answers.append(r.status)
            return r.status == 200 and r
        r = wait_until(replayed, DEADLINE, "a 200 for the sender's retry",
                       interval=0.2)
        t.expect_eq(r.header("Idempotent-Replayed"), "true",
                    "the retry's Idempotent-Replayed")
        t.expect_eq(r.json(), {"received": True}, "the replayed answer")
        t.expect_eq(env.db.scalar("select status from payments where id = "
                                  "'%s'" % pid), "disputed", "the payment")
        wait_until(lambda: env.db.scalar(
            "select string_agg(d.state, ',') from idem_deliveries d join "
            "idem_events e on e.id = d.event where e.api_key_id = %d and "
            "e.type = 'payment.disputed'" % tenant.id) == "delivered",
            DEADLINE, "one payment.disputed delivery, delivered")
        got = [d for d in rcv.of_object(pid, "payment.disputed")
               if 200 <= d.status < 300]
        t.expect_eq(len(rcv.applied_ids()), 1, "payment.disputed applied")
        t.note("retries answered %s; %d delivery attempt(s)"
               % (answers, len(got)))
    finally:
        rcv.stop()
