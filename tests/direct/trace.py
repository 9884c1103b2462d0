#!/usr/bin/env python3
"""trace.py - W3C Trace Context through the sample: a payments.fcgi of its
own on a socket, a database of its own, the acquirer simulator
(tests/acquirer) and a webhook receiver (tests/lib/webhook_receiver.py):

- a create sent with a traceparent: the acquirer's charge call and the
  payment.succeeded delivery each carry a traceparent with the client's
  trace id, a span id of their own (not the client's), the client's
  flags; the request's access line has "trace_id" the client's, and
  the stored event keeps it (idemctl events show);
- the acquirer failing once: the handler's warning and the access line
  of that request both carry the client's trace id;
- a create with an invalid traceparent (uppercase hex): a fresh trace,
  valid and not the one sent, is the one the acquirer and the logs see.

Every wait is for a condition with a deadline.  Prints TAP.  Usage:
  trace.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_main, run_args, DEADLINE, WEBHOOKS  # noqa: E402
from direct import App, acquirer, api_key, body_of, check  # noqa: E402
from direct import conf_text, done, fresh_db, wait_for, write  # noqa: E402
from webhook_receiver import Receiver  # noqa: E402

TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACE3 = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "b7ad6b7169203331"
TP = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def parts(tp):
    """(trace id, span id, flags) of a version 00 traceparent, or None."""
    m = TP.match(tp or "")
    return m.groups() if m else None


def charge_tp(acq, reference):
    """The traceparent of the acquirer's call for this payment."""
    recs = acq.by_reference(reference)
    return recs[0][1].get("traceparent") if len(recs) == 1 else None


def request_lines(app, request_id):
    """The log lines of the request whose access line has request_id."""
    return [ln for ln in app.log_lines() if ln.get("request_id") ==
            request_id]


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-trace.")
    db = fresh_db(a, "idem_trace")
    rcv = Receiver()
    acq = acquirer(tmp)
    app = None
    try:
        conf = os.path.join(tmp, "app.ini")
        write(conf, conf_text(a.pghost, a.pgport, db.name,
                              "[payments]\nacquirer_url = %s\n%s"
                              % (acq.url, WEBHOOKS)))
        secret = api_key(a.builddir, a.srcdir, conf, "trace")
        app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                  os.path.join(tmp, "app.log"))

        def post(uri, doc, key, tp):
            return app.request(secret, "POST", uri, json.dumps(doc).encode(),
                               key=key, headers={"traceparent": tp})

        st, raw = post("/v1/webhook_endpoints", {
            "url": rcv.url, "events": ["payment.succeeded"]}, "ep-1",
            "00-%s-%s-01" % ("1" * 32, "2" * 16))
        check.expect(st.startswith("Status: 201"), "an endpoint registered", raw[:300])

        sent = "00-%s-%s-01" % (TRACE, PARENT)
        st, raw = post("/v1/payments", {"amount": 700, "currency": "eur"},
                       "tr-1", sent)
        pay = body_of(raw) or {}
        check.expect(st.startswith("Status: 201"), "a create with a traceparent: 201",
           raw[:300])
        got = parts(charge_tp(acq, pay.get("id")))
        check.expect(got is not None and got[0] == TRACE and got[1] != PARENT and
           got[2] == "01", "the acquirer's call carries the client's trace "
           "id, a span id of its own, the client's flags", got)
        dl = wait_for(lambda: [d for d in rcv.got()
                               if d.json()["type"] == "payment.succeeded"],
                      DEADLINE)
        wt = parts(dl[0].headers.get("traceparent")) if dl else None
        check.expect(wt is not None and wt[0] == TRACE and wt[1] not in
           (PARENT, got and got[1]),
           "the payment.succeeded delivery carries the client's trace id, "
           "a span id of its own", dl and dl[0].headers)
        show = subprocess.run(
            [os.path.join(a.builddir, "apps/idemctl/idemctl"), "-c", conf,
             "events", "show", dl[0].id if dl else "-"],
            capture_output=True, text=True, timeout=60).stdout
        m = re.search(r"(?m)^traceparent +(\S+)$", show)
        check.expect(m and m.group(1) == dl[0].headers.get("traceparent"),
           "the stored event keeps the trace: idemctl events show prints "
           "the traceparent its delivery sent", show)
        access = wait_for(lambda: [
            ln for ln in app.log_lines() if ln.get("msg") == "request" and
            ln.get("route") == "/v1/payments" and ln.get("method") ==
            "POST"], DEADLINE)
        lines = request_lines(app, access[0]["request_id"]) if access else []
        check.expect(len(lines) == 1 and lines[0].get("trace_id") == TRACE,
           "the request's access line has the client's trace_id", lines)

        # The acquirer fails once: the handler's own line, under the
        # client's trace too.
        acq.control("fail", 1)
        sent3 = "00-%s-%s-00" % (TRACE3, PARENT)
        st, raw = post("/v1/payments", {"amount": 900, "currency": "eur"},
                       "tr-3", sent3)
        warn = wait_for(lambda: [ln for ln in app.log_lines() if
                                 ln.get("msg", "").startswith("acquirer:")],
                        DEADLINE)
        # The access line follows within the log's flush interval.
        rid = warn[0]["request_id"] if warn else None
        wait_for(lambda: len(request_lines(app, rid)) == 2, DEADLINE)
        lines = request_lines(app, rid)
        check.expect(st.startswith("Status: 503") and len(lines) == 2 and
           all(ln.get("trace_id") == TRACE3 for ln in lines),
           "the acquirer failing: the handler's warning and the access "
           "line both have the client's trace_id", (st, lines))

        bad = "00-%s-%s-01" % (TRACE.upper(), PARENT)
        st, raw = post("/v1/payments", {"amount": 800, "currency": "eur"},
                       "tr-2", bad)
        pay2 = body_of(raw) or {}
        got2 = parts(charge_tp(acq, pay2.get("id")))
        check.expect(st.startswith("Status: 201") and got2 is not None and
           got2[0] not in (TRACE, TRACE.upper()),
           "an invalid traceparent (uppercase hex): the acquirer sees a "
           "fresh, valid trace", (st, got2))
        access = wait_for(lambda: [
            ln for ln in app.log_lines() if ln.get("msg") == "request" and
            ln.get("route") == "/v1/payments" and
            ln.get("trace_id") not in (None, TRACE, TRACE3)], DEADLINE)
        check.expect(access and got2 is not None and
           access[0]["trace_id"] == got2[0],
           "... and it is the request's trace_id in the logs", access)
    finally:
        if app is not None:
            app.stop()
        acq.stop()
        rcv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
