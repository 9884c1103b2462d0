#!/usr/bin/env python3
"""retention.py - the retention contract of issue 14 against a real
payments.fcgi and PostgreSQL: the startup checks of the TTL window and of
[route] sections, Idempotency-Key-Expires on the first answer and every
replay (the record's expires_at), /metrics on its own listener ([metrics]
listen) and off the main socket, the eviction-lag gauge on the eviction
predicate, the janitor heartbeat, and a SIGTERM that drains in time while
the janitor works off a backlog.  Its own database in the suite's cluster.
Prints TAP.  Usage:
  retention.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import calendar
import email.utils
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import remove_tmp, scratch, run_args, run_main  # noqa: E402
from direct import (App, api_key, conf_text, done, free_port,  # noqa: E402
                    gauge, check, scrape, wait_for, write)

BODY = b'{"amount":250,"currency":"eur"}'
BACKLOG = 300000     # expired keys for the drain test
DRAIN_S = 5.0        # the runtime's promise: exit within 5 s of SIGTERM


def header(raw, name):
    m = re.search(rb"(?im)^" + name.encode() + rb": *([^\r\n]*)", raw)
    return m.group(1).decode() if m else None


def startup_checks(a, tmp, db):
    app = os.path.join(a.builddir, "apps/payments/payments.fcgi")

    sock = os.path.join(tmp, "startup.sock")

    def start(extra):
        """(exit status, stderr) of a start refused; ("started", stderr)
        of one that came up listening (its route checks and their warnings
        come before the socket) and then exited 0 on SIGTERM."""
        conf = os.path.join(tmp, "startup.ini")
        write(conf, conf_text(a.pghost, a.pgport, db, extra))
        if os.path.exists(sock):
            os.unlink(sock)
        p = subprocess.Popen([app, "-c", conf, "-l", sock],
                             stderr=subprocess.PIPE, text=True)
        wait_for(lambda: os.path.exists(sock) or p.poll() is not None, 20)
        if p.poll() is not None or not os.path.exists(sock):
            p.send_signal(signal.SIGTERM)
            err = p.communicate(timeout=10)[1]
            return p.returncode, err
        p.send_signal(signal.SIGTERM)
        err = p.communicate(timeout=10)[1]
        return "started" if p.returncode == 0 else p.returncode, err

    rc, err = start('\n[route "POST /v1/paymnts"]\nttl = 7d\n')
    check.expect(rc == 1 and "startup.ini:4: [route \"POST /v1/paymnts\"] names no "
                 "idempotent route" in err, "a misspelt [route] section is refused "
                 "with file:line", (rc, err))
    rc, err = start('\n[route "GET /v1/payments"]\nttl = 7d\n')
    check.expect(rc == 1 and "startup.ini:4:" in err, "a [route] section of a "
                 "route that is not idempotent is refused", (rc, err))
    rc, err = start("[server]\nrequest_timeout = 1s\n[idempotency]\n"
                    "lease = 3s\nttl = 30m\n")
    check.expect(rc == 1 and "startup.ini:7: ttl (1800000ms) is below 1h" in err,
                 "ttl = 30m is refused with file:line and the reason", (rc, err))
    rc, err = start('[idempotency]\nttl = 2h\n[route "POST /v1/payments"]\n'
                    'ttl = 30d\n')
    check.expect(rc == "started" and re.search(r"route POST /v1/payments/:id/refunds "
                                               r"\(7200s\) is below 24h", err) and
                 re.search(r"route POST /v1/payments \(2592000s\) is above 7d", err),
                 "ttl 2h and 30d start, each with a warning naming its route",
                 (rc, err))
    rc, err = start('[route "POST /v1/payments"]\nttl = 7d\n')
    check.expect(rc == "started" and "ttl of route" not in err,
                 "24h and 7d start (listening, then exit 0 on SIGTERM) without a "
                 "warning", (rc, err))


def expires_header(app, d, secret):
    def record_expiry(key):
        return int(d.sql("SELECT floor(extract(epoch FROM expires_at)) FROM "
                         "idempotency_keys WHERE key = '%s'" % key))

    st, raw = app.request(secret, "POST", "/v1/payments", BODY, key="exp-1")
    first = header(raw, "Idempotency-Key-Expires")
    check.expect(st.startswith("Status: 201") and first is not None,
                 "a created payment carries Idempotency-Key-Expires", raw[:400])
    want = record_expiry("exp-1")
    got = calendar.timegm(email.utils.parsedate(first)) if first else None
    check.expect(got == want, "it is the record's expires_at (%s)" % first,
                 (got, want))
    check.expect(first is not None and re.fullmatch(
                  r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|"
                  r"Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT", first),
                 "in IMF-fixdate form", first)
    check.expect(got is not None and abs(got - time.time() - 7 * 86400) < 120,
                 "7 days out ([route \"POST /v1/payments\"] ttl = 7d)")
    st, raw = app.request(secret, "POST", "/v1/payments", BODY, key="exp-1")
    check.expect(header(raw, "Idempotent-Replayed") == "true" and
                 header(raw, "Idempotency-Key-Expires") == first,
                 "the replay carries the same Idempotency-Key-Expires", raw[:400])
    pay = re.search(rb'"id":"(pay_[0-9a-f]+)"', raw).group(1).decode()
    st, raw = app.request(secret, "POST", "/v1/payments/%s/refunds" % pay,
                          b'{"amount":100}', key="exp-r")
    got = header(raw, "Idempotency-Key-Expires")
    check.expect(st.startswith("Status: 201") and got is not None and
                 calendar.timegm(email.utils.parsedate(got)) == record_expiry("exp-r"),
                 "a refund carries its own (24h) expiry", (st, got))
    st, raw = app.request(secret, "POST", "/v1/payments", b'{"amount":1,'
                          b'"currency":"eur"}', key="exp-1")
    check.expect(st.startswith("Status: 422") and
                 header(raw, "Idempotency-Key-Expires") is None,
                 "a 422 (another request's key) carries none", st)
    st, raw = app.request(secret, "POST", "/v1/payments", b'{"amount":-1,'
                          b'"currency":"eur"}', key="exp-bad")
    check.expect(st.startswith("Status: 400") and header(raw, "Idempotency-Key-"
                                                         "Expires") is None,
                 "a 400 of the declared body stores nothing, so it carries none", st)
    # The handler's own 400 (more than remains to refund) is stored.
    st, raw = app.request(secret, "POST", "/v1/payments/%s/refunds" % pay,
                          b'{"amount":1000000000000}', key="exp-bad2")
    check.expect(st.startswith("Status: 400") and header(raw, "Idempotency-Key-"
                                                         "Expires") is not None,
                 "a stored 4xx is recorded, so it carries it too", st)


def openapi(app):
    st, raw = app.request("", "GET", "/openapi.json")
    try:
        doc = json.loads(raw.split(b"\r\n\r\n", 1)[1])
        # the declared success (201), else the undeclared "2XX"
        resp = doc["paths"]["/v1/payments"]["post"]["responses"]
        h = resp.get("201", resp.get("2XX"))["headers"]
    except (ValueError, KeyError, IndexError, TypeError):
        h = {}
    check.expect("Idempotency-Key-Expires" in h, "the OpenAPI document names "
                 "Idempotency-Key-Expires on the idempotent route's answers", st)


def metrics_listener(app, d, mport, tenant):
    st, text = scrape(mport)
    check.expect(st == 200 and "idem_requests_total" in text,
                 "[metrics] listen serves /metrics over HTTP", st)
    check.expect(scrape(mport, "/other")[0] == 404, "and nothing else there")
    status, raw = app.request("", "GET", "/metrics")
    check.expect(status.startswith("Status: 404"), "the main socket has no /metrics "
                 "when it has a listener of its own", status)
    for name in ("idem_janitor_last_success_timestamp_seconds",
                 "idem_evict_interval_seconds", "idem_pool_size"):
        check.expect(gauge(text, name) is not None, "%s is exposed" % name)
    check.expect("idem_janitor_run_duration_seconds_bucket{le=\"+Inf\"}" in text,
                 "the janitor run duration histogram is exposed")

    # Eviction lag counts only what eviction would delete: an unfinished
    # phased record (past a recovery point) expired long ago is not lag.
    d.sql("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
          "request_path, request_fingerprint, state, recovery_point, "
          "lease_until, created_at, expires_at) VALUES (%s, 'unfinished-1', "
          "'POST', '/v1/payments', decode(repeat('ab', 32), 'hex'), "
          "'in_progress', 'charged', now() + interval '1 hour', "
          "now() - interval '3 days', now() - interval '2 days')" % tenant)
    text = scrape(mport)[1]
    check.expect(gauge(text, "idem_unfinished_keys") == 1 and
                 gauge(text, "idem_eviction_lag_seconds") == 0,
                 "an unfinished record counts as unfinished, not as eviction lag",
                 [l for l in text.splitlines() if "unfinished" in l or "lag" in l])
    hold = d.hold_eviction()
    d.sql("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
          "request_path, request_fingerprint, state, response_status, "
          "created_at, expires_at) VALUES (%s, 'expired-1', 'POST', "
          "'/v1/payments', decode(repeat('ab', 32), 'hex'), 'completed', "
          "201, now() - interval '2 hours', now() - interval '1 hour')"
          % tenant)
    lag = gauge(scrape(mport)[1], "idem_eviction_lag_seconds")
    check.expect(lag is not None and 3590 < lag < 3700, "an expired completed key is "
                 "eviction lag (%s s)" % lag)
    hold.release()
    evicted = wait_for(lambda: d.sql("SELECT count(*) FROM idempotency_keys "
                                     "WHERE key = 'expired-1'") == "0", 15)
    text = scrape(mport)[1]
    check.expect(evicted and gauge(text, "idem_eviction_lag_seconds") == 0 and
                 gauge(text, "idem_unfinished_keys") == 1,
                 "the janitor evicted it and left the unfinished one")
    # The run that evicted it records its success once the run's other
    # steps are done: awaited, not read at once.
    beat = wait_for(lambda: gauge(scrape(mport)[1],
                                  "idem_janitor_last_success_timestamp_seconds")
                    or None, 10)
    check.expect(beat is not None and abs(beat - time.time()) < 10,
                 "the janitor heartbeat is recent (%s)" % beat)


def drain_with_backlog(a, tmp, d, tenant):
    d.sql("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
          "request_path, request_fingerprint, state, response_status, "
          "created_at, expires_at) SELECT %s, 'backlog-' || g, 'POST', "
          "'/v1/payments', decode(repeat('ab', 32), 'hex'), 'completed', "
          "201, now() - interval '8 days', now() - interval '1 day' "
          "FROM generate_series(1, %d) g" % (tenant, BACKLOG))
    conf = os.path.join(tmp, "drain.ini")
    write(conf, conf_text(a.pghost, a.pgport, d.name,
                          "[idempotency]\nevict_interval = 1s\n"
                          "evict_batch = 500\n"))
    app = App(a.builddir, conf, os.path.join(tmp, "drain.sock"),
              os.path.join(tmp, "drain.log"))

    # Stop as soon as the first batches are gone: the janitor logs only
    # at the end of a run, by which time a fast machine has evicted all.
    def evicting():
        return int(d.sql("SELECT count(*) FROM idempotency_keys WHERE key "
                         "LIKE 'backlog-%'")) < BACKLOG
    check.expect(wait_for(evicting, 20, step=0.01), "the janitor works on the backlog")
    rc, took = app.terminate(30)
    left = int(d.sql("SELECT count(*) FROM idempotency_keys WHERE key LIKE "
                     "'backlog-%'"))
    check.expect(rc == 0 and took < DRAIN_S, "SIGTERM during a backlog: exit 0 in "
                 "%.2f s (< %.0f s)" % (took, DRAIN_S), rc)
    check.expect(0 < left < BACKLOG, "the run was cut between batches (%d of %d left)"
                 % (left, BACKLOG))
    msgs = [l.get("msg", "") for l in app.log_lines()]
    check.expect("runtime: drained, exiting" in msgs, "and drained cleanly", msgs[-3:])


def paced_backlog_leaves_pool(a, tmp, d):
    """While the janitor works a backlog off at its pace, it holds a pool
    connection only for a batch, not through the pauses between: with a
    pool of one and acquire_timeout 1s, every scrape still gets the
    store's gauges, in well under the timeout."""
    def backlog():
        return int(d.sql("SELECT count(*) FROM idempotency_keys WHERE key "
                         "LIKE 'backlog-%'"))
    left = backlog()
    mport = free_port()
    conf = os.path.join(tmp, "paced.ini")
    write(conf, conf_text(a.pghost, a.pgport, d.name,
                          "pool_size = 1\nacquire_timeout = 1s\n"
                          "[idempotency]\nevict_interval = 1s\n"
                          "evict_batch = 500\n"
                          "[metrics]\nlisten = 127.0.0.1:%d\n" % mport))
    app = App(a.builddir, conf, os.path.join(tmp, "paced.sock"),
              os.path.join(tmp, "paced.log"))
    try:
        # the first scrape plans the gauges' queries: before the janitor
        check.expect(wait_for(lambda: scrape(mport)[0] == 200, 10),
                     "a pool of one: the app answers /metrics")
        check.expect(wait_for(lambda: backlog() < left, 20, step=0.01),
                     "the janitor works on the backlog (%d keys)" % left)
        slow, missing, times = [], 0, []
        t_end = time.time() + 5
        while time.time() < t_end:
            t0 = time.time()
            status, text = scrape(mport)
            took = time.time() - t0
            times.append(round(took, 2))
            if status != 200 or gauge(text, "idem_eviction_lag_seconds") is None:
                missing += 1
            if took > 0.9:
                slow.append(round(took, 2))
            time.sleep(0.1)     # a scrape every 0.1 s, not a wait
        check.expect(missing == 0 and not slow,
                     "%d scrapes while the janitor evicts at its pace each got the "
                     "pool's one connection (%d keys evicted meanwhile; max %.2f s)"
                     % (len(times), left - backlog(), max(times)),
                     "%d without the store gauges; over 0.9 s: %s; all: %s"
                     % (missing, slow, times))
    finally:
        app.stop()


def main():
    a = run_args()
    tmp, d = scratch(a, "retention")
    name = d.name
    try:
        startup_checks(a, tmp, name)
        mport = free_port()
        conf = os.path.join(tmp, "app.ini")
        write(conf, conf_text(a.pghost, a.pgport, name,
                              "[idempotency]\nevict_interval = 1s\n"
                              "[metrics]\nlisten = 127.0.0.1:%d\n"
                              '[route "POST /v1/payments"]\nttl = 7d\n'
                              % mport))
        secret = api_key(a.builddir, a.srcdir, conf, "retention")
        tenant = d.sql("SELECT max(id) FROM api_keys")
        app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                  os.path.join(tmp, "app.log"))
        check.expect(wait_for(lambda: scrape(mport)[0] == 200, 10),
                     "the app starts with [metrics] listen")
        expires_header(app, d, secret)
        openapi(app)
        metrics_listener(app, d, mport, tenant)
        app.stop()
        drain_with_backlog(a, tmp, d, tenant)
        paced_backlog_leaves_pool(a, tmp, d)
    finally:
        remove_tmp(tmp, d)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
