#!/usr/bin/env python3
"""events.py - idemctl events list|show|retry|purge against the outbox of
sql/011 in a database of its own: events made by the library's own SQL
(idem_outbox_enqueue), attempts recorded as a dispatcher records them
(idem_outbox_take, _failed, _delivered), then each command's output and
what it changed in the tables; bad arguments refused with nothing changed.
Then the whole round with the real dispatcher (`payments.fcgi deliver`)
and a receiver on loopback: a delivery dead after a 500, retried with
idemctl, delivered by the next run under the same webhook-id.  And the
ordered take (sql/014) in a database of its own: each endpoint's first
pending delivery only, a backlog behind it not read.
Prints TAP.  Usage:
  events.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_args, run_main  # noqa: E402
from direct import Db, api_key, conf_text, done, check, write  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "lib"))
from webhook_receiver import Receiver  # noqa: E402

DB = "idem_events_cli"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class Cli:
    def __init__(self, builddir, conf):
        self.bin = os.path.join(builddir, "apps/idemctl/idemctl")
        self.conf = conf

    def __call__(self, *args):
        p = subprocess.run([self.bin, "-c", self.conf, "events"] +
                           [str(a) for a in args], capture_output=True,
                           text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr


def fields(line):
    return dict(re.findall(r"(\w+)=(\S*)", line))


def answers(rcv):
    """(webhook-id, status) of each delivery the receiver answered."""
    return [(g.id, g.status) for g in rcv.got()]


def dispatcher_round(a, d, tmp, ev, enqueue, tenant):
    """A dead delivery retried with idemctl and delivered by the real
    dispatcher, run apart (PROGRAM deliver)."""
    rcv = Receiver(ok_status=200)
    rcv.plans["/hooks"] = lambda n: 500 if n == 1 else 200
    conf = os.path.join(tmp, "deliver.ini")
    write(conf, conf_text(a.pghost, a.pgport, DB, "[webhooks]\n"
                          "allow_private = on\nmax_attempts = 1\n"
                          "timeout = 5s\n"))
    fcgi = os.path.join(a.builddir, "apps/payments/payments.fcgi")
    d.sql("INSERT INTO idem_webhook_endpoints (api_key_id, url, types, "
          "secret) VALUES (%s, '%s', '{order.shipped}', '%s')"
          % (tenant("beta"), rcv.url, SECRET))
    enqueue("evt_round", "beta", "order.shipped")
    try:
        r = subprocess.run([fcgi, "-c", conf, "deliver"],
                           capture_output=True, text=True, timeout=60)
        dead = [fields(x) for x in ev("list", "--dead")[1].splitlines()
                if "event=evt_round" in x]
        check.expect(r.returncode == 0 and answers(rcv) == [("evt_round", 500)] and
                     len(dead) == 1 and dead[0]["last_status"] == "500" and
                     dead[0]["attempts"] == "1",
                     "deliver: the receiver answers 500, max_attempts = 1: dead, "
                     "listed by events list --dead", (r.stdout, r.stderr, answers(rcv),
                                                      dead))
        rc, out, err = ev("retry", "evt_round")
        check.expect(rc == 0 and "dead, due now" in out, "events retry evt_round",
                     (rc, out, err))
        r = subprocess.run([fcgi, "-c", conf, "deliver"],
                           capture_output=True, text=True, timeout=60)
        rc, out, err = ev("show", "evt_round")
        sd = [fields(x) for x in out.splitlines()
              if x.startswith("delivery=")]
        check.expect(answers(rcv) == [("evt_round", 500), ("evt_round", 200)] and
                     len(sd) == 1 and sd[0]["state"] == "delivered" and
                     sd[0]["attempts"] == "1" and sd[0]["last_status"] == "200",
                     "the next deliver run delivers it, the same webhook-id; events "
                     "show: delivered at its first attempt since the retry",
                     (r.stdout, r.stderr, answers(rcv), out))
    finally:
        rcv.stop()


def fresh_db(a, tmp, name):
    """Database name made anew, and a config of the app naming it: (Db,
    the config's path)."""
    d = Db(a.pghost, a.pgport, name)
    d.sql("DROP DATABASE IF EXISTS %s" % name, db="postgres")
    d.sql("CREATE DATABASE %s" % name, db="postgres")
    conf = os.path.join(tmp, name + ".ini")
    write(conf, conf_text(a.pghost, a.pgport, name, ""))
    return d, conf


def add_endpoint(d, tenant_id, path, types):
    """An endpoint of the tenant at a closed loopback port: its id."""
    return d.sql("INSERT INTO idem_webhook_endpoints (api_key_id, url, "
                 "types, secret) VALUES (%s, 'http://127.0.0.1:9/%s', "
                 "'{%s}', '%s') RETURNING id" % (tenant_id, path, types,
                                                 SECRET))


def delivery_of(d, eid, ep=None):
    """The id of event eid's delivery (to endpoint ep, if it has several)."""
    return d.sql("SELECT d.id FROM idem_deliveries d JOIN idem_events e "
                 "ON e.id = d.event WHERE e.event_id = '%s'%s" % (
                     eid, "" if ep is None else " AND d.endpoint = %s" % ep))


def ordered_take(a, tmp):
    """idem_outbox_candidates with ordered on (sql/014, sql/040), and
    idem_outbox_take of what it gives, in a database of its
    own so that no other delivery is pending: each endpoint's first
    pending delivery only, in schedule order; none of an endpoint whose
    first is in flight or waiting for a retry; a deleted endpoint's too
    (to go dead); two sessions never take one endpoint's two; a backlog
    behind one endpoint is not walked."""
    name = DB + "_ord"
    d, conf = fresh_db(a, tmp, name)
    api_key(a.builddir, a.srcdir, conf, "ord")
    tenant = d.sql("SELECT id FROM api_keys WHERE name = 'ord'")
    eps = [add_endpoint(d, tenant, i, "t.%d" % i) for i in range(4)]
    ids = {}    # (endpoint index, n) -> delivery id
    for n in range(3):
        for i in range(4):
            eid = "evt_ord_%d_%d" % (i, n)
            d.sql("SELECT idem_outbox_enqueue('%s', %s, 't.%d', "
                  "'{\"id\":\"%s\"}')" % (eid, tenant, i, eid))
            ids[(i, n)] = delivery_of(d, eid)
    # Endpoint 2's first waits for a retry; endpoint 3 is deleted.
    d.sql("UPDATE idem_deliveries SET next_attempt_at = now() + "
          "interval '1 hour' WHERE id = %s" % ids[(2, 0)])
    d.sql("UPDATE idem_webhook_endpoints SET deleted_at = now() WHERE "
          "id = %s" % eps[3])

    def take(limit=10):
        """A dispatcher's take: the candidates, all of them taken."""
        return [r.split("|") for r in d.sql(
            "SELECT t.id, t.endpoint_deleted FROM idem_outbox_take(ARRAY("
            "SELECT id FROM idem_outbox_candidates(true, '{}', 0, %d)), "
            "60000, 1) t ORDER BY t.id" % limit).splitlines()]

    got = take()
    check.expect([r[0] for r in got] == [ids[(0, 0)], ids[(1, 0)], ids[(3, 0)]] and
                 [r[1] for r in got] == ["f", "f", "t"],
                 "ordered take: the first pending delivery of each endpoint, in "
                 "schedule order, a deleted endpoint's too; none of an endpoint "
                 "whose first waits for a retry", (got, ids))
    check.expect(take() == [], "again: nothing, each endpoint's first is in flight")
    d.sql("SELECT idem_outbox_delivered(%s, 200)" % ids[(0, 0)])
    d.sql("SELECT idem_outbox_failed(%s, 1, 500, 'HTTP 500', 3600000, "
          "false)" % ids[(1, 0)])
    got = take()
    check.expect([r[0] for r in got] == [ids[(0, 1)]],
                 "after its first is delivered, endpoint 0's second; endpoint 1's "
                 "failed first holds its second back", (got, ids))
    # Two sessions at once: the one holding endpoint 0's head locked makes
    # the other skip it, not take its successor.
    d.sql("SELECT idem_outbox_delivered(%s, 200)" % ids[(0, 1)])
    held = subprocess.Popen(
        ["psql", "-X", "-qAt", "-h", a.pghost, "-p", str(a.pgport), "-U",
         "postgres", "-d", name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    held.stdin.write("BEGIN;\nSELECT id FROM idem_deliveries WHERE id = %s "
                     "FOR UPDATE;\n" % ids[(0, 2)])
    held.stdin.flush()
    locked = held.stdout.readline().strip()
    got = take()
    held.stdin.write("ROLLBACK;\n")
    held.stdin.close()
    held.wait(timeout=10)
    check.expect(locked == ids[(0, 2)] and got == [], "endpoint 0's head locked by "
                 "another session: skipped, its successor not taken", (locked, got))
    check.expect([r[0] for r in take()] == [ids[(0, 2)]],
                 "once the lock is gone, taken", ids[(0, 2)])

    # A backlog behind endpoint 0, whose head (taken above) is in flight:
    # the take reads the heads only (index entries read, from the
    # statistics a session flushes when it ends), not the 20,000 behind.
    d.sql("INSERT INTO idem_events (event_id, api_key_id, type, body) "
          "SELECT 'evt_back_' || g, %s, 't.0', '{}' FROM "
          "generate_series(1, 20000) g" % tenant)
    d.sql("INSERT INTO idem_deliveries (event, endpoint) SELECT id, %s "
          "FROM idem_events WHERE event_id LIKE 'evt_back_%%'" % eps[0])
    d.sql("ANALYZE idem_deliveries")

    def entries_read():
        return int(d.sql("SELECT sum(idx_tup_read) FROM pg_stat_user_indexes "
                         "WHERE relname = 'idem_deliveries'"))

    before = entries_read()
    got = take()
    after = before
    for _ in range(50):     # the ended session's counters, once flushed
        after = entries_read()
        if after != before:
            break
        time.sleep(0.05)
    check.expect(got == [] and 0 < after - before < 100, "20,000 pending behind an "
                 "endpoint's head in flight: nothing taken, %d index entries read"
                 % (after - before), (got, before, after))
    d.sql("DROP DATABASE IF EXISTS %s" % name, db="postgres")


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-events-")
    d, conf = fresh_db(a, tmp, DB)
    api_key(a.builddir, a.srcdir, conf, "acme")
    api_key(a.builddir, a.srcdir, conf, "beta")
    ev = Cli(a.builddir, conf)

    def tenant(name):
        return d.sql("SELECT id FROM api_keys WHERE name = '%s'" % name)

    def endpoint(name, path, types):
        return add_endpoint(d, tenant(name), path, types)

    def enqueue(eid, name, typ, body=None):
        body = body or '{"id":"%s","type":"%s","created":1,"data":{}}' % (
            eid, typ)
        return d.sql("SELECT idem_outbox_enqueue('%s', %s, '%s', '%s')"
                     % (eid, tenant(name), typ, body))

    def delivery(eid, ep):
        return delivery_of(d, eid, ep)

    def row(did):
        return d.sql("SELECT state, attempts, next_attempt_at <= now(), "
                     "ended_at IS NULL FROM idem_deliveries WHERE id = %s"
                     % did).split("|")

    def take_all():
        """A dispatcher's take: every due delivery, one attempt each."""
        return dict(tuple(r.split("|")) for r in d.sql(
            "SELECT id, attempts FROM idem_outbox_take(ARRAY(SELECT id FROM "
            "idem_deliveries WHERE state = 'pending' AND next_attempt_at <= "
            "now()), 60000, 1)")
            .splitlines())

    e1 = endpoint("acme", "a", "payment.succeeded,refund.created")
    e2 = endpoint("acme", "b", "payment.succeeded")
    e3 = endpoint("beta", "c", "payment.succeeded")
    check.expect(enqueue("evt_pay1", "acme", "payment.succeeded") == "2" and
                 enqueue("evt_ref1", "acme", "refund.created") == "1" and
                 enqueue("evt_beta", "beta", "payment.succeeded") == "1" and
                 enqueue("evt_big", "acme", "refund.created", "x" * 5000) == "1",
                 "4 events, 5 deliveries, fanned out by the library")
    # evt_pay1: dead at e1 (500, given up), delivered at e2.
    # evt_ref1: failed once at e1, next attempt in an hour (pending).
    # evt_beta: delivered.  evt_big: pending, due.
    taken = take_all()
    check.expect(len(taken) == 5, "a dispatcher takes the 5", taken)
    d.sql("SELECT idem_outbox_failed(%s, 1, 500, 'status: POST "
          "http://127.0.0.1:9/a answered 500', 0, true)"
          % delivery("evt_pay1", e1))
    d.sql("SELECT idem_outbox_delivered(%s, 204)" % delivery("evt_pay1", e2))
    d.sql("SELECT idem_outbox_failed(%s, 1, NULL, 'timeout: POST "
          "http://127.0.0.1:9/a', 3600000, false)" % delivery("evt_ref1", e1))
    d.sql("SELECT idem_outbox_delivered(%s, 200)" % delivery("evt_beta", e3))
    d.sql("UPDATE idem_deliveries SET next_attempt_at = now() WHERE id = %s"
          % delivery("evt_big", e1))

    # --- list
    rc, out, err = ev("list")
    lines = out.splitlines()
    ids = [int(fields(x)["delivery"]) for x in lines]
    check.expect(rc == 0 and len(lines) == 5 and ids == sorted(ids, reverse=True),
                 "list: the 5 deliveries, newest first", out + err)
    dead = [fields(x) for x in ev("list", "--dead")[1].splitlines()]
    check.expect(len(dead) == 1 and dead[0]["event"] == "evt_pay1" and
                 dead[0]["state"] == "dead" and dead[0]["last_status"] == "500" and
                 dead[0]["tenant"] == "acme" and dead[0]["error"] == "status:",
                 "list --dead: the one dead delivery, its tenant, status and error",
                 dead)
    pend = [fields(x) for x in ev("list", "--pending")[1].splitlines()]
    check.expect([p["event"] for p in pend] == ["evt_ref1", "evt_big"] and
                 all(p["state"] == "pending" for p in pend),
                 "list --pending: the 2 pending, oldest first", pend)
    dl = [fields(x) for x in ev("list", "--delivered")[1].splitlines()]
    check.expect(sorted(x["event"] for x in dl) == ["evt_beta", "evt_pay1"],
                 "list --delivered: the 2 delivered", dl)
    rc, out, err = ev("list", "--limit", "2")
    check.expect(rc == 0 and len(out.splitlines()) == 3 and
                 out.splitlines()[2].startswith("(more than 2 deliveries"),
                 "list --limit 2: 2 lines and a line saying there are more", out)
    rc, out, err = ev("list", "--limit", "5")
    check.expect(rc == 0 and len(out.splitlines()) == 5 and "more" not in out,
                 "list --limit 5 of 5: no 'more' line", out)
    for bad in (["--limit", "0"], ["--limit", "10001"], ["--limit", "x"],
                ["--dead", "--pending"], ["--frob"]):
        rc, out, err = ev("list", *bad)
        check.expect(rc == 2 and out == "" and "usage:" in err,
                     "list %s: usage, exit 2" % " ".join(bad), (rc, out, err))

    # --- show
    rc, out, err = ev("show", "evt_pay1")
    check.expect(rc == 0 and re.search(r"(?m)^tenant +acme$", out) and
                 re.search(r"(?m)^type +payment.succeeded$", out) and
                 re.search(r'(?m)^body +\{"id":"evt_pay1"', out) and
                 re.search(r"(?m)^deliveries +2$", out),
                 "show: the event, its tenant, type, body and 2 deliveries", out)
    sd = [fields(x) for x in out.splitlines() if x.startswith("delivery=")]
    check.expect(len(sd) == 2 and sd[0]["state"] == "dead" and
                 sd[0]["url"] == "http://127.0.0.1:9/a" and
                 "error=status: POST http://127.0.0.1:9/a answered 500" in out and
                 sd[1]["state"] == "delivered" and sd[1]["last_status"] == "204",
                 "show: each delivery with its endpoint, state, status and last "
                 "error", out)
    rc, out, err = ev("show", "evt_big")
    body = re.search(r"(?m)^body +(\S*)", out)
    check.expect(rc == 0 and re.search(r"(?m)^body_bytes +5000$", out) and body and
                 body.group(1) == "x" * 4096 and out.count("(...)") == 1,
                 "show: a 5000-byte body shown to 4096 bytes, marked cut", out[:300])
    rc, out, err = ev("show", "evt_nope")
    check.expect(rc == 1 and out == "" and "no event 'evt_nope'" in err,
                 "show of an unknown event: exit 1, said", (rc, err))

    # --- retry
    d_dead, d_ok = delivery("evt_pay1", e1), delivery("evt_pay1", e2)
    rc, out, err = ev("retry", "evt_pay1")
    check.expect(rc == 0 and out.count("\n") == 1 and ("delivery %s to endpoint %s: "
                 "dead, due now (pending again, attempts reset)" % (d_dead, e1)) in out,
                 "retry EVT: its dead delivery, said", (rc, out, err))
    check.expect(row(d_dead) == ["pending", "0", "t", "t"],
                 "the dead delivery is pending, attempts 0, due now", row(d_dead))
    check.expect(row(d_ok)[0] == "delivered", "the delivered one is left alone",
                 row(d_ok))
    taken = take_all()
    check.expect(taken.get(d_dead) == "1", "a dispatcher takes it at once, as its "
                 "first attempt again", taken)
    d.sql("SELECT idem_outbox_failed(%s, 1, 500, 'again', 0, true)" % d_dead)
    d_ref = delivery("evt_ref1", e1)
    before = row(d_ref)
    rc, out, err = ev("retry", d_ref)
    check.expect(before[2] == "f" and rc == 0 and row(d_ref) == ["pending", "1", "t",
                                                                 "t"],
                 "retry DELIVERY of a pending one an hour away: due now, its "
                 "attempts kept", (before, row(d_ref), out, err))
    rc, out, err = ev("retry", "evt_beta")
    check.expect(rc == 1 and "no dead or pending delivery of 'evt_beta'" in err,
                 "retry of an event delivered everywhere: exit 1, nothing done",
                 (rc, err))
    # A deleted endpoint's delivery would only die again: left alone.
    d.sql("UPDATE idem_webhook_endpoints SET deleted_at = now() WHERE id = "
          "%s" % e1)
    rc, out, err = ev("retry", "evt_pay1")
    check.expect(rc == 1 and row(d_dead)[0] == "dead",
                 "retry towards a deleted endpoint: exit 1, still dead",
                 (rc, err, row(d_dead)))
    # A usage error is exit 2, an argument that names nothing exit 1;
    # either way no delivery changes.
    snapshot = ("SELECT string_agg(id || ' ' || state || ' ' || attempts || "
                "' ' || next_attempt_at, ',' ORDER BY id) FROM "
                "idem_deliveries")
    for bad, want in (([], 2), (["evt_a", "evt_b"], 2), (["evt_nope"], 1),
                      (["12345678"], 1)):
        before = d.sql(snapshot)
        rc, out, err = ev("retry", *bad)
        check.expect(rc == want and out == "" and d.sql(snapshot) == before,
                     "retry %s: refused (exit %d), nothing changed"
                     % (" ".join(bad) or "without argument", want), (rc, err))

    # --- purge: evt_pay1 (dead + delivered) and evt_beta (delivered) ended
    # two days ago; evt_ref1 and evt_big are pending; two more delivered
    # events ended an hour ago.
    for eid in ("evt_old1", "evt_old2", "evt_new1", "evt_new2"):
        enqueue(eid, "beta", "payment.succeeded")
    take_all()
    d.sql("SELECT idem_outbox_delivered(d.id, 200) FROM idem_deliveries d "
          "JOIN idem_events e ON e.id = d.event WHERE e.event_id IN "
          "('evt_old1', 'evt_old2', 'evt_new1', 'evt_new2')")
    d.sql("UPDATE idem_events SET created_at = now() - interval '3 days' "
          "WHERE event_id IN ('evt_pay1', 'evt_beta', 'evt_old1', "
          "'evt_old2', 'evt_ref1')")
    d.sql("UPDATE idem_deliveries d SET ended_at = now() - interval "
          "'2 days' FROM idem_events e WHERE e.id = d.event AND d.state <> "
          "'pending' AND e.event_id IN ('evt_pay1', 'evt_beta', "
          "'evt_old1', 'evt_old2')")
    d.sql("UPDATE idem_events SET created_at = now() - interval "
          "'2 hours' WHERE event_id IN ('evt_new1', 'evt_new2')")
    d.sql("UPDATE idem_deliveries d SET ended_at = now() - interval "
          "'1 hour' FROM idem_events e WHERE e.id = d.event AND "
          "e.event_id IN ('evt_new1', 'evt_new2')")

    def events():
        return sorted(d.sql("SELECT event_id FROM idem_events").split())

    all8 = events()
    for bad in (["--older-than", "x"], ["--older-than", "-1h"], [],
                ["--older-than", "1d", "--batch", "0"]):
        rc, out, err = ev("purge", *bad)
        check.expect(rc == 2 and events() == all8, "purge %s: exit 2, nothing "
                     "deleted" % (" ".join(bad) or "without --older-than"),
                     (rc, out, err))
    rc, out, err = ev("purge", "--older-than", "1d", "--batch", "2",
                      "--max-batches", "1")
    left = events()
    check.expect(rc == 0 and out.startswith("purged 2 events") and len(left) == 6,
                 "purge --older-than 1d --batch 2 --max-batches 1: exactly 2 of the "
                 "4 old ones", (out, err, left))
    rc, out, err = ev("purge", "--older-than", "1d", "--batch", "1")
    check.expect(rc == 0 and out.startswith("purged 2 events") and events() ==
                 ["evt_big", "evt_new1", "evt_new2", "evt_ref1"],
                 "purge --older-than 1d again: the other 2; pending ones and those "
                 "ended an hour ago stay", (out, err, events()))
    orphans = d.sql("SELECT count(*) FROM idem_deliveries d WHERE NOT "
                    "EXISTS (SELECT 1 FROM idem_events e WHERE e.id = "
                    "d.event)")
    check.expect(orphans == "0" and d.sql("SELECT count(*) FROM idem_deliveries") ==
                 "4", "their deliveries went with them", orphans)
    rc, out, err = ev("purge", "--older-than", "30m")
    check.expect(rc == 0 and out.startswith("purged 2 events") and events() ==
                 ["evt_big", "evt_ref1"], "purge --older-than 30m: the 2 ended an "
                 "hour ago; the pending ones never", (out, events()))

    dispatcher_round(a, d, tmp, ev, enqueue, tenant)
    ordered_take(a, tmp)

    for bad in ([], ["frob"], ["show"], ["show", "a", "b"]):
        rc, out, err = ev(*bad)
        check.expect(rc == 2 and "usage:" in err, "events %s: usage, exit 2"
                     % " ".join(bad), (rc, err))

    d.sql("DROP DATABASE IF EXISTS %s" % DB, db="postgres")
    shutil.rmtree(tmp, ignore_errors=True)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
