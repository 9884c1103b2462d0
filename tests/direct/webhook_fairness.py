#!/usr/bin/env python3
"""webhook_fairness.py - one tenant's dead endpoints do not delay another
tenant's webhooks (issue 36, item 1).  A payments.fcgi of its own on a
socket (its dispatcher thread: [webhooks] concurrency at its default, 8),
a database of its own in the suite's cluster, receivers on loopback
(tests/lib/webhook_receiver.py; [webhooks] allow_private = on here):

- tenant A registers 10 endpoints on a receiver that holds every request
  (a tarpit: the connection stays open until the dispatcher's timeout,
  2 s); A's one payment fans out to all 10;
- A's calls in flight reach its share (half of concurrency while A alone
  has work: the other half kept free for a tenant whose work comes next)
  and go no further;
- tenant B's payment, made while A's calls hold their slots, is delivered
  within 1 s (the dispatcher before issue 36 called one endpoint after
  the other: B waited for each of A's ten timeouts, 20 s).

Every wait is for a condition with a deadline.  Prints TAP.  Usage:
  webhook_fairness.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import (run_main, App, api_key, fresh_db, remove_tmp,  # noqa: E402
                    conf_text, done, check,
                    run_args, wait_for, write)
from webhook_receiver import Receiver  # noqa: E402

DB = "idem_webhook_fairness"
TIMEOUT_S = 2
ENDPOINTS_A = 10
SHARE_A = 4         # ceil(8 / (1 tenant + 1)), lib/pure/delivery.c
# Long enough to see what the old dispatcher did (10 x 2 s), short enough
# for the suite.
B_WAIT = 25
WEBHOOKS = ("[webhooks]\nallow_private = on\ninterval = 100ms\n"
            "timeout = %ds\nbackoff = 30s\nbackoff_max = 60s\n" % TIMEOUT_S)


def post(app, secret, uri, doc, key):
    st, raw = app.request(secret, "POST", uri, json.dumps(doc).encode(),
                          key=key)
    _, _, body = raw.partition(b"\r\n\r\n")
    return st, (json.loads(body) if body.strip() else {})


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-fairness.")
    tarpit, fast = Receiver(), Receiver()
    app = db = None
    try:
        db = fresh_db(a, DB)
        conf = os.path.join(tmp, "app.ini")
        write(conf, conf_text(a.pghost, a.pgport, db.name, WEBHOOKS))
        sa = api_key(a.builddir, a.srcdir, conf, "tenant-a")
        sb = api_key(a.builddir, a.srcdir, conf, "tenant-b")
        app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                  os.path.join(tmp, "app.log"))
        made = [post(app, sa, "/v1/webhook_endpoints", {
            "url": "%s?n=%d" % (tarpit.url, i),
            "events": ["payment.succeeded"]}, "ep-a-%d" % i)[0]
            for i in range(ENDPOINTS_A)]
        made.append(post(app, sb, "/v1/webhook_endpoints", {
            "url": fast.url, "events": ["payment.succeeded"]}, "ep-b")[0])
        check.expect(all(s.startswith("Status: 201") for s in made),
           "tenant A registers %d endpoints, tenant B one" % ENDPOINTS_A,
           made)

        tarpit.hold()
        st, _ = post(app, sa, "/v1/payments", {"amount": 100,
                                               "currency": "eur"}, "pay-a")
        check.expect(st.startswith("Status: 201") and wait_for(
            lambda: tarpit.waiting >= SHARE_A, 10, step=0.01),
           "A's payment: its deliveries held by the tarpit", st)

        st, pay = post(app, sb, "/v1/payments", {"amount": 200,
                                                 "currency": "eur"}, "pay-b")
        t0 = time.monotonic()
        most = tarpit.waiting
        while not fast.got() and time.monotonic() - t0 < B_WAIT:
            most = max(most, tarpit.waiting)
            time.sleep(0.01)
        got = fast.got()
        took = got[0].at - t0 if got else None
        check.expect(st.startswith("Status: 201") and took is not None and took < 1.0,
           "B's delivery arrived %s after its 201, beside A's tarpit (%d "
           "endpoints holding until the %d s timeout)" % (
               "in %.2f s" % took if took is not None else
               "not within %d s" % B_WAIT, ENDPOINTS_A, TIMEOUT_S), got)
        check.expect(got and got[0].json()["data"]["id"] == pay.get("id"),
           "it is B's payment.succeeded", got)
        check.expect(most == SHARE_A, "A's calls in flight meanwhile: %d, its share "
           "of concurrency 8 while it alone had work (%d)" % (most, SHARE_A))
    finally:
        tarpit.release()
        if app is not None:
            app.stop()
        tarpit.stop()
        fast.stop()
        remove_tmp(tmp, db)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
