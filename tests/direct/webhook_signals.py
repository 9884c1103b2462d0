#!/usr/bin/env python3
"""webhook_signals.py - the dispatcher honours what receivers say (issue
36, item 3).  A payments.fcgi of its own (its dispatcher thread), a
database of its own in the suite's cluster, receivers on loopback
(tests/lib/webhook_receiver.py), endpoints and events written with the
library's SQL as tests/direct/outbox.py writes them; all scenarios run at
once, each on its own endpoint:

- 410 Gone: the endpoint is disabled at once (reason gone), its other
  pending deliveries die with that reason, it is called once only and
  gets no new deliveries; the tenant's endpoint subscribed to
  webhook_endpoint.disabled gets that event; the log says so, and
  idem_webhook_endpoints_disabled_total{reason="gone"} counts it;
- 503 with Retry-After: 3 (seconds), and with an HTTP-date 4 s ahead: the
  next attempt comes no sooner (the backoff alone would retry in 0.1 s);
  Retry-After: 3600 is capped by backoff_max (4 s);
- a receiver answering 500 for longer than [webhooks] disable_after (3 s
  here): disabled (reason failing), counted, announced;
- health: a failure sets failing_since (last_success_at still unset), a
  success then sets last_success_at and clears failing_since.

Every wait is for a condition with a deadline.  Prints TAP.  Usage:
  webhook_signals.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import email.utils
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import (run_main, App, api_key, fresh_db, remove_tmp,  # noqa: E402
                    conf_text, done, free_port,
                    check, run_args, scrape, wait_for, write)
from outbox import endpoint, enqueue  # noqa: E402
from webhook_receiver import Receiver  # noqa: E402

WEBHOOKS = ("[webhooks]\nallow_private = on\ninterval = 100ms\n"
            "timeout = 2s\nbackoff = 100ms\nbackoff_max = 4s\n"
            "max_attempts = 1000\ndisable_after = 3s\n")


def wall(d):
    """A delivery's arrival in Unix seconds (Delivery.at is monotonic)."""
    return time.time() - (time.monotonic() - d.at)


def disabled_total(port, reason):
    text = scrape(port)[1]
    m = re.search(r'(?m)^idem_webhook_endpoints_disabled_total\{reason="%s"'
                  r'\} (\d+)$' % reason, text)
    return int(m.group(1)) if m else None


class Run:
    def __init__(self, a, tmp):
        self.db = fresh_db(a, "idem_webhook_signals")
        self.mport = free_port()
        conf = os.path.join(tmp, "app.ini")
        write(conf, conf_text(a.pghost, a.pgport, self.db.name,
                              "[metrics]\nlisten = 127.0.0.1:%d\n%s"
                              % (self.mport, WEBHOOKS)))
        api_key(a.builddir, a.srcdir, conf, "signals")
        self.tenant = self.db.sql("SELECT max(id) FROM api_keys")
        self.app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                       os.path.join(tmp, "app.log"))

    def endpoint(self, rcv, types):
        return endpoint(self.db, self.tenant, rcv.url, types)

    def col(self, ep, expr):
        return self.db.sql("SELECT %s FROM idem_webhook_endpoints WHERE "
                           "id = %s" % (expr, ep))

    def deliveries(self, ep):
        return self.db.sql("SELECT string_agg(state || ' ' || "
                           "coalesce(last_error, '-'), ',' ORDER BY id) "
                           "FROM idem_deliveries WHERE endpoint = %s" % ep)


def disabled_events(watch):
    return [d.json()["data"] for d in watch.got()
            if d.json().get("type") == "webhook_endpoint.disabled"]


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-signals.")
    rc = {k: Receiver() for k in ("gone", "ra3", "date", "cap", "failing",
                                  "health", "watch")}
    r = None
    try:
        r = Run(a, tmp)
        ep = {k: r.endpoint(v, ["t." + k]) for k, v in rc.items()
              if k != "watch"}
        ep["watch"] = r.endpoint(rc["watch"], ["webhook_endpoint.disabled"])
        rc["gone"].status = 410
        for k in ("ra3", "date", "cap"):
            rc[k].status = 503
        rc["ra3"].headers = {"Retry-After": "3"}
        rc["cap"].headers = {"Retry-After": "3600"}
        until = int(time.time()) + 4
        rc["date"].headers = {"Retry-After": email.utils.formatdate(
            until, usegmt=True)}
        rc["failing"].status = 500
        rc["health"].status = 500
        # The 410 endpoint's three at once: pending when it answers.
        r.db.sql("SELECT idem_outbox_enqueue('evt_gone_' || g, %s, "
                 "'t.gone', '{}') FROM generate_series(1, 3) g" % r.tenant)
        for k in ("ra3", "date", "cap", "failing", "health"):
            enqueue(r.db, r.tenant, "t." + k)

        # --- health: first, before disable_after (3 s) disables it ------
        h = ep["health"]
        check.expect(wait_for(lambda: r.col(h, "failing_since IS NOT NULL AND "
                              "last_success_at IS NULL") == "t", 10),
           "a failure sets failing_since; last_success_at stays unset")
        rc["health"].status = None
        check.expect(wait_for(lambda: r.col(h, "failing_since IS NULL AND "
                              "last_success_at IS NOT NULL") == "t", 10),
           "a success sets last_success_at and clears failing_since",
           r.col(h, "failing_since, last_success_at"))

        # --- 410 --------------------------------------------------------
        check.expect(wait_for(lambda: r.col(ep["gone"], "disabled_reason") == "gone",
                    10), "410: the endpoint is disabled, reason gone",
           r.col(ep["gone"], "disabled_reason"))
        check.expect(r.deliveries(ep["gone"]) == "dead HTTP 410,dead endpoint disabled "
           "(gone),dead endpoint disabled (gone)", "410: the delivery "
           "answered dies, the other two pending die with the reason",
           r.deliveries(ep["gone"]))
        check.expect(len(rc["gone"].got()) == 1, "410: the endpoint was called once",
           rc["gone"].got())
        enqueue(r.db, r.tenant, "t.gone")
        check.expect(r.db.sql("SELECT count(*) FROM idem_deliveries WHERE endpoint = "
                    "%s" % ep["gone"]) == "3", "a disabled endpoint gets no "
           "new deliveries")
        check.expect(wait_for(lambda: disabled_total(r.mport, "gone") == 1, 5),
           "idem_webhook_endpoints_disabled_total{reason=\"gone\"} 1",
           disabled_total(r.mport, "gone"))
        check.expect(wait_for(lambda: [e for e in disabled_events(rc["watch"])
                             if e["id"] == int(ep["gone"])], 10) and
           [(e["disabled_reason"], e["enabled"], e["url"]) for e in
            disabled_events(rc["watch"]) if e["id"] == int(ep["gone"])] ==
           [("gone", False, rc["gone"].url)], "the tenant's endpoint "
           "subscribed to webhook_endpoint.disabled gets it, once",
           disabled_events(rc["watch"]))
        logs = [x for x in r.app.log_lines()
                if re.search(r"webhook endpoint \d+ .*disabled \(gone",
                             x.get("msg", ""))]
        check.expect(len(logs) == 1 and logs[0].get("level") == "warn",
           "the log says it, once, as a warning", logs)

        # --- Retry-After --------------------------------------------------
        for k in ("ra3", "date", "cap"):
            wait_for(lambda: rc[k].got(), 10)
            rc[k].status = None
        for k in ("ra3", "date", "cap"):
            check.expect(wait_for(lambda: r.deliveries(ep[k]) == "delivered -", 10),
               "503 with Retry-After (%s): delivered at the next attempt"
               % rc[k].headers["Retry-After"], r.deliveries(ep[k]))
        g = rc["ra3"].got()
        gap = g[1].at - g[0].at if len(g) == 2 else None
        check.expect(gap is not None and 3.0 <= gap < 3.0 + 1.5, "Retry-After: 3: "
           "the next attempt %s s later (>= 3; the backoff alone: 0.1)" %
           ("%.2f" % gap if gap is not None else "never"))
        g = rc["date"].got()
        check.expect(len(g) == 2 and wall(g[1]) >= until, "Retry-After as an "
           "HTTP-date: the next attempt %s s after it (no sooner)" %
           ("%.2f" % (wall(g[1]) - until) if len(g) == 2 else "never"))
        g = rc["cap"].got()
        gap = g[1].at - g[0].at if len(g) == 2 else None
        check.expect(gap is not None and 4.0 - 0.1 <= gap < 4.0 + 1.5,
           "Retry-After: 3600 capped by backoff_max (4s): %s s later" %
           ("%.2f" % gap if gap is not None else "never"))

        # --- disable_after ------------------------------------------------
        f = ep["failing"]
        check.expect(wait_for(lambda: r.col(f, "disabled_reason") == "failing", 15),
           "500 for longer than disable_after (3s): disabled, reason "
           "failing", r.col(f, "disabled_reason"))
        span = r.col(f, "extract(epoch FROM disabled_at - failing_since)")
        n = len(rc["failing"].got())
        check.expect(span and 3.0 <= float(span) < 3.0 + 4.5 and n >= 3 and
           r.deliveries(f) == "dead endpoint disabled (failing)",
           "after %d attempts over %s s, every one failed; its delivery "
           "died with the reason" % (n, span), r.deliveries(f))
        check.expect(wait_for(lambda: disabled_total(r.mport, "failing") == 1, 5) and
           wait_for(lambda: [e for e in disabled_events(rc["watch"])
                             if e["id"] == int(f) and
                             e["disabled_reason"] == "failing"], 10),
           "counted (reason failing) and announced",
           disabled_events(rc["watch"]))
    finally:
        for v in rc.values():
            v.stop()
        if r is not None:
            r.app.stop()
        remove_tmp(tmp, r.db if r is not None else None)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
