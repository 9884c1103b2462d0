#!/usr/bin/env python3
"""run.py - fault-injection tests of idem: the database restarts and fails
over, clients disconnect, the worker is killed, the pool runs dry, a load
of retries and duplicates, and a few security properties.

  tests/faults/run.py --srcdir SRCDIR --builddir BUILDDIR [--only N,...]
                      [--keep]

Starts its own PostgreSQL clusters (unix sockets only), its own lighttpd
on 127.0.0.1 and payments.fcgi from BUILDDIR, and stops everything at the
end (also on failure, Ctrl-C, SIGTERM).  Prints TAP ("ok N - ...",
"not ok N - ...", diagnostics as "# ..." lines, the plan last); exit
status 0 when nothing failed, 1 otherwise, 2 when the environment is
unusable.

Scenarios (--only takes their numbers):
  1 PostgreSQL restarted (pg_ctl restart -m fast) under load
  2 failover: primary + synchronous standby; primary stopped, standby
    promoted, under load
  3 clients disconnecting right after sending their request
  4 the app killed with SIGKILL mid-transaction (lighttpd respawns it)
  5 pool exhaustion: pool_size 2, 8 threads, slow inserts
  6 load: 32 threads, 20 000 requests, retries and concurrent duplicates
  7 security: SQL-looking input, tenant isolation, no internal error text
    in responses, no secrets or keys in the app's log

Faults that need a slow statement use triggers installed by this program
on its private database: an INSERT into payments sleeps N seconds when
the description is "slow:N" and fails with an internal message when it is
"fail:...".  Scenario 4 holds a table lock from a psql session of its own
to stop the first flight in its tracks.  Every payment is posted with customer = its idempotency
key, so the payments of a key can be counted.

Standard library only; reuses tests/integration/harness.py (psql).
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from missing import missing_tool  # noqa: E402

PAY = "/v1/payments"
RUN = "f" + uuid.uuid4().hex[:10]       # in every key this run sends
RESTARTS = 8                            # scenario 1


# --- TAP ----------------------------------------------------------------------

class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0
        self.lock = threading.Lock()

    def line(self, text):
        with self.lock:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()

    def diag(self, lines):
        for d in lines:
            for ln in str(d).splitlines():
                self.line("#   " + ln)

    def result(self, ok, name, diag=(), todo=None, skip=None):
        self.n += 1
        if skip is not None:
            self.line("ok %d - %s # SKIP %s" % (self.n, name, skip))
        elif ok:
            self.line("ok %d - %s" % (self.n, name))
        else:
            if todo is None:
                self.failed += 1
            self.line("not ok %d - %s%s" % (self.n, name,
                                            " # TODO " + todo if todo else ""))
        self.diag(diag)

    def note(self, text):
        self.line("# " + text)

    def finish(self, tmp, keep, t_start):
        """The run's end: tmp kept (--keep) or removed, its time, the
        plan."""
        if keep:
            self.note("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        self.note("took %.1fs" % (time.monotonic() - t_start))
        self.line("1..%d" % self.n)


def bounded_run(seconds):
    """SIGTERM and SIGHUP end the run as Ctrl-C does (cleaning up), and
    so does its running longer than seconds."""
    def on_signal(sig, frame):
        raise KeyboardInterrupt("signal %d" % sig)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    def on_alarm(sig, frame):
        raise TimeoutError("the whole run took longer than %d s" % seconds)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)


class Scenario:
    """The checks of one scenario, declared up front so that a scenario
    that dies half-way still reports every one of them."""

    def __init__(self, tap, num, title, checks):
        self.tap = tap
        self.num = num
        self.title = title
        self.checks = list(checks)      # [(id, text)]
        self.done = set()
        self.stacks = []

    def name(self, cid):
        text = dict(self.checks)[cid]
        return "%d.%s %s: %s" % (self.num, cid, self.title, text)

    def report(self, cid, ok, diag=(), todo=None):
        diag = list(diag)
        if not ok and todo is None:
            for st in self.stacks:
                tail = st.log_tail(12)
                if tail:
                    diag.append("last app log lines (%s):" % st.name)
                    diag.extend("  " + ln for ln in tail.splitlines())
        self.done.add(cid)
        self.tap.result(ok, self.name(cid), diag, todo=todo)

    def skip_rest(self, reason):
        for cid, _ in self.checks:
            if cid not in self.done:
                self.done.add(cid)
                self.tap.result(True, self.name(cid), skip=reason)

    def fail_rest(self, why):
        for cid, _ in self.checks:
            if cid not in self.done:
                self.report(cid, False, why)
                why = ["(see the failure above)"]

    def run(self, fn, ctx, what):
        """fn(ctx, self); if it dies (what died), the checks it did not
        report fail.  True when it returned."""
        try:
            fn(ctx, self)
            return True
        except KeyboardInterrupt:
            self.fail_rest(["interrupted"])
            raise
        except Exception:       # noqa: BLE001
            self.fail_rest(["%s died:" % what,
                            traceback.format_exc().rstrip()])
            return False


# --- helpers ------------------------------------------------------------------

class Ctx:
    """What the scenarios share: fixtures, the main cluster, the client."""

    def __init__(self, fixtures, tap):
        self.fx = fixtures
        self.tap = tap
        self.main = None        # Cluster
        self.seq = 0
        self.lock = threading.Lock()
        self.secrets = []       # every API key secret of the run
        self.stacks = []

    def key(self, label):
        with self.lock:
            self.seq += 1
            return "%s-%s-%d" % (label, RUN, self.seq)

    def tenant(self, cluster, name):
        secret, tid = self.fx.tenant(cluster, name)
        self.secrets.append(secret)
        return secret, tid

    def stack(self, sc, name, conninfo, **kw):
        st = fx.Stack(self.fx, name, conninfo, **kw)
        sc.stacks.append(st)
        self.stacks.append(st)
        return st


def body(key, amount=1000, description=None, currency="eur"):
    b = {"amount": amount, "currency": currency, "customer": key}
    if description is not None:
        b["description"] = description
    return hc.body_of(b)


def post(cl, secret, key, data, timeout=15, quoted=False):
    return cl.request("POST", PAY, hc.payment_headers(secret, key, quoted),
                      data, timeout=timeout)


def fresh(st, timeout=15):
    return hc.Client(st.host, st.port, keepalive=False, timeout=timeout)


def proper_retry_answer(a):
    """None if a is a well-formed 503 service-unavailable or 409
    idempotency-key-in-flight with Retry-After; else what is wrong."""
    if a.status == 503:
        if not a.problem_ok(503, "service-unavailable"):
            return "503 that is not a service-unavailable problem"
    elif a.status == 409:
        if not a.problem_ok(409, "idempotency-key-in-flight"):
            return "409 that is not an idempotency-key-in-flight problem"
    else:
        return "unexpected answer"
    ra = (a.header("Retry-After") or "").strip()
    if not ra.isdigit():
        return "%d without a Retry-After delay (%r)" % (a.status, ra)
    return None


LEAKS = ("ERROR", "FATAL", "CONTEXT", "PL/pgSQL", "libpq", "could not conn",
         "server closed", "connection to server", "SQLSTATE", "INSERT",
         "idempotency_keys", "pg_", "secret-internal-detail")


def leaks(a):
    """Internal error text found in a response body (a list)."""
    text = a.body.decode("utf-8", "replace")
    return [w for w in LEAKS if w in text]


def key_state(db, tid):
    """{key: {state, status, pid}} of tenant tid's idempotency records."""
    out = {}
    for r in db.rows("select key, state, response_status, "
                     "convert_from(response_body, 'UTF8') as body "
                     "from idempotency_keys where api_key_id = %d" % tid):
        pid = None
        try:
            doc = json.loads(r["body"] or "")
            if isinstance(doc, dict):
                pid = doc.get("id")
        except ValueError:
            pass
        out[r["key"]] = {"state": r["state"], "status": r["response_status"],
                         "pid": pid}
    return out


def payments_by_key(db, tid):
    """{customer (= key): [payment ids]} of tenant tid."""
    out = {}
    for r in db.rows("select customer, id from payments "
                     "where api_key_id = %d" % tid):
        out.setdefault(r["customer"], []).append(r["id"])
    return out


def sleeping(db, like):
    """pids of app backends sleeping in pg_sleep in a statement LIKE like."""
    out = db.scalar("select coalesce(string_agg(pid::text, ','), '') from "
                    "pg_stat_activity where application_name = 'idem' and "
                    "wait_event = 'PgSleep' and query like %s" % q(like))
    return [int(p) for p in out.split(",") if p]


def backends_gone(db, pids):
    if not pids:
        return True
    return db.int("select count(*) from pg_stat_activity where pid in (%s)"
                  % ",".join(map(str, pids))) == 0


def quiescent(db, st, tid, timeout=20):
    """Wait until no app backend is busy and the tenant's key count stays
    the same over three polls (a condition, with a deadline)."""
    last, same = None, 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = db.int("select count(*) from pg_stat_activity where "
                      "application_name = 'idem' and state <> 'idle'")
        n = db.int("select count(*) from idempotency_keys where "
                   "api_key_id = %d" % tid)
        same = same + 1 if (busy == 0 and n == last) else 0
        last = n
        if same >= 3:
            return True
        time.sleep(0.15)
    return False


def until_201(cl, secret, key, data, deadline, pause=0.1, max_tries=600,
              timeout=15, also=()):
    """Post until a definitive 201; retry on 503, 409, connection errors
    and the statuses in also (bounded in count and time).  Returns all
    answers."""
    answers = []
    retry = (503, 409, None) + tuple(also)
    for _ in range(max_tries):
        a = post(cl, secret, key, data, timeout=timeout)
        answers.append(a)
        if a.status == 201:
            break
        if a.status not in retry or time.monotonic() > deadline:
            break
        time.sleep(pause)
    return answers


class Load:
    """nthreads clients, each posting new keys and retrying every key
    until it gets a 201; fault() is run once enough payments were made."""

    def __init__(self, ctx, st, secret, nthreads, label):
        self.ctx, self.st, self.secret = ctx, st, secret
        self.nthreads, self.label = nthreads, label
        self.records = []       # (key, [answers])
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.created_after = {}
        self.errors = []

    def worker(self):
        cl = fresh(self.st)
        try:
            while not self.stop.is_set():
                k = self.ctx.key(self.label)
                # a 500 is counted against the contract, and retried
                # like a 503 to see whether it left an effect
                ans = until_201(cl, self.secret, k, body(k),
                                time.monotonic() + 30, also=(500,))
                with self.lock:
                    self.records.append((k, ans))
        except Exception:           # noqa: BLE001
            self.errors.append(traceback.format_exc())

    def created_since(self, t):
        with self.lock:
            return sum(1 for _, ans in self.records for a in ans
                       if a.status == 201 and not a.replayed and a.t0 > t)

    def run(self, fault, warm=30, after=100):
        """Returns (t_fault_start, t_fault_end, t_first_201_after or
        None)."""
        ths = [threading.Thread(target=self.worker, daemon=True)
               for _ in range(self.nthreads)]
        for t in ths:
            t.start()
        try:
            fx.wait_until("%d payments before the fault" % warm,
                          lambda: self.created_since(0) >= warm, 30)
            ta = time.monotonic()
            fault()
            tb = time.monotonic()
            try:
                fx.wait_until("%d payments after the fault" % after,
                              lambda: self.created_since(tb) >= after, 30)
            except fx.SetupError:
                pass
            first = None
            with self.lock:
                ts = [a.t1 for _, ans in self.records for a in ans
                      if a.status == 201 and not a.replayed and a.t0 > tb]
            if ts:
                first = min(ts)
            return ta, tb, first
        finally:
            self.stop.set()
            for t in ths:
                t.join(60)

    def answers(self):
        return [a for _, ans in self.records for a in ans]


def check_retry_answers(sc, cid, load, what):
    """Every non-201 answer is a proper 503 (or 409) with Retry-After and
    no internal text; at least one 503 was seen."""
    bad, n503, n409 = [], 0, 0
    for k, ans in load.records:
        for a in ans:
            if a.status == 201:
                continue
            if a.status == 503:
                n503 += 1
            if a.status == 409:
                n409 += 1
            why = proper_retry_answer(a)
            lk = leaks(a) if a.status is not None else []
            if why or lk:
                bad.append("%s: %s%s: %s" % (
                    k, why or "internal text in the body",
                    " (%s)" % ", ".join(lk) if lk else "", a.describe()))
    diag = ["%d answers, %d x 503, %d x 409, %d other" % (
        len(load.answers()), n503, n409, len(bad))]
    if n503 == 0:
        diag.append("no 503 seen during %s: the fault was not exercised "
                    "or requests did not fail fast" % what)
    diag += bad[:10]
    if bad:
        # each request line with a 5xx other than 503, and the error
        # lines logged just before it
        lines, recent = [], []
        for ln in load.st.log_text().splitlines():
            if '"level":"error"' in ln or '"level":"warn"' in ln:
                recent = (recent + [ln])[-3:]
            elif '"msg":"request"' in ln and '"status":5' in ln and \
                    '"status":503' not in ln:
                lines += recent + [ln]
                recent = []
        diag.append("app log: requests answered 5xx but not 503, with the "
                    "error lines before each (first 16 lines):")
        diag += ["  " + ln[:400] for ln in lines[:16]]
    sc.report(cid, not bad and n503 > 0 and not load.errors,
              diag + load.errors[:2])


def check_latency(sc, cid, load, bound):
    slow = sorted((a for a in load.answers() if a.elapsed > bound),
                  key=lambda a: -a.elapsed)
    worst = max((a.elapsed for a in load.answers()), default=0)
    diag = ["slowest answer %.2fs (bound %.1fs)" % (worst, bound)]
    diag += [a.brief() for a in slow[:5]]
    sc.report(cid, not slow, diag)


def check_effects(sc, cid, load, db, tid):
    """Every key got a 201 in the end and has exactly one payment, the
    one every 201 named; a key that never got a 201 has none; no payment
    without a key."""
    pays = payments_by_key(db, tid)
    keys = key_state(db, tid)
    bad = []
    after = {(c, r): 0 for c in (503, 500) for r in (False, True)}
    for k, ans in load.records:
        got = pays.get(k, [])
        ids = {a.payment_id() for a in ans if a.status == 201}
        if ids:
            if len(got) != 1:
                bad.append("%s: %d payments after a 201 (%s)"
                           % (k, len(got), [a.brief() for a in ans]))
            elif ids != {got[0]}:
                bad.append("%s: 201 named %s, the payment is %s"
                           % (k, sorted(map(str, ids)), got[0]))
            for code in (503, 500):
                if any(a.status == code for a in ans):
                    after[code, ans[-1].replayed] += 1
            st = keys.get(k)
            if st is None or st["state"] != "completed" or \
                    st["status"] != 201:
                bad.append("%s: key record %r" % (k, st))
        else:
            if got or k in keys:
                bad.append("%s: never answered 201 (%s) but has %d "
                           "payments, key record %r" % (
                               k, [a.brief() for a in ans][-3:], len(got),
                               keys.get(k)))
            else:
                bad.append("%s: never answered 201 within 30 s: %s"
                           % (k, [a.brief() for a in ans][-3:]))
    known = {k for k, _ in load.records}
    stray = [c for c in pays if c not in known]
    if stray:
        bad.append("payments of keys this client never sent: %s" % stray[:5])
    diag = ["%d keys, %d payments" % (len(load.records),
                                       sum(map(len, pays.values())))]
    for code in (503, 500):
        if after[code, False] or after[code, True]:
            diag.append("%d keys answered %d and then created once (it left "
                        "no effect), %d answered %d and then replayed (the "
                        "COMMIT had gone through: in doubt, not lost)"
                        % (after[code, False], code, after[code, True], code))
    sc.report(cid, not bad and len(load.records) > 0, diag + bad[:10])


# --- scenario 1: PostgreSQL restart ---------------------------------------

def s1(ctx, sc):
    c = ctx.main
    secret, tid = ctx.tenant(c, "faults-restart")
    st = ctx.stack(sc, "s1", c.conninfo, acquire_timeout="2s")
    st.start()
    pid0 = st.app.pid
    load = Load(ctx, st, secret, 8, "restart")
    # one request is sure to be mid-statement when the server goes down
    ks = ctx.key("restartslow")
    slow = {}

    def slow_post():
        slow["a"] = post(fresh(st), secret, ks, body(ks, description="slow:2"))

    took = []

    def fault():
        # several restarts: each catches other requests at other points
        for i in range(RESTARTS):
            if i > 0:
                t = time.monotonic()
                fx.wait_until("new payments between restarts",
                              lambda: load.created_since(t) >= 20, 20)
            else:
                th = threading.Thread(target=slow_post, daemon=True)
                th.start()
                fx.wait_until("the slow request's INSERT sleeps",
                              lambda: sleeping(c.db, "INSERT INTO payments%"),
                              10)
            t = time.monotonic()
            c.restart("fast")
            took.append(time.monotonic() - t)
        th.join(20)
    ta, tb, first = load.run(fault)
    ctx.tap.note("%d x pg_ctl restart -m fast, %s s each"
                 % (len(took), ", ".join("%.2f" % x for x in took)))
    a = slow.get("a")
    retry = until_201(fresh(st), secret, ks, body(ks, description="slow:2"),
                      time.monotonic() + 20, also=(500,))
    if a is not None:
        load.records.append((ks, [a] + retry))
    r5 = (a is not None and proper_retry_answer(a) is None, [
        "the request sleeping in its INSERT when the server shut down got: "
        "%s" % (a.describe() if a else "no answer"),
        "its retry: %s" % retry[-1].brief()])
    check_retry_answers(sc, "1", load, "the restart")
    # The product's own bound is acquire_timeout + connect_timeout (the
    # latter acquire_timeout rounded up, at least 2 s): a request waits for
    # a connection, then for its connect, and is answered.  The 3 s on top
    # is what a loaded 2-core machine needs to schedule lighttpd, the app
    # and the restarting server around it (measured under two CPU hogs).
    check_latency(sc, "2", load, 2.0 + 2.0 + 3.0)
    alive = st.app.poll() is None and st.app_pids() == {pid0}
    k = ctx.key("after")
    r = post(fresh(st), secret, k, body(k))
    load.records.append((k, [r]))
    ok = first is not None and alive and r.status == 201 and \
        first - tb < 15
    sc.report("3", ok, [
        "first new payment %s after the restart ended" % (
            "%.2fs" % (first - tb) if first else "never"),
        "app pid %d %s" % (pid0, "still serving" if alive else
                           "gone (%s)" % sorted(st.app_pids())),
        "a POST after the load: %s" % r.brief()])
    check_effects(sc, "4", load, c.db, tid)
    sc.report("5", *r5)


# --- scenario 2: failover -----------------------------------------------------

def s2(ctx, sc):
    p1 = fx.Cluster(ctx.fx, "fo-primary", extra=(
        "synchronous_commit = on\n"
        "wal_level = replica\nmax_wal_senders = 5\n"))
    p1.init()
    p1.start()
    ctx.fx.migrate(p1)
    secret, tid = ctx.tenant(p1, "faults-failover")
    p2 = fx.Cluster(ctx.fx, "fo-standby")
    p2.init_standby_of(p1, "standby1")
    p2.start()
    # synchronous only now that the standby is there (else commits wait)
    p1.db.run("alter system set synchronous_standby_names = '*'; "
              "select pg_reload_conf();")
    try:
        fx.wait_until("the standby streams synchronously", lambda: p1.db.scalar(
            "select string_agg(sync_state, ',') from pg_stat_replication")
            == "sync", 30, 0.1)
        ok = p2.db.scalar("select pg_is_in_recovery()") == "t"
        sc.report("1", ok, ["standby in recovery: %s" % ok])
    except fx.SetupError as e:
        sc.report("1", False, [str(e)])
        raise
    conninfo = ("host=%s,%s port=%d,%d dbname=postgres user=postgres "
                "target_session_attrs=read-write"
                % (p1.sock, p2.sock, p1.port, p2.port))
    st = ctx.stack(sc, "s2", conninfo, acquire_timeout="2s")
    st.start()
    pid0 = st.app.pid
    times = {}

    def fault():
        p1.stop("immediate")
        times["stopped"] = time.monotonic()
        p2.promote()
        times["promoted"] = time.monotonic()

    load = Load(ctx, st, secret, 8, "failover")
    ta, tb, first = load.run(fault)
    ctx.tap.note("primary stopped %.2fs, standby promoted %.2fs after the "
                 "fault began" % (times["stopped"] - ta,
                                  times["promoted"] - ta))
    check_retry_answers(sc, "2", load, "the failover")
    promoted = p2.db.scalar("select pg_is_in_recovery()") == "f"
    alive = st.app.poll() is None and st.app_pids() == {pid0}
    k = ctx.key("after")
    r = post(fresh(st), secret, k, body(k))
    load.records.append((k, [r]))
    on_new = r.status == 201 and p2.db.int(
        "select count(*) from payments where id = %s"
        % q(r.payment_id() or "")) == 1
    sc.report("3", first is not None and alive and promoted and on_new, [
        "first new payment %s after the promotion" % (
            "%.2fs" % (first - tb) if first else "never"),
        "standby promoted: %s; app pid %d %s" % (
            promoted, pid0, "still serving" if alive else "gone"),
        "a POST after the load: %s; its payment on the new primary: %s"
        % (r.brief(), on_new)])
    # every acknowledged payment is on the new primary
    pays = payments_by_key(p2.db, tid)
    ids_there = {i for v in pays.values() for i in v}
    lost = []
    for key, ans in load.records:
        for a in ans:
            if a.status == 201 and a.payment_id() not in ids_there:
                lost.append("%s: %s acknowledged at +%.2fs, not on the new "
                            "primary" % (key, a.payment_id(), a.t1 - ta))
    n201 = sum(1 for a in load.answers() if a.status == 201)
    sc.report("4", not lost and n201 > 0,
              ["%d acknowledged (201) answers, %d payments on the new "
               "primary" % (n201, len(ids_there))] + lost[:10])
    check_effects(sc, "5", load, p2.db, tid)
    st.stop()
    p2.stop("immediate", check=False)


# --- scenario 3: client disconnects ------------------------------------------

def raw_post_and_close(st, secret, key, data, rst=False, before=None):
    """Send a whole POST and close (or reset) the connection, after
    before() returns if given."""
    head = ("POST %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
            "Idempotency-Key: %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (PAY, st.host, st.port, secret,
                                             key, len(data)))
    s = socket.create_connection((st.host, st.port), timeout=5)
    try:
        if rst:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.sendall(head.encode() + data)
        if before is not None:
            before()
    finally:
        s.close()


def s3(ctx, sc):
    c = ctx.main
    secret, tid = ctx.tenant(c, "faults-disconnect")
    st = ctx.stack(sc, "s3", c.conninfo)
    st.start()
    pid0 = st.app.pid
    keys = []
    # abandoned once the app runs them: each is closed (or reset) while
    # its INSERT sleeps, so these must all execute, whatever the web
    # server does with the connections abandoned earlier below
    held = [ctx.key("gonerun") for _ in range(4)]
    keys += held
    sent = {k: body(k, description="wait:33") for k in held}
    hold = Hold(ctx, c, 33)
    try:
        for i, k in enumerate(held):
            # each waits in its INSERT for the test's lock when abandoned
            raw_post_and_close(
                st, secret, k, sent[k], rst=i % 2 == 1,
                before=lambda n=i + 1: fx.wait_until(
                    "the abandoned request's INSERT waits",
                    lambda: len(lock_waiters(
                        c.db, "INSERT INTO payments%")) >= n, 20))
    finally:
        hold.release()
    # sequential, half with a plain close, half with a reset
    for i in range(60):
        k = ctx.key("gone")
        keys.append(k)
        raw_post_and_close(st, secret, k, body(k), rst=i % 2 == 1)
    # concurrent: 8 threads x 20 distinct keys, and 20 keys sent by 3
    # threads at once
    errs = []
    dup = [ctx.key("gonedup") for _ in range(20)]
    keys += dup
    lock = threading.Lock()

    def w(i):
        try:
            mine = []
            for j in range(20):
                k = ctx.key("gonec")
                mine.append(k)
                raw_post_and_close(st, secret, k, body(k), rst=(i + j) % 2)
                if j < len(dup) and i < 3:
                    raw_post_and_close(st, secret, dup[j], body(dup[j]),
                                       rst=i == 1)
            with lock:
                keys.extend(mine)
        except Exception:       # noqa: BLE001
            errs.append(traceback.format_exc())
    ths = [threading.Thread(target=w, args=(i,), daemon=True)
           for i in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(60)
    settled = quiescent(c.db, st, tid)
    pays = payments_by_key(c.db, tid)
    recs = key_state(c.db, tid)
    bad = []
    for k in keys:
        got, rec = pays.get(k, []), recs.get(k)
        if rec is None and not got:
            continue
        if rec is None or rec["state"] != "completed" or \
                rec["status"] != 201 or len(got) != 1 or \
                rec["pid"] != got[0]:
            bad.append("%s: key record %r, payments %s" % (k, rec, got))
    stray = set(pays) - set(keys)
    if stray:
        bad.append("payments of unknown keys: %s" % sorted(stray)[:5])
    executed = sum(1 for k in keys if k in recs)
    ran = [k for k in held if k in recs]
    if len(ran) != len(held):
        bad.append("abandoned while their INSERT ran, yet not executed: %s"
                   % sorted(set(held) - set(ran)))
    sc.report("1", settled and not bad and not errs, [
        "%d abandoned while the app ran them: %d executed (want all)"
        % (len(held), len(ran)),
        "%d keys sent and abandoned; %d executed, %d never reached the "
        "app (or were abandoned before it started)"
        % (len(keys), executed, len(keys) - executed),
        "settled (no busy backend, key count stable): %s" % settled]
        + bad[:10] + errs[:2])
    # retry each key once properly
    bad = []
    cl = hc.Client(st.host, st.port)
    counts = {"replayed": 0, "created": 0}
    for k in keys:
        ans = until_201(cl, secret, k, sent.get(k) or body(k),
                        time.monotonic() + 20)
        a = ans[-1]
        had = k in recs
        if a.status != 201:
            bad.append("%s: retry answered %s" % (k, a.describe()))
        elif had and not (a.replayed and a.payment_id() == recs[k]["pid"]):
            bad.append("%s: executed before; retry %s (stored %s)"
                       % (k, a.brief(), recs[k]["pid"]))
        elif not had and a.replayed:
            bad.append("%s: absent before; retry replayed" % k)
        else:
            counts["replayed" if a.replayed else "created"] += 1
    pays = payments_by_key(c.db, tid)
    multi = ["%s: %d payments" % (k, len(pays.get(k, []))) for k in keys
             if len(pays.get(k, [])) != 1]
    sc.report("2", not bad and not multi, [
        "retries: %(replayed)d replayed, %(created)d created" % counts]
        + bad[:10] + multi[:10])
    alive = st.app.poll() is None and st.app_pids() == {pid0}
    h = st.healthz()
    sc.report("3", alive and h.status == 200,
              ["app pid %d alive: %s; /healthz %s" % (pid0, alive,
                                                      h.brief())])


# --- scenario 4: kill -9 mid-transaction --------------------------------------

def kill_during(ctx, st, secret, key, data, waiting):
    """Post in a thread; once waiting(db) names the app backends stuck in
    its statement, SIGKILL the app.  Returns (client's answer, killed
    pids, those backends)."""
    c = ctx.main
    out = {}

    def go():
        out["a"] = post(fresh(st, 20), secret, key, data, timeout=20)
    th = threading.Thread(target=go, daemon=True)
    th.start()
    back = fx.wait_until("the request's statement waits (pg_stat_activity)",
                         lambda: waiting(c.db), 10)
    pids = st.app_pids()
    for p in pids:
        os.kill(p, signal.SIGKILL)
    th.join(25)
    return out.get("a"), pids, back


def lock_waiters(db, like):
    """pids of app backends waiting for a heavyweight lock in a statement
    LIKE like."""
    out = db.scalar("select coalesce(string_agg(pid::text, ','), '') from "
                    "pg_stat_activity where application_name = 'idem' and "
                    "wait_event_type = 'Lock' and query like %s" % q(like))
    return [int(p) for p in out.split(",") if p]


class Hold:
    """Advisory lock n held by a psql session of its own until release():
    a payment INSERT described "wait:n" waits for it (TRIGGERS), for as
    long as the test needs, however slow the machine."""

    def __init__(self, ctx, c, n):
        self.c, self.app = c, "fx-hold-%d" % n
        self.log = open(os.path.join(ctx.fx.tmp, "hold.log"), "ab")
        self.proc = subprocess.Popen(
            ["psql", "-X", "-q", "-At", "-d",
             c.conninfo + " application_name=" + self.app,
             "-c", "select pg_advisory_lock(%d); select pg_sleep(120)" % n],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.log)
        fx.wait_until("the test session holds advisory lock %d" % n,
                      lambda: c.db.int(
                          "select count(*) from pg_locks l join "
                          "pg_stat_activity a using (pid) where "
                          "a.application_name = %s and l.locktype = "
                          "'advisory' and l.granted" % q(self.app)) == 1, 20)

    def release(self):
        self.c.db.run("select pg_terminate_backend(pid) from "
                      "pg_stat_activity where application_name = %s"
                      % q(self.app))
        self.proc.wait(20)
        self.log.close()


def s4(ctx, sc):
    c = ctx.main
    secret, tid = ctx.tenant(c, "faults-kill")
    st = ctx.stack(sc, "s4", c.conninfo, mode="spawn")
    st.start()
    # a: the first flight (idem_claim(): lookup and lock) waits behind a
    # table lock another session holds: no COMMIT was sent
    ka = ctx.key("kill")
    with open(os.path.join(ctx.fx.tmp, "s4-lock.log"), "ab") as log:
        locker = subprocess.Popen(
            ["psql", "-X", "-q", "-At", "-d",
             c.conninfo + " application_name=fx-lock",
             "-c", "begin; lock table idempotency_keys in access exclusive "
             "mode; select pg_sleep(60)"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    try:
        fx.wait_until("the test session holds the table lock",
                      lambda: c.db.int(
                          "select count(*) from pg_locks l join "
                          "pg_stat_activity a using (pid) where "
                          "a.application_name = 'fx-lock' and l.mode = "
                          "'AccessExclusiveLock' and l.granted") == 1, 10)
        a, pids, back = kill_during(ctx, st, secret, ka, body(ka),
                                    lambda db: lock_waiters(db,
                                                            "%idem_claim%"))
    finally:
        c.db.run("select pg_terminate_backend(pid) from pg_stat_activity "
                 "where application_name = 'fx-lock'")
        locker.wait(10)
    fx.wait_until("the killed worker's backend ends",
                  lambda: backends_gone(c.db, back), 15)
    recs, pays = key_state(c.db, tid), payments_by_key(c.db, tid)
    sc.report("1", ka not in recs and not pays.get(ka) and bool(pids), [
        "killed app pid(s) %s while backend %s waited in idem_claim()"
        % (sorted(pids), back),
        "the client got: %s" % (a.brief() if a else "nothing"),
        "key record %r, payments %s" % (recs.get(ka), pays.get(ka, []))])
    # b: the handler's INSERT (flight 2, with the COMMIT) sleeps
    fx.wait_until("lighttpd respawns the app (GET /healthz 200)",
                  lambda: st.healthz().status == 200, 20, 0.1)
    kb = ctx.key("kill")
    # its INSERT waits for the test's lock (not a clock) when the app is
    # killed; the lock is let go afterwards
    hold = Hold(ctx, c, 42)
    try:
        b, pids_b, back_b = kill_during(ctx, st, secret, kb,
                                        body(kb, description="wait:42"),
                                        lambda db: lock_waiters(
                                            db, "INSERT INTO payments%"))
    finally:
        hold.release()
    fx.wait_until("the killed worker's backend ends",
                  lambda: backends_gone(c.db, back_b), 15)
    recs, pays = key_state(c.db, tid), payments_by_key(c.db, tid)
    rec, got = recs.get(kb), pays.get(kb, [])
    # The INSERT is deferred and sent with idem_complete() and COMMIT in
    # one flight (results are flushed only at its end): the server has the
    # COMMIT before the worker dies, so the transaction always commits.
    whole = rec is not None and rec["state"] == "completed" and \
        rec["status"] == 201 and len(got) == 1 and rec["pid"] == got[0]
    diag = ["killed app pid(s) %s while backend %s waited in the payment "
            "INSERT" % (sorted(pids_b), back_b),
            "the client got: %s" % (b.brief() if b else "nothing"),
            "key record %r, payments %s" % (rec, got)]
    sc.report("2", whole and bool(pids_b), diag)
    # c: the handler waits for a row lock before its commit flight (a
    # refund's SELECT ... FOR UPDATE of the payment, held from psql):
    # nothing was sent to commit, so nothing of it may stay.
    fx.wait_until("lighttpd respawns the app (GET /healthz 200)",
                  lambda: st.healthz().status == 200, 20, 0.1)
    kp = ctx.key("kill")
    paid = until_201(fresh(st), secret, kp, body(kp), time.monotonic() + 20)
    pay_id = paid[-1].payment_id() if paid[-1].status == 201 else None
    kr = ctx.key("killref")
    ref_path = "%s/%s/refunds" % (PAY, pay_id)
    ref_body = hc.body_of({"amount": 100})
    with open(os.path.join(ctx.fx.tmp, "s4-row.log"), "ab") as log:
        holder = subprocess.Popen(
            ["psql", "-X", "-q", "-At", "-d",
             c.conninfo + " application_name=fx-row",
             "-c", "begin; select 1 from payments where id = %s for update; "
             "select pg_sleep(60)" % q(pay_id or "")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    out = {}

    def refund():
        out["a"] = fresh(st, 20).request(
            "POST", ref_path, hc.payment_headers(secret, kr), ref_body,
            timeout=20)
    try:
        fx.wait_until("the test session holds the payment's row",
                      lambda: c.db.int(
                          "select count(*) from pg_stat_activity where "
                          "application_name = 'fx-row' and wait_event = "
                          "'PgSleep'") == 1, 10)
        th = threading.Thread(target=refund, daemon=True)
        th.start()
        back_r = fx.wait_until(
            "the refund's backend waits for the row lock "
            "(wait_event_type = 'Lock')",
            lambda: lock_waiters(c.db, "%FOR UPDATE%"), 10)
        pids_r = st.app_pids()
        for p in pids_r:
            os.kill(p, signal.SIGKILL)
        th.join(25)
    finally:
        c.db.run("select pg_terminate_backend(pid) from pg_stat_activity "
                 "where application_name = 'fx-row'")
        holder.wait(10)
    fx.wait_until("the killed worker's backend ends",
                  lambda: backends_gone(c.db, back_r), 15)
    rrec = key_state(c.db, tid).get(kr)
    nref = c.db.int("select count(*) from refunds where payment_id = %s"
                    % q(pay_id or ""))
    refunded = c.db.int("select amount_refunded from payments where id = %s"
                        % q(pay_id or ""))
    sc.report("3", pay_id is not None and bool(pids_r) and rrec is None and
              nref == 0 and refunded == 0, [
                  "payment %s; killed app pid(s) %s while backend %s waited "
                  "for the payment's row lock" % (pay_id, sorted(pids_r),
                                                  back_r),
                  "the client got: %s" % (out["a"].brief() if out.get("a")
                                          else "nothing"),
                  "key record %r, refunds %d, amount_refunded %d"
                  % (rrec, nref, refunded)])
    # the app is back; each retry executes once (or replays the commit)
    t0 = time.monotonic()
    fx.wait_until("lighttpd respawns the app (GET /healthz 200)",
                  lambda: st.healthz().status == 200, 20, 0.1)
    now = st.app_pids()
    bad = []
    ra = until_201(fresh(st), secret, ka, body(ka), time.monotonic() + 20)
    rb = until_201(fresh(st), secret, kb, body(kb, description="wait:42"),
                   time.monotonic() + 20)
    rr = []
    for _ in range(200):
        rr.append(fresh(st).request("POST", ref_path,
                                    hc.payment_headers(secret, kr), ref_body,
                                    timeout=15))
        if rr[-1].status not in (503, 409, None):
            break
        time.sleep(0.1)
    if ra[-1].status != 201 or ra[-1].replayed:
        bad.append("retry of %s: %s (want 201 created)" % (ka, ra[-1].brief()))
    # 4.2's commit stands: its retry replays it
    if rb[-1].status != 201 or not rb[-1].replayed:
        bad.append("retry of %s: %s (want 201 replay)" % (kb, rb[-1].brief()))
    # 4.3's refund never committed: its retry executes, once
    if rr[-1].status != 201 or rr[-1].replayed:
        bad.append("retry of refund %s: %s (want 201 created)"
                   % (kr, rr[-1].brief()))
    pays = payments_by_key(c.db, tid)
    for k in (ka, kb):
        if len(pays.get(k, [])) != 1:
            bad.append("%s: %d payments after the retry"
                       % (k, len(pays.get(k, []))))
    nref = c.db.int("select count(*) from refunds where payment_id = %s"
                    % q(pay_id or ""))
    refunded = c.db.int("select amount_refunded from payments where id = %s"
                        % q(pay_id or ""))
    if nref != 1 or refunded != 100:
        bad.append("refund %s: %d refunds, amount_refunded %d after the "
                   "retry (want 1, 100)" % (kr, nref, refunded))
    killed = pids | pids_b | pids_r
    sc.report("4", not bad and now and not (now & killed), [
        "app back after %.2fs as pid(s) %s (killed %s)"
        % (time.monotonic() - t0, sorted(now), sorted(killed)),
        "retries: %s; %s; %s" % (ra[-1].brief(), rb[-1].brief(),
                                 rr[-1].brief())] + bad)

    # c: while the handler's payment INSERT sleeps, a writer that ignores
    # the key's lock stores a live record under the same key.
    # idem_complete() then cannot write the key's record: the whole
    # transaction, the payment included, rolls back and the client is told
    # to retry; the other writer's record stays as it was.
    kc = ctx.key("kill")
    out = {}

    def go():
        out["a"] = post(fresh(st, 30), secret, kc,
                        body(kc, description="wait:45"), timeout=30)
    # the INSERT waits for the test's lock, not for a clock: the foreign
    # record is written while it surely still waits
    hold = Hold(ctx, c, 45)
    try:
        th = threading.Thread(target=go, daemon=True)
        th.start()
        fx.wait_until("the request's payment INSERT waits for the test's "
                      "lock", lambda: lock_waiters(c.db,
                                                   "INSERT INTO payments%"),
                      20)
        c.db.run("insert into idempotency_keys (api_key_id, key, "
                 "request_method, request_path, request_fingerprint, state,"
                 " recovery_point, response_status, response_headers,"
                 " response_body, expires_at) values (%d, %s, 'POST',"
                 " '/v1/payments', sha256('elsewhere'), 'completed',"
                 " 'finished', 201, '{}', 'elsewhere',"
                 " now() + interval '1 hour')" % (tid, q(kc)))
    finally:
        hold.release()
    th.join(25)
    c_ans = out.get("a")
    kept = c.db.scalar("select convert_from(response_body, 'UTF8') from "
                       "idempotency_keys where api_key_id = %d and key = %s"
                       % (tid, q(kc)))
    c_pays = payments_by_key(c.db, tid).get(kc, [])
    sc.report("5", c_ans is not None and
              c_ans.problem_ok(503, "service-unavailable") and
              c_ans.header("Retry-After") == "1" and not c_pays and
              kept == "elsewhere", [
                  "the client got: %s" % (c_ans.brief() if c_ans
                                          else "nothing"),
                  "payments %s; the key's record body %r" % (c_pays, kept)])


# --- scenario 5: pool exhaustion ----------------------------------------------

def s5(ctx, sc):
    c = ctx.main
    secret, tid = ctx.tenant(c, "faults-pool")
    acq = 1.0
    st = ctx.stack(sc, "s5", c.conninfo, threads=8, pool_size=2,
                   acquire_timeout="1s")
    st.start()
    keys = [ctx.key("pool") for _ in range(8)]
    answers = {}
    bar = threading.Barrier(8, timeout=10)

    def go(k):
        cl = fresh(st, 30)
        try:
            bar.wait()
        except threading.BrokenBarrierError:
            pass
        answers[k] = post(cl, secret, k, body(k, description="slow:1.5"),
                          timeout=30)
    t0 = time.monotonic()
    ths = [threading.Thread(target=go, args=(k,), daemon=True)
           for k in keys]
    for t in ths:
        t.start()
    for t in ths:
        t.join(max(0.1, t0 + 20 - time.monotonic()))
    hung = [k for k in keys if k not in answers or answers[k].status is None]
    wall = time.monotonic() - t0
    sc.report("1", not hung and wall < 20, [
        "all 8 answered within %.2fs" % wall if not hung else
        "no answer within 20 s for %s" % hung] +
        ["%s: %s" % (k, answers[k].brief()) for k in keys if k in answers])
    got = [answers[k] for k in keys if k in answers]
    n503 = [a for a in got if a.status == 503]
    bad = []
    for a in got:
        if a.status == 201:
            continue
        why = proper_retry_answer(a) if a.status == 503 else "not 201/503"
        if why:
            bad.append("%s: %s" % (why, a.describe()))
        # Not before acquire_timeout: the product's own target (a request
        # waits that long for a connection); 2 s above it is what a loaded
        # machine needs to schedule the answer.
        elif not (acq - 0.2 <= a.elapsed <= acq + 2.0):
            bad.append("503 after %.2fs, not within [%.1f, %.1f] s"
                       % (a.elapsed, acq - 0.2, acq + 2.0))
    sc.report("2", n503 and not bad, [
        "%d x 201, %d x 503 (pool_size 2, acquire_timeout 1s, inserts "
        "sleep 1.5s)" % (sum(1 for a in got if a.status == 201),
                         len(n503))] + bad)
    quiescent(c.db, st, tid, 10)
    pays, recs = payments_by_key(c.db, tid), key_state(c.db, tid)
    bad = []
    for k in keys:
        a = answers.get(k)
        n = len(pays.get(k, []))
        if a is not None and a.status == 201:
            if n != 1 or pays[k][0] != a.payment_id():
                bad.append("%s: 201 (%s) but payments %s"
                           % (k, a.payment_id(), pays.get(k)))
        elif n != 0 or k in recs:
            bad.append("%s: %s but %d payments, key record %r"
                       % (k, a.brief() if a else "no answer", n,
                          recs.get(k)))
    k = ctx.key("pool")
    r = post(fresh(st), secret, k, body(k))
    if r.status != 201:
        bad.append("a POST after the burst: %s" % r.describe())
    sc.report("3", not bad, bad)


# --- scenario 6: load ---------------------------------------------------------

def s6(ctx, sc):
    c = ctx.main
    secret, tid = ctx.tenant(c, "faults-load")
    st = ctx.stack(sc, "s6", c.conninfo)
    st.start()
    total, nthreads = 20000, 32
    ndup = total * 5 // 100 // 2            # pairs
    nretry = total * 30 // 100
    nnew = total - nretry - 2 * ndup
    rnd = random.Random(RUN)
    # the first retries need earlier keys: begin with new ones
    pool = ["new"] * (nnew - 200) + ["retry"] * nretry
    rnd.shuffle(pool)
    singles = ["new"] * 200 + pool
    tasks = []
    pos = sorted(rnd.sample(range(200, len(singles)), ndup))
    pi = 0
    for i, t in enumerate(singles):
        while pi < len(pos) and pos[pi] == i:
            tasks.append(("dup", pi, 0))
            tasks.append(("dup", pi, 1))
            pi += 1
        tasks.append((t, None, None))
    bars = [threading.Barrier(2, timeout=10) for _ in range(ndup)]
    dupkeys = [ctx.key("dup") for _ in range(ndup)]
    lock = threading.Lock()
    it = iter(tasks)
    started = []                # keys whose first post has started
    log = {}                    # key -> [answers, per request: final]
    stats = {"sent": 0, "409": 0, "errors": 0}
    errs = []
    deadline = time.monotonic() + 120

    def record(k, ans):
        with lock:
            log.setdefault(k, []).append(ans)
            stats["sent"] += len(ans)
            stats["409"] += sum(1 for a in ans if a.status == 409)
            stats["errors"] += sum(1 for a in ans if a.status is None)

    def send(cl, k):
        """One request (re-sent while 409, bounded); its answers."""
        ans = []
        for _ in range(200):
            a = post(cl, secret, k, body(k), timeout=30)
            ans.append(a)
            if a.status != 409 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        return ans

    def w():
        cl = hc.Client(st.host, st.port, keepalive=True, timeout=30)
        try:
            while time.monotonic() < deadline:
                with lock:
                    t = next(it, None)
                    if t is None:
                        return
                    kind, di, _ = t
                    if kind == "new":
                        k = ctx.key("load")
                        started.append(k)
                    elif kind == "retry":
                        if rnd.random() < 0.5:
                            k = rnd.choice(started[-32:])
                        else:
                            k = rnd.choice(started)
                if kind == "dup":
                    k = dupkeys[di]
                    try:
                        bars[di].wait()
                    except threading.BrokenBarrierError:
                        pass
                record(k, send(cl, k))
        except Exception:       # noqa: BLE001
            errs.append(traceback.format_exc())
        finally:
            cl.close()
    t0 = time.monotonic()
    ths = [threading.Thread(target=w, daemon=True) for _ in range(nthreads)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(max(0.1, deadline + 35 - time.monotonic()))
    wall = time.monotonic() - t0
    requests = sum(len(v) for v in log.values())
    quiescent(c.db, st, tid, 10)
    pays = payments_by_key(c.db, tid)
    nrows = c.db.int("select count(*) from payments where api_key_id = %d"
                     % tid)
    created = replayed = 0
    bad = []
    for k, reqs in log.items():
        finals = [ans[-1] for ans in reqs]
        made = [a for a in finals if a.status == 201 and not a.replayed]
        created += len(made)
        replayed += sum(1 for a in finals if a.status == 201 and a.replayed)
        odd = [a for ans in reqs for a in ans
               if a.status != 201 and proper_retry_answer(a) is not None]
        odd += [a for ans in reqs for a in ans if a.status == 503]
        if len(made) != 1 or odd or any(a.status != 201 for a in finals):
            bad.append("%s: %d created; answers %s" % (
                k, len(made), [a.brief() for ans in reqs for a in ans][:6]))
            continue
        ids = {a.payment_id() for a in finals}
        bodies = {a.body for a in finals}
        if len(ids) != 1 or len(bodies) != 1:
            bad.append("%s: replays differ: %s" % (k, sorted(map(str, ids))))
    ctx.tap.note("load: requests %d (planned %d; %d sent in all, with "
                 "re-sends after 409), keys %d, created %d, replayed %d, "
                 "409s %d, connection errors %d, payments rows %d; "
                 "%.1fs, %.0f requests/s"
                 % (requests, total, stats["sent"], len(log), created,
                    replayed, stats["409"], stats["errors"], nrows, wall,
                    stats["sent"] / wall if wall else 0))
    eff = [k for k in log if len(pays.get(k, [])) != 1]
    stray = set(pays) - set(log)
    sc.report("1", requests == total and not eff and not stray and
              nrows == len(log), [
                  "%d keys, %d payment rows" % (len(log), nrows)] +
              ["%s: %d payments" % (k, len(pays.get(k, []))) for k in
               eff[:10]] + (["payments of unknown keys: %s"
                             % sorted(stray)[:5]] if stray else []) +
              ([] if requests == total else
               ["only %d of %d requests done in time" % (requests, total)]))
    sc.report("2", not bad and not errs and created == len(log), [
        "%d created, %d replayed, %d x 409 then replay"
        % (created, replayed, stats["409"])] + bad[:10] + errs[:2])


# --- scenario 7: security -------------------------------------------------

SQLISH = [
    ("'; DROP TABLE payments; --", "Robert'); DROP TABLE payments;--"),
    ("\" OR \"1\"=\"1 -- %s" % RUN, "x' OR '1'='1"),
    ("';DROP/**/TABLE/**/payments;--%s" % RUN, "$$; DROP TABLE api_keys; $$"),
    ("%%s%%n%%x%%d\\%s" % RUN, "%s%n%p \\'; SELECT pg_sleep(5);--"),
    ("$1::text);--{%s}" % RUN, "E'\\x27' || chr(39) \\\\ \" \\\""),
]


def s7(ctx, sc):
    c = ctx.main
    sa, ta = ctx.tenant(c, "faults-sec-a")
    sb, tb = ctx.tenant(c, "faults-sec-b")
    st = ctx.stack(sc, "s7", c.conninfo)
    st.start()
    cl = hc.Client(st.host, st.port)
    tables0 = c.db.scalar("select string_agg(tablename, ',' order by "
                          "tablename) from pg_tables where schemaname = "
                          "'public'")
    nkeys0 = c.db.int("select count(*) from api_keys")
    bad = []
    for key, desc in SQLISH:
        data = body(key, description=desc)
        r1 = post(cl, sa, key, data, quoted=True)
        r2 = post(cl, sa, key, data, quoted=True)
        if r1.status != 201 or r1.replayed:
            bad.append("%r: first post %s" % (key, r1.describe()))
            continue
        if not (r2.status == 201 and r2.replayed and r2.body == r1.body):
            bad.append("%r: second post %s" % (key, r2.describe()))
        doc = r1.json() or {}
        if doc.get("description") != desc:
            bad.append("%r: response description %r" % (key,
                                                       doc.get("description")))
        rows = c.db.rows("select p.description, p.customer, k.key from "
                         "payments p, idempotency_keys k where p.id = %s "
                         "and k.api_key_id = %d and k.key = %s"
                         % (q(doc.get("id", "")), ta, q(key)))
        if len(rows) != 1 or rows[0] != {"description": desc,
                                         "customer": key, "key": key}:
            bad.append("%r: stored %r" % (key, rows))
        g = cl.request("GET", PAY + "/" + doc.get("id", "x"),
                       [("Authorization", "Bearer " + sa)])
        if g.status != 200 or (g.json() or {}).get("description") != desc:
            bad.append("%r: GET %s" % (key, g.describe()))
    tables1 = c.db.scalar("select string_agg(tablename, ',' order by "
                          "tablename) from pg_tables where schemaname = "
                          "'public'")
    if tables1 != tables0 or c.db.int("select count(*) from api_keys") \
            != nkeys0:
        bad.append("tables %s -> %s, api_keys %d -> %d" % (
            tables0, tables1, nkeys0,
            c.db.int("select count(*) from api_keys")))
    h = st.healthz()
    if h.status != 200:
        bad.append("/healthz after: %s" % h.brief())
    sc.report("1", not bad, ["%d SQL-looking keys and bodies" % len(SQLISH)]
              + bad)

    # tenant B cannot read A's payment
    k = ctx.key("seca")
    ra = post(cl, sa, k, body(k))
    pid = ra.payment_id() or "pay_none"
    gb = cl.request("GET", PAY + "/" + pid, [("Authorization", "Bearer " + sb)])
    ga = cl.request("GET", PAY + "/" + pid, [("Authorization", "Bearer " + sa)])
    lb = cl.request("GET", PAY + "?limit=100",
                    [("Authorization", "Bearer " + sb)])
    ok = ra.status == 201 and ga.status == 200 and \
        gb.problem_ok(404, "not-found") and pid.encode() not in lb.body
    sc.report("2", ok, ["A's POST: %s" % ra.brief(), "A's GET: %s" % ga.brief(),
                        "B's GET: %s" % gb.describe(),
                        "B's list: %s" % lb.brief()])
    # B's same key: its own new payment, not A's replayed
    rb = post(cl, sb, k, body(k))
    ra2 = post(cl, sa, k, body(k))
    pays_a, pays_b = payments_by_key(c.db, ta), payments_by_key(c.db, tb)
    ok = rb.status == 201 and not rb.replayed and \
        rb.payment_id() not in (None, pid) and ra2.replayed and \
        ra2.payment_id() == pid and len(pays_a.get(k, [])) == 1 and \
        pays_b.get(k) == [rb.payment_id()]
    sc.report("3", ok, ["B's POST with A's key: %s (%s; A's is %s)"
                        % (rb.brief(), rb.payment_id(), pid),
                        "A's again: %s" % ra2.brief(),
                        "payments: A %s, B %s" % (pays_a.get(k),
                                                  pays_b.get(k))])
    # B's same key while A's is in flight
    k = ctx.key("secslow")
    out = {}

    def slow_a():
        out["a"] = post(fresh(st, 20), sa, k, body(k, description="slow:4"),
                        timeout=20)
    th = threading.Thread(target=slow_a, daemon=True)
    th.start()
    diag = []
    try:
        fx.wait_until("A's insert sleeps", lambda: sleeping(
            c.db, "INSERT INTO payments%"), 10)
        a_again = post(fresh(st), sa, k, body(k, description="slow:4"))
        b_now = post(fresh(st), sb, k, body(k))
        th.join(20)
        a = out.get("a")
        ok = a_again.problem_ok(409, "idempotency-key-in-flight") and \
            b_now.status == 201 and not b_now.replayed and a is not None \
            and a.status == 201 and b_now.t1 < a.t1
        # (B answered before A, whose INSERT sleeps 4 s and was already
        # asleep when B was sent, shows that B did not wait for A's key:
        # no wall-clock bound of its own needed)
        diag = ["A again while in flight: %s (want 409)" % a_again.brief(),
                "B meanwhile: %s (want 201 created, before A's)"
                % b_now.brief(),
                "A's slow request: %s" % (a.brief() if a else "none")]
    except fx.SetupError as e:
        ok, diag = False, [str(e)]
    sc.report("4", ok, diag)
    # a failing statement: 500 without its text, nothing stored
    k = ctx.key("secfail")
    data = body(k, description="fail:boom")
    r1 = post(cl, sa, k, data)
    r2 = post(cl, sa, k, data)
    recs, pays = key_state(c.db, ta), payments_by_key(c.db, ta)
    bad = []
    for r in (r1, r2):
        if not r.problem_ok(500, "internal-error"):
            bad.append("want 500 internal-error: %s" % r.describe())
        if leaks(r):
            bad.append("internal text %s in %s" % (leaks(r), r.describe()))
    if k in recs or pays.get(k):
        bad.append("stored: key %r, payments %s" % (recs.get(k), pays.get(k)))
    # and what 401 / 404 / 400 / 503 say
    r401 = cl.request("POST", PAY, hc.payment_headers(
        "sk_bogus_" + RUN, ctx.key("sec401")), body("x"))
    if leaks(r401) or r401.status != 401:
        bad.append("bad secret: %s" % r401.describe())
    sc.report("5", not bad, ["trigger RAISE EXCEPTION 'secret-internal-"
                             "detail': %s; again: %s" % (r1.brief(),
                                                         r2.brief())] + bad)
    # the app's stderr: no secret, no key
    cl.close()
    bad = []
    needles = [(s, "an API key secret") for s in ctx.secrets] + \
        [("sk_bogus_" + RUN, "the bogus secret"), (RUN, "an idempotency key"),
         ("DROP TABLE", "the SQL-looking key or body"),
         ("Robert'", "a request body")]
    nlines = 0
    for s in ctx.stacks:
        text = s.log_text()
        nlines += len(text.splitlines())
        for n, what in needles:
            if n in text:
                ln = next(x for x in text.splitlines() if n in x)
                bad.append("%s (%s) in the log of %s: %s"
                           % (what, n[:12] + "...", s.name, ln[:300]))
    sc.report("6", not bad and nlines > 0,
              ["%d app log lines of %d app instances checked for %d "
               "secrets, the run's keys and bodies"
               % (nlines, len(ctx.stacks), len(ctx.secrets))] + bad[:10])


SCENARIOS = [
    (1, "pg restart", s1, [
        ("1", "requests during the outage get 503 service-unavailable "
              "(problem+json, Retry-After), nothing else"),
        ("2", "no answer took longer than acquire_timeout + "
              "connect_timeout + 3 s"),
        ("3", "the pool recovers without restarting the app "
              "(new 201s, same pid)"),
        ("4", "every key retried to 201 has exactly one payment, the one "
              "its 201s named; a key never answered 201 has none"),
        ("5", "a request whose statement runs when the server shuts down "
              "gets 503 service-unavailable with Retry-After"),
    ]),
    (2, "failover", s2, [
        ("1", "the standby replicates synchronously before the fault"),
        ("2", "requests during the failover get 503 service-unavailable "
              "(problem+json, Retry-After), nothing else"),
        ("3", "the app recovers to 201s on the promoted standby without "
              "a restart"),
        ("4", "no acknowledged (201) payment lost: each is on the new "
              "primary"),
        ("5", "no key executed twice: exactly one payment per key"),
    ]),
    (3, "client disconnects", s3, [
        ("1", "each abandoned key is absent or completed with exactly "
              "one payment; those abandoned while their INSERT ran all "
              "executed"),
        ("2", "a retry with the same key replays, or executes once"),
        ("3", "the app survives (same pid, /healthz 200)"),
    ]),
    (4, "kill -9 mid-transaction", s4, [
        ("1", "killed in the first flight (idem_claim() waiting for a "
              "lock): no key row, no payment"),
        ("2", "killed after the commit flight was sent (the handler's "
              "INSERT, pipelined with COMMIT, waiting for a lock): exactly "
              "one payment, its key record completed"),
        ("3", "killed while the handler waits on a row lock before the "
              "commit flight (a refund's FOR UPDATE): no key record, no "
              "refund"),
        ("4", "lighttpd respawns the app; 4.1's and 4.3's retries execute "
              "once, 4.2's replays (one payment per key, one refund)"),
        ("5", "a live record written under the key, ignoring its lock, "
              "while the handler runs: 503 service-unavailable with "
              "Retry-After, no payment, that record untouched"),
    ]),
    (5, "pool exhaustion", s5, [
        ("1", "8 concurrent requests on a pool of 2 all answer (no "
              "deadlock)"),
        ("2", "some get 503 service-unavailable after ~acquire_timeout "
              "(0.8..3.0 s), the others 201"),
        ("3", "each key has 0 or 1 payment, as its answer says"),
    ]),
    (6, "load", s6, [
        ("1", "32 threads, 20000 requests: every key has exactly one "
              "payment row"),
        ("2", "every retry and duplicate answered 201 replay (409 only "
              "while in flight), one creation per key"),
    ]),
    (7, "security", s7, [
        ("1", "SQL-looking keys and bodies are stored and returned "
              "literally, nothing breaks"),
        ("2", "tenant B cannot read A's payment (GET 404)"),
        ("3", "tenant B's use of A's key makes B's own new payment"),
        ("4", "tenant B's same key proceeds while A's is in flight"),
        ("5", "a failing statement -> 500 without internal error text, "
              "nothing stored"),
        ("6", "secrets, keys and bodies never appear in the app's stderr"),
    ]),
]

TRIGGERS = r"""
create or replace function fault_payment() returns trigger
language plpgsql as $$
begin
	if new.description like 'slow:%' then
		perform pg_sleep(split_part(new.description, ':', 2)::float8);
	elsif new.description like 'fail:%' then
		raise exception 'secret-internal-detail';
	elsif new.description like 'wait:%' then
		-- held until the test lets go (Hold): a wait with no clock in it
		perform pg_advisory_xact_lock(split_part(new.description, ':', 2)::bigint);
	end if;
	return new;
end $$;
create trigger fault_payment before insert on payments
	for each row execute function fault_payment();
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srcdir", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--builddir")
    ap.add_argument("--only", help="comma-separated scenario numbers")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temp dir (logs, databases)")
    args = ap.parse_args()
    srcdir = os.path.abspath(args.srcdir)
    builddir = os.path.abspath(args.builddir or srcdir)
    only = {int(x) for x in args.only.split(",")} if args.only else None

    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(srcdir, "tests", "integration"))
    global fx, hc, q
    import fx                   # noqa: F811
    import hc                   # noqa: F811
    from harness import q       # noqa: F811

    bounded_run(330)

    tap = Tap()
    tmp = tempfile.mkdtemp(prefix="idem-faults.")
    os.chmod(tmp, 0o755)
    fixtures = None
    t_start = time.monotonic()
    rc = 0
    try:
        try:
            fixtures = fx.Fixtures(srcdir, builddir, tmp)
        except fx.SetupError as e:
            # a tool not found: tests/lib/missing.py decides (a failure in
            # CI, a counted skip elsewhere); anything else is a failure
            name = "faults: set up the fixtures"
            failed = True
            if "not found" in str(e):
                failed = missing_tool(name, str(e))[1]
            if failed:
                tap.result(False, name, [str(e)])
            else:
                tap.result(True, name, skip=str(e))
            return 1 if failed else 0     # (the plan: in finally)
        ctx = Ctx(fixtures, tap)
        tap.note("fault tests, run %s, temp dir %s" % (RUN, tmp))
        main_pg = fx.Cluster(fixtures, "pg", extra="synchronous_commit = off\n")
        try:
            main_pg.init()
            main_pg.start()
            fixtures.migrate(main_pg)
            main_pg.db.run(TRIGGERS)
            ctx.main = main_pg
            setup_error = None
        except Exception as e:      # noqa: BLE001
            setup_error = "setup of the main cluster failed: %s" % e
        for num, title, fn, checks in SCENARIOS:
            sc = Scenario(tap, num, title, checks)
            if only is not None and num not in only:
                sc.skip_rest("not selected (--only)")
                continue
            if setup_error:
                sc.fail_rest([setup_error])
                continue
            t0 = time.monotonic()
            try:
                sc.run(fn, ctx, "scenario %d" % num)
            finally:
                for st in sc.stacks:
                    problems = st.stop()
                    if problems:
                        tap.note("stopping %s: %s" % (st.name,
                                                      "; ".join(problems)))
            tap.note("scenario %d (%s) took %.1fs"
                     % (num, title, time.monotonic() - t0))
            if main_pg.running is False and setup_error is None:
                try:
                    main_pg.start()
                except Exception as e:      # noqa: BLE001
                    setup_error = "main cluster down after scenario " \
                                  "%d: %s" % (num, e)
        # A PANIC is a server crash, whatever the checks saw.
        panics = []
        for cl in fixtures.clusters:
            try:
                with open(cl.log, errors="replace") as f:
                    panics += ["%s: %s" % (cl.log, ln.rstrip()) for ln in f
                               if "PANIC" in ln]
            except OSError:
                pass
        tap.result(not panics, "the clusters' PostgreSQL logs have no "
                   "PANIC", panics[:5])
    except (KeyboardInterrupt, TimeoutError) as e:
        tap.result(False, "run interrupted: %s" % e)
    finally:
        signal.alarm(0)
        if fixtures is not None:
            problems = fixtures.cleanup()
            for p in problems:
                tap.note("cleanup: %s" % p)
        tap.finish(tmp, args.keep, t_start)
    rc = 1 if tap.failed else 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
