#!/usr/bin/env python3
"""outbox.py - the outbox's dispatcher (lib/runtime/dispatcher.c) against a real
receiver on loopback (tests/lib/webhook_receiver.py, [webhooks]
allow_private = on), a real
payments.fcgi (its dispatcher thread) and `payments.fcgi deliver` (runs
apart), and PostgreSQL.  Events are enqueued with the library's SQL
function (sql/011) in transactions of the test's own, committed or rolled
back; the routes that enqueue are the payments sample's.  Checks: one
delivery with the Standard Webhooks headers and a signature computed here;
a rolled-back event never leaves; 500s retried at growing intervals then
delivered; max_attempts -> dead; a receiver holding a request past the
timeout -> failed saying so, another endpoint served meanwhile, retried
and delivered, applied once; a 2xx the database cannot record ends the
batch, the rest given back uncalled; two deliver processes never deliver
one event twice; kill -9 with a delivery in flight -> delivered after the
restart with the same webhook-id; private destinations refused by default;
the metrics; eviction after retention; the startup checks.  Prints TAP.
Usage: outbox.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import (run_main, App, Db, api_key, conf_text, done, free_port,  # noqa: E402
                    check, scrape, wait_for, write)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "lib"))
# tests/lib's receiver (it applies a webhook-id's first 2xx delivery once)
from webhook_receiver import Receiver  # noqa: E402

KEY = b"outbox-test-key-0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(KEY).decode()


def sign(msg_id, ts, body):
    mac = hmac.new(KEY, b"%s.%s.%s" % (msg_id.encode(), ts.encode(), body),
                   hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def endpoint(d, tenant, url, types):
    return d.sql("INSERT INTO idem_webhook_endpoints (api_key_id, url, "
                 "types, secret) VALUES (%s, '%s', ARRAY[%s], '%s') "
                 "RETURNING id" % (tenant, url, ",".join(
                     "'%s'" % t for t in types), SECRET))


NEXT = [0]


def enqueue(d, tenant, etype, data="{}", rollback=False):
    """An event committed (or rolled back) in a transaction of its own;
    its id."""
    NEXT[0] += 1
    eid = "evt_test%06d_%d" % (NEXT[0], os.getpid())
    body = json.dumps({"id": eid, "type": etype, "created": int(time.time()),
                       "data": json.loads(data)})
    d.sql("BEGIN; SELECT idem_outbox_enqueue('%s', %s, '%s', '%s'); %s;" %
          (eid, tenant, etype, body.replace("'", "''"),
           "ROLLBACK" if rollback else "COMMIT"))
    return eid


def state(d, eid):
    return d.sql("SELECT d.state || ' ' || d.attempts || ' ' || "
                 "coalesce(d.last_status::text, '-') FROM idem_deliveries d "
                 "JOIN idem_events e ON e.id = d.event WHERE e.event_id = "
                 "'%s'" % eid)


def metric(text, name, topic):
    m = re.search(r'(?m)^%s\{topic="%s"\} (\d+)$' % (name, re.escape(topic)),
                  text)
    return int(m.group(1)) if m else None


def main():
    p = argparse.ArgumentParser()
    for o in ("builddir", "srcdir", "pghost", "pgport"):
        p.add_argument("--" + o, required=True)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="outbox-")
    name = "outbox_%d" % os.getpid()
    d = Db(a.pghost, a.pgport, name)
    d.sql("CREATE DATABASE %s" % name, db="postgres")
    rcv = Receiver(ok_status=200)
    app = None
    fcgi = os.path.join(a.builddir, "apps/payments/payments.fcgi")
    mport = free_port()
    webhooks = ("[webhooks]\nallow_private = on\ninterval = 50ms\n"
                "timeout = 2s\nbackoff = 200ms\nbackoff_max = 5s\n"
                "max_attempts = 3\nbatch = 5\n")
    conf = os.path.join(tmp, "app.ini")
    write(conf, conf_text(a.pghost, a.pgport, name,
                          "[server]\nlog_level = info\n"
                          "[metrics]\nlisten = 127.0.0.1:%d\n%s" %
                          (mport, webhooks)))
    try:
        secret = api_key(a.builddir, a.srcdir, conf, "outbox")
        tenant = d.sql("SELECT max(id) FROM api_keys")

        # --- startup checks of [webhooks] -------------------------------
        bad = os.path.join(tmp, "bad.ini")
        write(bad, conf_text(a.pghost, a.pgport, name, "[webhooks]\n"
                             "backoff = 10s\nbackoff_max = 1s\n"))
        r = subprocess.run([fcgi, "-c", bad, "deliver"], capture_output=True,
                           text=True, timeout=20)
        check.expect(r.returncode == 1 and "bad.ini:5: [webhooks] backoff_max must "
                     "be at least backoff" in r.stderr, "backoff_max below backoff "
                     "is refused with file:line", (r.returncode, r.stderr))
        write(bad, conf_text(a.pghost, a.pgport, name, "[webhooks]\n"
                             "dispatcher = maybe\n"))
        r = subprocess.run([fcgi, "-c", bad, "deliver"], capture_output=True,
                           text=True, timeout=20)
        check.expect(r.returncode == 1 and "bad.ini:4: dispatcher must be on or off"
                     in r.stderr, "dispatcher = maybe is refused with file:line",
                     (r.returncode, r.stderr))

        # --- delivered once, signed -------------------------------------
        endpoint(d, tenant, rcv.url_of("/one"), ["t.one", "t.barrier"])
        app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                  os.path.join(tmp, "app.log"))
        t0 = time.time()
        eid = enqueue(d, tenant, "t.one", '{"amount": 250}')
        check.expect(wait_for(lambda: state(d, eid) == "delivered 1 200", 15),
                     "a committed event is delivered by the app's dispatcher thread",
                     state(d, eid))
        got = rcv.on("/one")
        body = d.sql("SELECT body FROM idem_events WHERE event_id = '%s'" %
                     eid).encode()
        h = got[0].headers if got else {}
        check.expect(len(got) == 1 and got[0].body == body, "the receiver got it once, "
                     "the body as stored", got)
        check.expect(h.get("webhook-id") == eid, "webhook-id is the event id", h)
        ts = h.get("webhook-timestamp", "")
        check.expect(ts.isdigit() and abs(int(ts) - t0) < 30,
                     "webhook-timestamp is now in unix seconds", ts)
        check.expect(h.get("webhook-signature") == sign(eid, ts, body),
                     "webhook-signature is v1, HMAC-SHA256 of id.timestamp.body "
                     "under the endpoint's secret (computed here)", h)
        check.expect(h.get("content-type") == "application/json",
                     "content-type application/json", h)

        # --- rolled back: never leaves ------------------------------------
        gone = enqueue(d, tenant, "t.one", rollback=True)
        mark = enqueue(d, tenant, "t.barrier")
        check.expect(wait_for(lambda: mark in rcv.ids("/one"), 15),
                     "an event committed after a rolled-back one is delivered")
        check.expect(gone not in rcv.ids("/one") and d.sql(
                     "SELECT count(*) FROM idem_events WHERE event_id = '%s'" %
                     gone) == "0", "the rolled-back event never left, nor exists")
        check.expect(rcv.ids("/one").count(eid) == 1, "the first event was delivered "
                     "once only", rcv.ids("/one"))

        # --- 500, 500, 500 -> retried at growing intervals -> 200 ----------
        # max_attempts 3 would kill it: this endpoint's events live under a
        # deliver run with more attempts (below); the thread's gets 2 x 500.
        rcv.plans["/flaky"] = lambda n: 500 if n <= 2 else 200
        endpoint(d, tenant, rcv.url_of("/flaky"), ["t.flaky"])
        fl = enqueue(d, tenant, "t.flaky")
        check.expect(wait_for(lambda: state(d, fl) == "delivered 3 200", 20),
                     "a receiver answering 500 twice: delivered at the 3rd attempt",
                     state(d, fl))
        times = [g.at for g in rcv.on("/flaky")]
        gaps = [b - c for b, c in zip(times[1:], times)]
        # Attempt n waits 200 ms x 2^(n-1), jittered down to half of it
        # (idem_backoff_ms), never less; then up to a poll interval (50 ms)
        # and the machine's delay, allowed 300 ms.  The two windows overlap
        # at 200 ms, so the second gap is not always the longer one.
        windows = [(0.1, 0.2 + 0.3), (0.2, 0.4 + 0.3)]
        check.expect(len(gaps) == 2 and all(lo <= g <= hi for g, (lo, hi) in
                                            zip(gaps, windows)),
                     "the retries come at growing intervals (backoff 200ms doubled, "
                     "jittered): %s within %s" % (["%.3f" % g for g in gaps], windows))
        check.expect(set(rcv.ids("/flaky")) == {fl}, "the same webhook-id on every "
                     "attempt", rcv.ids("/flaky"))

        # --- always 500 -> dead after max_attempts ------------------------
        rcv.plans["/down"] = lambda n: 500
        endpoint(d, tenant, rcv.url_of("/down"), ["t.dead"])
        dead = enqueue(d, tenant, "t.dead")
        check.expect(wait_for(lambda: state(d, dead) == "dead 3 500", 20),
                     "always 500: dead after max_attempts = 3", state(d, dead))
        check.expect(len(rcv.on("/down")) == 3, "the receiver saw 3 attempts",
                     len(rcv.on("/down")))
        check.expect(d.sql("SELECT last_error FROM idem_deliveries d JOIN idem_events e"
                           " ON e.id = d.event WHERE e.event_id = '%s'" % dead) ==
                     "HTTP 500", "its last error is kept")

        # --- the metrics ---------------------------------------------------
        st, text = scrape(mport)
        check.expect(st == 200 and metric(text, "idem_events_delivered_total",
                                          "t.one") == 1 and
                     metric(text, "idem_events_delivered_total", "t.barrier") == 1 and
                     metric(text, "idem_events_delivered_total", "t.flaky") == 1 and
                     metric(text, "idem_events_failed_total", "t.flaky") == 2 and
                     metric(text, "idem_events_failed_total", "t.dead") == 3 and
                     metric(text, "idem_events_dead_total", "t.dead") == 1,
                     "delivered, failed and dead totals by topic",
                     re.findall(r"(?m)^idem_events_.*$", text))
        m = re.search(r"(?m)^idem_event_delivery_seconds_count (\d+)$", text)
        check.expect(m is not None and int(m.group(1)) == 3, "the latency histogram "
                     "counts the 3 deliveries", m and m.group(0))
        check.expect(re.search(r"(?m)^idem_events_pending 0$", text) and re.search(
                     r"(?m)^idem_events_oldest_pending_seconds 0$", text),
                     "nothing pending now", re.findall(r"(?m)^idem_events_[op].*$",
                                                       text))

        # --- a receiver holding the request past [webhooks] timeout ------
        # (2s): the attempt fails saying so, the dispatcher goes on with
        # another endpoint's event meanwhile, the retry (answered at once:
        # only a webhook-id's first arrival is held) is delivered, and the
        # receiver, deduplicating on webhook-id, applies the event once even
        # though it finally answers the held request too.
        late = Receiver()
        # Every outcome recorded (a retry clears last_error): the test's
        # own table, filled in the dispatcher's transactions.
        d.sql("CREATE TABLE t_outcomes (delivery bigint, attempts int, "
              "status int, error text, state text, at timestamptz "
              "DEFAULT clock_timestamp()); "
              "CREATE FUNCTION t_outcome() RETURNS trigger LANGUAGE plpgsql "
              "AS $$ BEGIN INSERT INTO t_outcomes (delivery, attempts, "
              "status, error, state) VALUES (new.id, new.attempts, "
              "new.last_status, new.last_error, new.state); RETURN new; "
              "END $$; CREATE TRIGGER t_outcome AFTER UPDATE OF state, "
              "last_error ON idem_deliveries FOR EACH ROW WHEN "
              "(new.last_error IS DISTINCT FROM old.last_error OR "
              "new.state <> old.state) EXECUTE FUNCTION t_outcome()")
        endpoint(d, tenant, late.url, ["t.late"])
        endpoint(d, tenant, rcv.url_of("/meanwhile"), ["t.meanwhile"])
        late.hold(first_only=True)
        lt = enqueue(d, tenant, "t.late")
        check.expect(wait_for(lambda: late.waiting == 1, 15, step=0.01),
                     "a delivery in flight to a receiver that holds it")
        t_in = time.time()
        mw = enqueue(d, tenant, "t.meanwhile")
        check.expect(wait_for(lambda: state(d, mw) == "delivered 1 200", 10,
                              step=0.02) and late.waiting == 1,
                     "another endpoint's event is delivered while the first receiver "
                     "still holds its request", (state(d, mw), late.waiting))
        took = rcv.on("/meanwhile")[0].wall - t_in if rcv.on("/meanwhile") \
            else None
        check.expect(took is not None and took < 2.0 + 1.0, "the dispatcher was "
                     "blocked no longer than the timeout (2s) and a poll: the other "
                     "event arrived %s s after the held one" % (
                         "%.2f" % took if took is not None else "never"))
        check.expect(wait_for(lambda: state(d, lt) == "delivered 2 204", 10) and
                     late.waiting == 1, "retried: delivered at the 2nd attempt, "
                     "answered at once while the first is still held", state(d, lt))
        outs = d.sql("SELECT o.attempts || '|' || coalesce(o.status::text, "
                     "'-') || '|' || o.state || '|' || coalesce(o.error, '-')"
                     " || '|' || extract(epoch FROM o.at) FROM t_outcomes o "
                     "JOIN idem_deliveries d ON d.id = o.delivery JOIN "
                     "idem_events e ON e.id = d.event WHERE e.event_id = "
                     "'%s' ORDER BY o.at" % lt).splitlines()
        outs = [o.split("|") for o in outs]
        check.expect(len(outs) == 2 and outs[0][:3] == ["1", "-", "pending"] and
                     outs[0][3].startswith("timeout: ") and
                     outs[1][:4] == ["2", "204", "delivered", "-"],
                     "the first attempt recorded failed, no status, its error saying "
                     "timeout; the second delivered", outs)
        fail_at = float(outs[0][4]) - t_in if outs else None
        check.expect(fail_at is not None and 2.0 - 0.1 <= fail_at < 2.0 + 1.0,
                     "the failure recorded when the timeout (2s) ran out: %s s after "
                     "the request arrived" % ("%.2f" % fail_at if fail_at is not None
                                              else "never"))
        late.release()
        check.expect(wait_for(lambda: len(late.got()) == 2, 10) and
                     [g.id for g in late.got()] == [lt, lt] and
                     late.applied_ids() == [lt], "the same webhook-id both times; the "
                     "receiver applied the event once", (late.got(),
                                                         late.applied_ids()))
        text = scrape(mport)[1]
        check.expect(metric(text, "idem_events_failed_total", "t.late") == 1 and
                     metric(text, "idem_events_delivered_total", "t.late") == 1 and
                     metric(text, "idem_events_dead_total", "t.late") == 0,
                     "the metrics count one failed and one delivered attempt, "
                     "none dead (the topic's line says 0)",
                     re.findall(r"(?m)^idem_events_\w+\{topic=\"t.late\"\}.*$", text))
        late.stop()
        d.sql("DROP TRIGGER t_outcome ON idem_deliveries; DROP FUNCTION "
              "t_outcome(); DROP TABLE t_outcomes")

        # --- kill -9 with a delivery in flight -> delivered after restart --
        rcv.hold(path="/held")
        endpoint(d, tenant, rcv.url_of("/held"), ["t.held"])
        kd = enqueue(d, tenant, "t.held")
        check.expect(wait_for(lambda: len(rcv.on("/held")) == 1, 15),
                     "a delivery is in flight (the receiver holds it)")
        app.proc.send_signal(signal.SIGKILL)
        app.proc.wait(timeout=10)
        rcv.release("/held")
        check.expect(state(d, kd).startswith("pending 1"), "after kill -9 it is "
                     "pending, its attempt counted", state(d, kd))
        os.unlink(os.path.join(tmp, "app.sock"))
        app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                  os.path.join(tmp, "app2.log"))
        check.expect(wait_for(lambda: state(d, kd) == "delivered 2 200", 30),
                     "the restarted app delivers it once its hold lapsed",
                     state(d, kd))
        check.expect(rcv.ids("/held") == [kd, kd], "the same webhook-id both times "
                     "(the receiver deduplicates on it)", rcv.ids("/held"))

        # --- SIGTERM during a call: abandoned, given back, exit 0 in time --
        rcv.hold(path="/slow")
        endpoint(d, tenant, rcv.url_of("/slow"), ["t.slow"])
        sl = enqueue(d, tenant, "t.slow")
        check.expect(wait_for(lambda: len(rcv.on("/slow")) == 1, 15),
                     "a delivery is in flight to a receiver that does not answer")
        def gauges():
            text = scrape(mport)[1]
            m = re.search(r"(?m)^idem_events_oldest_pending_seconds "
                          r"([0-9.]+)$", text)
            return (re.search(r"(?m)^idem_events_pending 1$", text) and m
                    and float(m.group(1)) >= 1.0), re.findall(
                        r"(?m)^idem_events_[op].*$", text)
        check.expect(wait_for(lambda: gauges()[0], 10), "the gauges: one pending, "
                     "its age growing past a second", gauges()[1])
        t1 = time.time()
        rc = app.stop()
        took = time.time() - t1
        rcv.release("/slow")
        check.expect(rc == 0 and took < 5, "SIGTERM: the call is abandoned, exit 0 "
                     "within the drain (%.2f s)" % took, rc)
        check.expect(state(d, sl) == "pending 0 -", "the delivery is given back: due, "
                     "its attempt not counted", state(d, sl))
        app = None
        r = subprocess.run([fcgi, "-c", conf, "deliver"], capture_output=True,
                           text=True, timeout=30)
        check.expect(state(d, sl) == "delivered 1 200" and rcv.ids("/slow") == [sl, sl],
                     "delivered by the next run, the same webhook-id",
                     (state(d, sl), r.stdout))

        # --- two deliver processes at once: each event once ----------------
        rcv.plans["/many"] = lambda n: (time.sleep(0.002), 200)[1]
        endpoint(d, tenant, rcv.url_of("/many"), ["t.many"])
        d.sql("INSERT INTO idem_events (event_id, api_key_id, type, body) "
              "SELECT 'evt_many_' || g, %s, 't.many', '{\"n\":' || g || '}' "
              "FROM generate_series(1, 300) g; "
              "INSERT INTO idem_deliveries (event, endpoint) SELECT e.id, w.id "
              "FROM idem_events e, idem_webhook_endpoints w WHERE e.type = "
              "'t.many' AND w.url LIKE '%%/many'" % tenant)
        two = os.path.join(tmp, "two.ini")
        write(two, conf_text(a.pghost, a.pgport, name, webhooks))
        procs = [subprocess.Popen([fcgi, "-c", two, "deliver"],
                                  stdout=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [pr.communicate(timeout=120)[0] for pr in procs]
        counts = [int(m.group(1)) for m in (re.search(r"delivered (\d+)", o)
                                            for o in outs) if m]
        ids = rcv.ids("/many")
        check.expect(len(ids) == 300 and len(set(ids)) == 300,
                     "two deliver processes at once: 300 events, each received once "
                     "(%d requests, %d ids)" % (len(ids), len(set(ids))))
        check.expect(len(counts) == 2 and sum(counts) == 300 and min(counts) > 0,
                     "both delivered a share: %s" % counts, outs)
        check.expect(d.sql("SELECT count(*) FROM idem_deliveries WHERE state = "
                           "'delivered' AND attempts = 1 AND endpoint = (SELECT id FROM "
                           "idem_webhook_endpoints WHERE url LIKE '%/many')") == "300",
                     "each recorded delivered at its first attempt")

        # --- ordered: an endpoint's failing delivery holds the later back --
        for path, flag in (("/ord", "on"), ("/unord", "off")):
            rcv.plans[path] = lambda n: 500 if n == 1 else 200
            endpoint(d, tenant, rcv.url_of(path), ["t" + path.replace("/", ".")])
            oc = os.path.join(tmp, "ord.ini")
            write(oc, conf_text(a.pghost, a.pgport, name, webhooks +
                                "ordered = %s\n" % flag))
            evs = [enqueue(d, tenant, "t" + path.replace("/", "."))
                   for _ in range(3)]
            r = subprocess.run([fcgi, "-c", oc, "deliver"],
                               capture_output=True, text=True, timeout=30)
            first = r.stdout.strip()
            wait_for(lambda: subprocess.run(
                [fcgi, "-c", oc, "deliver"], capture_output=True,
                timeout=30) and all(state(d, e).startswith("delivered")
                                    for e in evs), 15, step=0.1)
            got = rcv.ids(path)
            if flag == "on":
                check.expect(first.startswith("delivered 0, failed 1") and
                             got == [evs[0], evs[0], evs[1], evs[2]],
                             "ordered = on: the first delivery's 500 holds the next "
                             "two back; then all three in order", (first, got))
            else:
                check.expect(first.startswith("delivered 2, failed 1") and
                             got[:3] == evs and got[3] == evs[0],
                             "ordered = off: the later two go past the failing one",
                             (first, got))

        # --- an outcome that cannot be recorded ends the batch --------------
        # The database refuses the 2xx's record (the function renamed away
        # for the run): the rest of the batch is given back, not called.
        rcv.plans["/unrec"] = lambda n: 200
        endpoint(d, tenant, rcv.url_of("/unrec"), ["t.unrec"])
        evs = [enqueue(d, tenant, "t.unrec") for _ in range(3)]
        uc = os.path.join(tmp, "unrec.ini")
        write(uc, conf_text(a.pghost, a.pgport, name, webhooks))
        d.sql("ALTER FUNCTION idem_outbox_delivered(bigint, integer) "
              "RENAME TO idem_outbox_delivered_away")
        try:
            r = subprocess.run([fcgi, "-c", uc, "deliver"],
                               capture_output=True, text=True, timeout=30)
        finally:
            d.sql("ALTER FUNCTION idem_outbox_delivered_away(bigint, "
                  "integer) RENAME TO idem_outbox_delivered")
        got = rcv.ids("/unrec")
        rest = [e for e in evs if e not in got]
        check.expect(r.returncode == 1 and len(got) == 1 and
                     "deliver: the database is not available" in r.stderr,
                     "a 2xx the database cannot record: the run fails (exit 1, "
                     "saying so), and of a batch of three only that one was called",
                     (r.returncode, got, r.stdout, r.stderr))
        check.expect([state(d, e) for e in rest] == ["pending 0 -"] * 2,
                     "the other two are given back: due, no attempt counted",
                     [state(d, e) for e in rest])
        r = subprocess.run([fcgi, "-c", uc, "deliver"], capture_output=True,
                           text=True, timeout=30)
        check.expect(sorted(rcv.ids("/unrec")[1:]) == sorted(rest) and
                     [state(d, e) for e in rest] == ["delivered 1 200"] * 2,
                     "the next run delivers them at their first attempt",
                     (rcv.ids("/unrec"), [state(d, e) for e in evs], r.stdout))
        # The called one is held until the hold its batch took lapses
        # (batch x (timeout + 1 s) + 5 s); made due here instead of waited.
        check.expect(state(d, got[0]) == "pending 1 -", "the one whose 2xx was not "
                     "recorded stays taken, its attempt counted", state(d, got[0]))
        d.sql("UPDATE idem_deliveries SET next_attempt_at = now() WHERE "
              "event = (SELECT id FROM idem_events WHERE event_id = '%s')"
              % got[0])
        r = subprocess.run([fcgi, "-c", uc, "deliver"], capture_output=True,
                           text=True, timeout=30)
        check.expect(rcv.ids("/unrec")[3:] == got and
                     state(d, got[0]) == "delivered 2 200",
                     "once due again it is sent again under the same webhook-id, "
                     "and recorded", (rcv.ids("/unrec"), state(d, got[0]), r.stdout))

        # --- private destinations refused by default -----------------------
        priv = os.path.join(tmp, "private.ini")
        write(priv, conf_text(a.pghost, a.pgport, name,
                              "[webhooks]\nbackoff = 1s\n"))
        endpoint(d, tenant, rcv.url_of("/private"), ["t.private"])
        pv = enqueue(d, tenant, "t.private")
        r = subprocess.run([fcgi, "-c", priv, "deliver"], capture_output=True,
                           text=True, timeout=30)
        err = d.sql("SELECT last_error FROM idem_deliveries d JOIN "
                    "idem_events e ON e.id = d.event WHERE e.event_id = "
                    "'%s'" % pv)
        check.expect(r.returncode == 0 and "failed 1" in r.stdout and
                     rcv.on("/private") == [] and err.startswith("refused"),
                     "allow_private off (the default): a loopback endpoint is refused,"
                     " nothing reaches it", (r.stdout, err))

        # --- eviction after retention --------------------------------------
        ev = os.path.join(tmp, "evict.ini")
        write(ev, conf_text(a.pghost, a.pgport, name, "[webhooks]\n"
                            "retention = 1s\n"))
        before = int(d.sql("SELECT count(*) FROM idem_events"))
        d.sql("UPDATE idem_deliveries SET ended_at = now() - interval '2s' "
              "WHERE state <> 'pending'; UPDATE idem_events SET created_at = "
              "now() - interval '2s'")
        r = subprocess.run([fcgi, "-c", ev, "deliver", "1"],
                           capture_output=True, text=True, timeout=30)
        left = d.sql("SELECT string_agg(e.event_id, ',') FROM idem_events e")
        m = re.search(r"evicted (\d+) events", r.stdout)
        check.expect(m is not None and int(m.group(1)) == before - 1 and left == pv,
                     "retention: delivered and dead events evicted (%s of %d), the "
                     "pending one kept" % (m and m.group(1), before), (r.stdout, left))
    finally:
        if app is not None:
            app.stop()
        rcv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            d.sql("DROP DATABASE %s" % name, db="postgres")
        except subprocess.CalledProcessError:
            pass
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
