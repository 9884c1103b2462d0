#!/usr/bin/env python3
"""webhooks.py - the sample's events on the phased create (an acquirer
configured: tests/acquirer/acquirer.py), and a crash between the commit and
the delivery.  A payments.fcgi of its own on a socket, a database of its
own in the suite's cluster, a receiver on loopback
(tests/lib/webhook_receiver.py; [webhooks] allow_private = on here):

- an approved card: one payment.succeeded, its data the payment as GET
  shows it (status succeeded), enqueued in the phase that records the
  outcome;
- a declined card: 402 payment-declined stored, and one payment.failed, its
  data the failed payment;
- kill -9 of the app after the commit, before the delivery (the receiver
  is down then): a new process delivers the event, once, with its id.

Every wait is for a condition with a deadline.  Prints TAP.  Usage:
  webhooks.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import json
import os
import re
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import remove_tmp, run_args, run_main, DEADLINE, WEBHOOKS  # noqa: E402
from direct import App, acquirer, api_key, body_of, check  # noqa: E402
from direct import conf_text, done, fresh_db, wait_for, write  # noqa: E402
from webhook_receiver import Receiver, verify  # noqa: E402

# The dispatcher's retries (direct.WEBHOOKS), one delivery a batch.  The
# kill -9 may land while the delivery is taken for an attempt: it is then
# due again once the batch's hold lapses (batch x (timeout + 1 s) + 5 s),
# 8 s here, well inside DEADLINE (115 s with the defaults).
BATCH_1 = "batch = 1\n"


class Run:
    def __init__(self, a, tmp):
        self.a = a
        self.tmp = tmp
        self.db = fresh_db(a, "idem_webhooks")
        self.acq = acquirer(tmp)
        self.conf = os.path.join(tmp, "app.ini")
        write(self.conf, conf_text(
            a.pghost, a.pgport, self.db.name,
            "[payments]\nacquirer_url = %s\n%s"
            % (self.acq.url, WEBHOOKS + BATCH_1)))
        self.secret = api_key(a.builddir, a.srcdir, self.conf, "webhooks")
        self.sock = os.path.join(tmp, "app.sock")
        self.n = 0
        self.app = self.start()

    def start(self):
        self.n += 1
        return App(self.a.builddir, self.conf, self.sock,
                   os.path.join(self.tmp, "app%d.log" % self.n))

    def post(self, uri, doc, key):
        return self.app.request(self.secret, "POST", uri,
                                json.dumps(doc).encode(), key=key)

    def get(self, uri):
        return self.app.request(self.secret, "GET", uri)

    def events(self):
        out = self.db.sql("SELECT coalesce(json_agg(json_build_object("
                          "'type', type, 'id', event_id) ORDER BY id), "
                          "'[]') FROM idem_events")
        return json.loads(out)

    def delivery(self, event_id):
        """The state, attempts and last status of event_id's deliveries."""
        return self.db.sql("SELECT string_agg(d.state || ' ' || d.attempts "
                           "|| ' ' || coalesce(d.last_status::text, '-'), "
                           "',') FROM idem_deliveries d JOIN idem_events e "
                           "ON e.id = d.event WHERE e.event_id = '%s'"
                           % event_id)

    def settled(self, rcv, obj_id, etype):
        """Wait for obj_id's etype event to arrive and its delivery to be
        recorded delivered (the dispatcher is done with it), then return
        its 2xx arrivals: a redelivery after the recorded 2xx, or a
        second send, would be counted."""
        got = wait_for(lambda: delivered(rcv, obj_id, etype), DEADLINE)
        if got:
            wait_for(lambda: self.delivery(got[0].id).startswith(
                "delivered "), DEADLINE)
        return delivered(rcv, obj_id, etype)

    def stop(self):
        if self.app is not None:
            self.app.stop()
        self.acq.stop()


def delivered(rcv, obj_id, etype):
    return [d for d in rcv.of_object(obj_id, etype) if 200 <= d.status < 300]


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-webhooks.")
    rcv = Receiver()
    r = None
    try:
        r = Run(a, tmp)
        st, raw = r.post("/v1/webhook_endpoints", {
            "url": rcv.url, "events": ["payment.succeeded",
                                       "payment.failed"]}, key="ep-1")
        ep = body_of(raw) or {}
        check.expect(st.startswith("Status: 201") and ep.get("secret", "")
                     .startswith("whsec_"), "POST /v1/webhook_endpoints -> 201 with "
                     "a secret", raw[:300])

        # An approved card: the outcome's phase enqueues payment.succeeded.
        st, raw = r.post("/v1/payments", {"amount": 1200, "currency": "eur"},
                         key="ok-1")
        pay = body_of(raw) or {}
        check.expect(st.startswith("Status: 201") and pay.get("status") ==
                     "succeeded", "an approved card: 201 succeeded", raw[:300])
        got = r.settled(rcv, pay.get("id"), "payment.succeeded")
        _, graw = r.get("/v1/payments/%s" % pay.get("id"))
        check.expect(len(got) == 1 and r.delivery(got[0].id) == "delivered 1 204" and
                     got[0].json()["data"] == body_of(graw) and
                     verify(ep.get("secret", ""), got[0].id, got[0].timestamp,
                            got[0].signature, got[0].body) is None,
                     "its payment.succeeded delivered once, signed, data = GET "
                     "(status succeeded)", got)

        # A declined card: 402 stored, payment.failed with the payment.
        r.acq.control("decline")
        st, raw = r.post("/v1/payments", {"amount": 1300, "currency": "eur"},
                         key="no-1")
        prob = body_of(raw) or {}
        check.expect(st.startswith("Status: 402") and
                     prob.get("type", "").endswith("/payment-declined"),
                     "a declined card: 402 payment-declined", raw[:300])
        failed = r.db.sql("SELECT id FROM payments WHERE status = 'failed'")
        got = r.settled(rcv, failed, "payment.failed")
        _, graw = r.get("/v1/payments/%s" % failed)
        data = got[0].json()["data"] if got else None
        check.expect(len(got) == 1 and r.delivery(got[0].id) == "delivered 1 204" and
                     data == body_of(graw) and
                     data["status"] == "failed", "its payment.failed delivered once, "
                     "data = GET (status failed)", got)
        # Replays of both: nothing more committed.
        st1, _ = r.post("/v1/payments", {"amount": 1200, "currency": "eur"},
                        key="ok-1")
        st2, _ = r.post("/v1/payments", {"amount": 1300, "currency": "eur"},
                        key="no-1")
        ev = r.events()
        check.expect(st1.startswith("Status: 201") and st2.startswith("Status: 402")
                     and [e["type"] for e in ev] == ["payment.succeeded",
                                                     "payment.failed"],
                     "replays of both enqueue nothing: two events in all", ev)

        # kill -9 after the commit, before the delivery.
        r.acq.control("approve")
        rcv.stop()
        st, raw = r.post("/v1/payments", {"amount": 1400, "currency": "eur"},
                         key="crash-1")
        pay = body_of(raw) or {}
        ev = wait_for(lambda: [e for e in r.events()
                               if e["type"] == "payment.succeeded"][1:],
                      DEADLINE)
        check.expect(st.startswith("Status: 201") and ev, "a payment committed while "
                     "the receiver is down: its event is in the outbox", ev)
        wid = ev[0]["id"] if ev else None
        r.app.proc.send_signal(signal.SIGKILL)
        r.app.proc.wait(10)
        r.app = None
        # The receiver is down: nothing can arrive, so the row says
        # whether an attempt counted as delivered.
        st = r.delivery(wid)
        check.expect(st is not None and re.fullmatch(r"pending \d+ -", st),
                     "before the kill -9 its delivery is pending, no answer recorded",
                     st)
        rcv.start()
        r.app = r.start()
        got = r.settled(rcv, pay.get("id"), "payment.succeeded")
        check.expect(len(got) == 1 and got[0].id == wid and
                     r.delivery(wid).startswith("delivered "), "after kill -9 and a "
                     "new process: delivered once (recorded), with the event's id",
                     (got, r.delivery(wid)))
    finally:
        rcv.stop()
        if r is not None:
            r.stop()
        remove_tmp(tmp)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
