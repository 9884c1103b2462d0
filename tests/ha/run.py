#!/usr/bin/env python3
"""run.py - high availability of idem on a real engine: three Patroni-
managed PostgreSQL 15 nodes (synchronous_mode) on one etcd member, two
payments.fcgi instances behind one nginx upstream, each on a libpq
multi-host conninfo with target_session_attrs=read-write, and a steady
mixed load (creates retried with the same key on either instance, replays,
refunds) through three events:

  1 patronictl switchover
  2 failover: kill -9 of the primary's postmaster and its Patroni
  3 rolling restart of both app instances (SIGTERM, start), one at a time

For each: no acknowledged (201) payment or refund missing on the new
primary, no key executed twice, every answer a 201 (a retry: a replay of
the key's first 201) or an honest 409/503 with Retry-After (never a 500,
nor an nginx 502), and the time to the first success printed as a
"# figures:" line: for a switchover or a failover from the moment Patroni
reported the new primary (REST /primary), which is what is held to the
target; what comes before (the election) is Patroni's and is awaited on
its reported state (REST /primary, /sync, /cluster), never in a fixed
window, so that the suite holds on a busy machine.  The failover happens
during webhook delivery: the load's tenant has an endpoint on a receiver on
loopback (tests/lib/webhook_receiver.py), calls to it are held in flight
from the kill until Patroni reports the new primary, and every payment on
the new primary must reach the receiver under its event's webhook-id
there, applied once by the receiver (it deduplicates on webhook-id), no
event of a payment the new primary lacks, every delivery recorded
delivered within a deadline; the time to the first delivery after the
failover is a figure.  Then (5) the
completers of both app hosts, started together on abandoned phased
records of the shared store, run different records at the same time and
each record once.

  tests/ha/run.py --srcdir SRCDIR --builddir BUILDDIR [--keep]

Everything on 127.0.0.1; everything started is stopped at the end (also
on failure, Ctrl-C, SIGTERM).  Prints TAP; exit status 0 when nothing
failed, 1 otherwise, 2 when the environment is unusable (then it prints
"1..0 # SKIP why").  Reuses the fault suite's fixtures (tests/faults/fx.py,
hc.py) and its answer and effect checks (tests/faults/run.py).
"""

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True

THREADS = 4                 # client threads: the machine has 2 CPUs
WARM = 20                   # fresh creates before an event
AFTER = 40                  # fresh creates after it, before the checks
KEY_DEADLINE = 30           # a key retried for at most this long
# Targets for the time to the first success, with ttl 5, loop_wait 1,
# retry_timeout 2, and what it is measured from.  A switchover or a
# failover is timed from the moment Patroni reported the new primary (its
# REST /primary answered 200, polled every 50 ms): the election before it
# is Patroni's business and takes what a busy machine lets it take
# (patronictl's own start is ~0.7 s idle, 2.5 s under this load; a
# failover waits for the leader key's ttl); from there on the time is the
# product's: its pool drops the dead connections and reconnects through
# the multi-host conninfo.  The time from the event and the write gap are
# reported beside it.  A rolling restart is timed from the event.
TARGET = {"switchover": (3.0, "reported"), "failover": (3.0, "reported"),
          "rolling restart": (1.0, "event")}
# No answer waits for a TCP timeout: acquire_timeout 2 s + a libpq
# connect attempt (connect_timeout 2 s) + slack.
SLOWEST = 6.0
# [webhooks] of the app instances: the receiver is on loopback (allowed
# here only), retries come within a second, a call may take the default
# 10 s (a call held by the receiver outlasts the election) and a
# dispatcher takes one delivery at a time, so that a delivery taken and not
# recorded (its primary died between the take and the record) is due again
# once the take's hold lapses, batch x (timeout + 1 s) + 5 s = 16 s after
# it (lib/runtime/dispatcher.c), rather than after the default batch's 115 s.
WEBHOOKS = ("[webhooks]\nallow_private = on\ninterval = 100ms\n"
            "backoff = 200ms\nbackoff_max = 1s\ntimeout = 10s\nbatch = 1\n")
# Every payment's event recorded delivered within this long of Patroni's
# report of the new primary: what is left of the hold above (taken before
# the kill, reported ~5 s after it), the dispatchers' pause after database
# errors (it grows over the election, to a few seconds) and slack; the
# default batch's hold would miss it.
WEBHOOK_DEADLINE = 20
# Pool settings and the conninfo options the deploy docs recommend.
ACQUIRE_TIMEOUT = "2s"
CONN_OPTS = ("connect_timeout=2 keepalives=1 keepalives_idle=5 "
             "keepalives_interval=1 keepalives_count=3 tcp_user_timeout=5000")


def load_faults(srcdir):
    """tests/faults/run.py as a module (its checks use the globals its
    main() sets: fx, hc, q)."""
    path = os.path.join(srcdir, "tests", "faults", "run.py")
    spec = importlib.util.spec_from_file_location("faults_run", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.fx, mod.hc, mod.q = fx, hc, q
    return mod


# --- nginx: the shipped sample with two upstream servers ------------------

def nginx_conf(srcdir, dir, port, socks):
    """conf/nginx.conf with this run's paths and port, the upstream on
    both instances, and the two directives an HA deployment adds: an
    instance is never marked down (max_fails=0: a restarted one is used
    again at once), and a request whose instance went away is passed to
    the other one even though it is a POST (non_idempotent): safe here,
    every POST route carries an Idempotency-Key."""
    with open(os.path.join(srcdir, "conf", "nginx.conf")) as f:
        text = f.read()
    ups = "".join("server unix:%s max_fails=0;\n\t\t" % s for s in socks)
    repl = [
        ("/run/nginx-payments.pid", os.path.join(dir, "nginx.pid")),
        ("/var/log/nginx/", dir + "/"),
        ("/var/lib/nginx/", dir + "/tmp/"),
        ("listen 127.0.0.1:8080;", "listen 127.0.0.1:%d;" % port),
        ("server 127.0.0.1:9000;", ups.rstrip()),
        ("fastcgi_keep_conn on;",
         "fastcgi_keep_conn on;\n\t\t\tfastcgi_next_upstream error timeout "
         "non_idempotent;\n\t\t\tadd_header X-Upstream $upstream_addr "
         "always;"),
    ]
    for old, new in repl:
        if old not in text:
            raise fx.SetupError("conf/nginx.conf has no %r any more" % old)
        text = text.replace(old, new)
    return text


class Nginx:
    def __init__(self, fixtures, srcdir, socks):
        self.fx = fixtures
        self.dir = os.path.join(fixtures.tmp, "nginx")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.port = fx.free_port()
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(nginx_conf(srcdir, self.dir, self.port, socks))
        self.log = os.path.join(self.dir, "stderr.log")
        self.proc = None

    def start(self):
        exe = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.access(exe, os.X_OK):
            raise fx.SetupError("nginx not found")
        args = [exe, "-p", self.dir, "-e", os.path.join(self.dir, "error.log"),
                "-g", "daemon off;", "-c", self.conf]
        log = open(self.log, "ab")
        p = subprocess.run(args[:1] + ["-t"] + args[1:], stdout=log,
                           stderr=log, timeout=30)
        if p.returncode != 0:
            log.close()
            raise fx.SetupError("nginx rejects its config: %s" % self.tail())
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=log)
        log.close()
        self.fx.procs.append(self.proc)

    def stop(self):
        """SIGTERM the master (it stops its workers); SIGKILL both
        after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        workers = patroni.children(self.proc.pid)
        self.proc.terminate()
        try:
            self.proc.wait(10)
            return []
        except subprocess.TimeoutExpired:
            for pid in [self.proc.pid] + workers:
                patroni.kill(pid)
            self.proc.wait(5)
            return ["nginx did not stop on SIGTERM; killed"]

    def tail(self, n=10):
        out = []
        for name in ("stderr.log", "error.log"):
            try:
                with open(os.path.join(self.dir, name),
                          errors="replace") as f:
                    out += f.read().splitlines()[-n:]
            except OSError:
                pass
        return out


# --- the load ---------------------------------------------------------------

class Op:
    """One logical operation: a create or a refund under one key, and
    every answer it got (first try, retries, a deliberate replay)."""
    __slots__ = ("kind", "key", "payment", "answers")

    def __init__(self, kind, key, payment=None):
        self.kind, self.key, self.payment = kind, key, payment
        self.answers = []

    def first_201(self):
        for a in self.answers:
            if a.status == 201:
                return a
        return None


class Load:
    """THREADS clients through nginx.  Each creates a payment under a new
    key, retrying it until a 201 (503, 409 and connection errors are
    retried; so is anything else, to see what it left behind), replays
    every third key once more and refunds every second payment (100 of
    its 1000) under a key of its own, retried the same way.  nginx's
    round robin sends the retries and replays of a key to either
    instance."""

    def __init__(self, ctx, label):
        self.ctx, self.label = ctx, label
        self.ops = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors = []

    def until_201(self, cl, path, op, data):
        deadline = time.monotonic() + KEY_DEADLINE
        for _ in range(600):
            a = cl.request("POST", path,
                           hc.payment_headers(self.ctx.secret, op.key), data,
                           timeout=15)
            op.answers.append(a)
            if a.status == 201 or time.monotonic() > deadline or \
                    (a.status is not None and 400 <= a.status < 500 and
                     a.status != 409):
                return a
            time.sleep(0.1)
        return op.answers[-1]

    def worker(self):
        cl = hc.Client("127.0.0.1", self.ctx.nginx.port, keepalive=True,
                       timeout=15)
        n = 0
        try:
            while not self.stop.is_set() and n < 5000:
                n += 1
                k = self.ctx.key(self.label)
                op = Op("create", k)
                with self.lock:
                    self.ops.append(op)
                data = F.body(k)
                a = self.until_201(cl, F.PAY, op, data)
                if a.status != 201:
                    continue
                if n % 3 == 0:
                    op.answers.append(cl.request(
                        "POST", F.PAY,
                        hc.payment_headers(self.ctx.secret, k), data,
                        timeout=15))
                if n % 2 == 0:
                    rop = Op("refund", self.ctx.key(self.label + "-re"),
                             a.payment_id())
                    with self.lock:
                        self.ops.append(rop)
                    self.until_201(cl, "%s/%s/refunds" % (F.PAY, rop.payment),
                                   rop, hc.body_of({"amount": 100}))
        except Exception:           # noqa: BLE001
            self.errors.append(traceback.format_exc())
        finally:
            cl.close()

    def fresh_201s(self, since=0.0):
        """Answer times of first executions (not replays) after since."""
        with self.lock:
            return [a for op in self.ops for a in list(op.answers)
                    if a.status == 201 and not a.replayed and a.t0 >= since]

    def run(self, event, before=None):
        """Warm up, run before() (if any) then event() (returns its time
        marks), wait for AFTER fresh creates, stop.  Returns event()'s
        dict plus t_event and t_end."""
        ths = [threading.Thread(target=self.worker, daemon=True)
               for _ in range(THREADS)]
        for t in ths:
            t.start()
        marks = {}
        try:
            fx.wait_until("%d payments before the event" % WARM,
                          lambda: len(self.fresh_201s()) >= WARM, 30)
            if before is not None:
                before()
            marks["t_event"] = time.monotonic()
            marks.update(event() or {})
            marks["t_end"] = time.monotonic()
            try:
                fx.wait_until("%d payments after the event" % AFTER,
                              lambda: len(self.fresh_201s(marks["t_end"]))
                              >= AFTER, 30)
            except fx.SetupError:
                pass            # the checks say what is missing
            return marks
        finally:
            self.stop.set()
            for t in ths:
                t.join(KEY_DEADLINE + 20)

    def answers(self):
        return [a for op in self.ops for a in op.answers]


# --- checks -------------------------------------------------------------------

def upstream(a, ctx):
    """Names of the instances nginx tried for answer a."""
    v = a.header("X-Upstream") or ""
    return [ctx.by_sock.get(s.strip()[len("unix:"):], s.strip())
            for s in v.split(",") if s.strip()]


def check_answers(sc, cid, load, ctx):
    """Every answer is a 201 or an honest 503/409 with Retry-After; a
    key's later 201s are replays of its first, byte for byte."""
    bad, counts = [], {}
    for op in load.ops:
        first = None
        for a in op.answers:
            counts[a.status] = counts.get(a.status, 0) + 1
            if a.status == 201:
                if first is None:
                    first = a
                elif not a.replayed or a.body != first.body:
                    bad.append("%s: a later 201 is not a replay of the first"
                               " (%s vs %s)" % (op.key, a.describe(),
                                                first.describe()))
                continue
            why = F.proper_retry_answer(a) if a.status is not None else \
                "no answer from nginx"
            lk = F.leaks(a) if a.status is not None else []
            if why or lk:
                bad.append("%s %s: %s%s: %s [via %s]" % (
                    op.kind, op.key, why or "internal text in the body",
                    " (%s)" % ", ".join(lk) if lk else "", a.describe(),
                    ",".join(upstream(a, ctx))))
    n500 = sum(v for k, v in counts.items() if k is not None and k >= 500
               and k != 503)
    diag = ["answers by status: %s" % ", ".join(
        "%s x %d" % (k if k is not None else "error", v)
        for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))]
    sc.report(cid, not bad and not load.errors and load.ops,
              diag + bad[:10] + load.errors[:2])
    return n500


def effects(load, db, ctx):
    """On the primary now: (lost, duplicated, other problems, acknowledged)
    of load's keys.  Lost: a 201 named a payment or refund that is not
    there.  Duplicated: a key with more than one effect (one refund key
    per payment, so a payment's refunds are its refund key's)."""
    pays = F.payments_by_key(db, ctx.tid)
    refunds = {}
    for r in db.rows("select r.id, r.payment_id from refunds r join payments"
                     " p on p.id = r.payment_id where p.api_key_id = %d"
                     % ctx.tid):
        refunds.setdefault(r["payment_id"], []).append(r["id"])
    lost, dup, bad, n201 = [], [], [], 0
    for op in load.ops:
        a = op.first_201()
        got = pays.get(op.key, []) if op.kind == "create" else \
            refunds.get(op.payment, [])
        if len(got) > 1:
            dup.append("%s %s: %d effects %s" % (op.kind, op.key, len(got),
                                                 got))
        if a is None:
            bad.append("%s %s: never answered 201 within %ds: %s" % (
                op.kind, op.key, KEY_DEADLINE,
                [x.brief() for x in op.answers[-3:]]))
            continue
        n201 += 1
        named = (a.json() or {}).get("id")
        if named not in got:
            lost.append("%s %s: acknowledged %s at +%.2fs, not on the "
                        "primary" % (op.kind, op.key, named,
                                     a.t1 - load.t_event))
    return lost, dup, bad, n201


def check_effects(sc, cid, load, db, ctx):
    lost, dup, bad, n201 = effects(load, db, ctx)
    diag = ["%d keys (%d acknowledged), %d lost, %d executed twice" % (
        len(load.ops), n201, len(lost), len(dup))]
    sc.report(cid, not lost and not dup and not bad and n201 > 0,
              diag + lost[:5] + dup[:5] + bad[:5])
    return len(lost), len(dup)


def executed_on(db):
    """{payment or refund id: PostgreSQL port of the node that ran its
    INSERT} (the EXEC_TRIGGER rows, replicated with the effect)."""
    return {r["id"]: r["port"] for r in db.rows("select id, port from "
                                                "ha_exec")}


def recovery(load, marks, db, old, new):
    """(time from the event to the first success, write gap, failed
    answers, time from Patroni's report of the new primary to the first
    success).  With a new primary, a success is a 201 whose effect ran on
    it, and the write gap is from the last 201 whose effect ran on the old
    one; else (a restart of the app) the first 201 of a request sent
    after the event, the gap is the longest run of failed answers, and
    there is no report."""
    te = marks["t_event"]
    answers = load.answers()
    fails = [a for a in answers if a.status != 201 and a.t1 >= te]
    fresh = [a for a in load.fresh_201s() if a.t1 >= te]
    if new is None:
        ok = [a.t1 for a in fresh if a.t0 >= te]
        took = min(ok) - te if ok else None
        gap = max((a.t1 - a.t0 for a in fails), default=0.0)
        return took, gap, len(fails), None
    where = executed_on(db)
    on = {}
    for a in load.fresh_201s():
        port = where.get((a.json() or {}).get("id"))
        on.setdefault(port, []).append(a.t1)
    firsts = [t for t in on.get(new.port, []) if t >= te]
    if not firsts:
        return None, None, len(fails), None
    t_new = min(firsts)
    last_old = max((t for t in on.get(old.port, []) if t <= t_new),
                   default=te)
    rep = marks.get("t_reported")
    return (t_new - te, t_new - last_old, len(fails),
            t_new - rep if rep is not None else None)


def check_recovery(sc, cid, load, marks, what, db, old=None, new=None):
    took, gap, nfail, after_rep = recovery(load, marks, db, old, new)
    target, basis = TARGET[what]
    measured = {"event": took, "gap": gap, "reported": after_rep}[basis]
    slowest = max((a.elapsed for a in load.answers()
                   if a.t1 >= marks["t_event"]), default=0.0)
    rep = marks.get("t_reported")
    fig = {"event": what, "failed answers": nfail,
           "first success": took, "gap": gap, "slowest": slowest,
           "after report": after_rep,
           "reported": rep - marks["t_event"] if rep is not None else None}
    diag = ["first success%s %s after the event, %s after the last write "
            "on the old primary, %s after Patroni reported the new "
            "primary (%s after the event) (target <= %.0fs after %s); %d "
            "answers not 201; slowest answer %.2fs (bound %.0fs)" % (
                " on the new primary (%s)" % new.name if new else "",
                "%.2fs" % took if took is not None else "never",
                "%.2fs" % gap if gap is not None else "-",
                "%.2fs" % after_rep if after_rep is not None else "-",
                "%.2fs" % fig["reported"] if rep is not None else "-",
                target, {"event": "the event", "gap": "that write",
                         "reported": "the report"}[basis], nfail,
                slowest, SLOWEST)]
    sc.report(cid, measured is not None and measured <= target and
              slowest <= SLOWEST, diag)
    return fig


# --- webhooks through the failover -----------------------------------------

class Webhooks:
    """The load's tenant's endpoint for payment.succeeded, registered
    through nginx, on a receiver on loopback that applies a webhook-id's
    first 2xx delivery and only acknowledges the later ones
    (tests/lib/webhook_receiver.py)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.rcv = Receiver()
        self.id = None
        self.in_flight = 0      # deliveries held across the election
        cl = hc.Client("127.0.0.1", ctx.nginx.port, keepalive=False)
        a = cl.request("POST", "/v1/webhook_endpoints",
                       hc.payment_headers(ctx.secret, ctx.key("wh")),
                       hc.body_of({"url": self.rcv.url,
                                   "events": ["payment.succeeded"]}),
                       timeout=15)
        cl.close()
        doc = a.json() if a.status == 201 else None
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), int):
            self.rcv.stop()
            raise fx.SetupError("POST /v1/webhook_endpoints: %s"
                                % a.describe())
        self.id, self.secret = doc["id"], doc["secret"]

    def hold(self):
        """Hold the deliveries arriving from now on at the receiver, until
        one is in flight."""
        self.rcv.hold()
        fx.wait_until("a delivery held in flight by the receiver",
                      lambda: self.rcv.waiting >= 1, 20, 0.01)

    def release(self):
        """Answer the held deliveries (204), their calls still waiting
        (the dispatchers' timeout is longer than the election)."""
        self.in_flight = self.rcv.waiting
        self.rcv.release()

    def close(self):
        self.rcv.release()
        cl = hc.Client("127.0.0.1", self.ctx.nginx.port, keepalive=False)
        cl.request("DELETE", "/v1/webhook_endpoints/%d" % self.id,
                   hc.payment_headers(self.ctx.secret, None), timeout=15)
        cl.close()
        self.rcv.stop()

    def check(self, sc, load, marks, new):
        """Checks 5 and 6 of the failover, on the new primary (node new),
        and the figures line."""
        db = self.ctx.primary_db()
        rep = marks["wall_reported"]
        t_wait = time.monotonic()
        left = rep + WEBHOOK_DEADLINE - time.time()
        sql_open = ("select count(*) from idem_deliveries where endpoint = "
                    "%d and state <> 'delivered'" % self.id)
        try:
            fx.wait_until("every delivery recorded delivered",
                          lambda: db.int(sql_open) == 0, max(left, 0.0),
                          0.2)
            all_done = True
        except fx.SetupError:
            all_done = False
        t_wait = time.monotonic() - t_wait
        rows = db.rows(
            "select e.event_id, e.body, d.state, d.attempts, x.port, "
            "extract(epoch from x.at) as at from idem_deliveries d join "
            "idem_events e on e.id = d.event left join ha_exec x on x.id = "
            "'delivery ' || d.id where d.endpoint = %d" % self.id)
        ev = {r["event_id"]: r for r in rows}
        of = {}                 # event id -> the payment its data names
        for r in rows:
            of[r["event_id"]] = (json.loads(r["body"]).get("data") or
                                 {}).get("id")
        keys = {op.key for op in load.ops if op.kind == "create"}
        pays = {pid for k, ids in F.payments_by_key(db, self.ctx.tid).items()
                if k in keys for pid in ids}
        got = self.rcv.got()
        bad = []
        if not all_done:
            bad.append("not every delivery recorded delivered %ds after "
                       "Patroni reported the new primary: %s" % (
                           WEBHOOK_DEADLINE, sorted(
                               (r["event_id"], r["state"], r["attempts"])
                               for r in rows if r["state"] != "delivered")
                           [:5]))
        missing = sorted(pays - set(of.values()))
        if missing:
            bad.append("payments on the new primary without an event for "
                       "the endpoint: %s" % missing[:5])
        stray = sorted(e for e, p in of.items() if p not in pays)
        if stray:
            bad.append("events on the new primary of payments not made by "
                       "the load or not there: %s" % stray[:5])
        arrived = {d.id for d in got}
        unsent = sorted(set(ev) - arrived)
        if unsent:
            bad.append("events that never reached the receiver: %s"
                       % unsent[:5])
        for d in got:
            why = verify(self.secret, d.id, d.timestamp, d.signature, d.body)
            try:
                pid = (d.json().get("data") or {}).get("id")
            except ValueError:
                pid = None
            if d.id not in ev:
                bad.append("delivered %s (payment %s): no such event on the "
                           "new primary" % (d.id, pid))
            elif pid != of[d.id] or pid not in pays or \
                    d.body.decode() != ev[d.id]["body"]:
                bad.append("delivery of %s: its body is not the event's on "
                           "the new primary (payment %s)" % (d.id, pid))
            if why is not None:
                bad.append("delivery of %s: signature: %s" % (d.id, why))
        if self.in_flight < 1:
            bad.append("no delivery was in flight from the kill to "
                       "Patroni's report")
        sc.report("5", not bad and len(pays) > 0, [
            "%d payments of the load on the new primary, %d events for the "
            "endpoint, %d deliveries received" % (len(pays), len(ev),
                                                  len(got))] + bad[:10])
        applied = self.rcv.applied_ids()
        per = {}
        for wid in applied:
            per.setdefault(of.get(wid), []).append(wid)
        twice = {p: w for p, w in per.items() if len(w) > 1}
        sc.report("6", applied == sorted(ev) and not twice and len(ev) > 0,
                  ["%d events applied (want the %d on the new primary); "
                   "payments applied under two webhook-ids: %s; events not "
                   "applied: %s; applied, not on the new primary: %s" % (
                       len(applied), len(ev), sorted(twice.items())[:3],
                       sorted(set(ev) - set(applied))[:5],
                       sorted(set(applied) - set(ev))[:5])])
        ats = sorted(r["at"] for r in rows if r["at"] is not None
                     and new is not None and r["port"] == new.port)
        redeliv = len(got) - len(arrived)
        node = {n.port: n.name for n in self.ctx.ha.nodes}
        held = ["received %d times, recorded on %s" % (
            len(self.rcv.got(e)), node.get((ev.get(e) or {}).get("port"),
                                           "none")) for e in
                self.rcv.held_ids]
        self.ctx.tap.note(
            "figures: webhooks through the failover: %d events, %d "
            "deliveries received (%d again, the same webhook-id); %d held "
            "in flight from the kill to Patroni's report (%s; the new "
            "primary %s); %d recorded delivered on the new primary: "
            "delivery resumed (the first) %s after the kill, %s after "
            "Patroni reported the new primary; the last %s after the "
            "report (the checks waited %.2fs for it)" % (
                len(ev), len(got), redeliv, self.in_flight,
                ", ".join(held), new.name if new else None, len(ats),
                "%.2fs" % (ats[0] - marks["wall_kill"]) if ats else "never",
                "%.2fs" % (ats[0] - rep) if ats else "-",
                "%.2fs" % (ats[-1] - rep) if ats else "-", t_wait))


# --- the events ---------------------------------------------------------------

class Ctx:
    def __init__(self, fixtures, tap, ha, srcdir):
        self.fx, self.tap, self.ha, self.srcdir = fixtures, tap, ha, srcdir
        self.seq = 0
        self.lock = threading.Lock()
        self.apps = []
        self.by_sock = {}
        self.nginx = None
        self.secret = self.tid = None
        self.figures = []
        self.loads = []

    def key(self, label):
        with self.lock:
            self.seq += 1
            return "%s-%s-%d" % (label, F.RUN, self.seq)

    def primary_db(self):
        return fx.wait_until("a primary", self.ha.primary, 30, 0.1).db


def event_checks(ctx, sc, load, marks, what, old=None, new=None):
    """The three checks every event makes, and its figures line."""
    load.t_event = marks["t_event"]
    db = ctx.primary_db()
    n500 = check_answers(sc, "2", load, ctx)
    fig = check_recovery(sc, "3", load, marks, what, db, old, new)
    lost, dup = check_effects(sc, "4", load, db, ctx)
    fig.update(lost=lost, duplicated=dup, http500=n500)
    ctx.figures.append(fig)
    ctx.loads.append(load)
    ctx.tap.note("figures: %s: lost %d, duplicated %d, 5xx other than 503 "
                 "%d, first success %s after the event, %s after Patroni "
                 "reported the new primary (reported %s after the event; "
                 "write gap %s, %d answers not 201, slowest %.2fs)" % (
                     what, lost, dup, n500,
                     "%.2fs" % fig["first success"]
                     if fig["first success"] is not None else "never",
                     "%.2fs" % fig["after report"]
                     if fig["after report"] is not None else "-",
                     "%.2fs" % fig["reported"]
                     if fig["reported"] is not None else "-",
                     "%.2fs" % fig["gap"] if fig["gap"] is not None
                     else "-", fig["failed answers"], fig["slowest"]))


def e_switchover(ctx, sc):
    old = ctx.ha.primary()
    out = {}

    watch = patroni.PrimaryWatch(ctx.ha, old)

    def event():
        watch.start()
        rc, text = ctx.ha.patronictl("switchover", "--force", timeout=240)
        out.update(rc=rc, text=text)
        # the load runs on until Patroni reports the new primary
        watch.wait()
        return {"t_reported": watch.t_reported}
    load = Load(ctx, "sw")
    marks = load.run(event)
    ctx.ha.wait_healthy(3)
    new = ctx.ha.primary()
    ok = out.get("rc") == 0 and new is not None and new is not old
    sc.report("1", ok, ["patronictl switchover exit %s; primary %s -> %s"
                        % (out.get("rc"), old.name, new.name if new else
                           None)] + ([] if ok else
                                     out.get("text", "").splitlines()[-8:]))
    event_checks(ctx, sc, load, marks, "switchover", old, new)


def e_failover(ctx, sc):
    old = ctx.ha.primary()
    sync = ctx.ha.sync_standby()
    watch = patroni.PrimaryWatch(ctx.ha, old)
    try:
        wh = Webhooks(ctx)
    except fx.SetupError as e:
        wh, why = None, str(e)

    def before():
        if wh is not None:
            wh.hold()

    def event():
        watch.start()
        t_kill = time.time()
        old.kill9()
        # Patroni's election (the leader key's ttl, then its loop): the
        # load runs on until it reports the new primary
        try:
            watch.wait()
        finally:
            # the held calls answered now: their dispatchers record that
            # on the new primary, or (the connection to the old one
            # failing) deliver them again once their hold lapses
            if wh is not None:
                wh.release()
        return {"t_reported": watch.t_reported, "wall_kill": t_kill,
                "wall_reported": time.time() - (time.monotonic() -
                                                watch.t_reported)}
    try:
        e_failover_run(ctx, sc, old, sync, wh, before, event)
    finally:
        if wh is not None:
            wh.close()
    if wh is None:
        sc.report("5", False, [why])
        sc.report("6", False, [why])


def e_failover_run(ctx, sc, old, sync, wh, before, event):
    load = Load(ctx, "fo")
    marks = load.run(event, before)
    reinit = []
    try:
        ctx.ha.wait_healthy(2)
    except fx.SetupError:
        # Patroni's own race (Ha.diverged): do what its operator would.
        stuck = ctx.ha.diverged()
        if not stuck:
            raise
        for n in stuck:
            rc, out = ctx.ha.patronictl("reinit", ctx.ha.scope, n.name,
                                        "--force", "--wait", timeout=180)
            reinit.append("%s left on the old timeline (Patroni 3.0.2's "
                          "check of a replica raced its replay): patronictl "
                          "reinit exit %d%s" % (n.name, rc, "" if rc == 0
                                                else ": " + out.strip()))
        ctx.ha.wait_healthy(2)
    new = ctx.ha.primary()
    left = old.postmaster_pid() is None and not old.alive()
    now_sync = ctx.ha.sync_standby()
    ok = new is not None and new is sync and left and now_sync is not None
    sc.report("1", ok, [
        "killed %s (postmaster and Patroni: %s); promoted %s (the "
        "synchronous standby was %s); synchronous standby now %s" % (
            old.name, "gone" if left else "STILL RUNNING",
            new.name if new else None, sync.name if sync else None,
            getattr(now_sync, "name", None))] + reinit + ([] if ok else [
                "members: %s" % ctx.ha.members()]))
    event_checks(ctx, sc, load, marks, "failover", old, new)
    if wh is not None:
        wh.check(sc, load, marks, new)


def e_rolling(ctx, sc):
    notes = []

    def event():
        for app in ctx.apps:
            t = time.monotonic()
            problem = app.stop_app()
            t_down = time.monotonic()
            app.start_app()
            t_up = time.monotonic()
            # back in the upstream: it served a request of the load
            fx.wait_until("%s serves again" % app.name, lambda: any(
                a.t0 > t_up and app.name in upstream(a, ctx)
                for a in load.answers()), 20, 0.05)
            notes.append("%s: drained and exited %.2fs after SIGTERM%s, "
                         "listening again %.2fs later" % (
                             app.name, t_down - t, " (%s)" % problem
                             if problem else "", t_up - t_down))
        return {}
    load = Load(ctx, "rr")
    marks = load.run(event)
    ok = len(notes) == len(ctx.apps) and all(a.app.poll() is None
                                             for a in ctx.apps)
    passed = sum(1 for a in load.answers() if len(upstream(a, ctx)) > 1)
    sc.report("1", ok, notes + ["%d requests passed by nginx to the other "
                                "instance (fastcgi_next_upstream)" % passed])
    event_checks(ctx, sc, load, marks, "rolling restart")


def e_overall(ctx, sc):
    """Across the run: both instances served, keys crossed instances, and
    every acknowledged effect of every event is on the final primary."""
    served, crossed = {}, 0
    for load in ctx.loads:
        for op in load.ops:
            ups = set()
            for a in op.answers:
                for u in upstream(a, ctx)[-1:]:
                    served[u] = served.get(u, 0) + 1
                    ups.add(u)
            crossed += len(ups) > 1
    names = [a.name for a in ctx.apps]
    sc.report("1", all(served.get(n, 0) > 0 for n in names) and crossed > 0,
              ["answers by instance: %s; keys answered by both: %d" % (
                  served, crossed)])
    db = ctx.primary_db()
    lost = dup = 0
    for load in ctx.loads:
        l, d, _, _ = effects(load, db, ctx)
        lost, dup = lost + len(l), dup + len(d)
    known = {op.key for load in ctx.loads for op in load.ops}
    stray = [k for k in F.payments_by_key(db, ctx.tid) if k not in known]
    sc.report("2", lost == 0 and dup == 0 and not stray, [
        "on the final primary: %d lost, %d executed twice, %d payments of "
        "unknown keys" % (lost, dup, len(stray))])


# --- two app hosts' completers on the shared store -------------------------

COMPLETER_RECORDS = 6       # abandoned records, three per completer


def canonical(doc):
    """RFC 8785 for what these bodies hold (ASCII strings, integers)."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def abandoned_records(db, tid, label, n):
    """n phased records of tenant tid as an owner killed after
    'payment_created' leaves them: in progress at that point, unleased,
    never attempted, with their pending payment.  The fingerprint is the
    app's: SHA-256 of method, path and canonical body, NUL-separated.
    [(key, record id, payment id)]."""
    out = []
    for i in range(n):
        key = "%s-%s-%d" % (label, F.RUN, i)
        body = canonical({"amount": 700 + i, "currency": "eur",
                          "description": key})
        fpr = hashlib.sha256(b"POST\0" + F.PAY.encode() + b"\0" +
                             body.encode()).hexdigest()
        rid = db.int(
            "insert into idempotency_keys (api_key_id, key, request_method, "
            "request_path, request_fingerprint, state, recovery_point, "
            "request_body, expires_at) values (%d, %s, 'POST', %s, "
            "decode(%s, 'hex'), 'in_progress', 'payment_created', "
            "convert_to(%s, 'UTF8'), now() + interval '7 days') returning id"
            % (tid, q(key), q(F.PAY), q(fpr), q(body)))
        pid = "pay_ha_%s_%d" % (F.RUN, i)
        db.run("insert into payments (id, api_key_id, amount, currency, "
               "status, description, idem_key_id) values (%s, %d, %d, "
               "'eur', 'pending', %s, %d)" % (q(pid), tid, 700 + i, q(key),
                                              rid))
        out.append((key, rid, pid))
    return out


def e_completers(ctx, sc):
    """Each app host runs its completer (payments.fcgi complete, with its
    own config plus the acquirer, so that the create is phased) at the same
    time on the shared store: both inside an acquirer call at once, on
    different records; every record attempted once, charged once."""
    import lcenv
    sim = lcenv.Simulator(os.path.join(ctx.srcdir, "tests", "acquirer",
                                       "acquirer.py"),
                          os.path.join(ctx.fx.tmp, "acquirer.log"))
    try:
        db = ctx.primary_db()
        cdb = _ConnDB(ctx.ha.conninfo("postgres", CONN_OPTS))
        _, tid = ctx.fx.tenant(cdb, "ha-c-%s" % F.RUN)
        recs = abandoned_records(db, tid, "ha-c", COMPLETER_RECORDS)
        confs = []
        for app in ctx.apps:
            conf = app.conf.replace(".ini", "-completer.ini")
            with open(app.conf) as f:
                text = f.read()
            with open(conf, "w") as f:
                f.write(text + "\n[payments]\nacquirer_url = %s\n" % sim.url)
            os.chmod(conf, 0o644)
            confs.append(conf)
        st0 = sim.stats()
        sim.control("hold", count=2)
        per = COMPLETER_RECORDS // len(confs)
        procs = [subprocess.Popen([ctx.fx.app_bin, "-c", c, "complete",
                                   str(per)], stdin=subprocess.DEVNULL,
                                  env=dict(os.environ,
                                           **ctx.fx.app_env),
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for c in confs]
        both = False
        try:
            fx.wait_until("both completers inside an acquirer call",
                          lambda: sim.stats()["held"] >= st0["held"] + 2,
                          30, 0.05)
            both = True
            leased = db.int("select count(*) from idempotency_keys where "
                            "api_key_id = %d and lease_until > now()" % tid)
        finally:
            sim.release()
            outs = []
            for p in procs:
                o, e = p.communicate(timeout=120)
                outs.append((p.returncode, o.decode().strip(),
                             e.decode(errors="replace").strip()[-300:]))
        sc.report("1", both and leased == 2, [
            "both completers held in an acquirer call at once: %s; records "
            "leased then: %d (want 2)" % (both, leased if both else -1)])
        st = sim.stats()
        rows = db.rows("select key, state, response_status, attempts from "
                       "idempotency_keys where api_key_id = %d order by key"
                       % tid)
        pays = db.rows("select id, status, acquirer_charge from payments "
                       "where api_key_id = %d order by id" % tid)
        want_out = "completed %d keys, 0 left" % per
        bad = [r for r in rows if (r["state"], r["response_status"],
                                   r["attempts"]) != ("completed", 201, 1)]
        ok = all((rc, o) == (0, want_out) for rc, o, _ in outs) and \
            len(rows) == COMPLETER_RECORDS and not bad and \
            st["charges"] - st0["charges"] == COMPLETER_RECORDS and \
            st["conflicts"] == st0["conflicts"] and \
            [p["status"] for p in pays] == ["succeeded"] * COMPLETER_RECORDS
        sc.report("2", ok, [
            "completers: %s (want exit 0, %r each)" % (outs, want_out),
            "records not completed 201 after exactly one attempt: %s" % bad,
            "acquirer charges %d (want %d), conflicts %d; payments %s" % (
                st["charges"] - st0["charges"], COMPLETER_RECORDS,
                st["conflicts"] - st0["conflicts"],
                [p["status"] for p in pays])])
    finally:
        sim.stop()


EVENT_CHECKS = [
    ("2", "every answer a 201 (a key's later 201s replays of its first) "
          "or an honest 503/409 with Retry-After: no 500, no 502"),
    ("3", "first success within the target (on the new primary, if any); "
          "no answer waited for a TCP timeout"),
    ("4", "no acknowledged payment or refund lost on the primary, no key "
          "executed twice"),
]

EVENTS = [
    (1, "switchover", e_switchover,
     [("1", "patronictl switchover moves the primary")] + EVENT_CHECKS),
    (2, "failover", e_failover,
     [("1", "kill -9 of postmaster and Patroni: the synchronous standby is "
            "promoted, a synchronous standby remains")] + EVENT_CHECKS + [
         ("5", "during webhook delivery (a call held in flight from the "
               "kill to Patroni's report): "
               "every payment on the new primary reached the receiver "
               "under its event's webhook-id there, signed, its body as "
               "stored; nothing of a payment the new primary lacks; every "
               "delivery recorded delivered within %ds of Patroni's report"
               % WEBHOOK_DEADLINE),
         ("6", "the receiver, deduplicating on webhook-id, applied every "
               "event exactly once, each payment under one webhook-id"),
     ]),
    (3, "rolling restart", e_rolling,
     [("1", "each instance drains on SIGTERM, restarts and serves "
            "again")] + EVENT_CHECKS),
    (4, "overall", e_overall, [
        ("1", "both instances served; retries of a key crossed instances"),
        ("2", "every acknowledged effect of the run is on the final "
              "primary, once"),
    ]),
    (5, "completers of two app hosts", e_completers, [
        ("1", "the two hosts' completers, started together, run different "
              "records at the same time (both held in an acquirer call, "
              "each record leased by one)"),
        ("2", "every abandoned record completed 201 after exactly one "
              "attempt, charged once, its payment succeeded"),
    ]),
]


# Which node executed each payment and refund, and recorded each webhook
# delivery delivered: written in the effect's own transaction, so it is on
# a node exactly when the effect is.  (The test's private database only;
# the app does not know of it.)
EXEC_TRIGGER = r"""
create table ha_exec (id text primary key, port int not null,
	at timestamptz not null default clock_timestamp());
create function ha_exec() returns trigger language plpgsql as $$
begin
	insert into ha_exec (id, port) values (new.id, inet_server_port());
	return new;
end $$;
create trigger ha_exec after insert on payments
	for each row execute function ha_exec();
create trigger ha_exec after insert on refunds
	for each row execute function ha_exec();
create function ha_delivered() returns trigger language plpgsql as $$
begin
	insert into ha_exec (id, port) values ('delivery ' || new.id,
	    inet_server_port());
	return new;
end $$;
create trigger ha_delivered after update of state on idem_deliveries
	for each row when (new.state = 'delivered' and old.state = 'pending')
	execute function ha_delivered();
"""


def setup(ctx, fixtures, tap):
    ha = ctx.ha
    t = time.monotonic()
    ha.start(90)
    tap.note("etcd + %d Patroni nodes healthy in %.1fs (leader %s, "
             "synchronous standby %s)" % (
                 len(ha.nodes), time.monotonic() - t, ha.primary().name,
                 getattr(ha.sync_standby(), "name", None)))
    conninfo = ha.conninfo("postgres", CONN_OPTS)
    fixtures.idemctl(conninfo, "migrate", "--dir",
                     os.path.join(ctx.srcdir, "sql"), "--dir",
                     os.path.join(ctx.srcdir, "apps", "payments", "sql"))
    cdb = _ConnDB(conninfo)
    cdb.db.run(EXEC_TRIGGER)
    ctx.secret, ctx.tid = fixtures.tenant(cdb, "ha")
    for i in (1, 2):
        st = fx.Stack(fixtures, "app%d" % i, conninfo, threads=4,
                      pool_size=4, acquire_timeout=ACQUIRE_TIMEOUT,
                      request_timeout="10s")
        # nginx's workers run as www-data (conf/nginx.conf): the app's
        # socket (mode 0660) gets their group, as docs/deploy.md says.
        if os.geteuid() == 0:
            with open(st.conf) as f:
                text = f.read()
            with open(st.conf, "w") as f:
                f.write(text.replace("[server]\n",
                                     "[server]\nsocket_group = www-data\n",
                                     1))
        with open(st.conf, "a") as f:
            f.write("\n" + WEBHOOKS)
        st.start_app()
        ctx.apps.append(st)
        ctx.by_sock[st.sock] = st.name
    ctx.nginx = Nginx(fixtures, ctx.srcdir, [a.sock for a in ctx.apps])
    ctx.nginx.start()
    cl = hc.Client("127.0.0.1", ctx.nginx.port, keepalive=False)
    fx.wait_until("GET /healthz -> 200 through nginx", lambda: cl.request(
        "GET", "/healthz", timeout=3).status == 200, 30, 0.1)


class _ConnDB:
    """What Fixtures.tenant() wants of a cluster: conninfo and db."""

    def __init__(self, conninfo):
        self.conninfo = conninfo
        self.db = harness.DB(conninfo)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srcdir", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--builddir")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temp dir (logs, data directories)")
    args = ap.parse_args()
    srcdir = os.path.abspath(args.srcdir)
    builddir = os.path.abspath(args.builddir or srcdir)

    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(srcdir, "tests", "faults"))
    sys.path.insert(0, os.path.join(srcdir, "tests", "integration"))
    sys.path.insert(0, os.path.join(srcdir, "tests", "lifecycle"))
    sys.path.insert(0, os.path.join(srcdir, "tests", "lib"))
    global fx, hc, q, F, patroni, harness, Receiver, verify
    import fx                   # noqa: F811
    import hc                   # noqa: F811
    import harness             # noqa: F811
    import patroni              # noqa: F811
    from webhook_receiver import Receiver, verify   # noqa: F811
    q = harness.q
    F = load_faults(srcdir)

    # tests/run gives the suite 400 s: end (and clean up) before that
    F.bounded_run(390)

    tap = F.Tap()
    tmp = tempfile.mkdtemp(prefix="idem-ha.")
    os.chmod(tmp, 0o755)
    fixtures = ha = ctx = None
    t_start = time.monotonic()
    try:
        missing = [p for p, pkg in (("patroni", "patroni"),
                                    ("patronictl", "patroni"),
                                    ("etcd", "etcd-server"),
                                    ("nginx", "nginx-light"))
                   if shutil.which(p) is None and
                   not os.access("/usr/sbin/" + p, os.X_OK)]
        if missing:
            tap.line("1..0 # SKIP not installed: %s" % ", ".join(missing))
            return 2
        try:
            fixtures = fx.Fixtures(srcdir, builddir, tmp)
        except fx.SetupError as e:
            tap.line("1..0 # SKIP %s" % e)
            return 2
        scope = "idem-ha-" + uuid.uuid4().hex[:8]
        sample = os.path.join(srcdir, "conf", "patroni.yml")
        try:
            dcs = patroni.sample_dcs(sample)
        except Exception as e:      # noqa: BLE001
            tap.result(False, "conf/patroni.yml has bootstrap.dcs with %s"
                       % ", ".join(patroni.DCS_KEYS), [repr(e)])
            return 1
        # the targets are the for these timings
        want = dict(ttl=5, loop_wait=1, retry_timeout=2,
                    synchronous_mode=True)
        tap.result(all(dcs[k] == v for k, v in want.items()),
                   "conf/patroni.yml, whose bootstrap.dcs this suite runs, "
                   "has ttl 5, loop_wait 1, retry_timeout 2, "
                   "synchronous_mode", ["%s: %s" % kv for kv in dcs.items()])
        ha = patroni.Ha(tmp, fixtures.pg_bindir, scope, dcs)
        ctx = Ctx(fixtures, tap, ha, srcdir)
        tap.note("HA tests, run %s, scope %s, temp dir %s" % (F.RUN, scope,
                                                             tmp))
        try:
            setup(ctx, fixtures, tap)
            setup_error = None
        except Exception as e:      # noqa: BLE001
            setup_error = "setup failed: %s" % e
            for n in ha.nodes:
                tap.diag(["%s: %s" % (n.name, ln) for ln in n.tail(6)])
        for num, title, fn, checks in EVENTS:
            sc = F.Scenario(tap, num, title, checks)
            sc.stacks = ctx.apps
            if setup_error:
                sc.fail_rest([setup_error])
                continue
            t0 = time.monotonic()
            if not sc.run(fn, ctx, "event %d" % num):
                for n in ha.nodes:
                    tap.diag(["%s: %s" % (n.name, ln) for ln in n.tail(6)])
            tap.note("event %d (%s) took %.1fs"
                     % (num, title, time.monotonic() - t0))
    except (KeyboardInterrupt, TimeoutError) as e:
        tap.result(False, "run interrupted: %s" % e)
    finally:
        signal.alarm(0)
        problems = []
        if ctx is not None and ctx.nginx is not None:
            problems += ctx.nginx.stop()
        if fixtures is not None:
            problems += fixtures.cleanup()
        if ha is not None:
            problems += ha.cleanup()
        for p in problems:
            tap.note("cleanup: %s" % p)
        tap.finish(tmp, args.keep, t_start)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
