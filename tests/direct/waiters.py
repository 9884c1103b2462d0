#!/usr/bin/env python3
"""waiters.py - Prefer: wait never takes the last worker, and one tenant's
duplicates never take every waiter slot.  payments.fcgi listening itself,
phased (an acquirer simulator, tests/acquirer/acquirer.py, holds the
owners' charge calls until this test releases them), its own database in
the suite's cluster, /metrics scraped on its [metrics] listen socket:

- threads = 4, one owner held in its acquirer call, three duplicates of
  its key sent one after the other with Prefer: wait=10: two wait, the
  third gets the 409 idempotency-key-in-flight with Retry-After at once
  (counted as refused_worker); meanwhile GET /healthz and another
  tenant's create each answer within 100 ms, measured in this process;
  once the call is released the owner answers 201, both waiters and a
  later retry replay it, and the acquirer charged once; then two owners
  (two tenants) held and one waiter: a duplicate of the other owner's key
  is refused too (owners of any key hold a worker), /healthz and the
  create again within 100 ms;
- threads = 16, max_waiters = 8, max_waiters_per_tenant = 2, one owner of
  each of two tenants held: the first tenant's third and fourth
  duplicates get the 409 at once (refused_tenant) while the other
  tenant's duplicate still waits; all waiters replay their owner's answer.

Every wait is for a condition with a deadline.  Prints TAP.  Usage:
  waiters.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import remove_tmp, run_args, run_main, scratch  # noqa: E402
from direct import (App, acquirer, api_key, conf_text, done, free_port,  # noqa: E402
                    gauge, check, scrape, wait_for, write)
import httpc  # noqa: E402  (tests/integration, on the path via direct)

BOUND = 0.100       # seconds: /healthz and another tenant's create
AT_ONCE = 1.0       # seconds: a refused duplicate's 409 (waiters wait 10)
PAY = "/v1/payments"
DEADLINE = 10       # seconds, for each awaited condition


def params(method, uri, secret=None, body=b"", key=None, prefer=None):
    p = {"REQUEST_METHOD": method, "REQUEST_URI": uri, "SCRIPT_NAME": "",
         "PATH_INFO": uri, "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1",
         "SERVER_PROTOCOL": "HTTP/1.1"}
    if body:
        p["CONTENT_LENGTH"] = str(len(body))
        p["CONTENT_TYPE"] = "application/json"
    if secret is not None:
        p["HTTP_AUTHORIZATION"] = "Bearer " + secret
    if key is not None:
        p["HTTP_IDEMPOTENCY_KEY"] = key
    if prefer is not None:
        p["HTTP_PREFER"] = prefer
    return p


def body(amount):
    return json.dumps({"amount": amount, "currency": "eur"}).encode()


class Call:
    """One request in a thread of its own: .r (a Response, or None on an
    error or a timeout), .took (seconds, measured here)."""

    def __init__(self, sock, p, stdin=b"", timeout=30):
        self.r, self.took, self.err = None, None, None
        self.th = threading.Thread(target=self.run,
                                   args=(sock, p, stdin, timeout))
        self.th.start()

    def run(self, sock, p, stdin, timeout):
        t0 = time.monotonic()
        try:
            self.r = httpc.fcgi_request(sock, p, stdin, timeout=timeout)
        except (OSError, ConnectionError) as e:
            self.err = e
        self.took = time.monotonic() - t0

    def join(self, seconds):
        self.th.join(seconds)
        return not self.th.is_alive()

    def describe(self):
        if self.r is None:
            return "no answer (%r) after %s s" % (self.err, self.took)
        return "%d %s %s after %.3f s" % (
            self.r.status, self.r.header("Retry-After"),
            self.r.body[:120], self.took)


def timed(sock, p, stdin=b"", timeout=2.0):
    c = Call(sock, p, stdin, timeout)
    c.join(timeout + 5)
    return c


def metric(mport, name):
    return gauge(scrape(mport)[1], name)


def waits(mport, outcome):
    return metric(mport, 'idem_prefer_waits_total{outcome="%s"}' % outcome)


class Run:
    """The database, the acquirer, two tenants; an app per case."""

    def __init__(self, a, tmp, db):
        self.a, self.tmp, self.db = a, tmp, db
        self.acq = acquirer(tmp)
        self.mport = free_port()
        self.app = None
        self.n = 0
        self.sock = os.path.join(tmp, "app.sock")
        conf = self.configure("")
        self.secret_a = api_key(a.builddir, a.srcdir, conf, "waiters-a")
        self.secret_b = api_key(a.builddir, a.srcdir, conf, "waiters-b")
        self.secret_c = api_key(a.builddir, a.srcdir, conf, "waiters-c")
        self.n_other = 0

    def configure(self, extra):
        self.n += 1
        conf = os.path.join(self.tmp, "app%d.ini" % self.n)
        # The held call outlasts the default acquirer_timeout (5s) on a
        # build where the waiters hold every worker.
        write(conf, conf_text(
            self.a.pghost, self.a.pgport, self.db.name,
            "[payments]\nacquirer_url = %s\nacquirer_timeout = 20s\n"
            "[metrics]\nlisten = 127.0.0.1:%d\n%s"
            % (self.acq.url, self.mport, extra)))
        return conf

    def start(self, extra):
        """An app with extra configuration; False if it did not start."""
        conf = self.configure(extra)
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.app = App(self.a.builddir, conf, self.sock,
                       os.path.join(self.tmp, "app%d.log" % self.n))
        wait_for(lambda: self.app.proc.poll() is not None or
                 scrape(self.mport)[0] == 200, DEADLINE)
        return self.app.proc.poll() is None and \
            scrape(self.mport)[0] == 200

    def log_tail(self):
        if self.app is None:
            return None
        with open(self.app.log.name) as f:
            return f.read()[-600:]

    def stop_app(self):
        if self.app is not None:
            self.app.stop()
            self.app = None

    def post(self, secret, key, amount, prefer=None, timeout=30):
        b = body(amount)
        return Call(self.sock, params("POST", PAY, secret, b, key, prefer),
                    b, timeout)

    def hold_owner(self, secret, key, amount):
        """An owner whose acquirer call is held: awaited there."""
        held = self.acq.stats()["held"]
        c = self.post(secret, key, amount)
        check.expect(wait_for(lambda: self.acq.stats()["held"] == held + 1, DEADLINE),
                     "the owner of %s is held in its acquirer call" % key,
                     c.describe())
        return c

    def waiter(self, secret, key, amount, waiting):
        """A duplicate with Prefer: wait=10, awaited as the waiting-th."""
        c = self.post(secret, key, amount, prefer="wait=10")
        check.expect(wait_for(lambda: metric(self.mport, "idem_prefer_waiters") ==
                              waiting, DEADLINE),
                     "duplicate %d of %s waits (idem_prefer_waiters %d)"
                     % (waiting, key, waiting), c.describe() if c.join(0) else None)
        return c

    def refused(self, secret, key, amount, why):
        """A duplicate with Prefer: wait=10 that must get the 409 at once."""
        c = self.post(secret, key, amount, prefer="wait=10")
        c.join(AT_ONCE + 2)
        r = c.r
        check.expect(r is not None and r.status == 409 and
                     (r.problem_type() or "").endswith("/idempotency-key-in-flight")
                     and (r.header("Retry-After") or "").strip() == "1" and
                     r.header("Preference-Applied") is None and c.took < AT_ONCE,
                     "a duplicate of %s past %s: 409 idempotency-key-in-flight, "
                     "Retry-After: 1, at once (%s)" % (key, why, c.describe()))
        return c

    def stop(self):
        self.stop_app()
        self.acq.stop()


def replays(run, owner, waiters, key):
    """The owner answers 201 once released; each waiter and a later
    retry replay it."""
    owner.join(DEADLINE)
    first = owner.r
    check.expect(first is not None and first.status == 201,
                 "the owner of %s answers 201 once its call is released (%s)"
                 % (key, owner.describe()))
    for i, w in enumerate(waiters):
        w.join(DEADLINE)
        check.expect(w.r is not None and w.r.status == first.status and
                     w.r.replayed and w.r.body == first.body and
                     w.r.header("Preference-Applied") == "wait=10",
                     "waiter %d of %s: the owner's answer replayed, "
                     "Preference-Applied: wait=10" % (i + 1, key), w.describe())
    return first


def quick(run, what):
    """/healthz and another tenant's create, each within BOUND."""
    health = [timed(run.sock, params("GET", "/healthz")) for _ in range(3)]
    creates = []
    for i in range(2):
        run.n_other += 1
        b = body(2000 + run.n_other)
        creates.append(timed(run.sock, params(
            "POST", PAY, run.secret_c, b, "other-%d" % run.n_other), b))
    worst_h = max(c.took for c in health)
    worst_c = max(c.took for c in creates)
    check.expect(all(c.r is not None and c.r.status == 200 for c in health) and
                 worst_h <= BOUND, "GET /healthz -> 200 within 100 ms while %s "
                 "(worst %.1f ms)" % (what, worst_h * 1e3),
                 [c.describe() for c in health])
    check.expect(all(c.r is not None and c.r.status == 201 for c in creates) and
                 worst_c <= BOUND, "another tenant's create -> 201 within 100 ms "
                 "meanwhile (worst %.1f ms)" % (worst_c * 1e3),
                 [c.describe() for c in creates])
    return len(creates)


def worker_bound(run):
    """threads 4: an owner and two waiters; the third would take the last
    worker.  Then two owners and a waiter: a duplicate of the other
    owner's key would."""
    # Configuration as on af7e0cf (max_waiters_per_tenant is new; its
    # default, 2, would refuse the third too, but the worker bound comes
    # first and is what the metric names).
    check.expect(run.start("[server]\nthreads = 4\n"),
                 "an app with threads = 4 starts", run.log_tail())
    # Warm: pool connections, the authentication cache of the tenants.
    for i, s in enumerate((run.secret_a, run.secret_b, run.secret_c)):
        run.post(s, "warm-%d" % i, 100 + i).join(DEADLINE)
    charges = run.acq.stats()["charges"]
    run.acq.control("hold", count=1)
    owner = run.hold_owner(run.secret_a, "w-1", 1000)
    waiters = [run.waiter(run.secret_a, "w-1", 1000, n) for n in (1, 2)]
    run.refused(run.secret_a, "w-1", 1000, "the last worker")
    check.expect(metric(run.mport, "idem_prefer_waiters") == 2 and
                 waits(run.mport, "refused_worker") == 1,
                 "still 2 waiting, 1 counted in idem_prefer_waits_total"
                 "{outcome=\"refused_worker\"}")
    others = quick(run, "an owner and 2 waiters hold 3 of 4 workers")
    check.expect(run.acq.stats()["held"] == 1 and owner.join(0) is False,
                 "all this while the owner was still in its acquirer call")

    run.acq.release()
    first = replays(run, owner, waiters, "w-1")
    retry = timed(run.sock, params("POST", PAY, run.secret_a, body(1000),
                                   "w-1"), body(1000))
    check.expect(first is not None and retry.r is not None and
                 retry.r.status == 201 and retry.r.replayed and
                 retry.r.body == first.body, "a later retry replays it",
                 retry.describe())
    st = run.acq.stats()
    check.expect(st["charges"] == charges + 1 + others and
                 waits(run.mport, "replayed") == 2,
                 "the acquirer charged once for w-1 (charges %d -> %d); 2 counted "
                 "as replayed" % (charges, st["charges"]))

    # Owners of other keys hold workers too.
    run.acq.control("hold", count=2)
    owner_a = run.hold_owner(run.secret_a, "w-2", 1001)
    owner_b = run.hold_owner(run.secret_b, "w-3", 1002)
    wa = [run.waiter(run.secret_a, "w-2", 1001, 1)]
    run.refused(run.secret_b, "w-3", 1002, "the last worker (2 owners, "
                "1 waiter of another tenant)")
    check.expect(waits(run.mport, "refused_worker") == 2, "2 counted as "
                 "refused_worker")
    quick(run, "2 owners and a waiter hold 3 of 4 workers")
    run.acq.release()
    replays(run, owner_a, wa, "w-2")
    replays(run, owner_b, [], "w-3")
    run.stop_app()


def tenant_bound(run):
    """threads 16: only max_waiters_per_tenant applies."""
    check.expect(run.start("[server]\nthreads = 16\n[idempotency]\n"
                           "max_waiters = 8\nmax_waiters_per_tenant = 2\n"),
                 "an app with threads = 16, max_waiters = 8 and "
                 "max_waiters_per_tenant = 2 starts",
                 run.log_tail())
    run.acq.control("hold", count=2)
    owner_a = run.hold_owner(run.secret_a, "t-a", 3000)
    owner_b = run.hold_owner(run.secret_b, "t-b", 3001)
    wa = [run.waiter(run.secret_a, "t-a", 3000, n) for n in (1, 2)]
    for _ in range(2):
        run.refused(run.secret_a, "t-a", 3000, "max_waiters_per_tenant")
    wb = [run.waiter(run.secret_b, "t-b", 3001, 3)]
    check.expect(waits(run.mport, "refused_tenant") == 2 and
                 waits(run.mport, "refused_worker") == 0 and
                 waits(run.mport, "refused") == 0,
                 "2 counted in idem_prefer_waits_total{outcome=\"refused_tenant\"}, "
                 "none as refused or refused_worker")
    check.expect(run.acq.stats()["held"] == 2, "both owners still in their "
                 "acquirer calls")
    run.acq.release()
    replays(run, owner_a, wa, "t-a")
    replays(run, owner_b, wb, "t-b")
    run.stop_app()


def main():
    a = run_args()
    tmp, db = scratch(a, "waiters")
    run = None
    try:
        run = Run(a, tmp, db)
        worker_bound(run)
        tenant_bound(run)
    finally:
        if run is not None:
            run.acq.release()
            run.stop()
        remove_tmp(tmp, db)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
