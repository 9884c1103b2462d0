"""lease_stall.py - an owner never acts on a lease it cannot prove it holds
(issue 31, item 1): the heartbeat's session stalls while phased payment
creates run with lease = 3 s, in two forms:

  sigstop    the heartbeat's PostgreSQL backend (found in
             pg_stat_activity by application_name 'idem heartbeat',
             renewing now) stopped with SIGSTOP;
  blackhole  the app's database sessions pass through a loopback TCP
             proxy (written here) that stops forwarding the heartbeat's
             session, and any new session naming itself so, without
             closing it.

Request A is inside a held acquirer call when the stall begins; request B
starts during the stall, its call slow.  The acquirer simulator records
each call's start and end per derived key: no two calls for one key
overlap; each request (or its client's retry, every 100 ms) succeeds
within lease + 2 s of the stall (B: of its start); one charge per key, one
payment per request, a byte-identical replay afterwards.  Blackhole, where
no renewal can get through, also shows the stop itself: A's owner answers
503 service-unavailable with Retry-After, having stopped, and the
heartbeat counts its failed renewals.

A's call is held until 4 s after the stall (an owner whose heartbeat
recovered finishes it then): a stalled heartbeat that is not bounded lets
the lease lapse in the database (by 3 s) while the call runs, and a retry's
call overlaps it.  Registered into run.py's list.
"""

import os
import select
import signal
import socket
import threading
import time

from harness import check, q
from lcenv import PAY, Fixture, wait_until
from checks import charge_of, expect_completed, expect_succeeded, replays
from leases import write_lease_config

LEASE_S = 3.0           # the route's lease here
SLACK_S = 2.0           # the target: a retry succeeds within lease + 2 s
HELD_S = 4.0            # A's call is answered this long after the stall
B_CALL_S = 3.5          # B's call, started during the stall
RETRY_EVERY_S = 0.1
HB_NAME = b"idem heartbeat"


def write_stall_config(path, conninfo, appname, acquirer_url):
    """Lease 3 s; room for A, B, their retries and /metrics at once."""
    write_lease_config(path, conninfo, appname, acquirer_url,
                       lease="%ds" % LEASE_S, threads=6,
                       acquirer_timeout="30s", deadline="30s",
                       origin="lease_stall.py")


class StallFixture:
    """lighttpd + payments.fcgi on its own config, in env.fx while the
    check runs; stopped (and its stall undone first) at the end."""

    def __init__(self, t, name, conninfo):
        env = t.env
        self.env, self.name = env, name
        conf = os.path.join(env.tmp, name + ".ini")
        write_stall_config(conf, conninfo, "lc-" + name, env.sim.url)
        self.fx = Fixture(name, env.tmp, env.app, conf)
        env.fx[name] = self.fx
        self.fx.start()
        self.fx.wait_ready()

    def stop(self):
        problem = self.fx.stop()
        self.env.fx.pop(self.name, None)
        return problem


# --- the black hole ---

def pg_address(conninfo):
    """Where the server listens, from a key=value conninfo: a Unix socket
    path or a (host, port)."""
    kv = dict(w.split("=", 1) for w in conninfo.split() if "=" in w)
    host, port = kv.get("host", "/var/run/postgresql"), kv.get("port",
                                                                "5432")
    if host.startswith("/"):
        return os.path.join(host, ".s.PGSQL.%s" % port)
    return (host, int(port))


class BlackHoleProxy:
    """127.0.0.1:PORT forwarding to the server.  hole(): from then on, a
    session whose first bytes name it 'idem heartbeat' (the startup packet,
    or its SET application_name) is no longer forwarded either way, and
    stays open: a half-open session, as after a failover."""

    def __init__(self, target):
        self.target = target
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.holed = threading.Event()
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.socks = []
        self.held = 0           # sessions no longer forwarded
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while not self.stopped.is_set():
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                fam = socket.AF_UNIX if isinstance(self.target, str) \
                    else socket.AF_INET
                s = socket.socket(fam, socket.SOCK_STREAM)
                s.connect(self.target)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.socks += [c, s]
            threading.Thread(target=self.pump, args=(c, s),
                             daemon=True).start()

    def pump(self, c, s):
        first, named, held = b"", False, False
        try:
            while not self.stopped.is_set():
                if named and self.holed.is_set():
                    if not held:
                        held = True
                        with self.lock:
                            self.held += 1
                    self.stopped.wait(0.05)     # read nothing, close nothing
                    continue
                r, _, _ = select.select([c, s], [], [], 0.05)
                for src in r:
                    data = src.recv(65536)
                    if not data:
                        return
                    if src is c and len(first) < 8192:
                        first += data
                        named = named or HB_NAME in first
                        if named and self.holed.is_set():
                            break       # not even this
                    (s if src is c else c).sendall(data)
        except OSError:
            return
        finally:
            if not held or self.stopped.is_set():
                for x in (c, s):
                    try:
                        x.close()
                    except OSError:
                        pass

    def conninfo(self, base):
        """base with host and port pointing here (later keywords win)."""
        return "%s host=127.0.0.1 port=%d" % (base, self.port)

    def stop(self):
        self.stopped.set()
        self.lsock.close()
        with self.lock:
            for x in self.socks:
                try:
                    x.close()
                except OSError:
                    pass


# --- the stall in each form ---

def heartbeat_renewing(t):
    """The backend pid of the heartbeat session renewing now (A's lease):
    only this check's fixture has phased requests in flight, the other
    fixtures' heartbeats are idle."""
    def renewing():
        return [r["pid"] for r in t.env.admin.rows(
            "select pid from pg_stat_activity where datname = %s and "
            "application_name = 'idem heartbeat' and query like "
            "'%%idem_renew%%' and query_start > now() - interval '1.2 s'"
            % q(t.env.dbname))]
    pids = wait_until(renewing, 8, "the heartbeat renewing A's lease "
                      "(pg_stat_activity)")
    t.expect_eq(len(pids), 1, "heartbeat sessions renewing")
    return pids[0]


class SigStop:
    name = "sigstop"

    def __init__(self, t):
        self.t, self.pid = t, None

    def conninfo(self, base):
        return base

    def stall(self):
        pid = heartbeat_renewing(self.t)
        try:
            os.kill(pid, signal.SIGSTOP)
        except PermissionError:
            self.t.skip("no permission to stop PostgreSQL's backend %d "
                        "(another user's)" % pid)
        self.pid = pid
        return "backend %d stopped" % pid

    def undo(self):
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except OSError:
                pass

    def stop(self):
        pass


class BlackHole:
    name = "blackhole"

    def __init__(self, t):
        self.t = t
        self.proxy = BlackHoleProxy(pg_address(t.env.base_conninfo))

    def conninfo(self, base):
        return self.proxy.conninfo(base)

    def stall(self):
        pid = heartbeat_renewing(self.t)
        self.proxy.holed.set()
        wait_until(lambda: self.proxy.held, 5, "the heartbeat's session "
                   "held by the proxy")
        return "the session of backend %d and its successors black-holed" \
            % pid

    def undo(self):
        self.proxy.holed.clear()

    def stop(self):
        self.proxy.stop()


# --- requests ---

class Client:
    """POST the payment once (the owner), or until a 201 every 100 ms
    while the answer is 409 (in flight) or 503 (stopped) (a retrying
    client): the 201, when it came, every answer's status, the first
    503."""

    def __init__(self, env, fx, key, body):
        self.env, self.fx, self.key, self.body = env, fx, key, body
        self.created, self.at, self.statuses, self.r503 = None, None, [], None
        self.error = None
        self.th = None

    def post(self):
        return self.env.post(PAY, self.body, key=self.key, fx=self.fx,
                             timeout=30)

    def once(self):
        r = self.post()
        self.statuses.append(r.status)
        if r.status == 201:
            self.created, self.at = r, time.monotonic()
        elif r.status == 503 and self.r503 is None:
            self.r503 = r
        return r

    def run(self, until):
        """Once, then (until not None) retries until a 201 or the
        monotonic time until."""
        try:
            r = self.once()
            while until is not None and r.status != 201 and \
                    time.monotonic() < until:
                if r.status not in (409, 503):
                    self.error = "answered %s: %r" % (r.status, r.body[:300])
                    return
                time.sleep(RETRY_EVERY_S)
                r = self.once()
        except Exception as e:          # reported by the check
            self.error = "%s: %s" % (type(e).__name__, e)

    def start(self, until=None):
        self.th = threading.Thread(target=self.run, args=(until,),
                                   daemon=True)
        self.th.start()


def summary(statuses):
    """[409, 409, 409, 201] -> '409 x3, 201'."""
    out = []
    for s in statuses:
        if out and out[-1][0] == s:
            out[-1][1] += 1
        else:
            out.append([s, 1])
    return ", ".join("%d x%d" % (s, n) if n > 1 else str(s)
                     for s, n in out)


def new_open_call(env, known):
    """The derived key of a call in flight not in known, or None."""
    for k, v in env.sim.stats()["by_key"].items():
        if k not in known and any(sp[1] is None for sp in v["spans"]):
            return k
    return None


def overlapping(spans):
    """Pairs of calls under one key that overlap ([start, end] each)."""
    s = sorted(spans)
    return [(a, b) for a, b in zip(s, s[1:]) if b[0] < a[1]]


def expect_one_payment(t, run, st):
    """run's first 201 made one payment, charged once under one derived
    key, its record completed, a byte-identical replay."""
    r = run.first_201()[1]
    row = expect_succeeded(t, r, run.body["description"])
    k, rec = charge_of(t, row["id"], st)
    t.expect_eq(rec["charges"], 1, "charges under %s's derived key"
                % run.key)
    t.expect_eq(row["acquirer_charge"], rec["id"], "payments."
                "acquirer_charge vs the acquirer's charge")
    expect_completed(t, run.key, 201)
    replays(t, run.key, run.body, r)


class Run:
    """One request's story: its owner (one POST), its retrying client,
    its acquirer key, and when its clock started (the stall, or its own
    start)."""

    def __init__(self, env, fx, label):
        self.key = env.new_key(label)
        self.body = env.payment_body(label)
        self.owner = Client(env, fx, self.key, self.body)
        self.client = Client(env, fx, self.key, self.body)
        self.acq_key, self.t0 = None, None

    def first_201(self):
        """(monotonic time, response) of the first 201, owner's or
        client's (a takeover, or a replay of the owner's), or None."""
        return min(((c.at, c.created) for c in (self.owner, self.client)
                    if c.created is not None), default=None,
                   key=lambda x: x[0])


def drive(t, env, fx, form, st0):
    """A inside a held call when the heartbeat stalls, B started during
    the stall with a slow call, each with a client retrying; A's held call
    answered HELD_S after the stall.  (A, B, what the stall was)."""
    a, b = Run(env, fx, "stall-a-" + form.name), Run(env, fx, "stall-b-" +
                                                     form.name)
    env.sim.call("POST", "/control", {"mode": "hold", "count": 1})
    a.owner.start()
    a.acq_key = wait_until(lambda: new_open_call(env, st0["by_key"]), 10,
                           "A inside its acquirer call")
    what = form.stall()
    a.t0 = time.monotonic()
    a.client.start(a.t0 + LEASE_S + SLACK_S + 10)
    # B's call (the next one) is slow.
    env.sim.call("POST", "/control", {"mode": "slow", "count": 1,
                                      "delay": B_CALL_S})
    b.t0 = time.monotonic()
    b.owner.start()
    b.acq_key = wait_until(lambda: new_open_call(
        env, set(st0["by_key"]) | {a.acq_key}), 10,
        "B inside its acquirer call")
    b.client.start(b.t0 + LEASE_S + SLACK_S + 10)
    # A's owner, if it may go on, gets its answer HELD_S after the stall:
    # the stimulus is a schedule, not a condition.
    time.sleep(max(0.0, a.t0 + HELD_S - time.monotonic()))
    env.sim.release()
    for c in (a.owner, a.client, b.owner, b.client):
        c.th.join(30)
        t.expect(c.error is None, "%s: %s" % (c.key, c.error))
    return a, b, what


def expect_no_overlap(t, st, st0, runs):
    """No two acquirer calls under one derived key overlapped."""
    for run in runs:
        spans = st["by_key"][run.acq_key]["spans"]
        t.expect(all(sp[1] is not None for sp in spans), "a call under "
                 "%s's derived key still in flight: %r" % (run.key, spans))
        pairs = overlapping(spans)
        t.expect(not pairs, "%s: two acquirer calls under one derived key "
                 "overlapped: %s (%d calls)" % (
                     run.key, "; ".join("[%.2f, %.2f] and [%.2f, %.2f]"
                                        % (x[0], x[1], y[0], y[1])
                                        for x, y in pairs), len(spans)))
    t.expect_eq(st["overlaps"], st0.get("overlaps", 0), "acquirer calls "
                "that began while another under their key was in flight")


def expect_in_time(t, run, since):
    """run succeeded within lease + 2 s of its clock; the seconds."""
    got = run.first_201()
    t.expect(got is not None and got[0] - run.t0 <= LEASE_S + SLACK_S,
             "%s succeeded %s after %s (owner %s, client %s), not within "
             "lease + %.0f s" % (run.key, "%.2f s" % (got[0] - run.t0)
                                 if got else "never", since,
                                 summary(run.owner.statuses),
                                 summary(run.client.statuses), SLACK_S))
    return got[0] - run.t0


def stall_check(t, form):
    env = t.env
    st0 = env.sim.stats()
    fx = None
    try:
        fx = StallFixture(t, "st-" + form.name, form.conninfo(env.conninfo))
        a, b, what = drive(t, env, fx.name, form, st0)
        form.undo()
        st = env.sim.stats()
        expect_no_overlap(t, st, st0, (a, b))
        a_s = expect_in_time(t, a, "the stall")
        b_s = expect_in_time(t, b, "its start (during the stall)")
        t.expect_eq(st["charges"] - st0["charges"], 2, "acquirer charges "
                    "for the two keys")
        t.expect_eq(st["conflicts"], st0["conflicts"], "acquirer key "
                    "conflicts")
        for run in (a, b):
            expect_one_payment(t, run, st)
        failed = float(env.metrics(fx=fx.name).get(
            "idem_heartbeat_renewals_failed_total", -1))
        t.expect(failed >= 1, "idem_heartbeat_renewals_failed_total %g "
                 "after the stall" % failed)
        if form.name == "blackhole":
            expect_stopped(t, a.owner)
        t.note("%s (%s): A's owner %s, its client %s, created %.2f s after "
               "the stall; B's owner %s, its client %s, created %.2f s "
               "after its start; %d + %d acquirer calls, none overlapping; "
               "%g failed renewals"
               % (form.name, what, summary(a.owner.statuses),
                  summary(a.client.statuses), a_s,
                  summary(b.owner.statuses), summary(b.client.statuses),
                  b_s, len(st["by_key"][a.acq_key]["spans"]),
                  len(st["by_key"][b.acq_key]["spans"]), failed))
    except BaseException:
        stop_all(fx, form, env)
        raise
    problem = stop_all(fx, form, env)
    t.expect(problem is None, "[%s] %s" % (fx.name, problem))


def expect_stopped(t, owner):
    """The owner stopped on its unproven lease: 503 service-unavailable
    saying so, with Retry-After."""
    t.expect(owner.r503 is not None, "A's owner never stopped: it "
             "answered %s" % owner.statuses)
    t.expect_problem(owner.r503, 503, "service-unavailable",
                     "could not prove")
    t.expect(owner.r503.header("Retry-After") is not None,
             "the 503 has no Retry-After")


def stop_all(fx, form, env):
    """The stall undone, held calls answered, the proxy closed, the
    fixture stopped (what it took, or None)."""
    form.undo()
    env.sim.release()
    form.stop()         # sessions held by the proxy end: nothing waits on them
    return fx.stop() if fx is not None else None


@check("lease stall: heartbeat backend SIGSTOPped, no overlapping calls")
def _(t):
    stall_check(t, SigStop(t))


@check("lease stall: heartbeat session black-holed, no overlapping calls")
def _(t):
    stall_check(t, BlackHole(t))
