"""leases.py - leases kept alive by the heartbeat (issue 21): with the
DEFAULT lease (10 s, nothing set in [idempotency]), a worker killed at
each of the four phase boundaries of the phased create is resumed by a
client retry within lease + 2 s; a live owner inside a 30 s acquirer call
is never taken over; a PostgreSQL restart at each boundary is answered
503 and the retry resumes at once (the owner released its lease on a
fresh connection); the heartbeat's own session terminated, the heartbeat
reconnects and the lease stays; eviction and a takeover in both forced
orders (the eviction's DELETE held open while the retry waits on the row;
the new owner stalled before its first commit while eviction runs).
After each: exactly one acquirer charge, one succeeded payment, a
byte-identical replay.

Its fixtures are its own (lighttpd + payments.fcgi with a config that
leaves the lease at its default, [payments] acquirer_timeout 40s and the
route's deadline 45s), started by the check that needs them and stopped at
its end.  The app host's wall clock stepped an hour each way mid-call
(clockstep.c, an LD_PRELOAD shim built here) moves no lease: see
docs/operations.md ("Leases and clocks").
Registered into run.py's list.
"""

import os
import shutil
import subprocess
import threading
import time

from harness import Failed, Session, check, q
from missing import in_ci
from lcenv import (PAY, Fixture, fresh, route_section, wait_until,
                   write_ini)
from checks import (charge_of, completed_replayed, crash, expect_completed,
                    replays)

LEASE_S = 10.0          # the default [idempotency] lease
SLACK_S = 2.0           # the target: resumed within lease + 2 s
CALL_S = 30             # the live owner's acquirer call
STALL_S = 6             # lib/request/idempotency.c: an IDEM_FAULT=stall-... sleep
BOUNDARIES = ("before:payment_created", "after:payment_created",
              "before:charged", "after:charged")
SHORT = {"before:payment_created": "bpc", "after:payment_created": "apc",
         "before:charged": "bch", "after:charged": "ach"}


def write_lease_config(path, conninfo, appname, acquirer_url, lease=None,
                       threads=3, acquirer_timeout="40s", deadline="45s",
                       origin="leases.py"):
    """The lease (unset: its default) and the heartbeat at their
    defaults; by default the route may run 45 s so that a 30 s acquirer
    call fits in it.  The pool has a connection per thread."""
    lines = [
        "# generated for one lifecycle run (%s)" % origin,
        "[server]",
        "threads = %d" % threads,
        "log_level = info",
        "",
        "[database]",
        "conninfo = %s application_name=%s" % (conninfo, appname),
        "pool_size = %d" % threads,
        "",
        "[idempotency]",
        "ttl = 24h",
        "evict_interval = 1h",
    ] + (["lease = %s" % lease] if lease else []) + [
        "",
        "[payments]",
        "acquirer_url = %s" % acquirer_url,
        "acquirer_timeout = %s" % acquirer_timeout,
        "",
    ] + route_section(deadline)
    write_ini(path, lines)


class LeaseFixture:
    """A fixture of this file, in env.fx while the check runs."""

    def __init__(self, t, name, fault=None, app_env=None, lease=None):
        env = t.env
        self.env, self.name = env, name
        conf = os.path.join(env.tmp, name + ".ini")
        write_lease_config(conf, env.conninfo, "lc-" + name, env.sim.url,
                           lease)
        self.fx = Fixture(name, env.tmp, env.app, conf, fault, app_env)
        env.fx[name] = self.fx
        self.fx.start()
        self.fx.wait_ready()

    def __enter__(self):
        return self.fx

    def __exit__(self, *exc):
        problem = self.fx.stop()
        self.env.fx.pop(self.name, None)
        if problem and exc[0] is None:
            raise Failed("[%s] %s" % (self.name, problem))
        return False


def completed_once(t, key, rec, body, st0, after):
    """The record rec completed with 201, one payment and one charge
    (st0: the simulator's stats before); a retry now (after: what came
    before it) replays that payment.  Returns the retry's answer."""
    from exactly_once import one_charge, succeeded_once
    fin = expect_completed(t, key, 201)
    t.expect_eq(fin["id"], rec["id"], "the completed record (the same)")
    row = succeeded_once(t, body["description"])
    one_charge(t, row["id"], st0)
    again = t.post(PAY, body, key=key)
    t.expect_status(again, 201)
    t.expect_eq(again.header("Idempotent-Replayed"), "true", "the retry "
                "after %s" % after)
    t.expect_eq(again.json_or_fail().get("id"), row["id"], "the replayed "
                "payment")
    return again


def owner_in_call(env, fx, key, body, timeout, st0):
    """The owner's POST of body under key (to fixture fx) on a thread of
    its own, awaited until it is inside its acquirer call (st0: the
    simulator's stats before).  Returns (thread, out, when it started):
    out gets "r", its answer, or "e", what it raised (for the caller to
    report)."""
    out = {}

    def owner():
        try:
            out["r"] = env.post(PAY, body, key=key, fx=fx, timeout=timeout)
        except Exception as e:      # reported by the caller
            out["e"] = e
    th = threading.Thread(target=owner, daemon=True)
    t_start = time.monotonic()
    th.start()
    wait_until(lambda: env.sim.stats()["calls"] > st0["calls"], 10,
               "the owner inside its acquirer call")
    return th, out, t_start


def slow_call(env, seconds):
    """The next acquirer call answers after seconds (mode slow)."""
    env.sim.call("POST", "/control", {"mode": "slow", "count": 1,
                                      "delay": seconds})


def metric(t, fx, name):
    return float(t.env.metrics(fx=fx).get(name, -1))


def lease_row(t, key):
    rows = t.env.db.rows(
        "select state, recovery_point, lease_token::text as token, "
        "extract(epoch from lease_until - clock_timestamp())::float8 "
        "as left_s from idempotency_keys where api_key_id = %d and "
        "key = %s" % (t.env.tenant.id, q(key)))
    return rows[0] if rows else None


def expect_live_lease(t, rec, what):
    """rec, read just before a retry that was answered 409 (so the record
    was in flight then): it exists, holds a lease, and the lease has time
    left.  A missing record or a NULL lease is a failure, not a pass."""
    t.expect(rec is not None, "%s: no record" % what)
    t.expect(rec["token"] is not None and rec["left_s"] is not None,
             "%s: no lease held (%r)" % (what, rec))
    t.expect(rec["left_s"] > 0, "%s lapsed (%.2f s left)"
             % (what, rec["left_s"]))


def exactly_once(t, key, body, r, st0):
    """r is the 201 that made the payment: one charge since st0 under one
    derived key, one succeeded payment, the record completed, a
    byte-identical replay."""
    env = t.env
    t.expect_status(r, 201)
    doc = r.json_or_fail()
    t.expect_eq(doc.get("status"), "succeeded", "status in the 201 body")
    rows = env.payments_described(body["description"])
    t.expect_eq(len(rows), 1, "payments rows of the request")
    t.expect_eq(rows[0]["id"], doc.get("id"), "payments row vs the 201")
    t.expect_eq(rows[0]["status"], "succeeded", "payments.status")
    st = env.sim.stats()
    t.expect_eq(st["charges"] - st0["charges"], 1, "acquirer charges for "
                "the key")
    t.expect_eq(st["conflicts"], st0["conflicts"], "acquirer key conflicts")
    k, c = charge_of(t, doc["id"], st)
    t.expect_eq(c["charges"], 1, "charges under the derived key")
    t.expect_eq(rows[0]["acquirer_charge"], c["id"], "payments."
                "acquirer_charge vs the acquirer's charge")
    completed_replayed(t, key, body, r)


def killed_owner_resumed(t, fault):
    env, key, body, st0 = fresh(t, "lease-kill-" + SHORT[fault])
    with LeaseFixture(t, "ls-main") as main, \
            LeaseFixture(t, "ls-k" + SHORT[fault], fault) as victim:
        t0 = crash(t, fault, key, body, victim)
        rec = env.record(key)
        t.expect(rec is not None and rec["state"] == "in_progress",
                 "after the kill: the record in progress: %r" % rec)
        n409 = 0
        while True:
            r = t.post(PAY, body, key=key, fx=main.name)
            if r.status != 409:
                break
            t.expect_problem(r, 409, "idempotency-key-in-flight")
            n409 += 1
            if time.monotonic() - t0 > LEASE_S + SLACK_S + 5:
                t.fail("still 409 %.1f s after the kill" %
                       (time.monotonic() - t0))
            time.sleep(0.2)
        took = time.monotonic() - t0
        t.expect_not_replayed(r)
        exactly_once(t, key, body, r, st0)
        t.note("kill -9 %s -> successful retry: %.2f s (%d retries "
               "answered 409)" % (fault, took, n409))
        t.expect(took <= LEASE_S + SLACK_S, "resumed %.2f s after the kill, "
                 "more than lease + %g s (%g s)" % (took, SLACK_S,
                                                    LEASE_S + SLACK_S))


for _fault in BOUNDARIES:
    @check("leases: default lease, worker killed -9 at %s -> a client "
           "retry resumes within lease + 2 s (12 s); one charge, one "
           "payment, replay byte-identical" % _fault, needs=("faults",))
    def _(t, fault=_fault):
        killed_owner_resumed(t, fault)


@check("leases: default lease, the owner alive inside a 30 s acquirer "
       "call -> every retry meanwhile is 409 (never taken over), the "
       "heartbeat renews its lease, the owner answers 201; one charge, "
       "one payment, replay byte-identical")
def _(t):
    env, key, body, st0 = fresh(t, "lease-alive")
    with LeaseFixture(t, "ls-main") as main:
        renew0 = metric(t, main.name, "idem_lease_renewals_total")
        t.expect(renew0 >= 0, "no idem_lease_renewals_total in /metrics")
        slow_call(env, CALL_S)
        th, out, t_start = owner_in_call(env, main.name, key, body,
                                         CALL_S + 30, st0)
        n409, max_left, last409 = 0, 0.0, 0.0
        while th.is_alive():
            rec = lease_row(t, key)
            r = t.post(PAY, body, key=key, fx=main.name)
            if not th.is_alive() and r.status != 409:
                break       # the owner answered meanwhile: a replay
            t.expect_problem(r, 409, "idempotency-key-in-flight")
            n409 += 1
            last409 = time.monotonic() - t_start
            expect_live_lease(t, rec, "the live owner's lease")
            max_left = max(max_left, rec["left_s"])
            time.sleep(0.5)
        th.join(5)
        took = time.monotonic() - t_start
        t.expect("e" not in out, "the owner failed: %r" % out.get("e"))
        t.expect(took >= CALL_S, "the owner answered after %.1f s, before "
                 "its %d s acquirer call ended" % (took, CALL_S))
        # Retries until the end of the call: well past the lease that the
        # pause before it gave (only the heartbeat can have kept it).
        t.expect(n409 >= 10 and last409 >= CALL_S - 3, "%d retries during "
                 "the call, the last %.1f s after its start" % (n409,
                                                                 last409))
        exactly_once(t, key, body, out["r"], st0)
        renewed = metric(t, main.name, "idem_lease_renewals_total") - renew0
        # 30 s at a beat every 3.3 s: 9; at least 6 on a slow machine.
        t.expect(renewed >= 6, "the heartbeat renewed %d leases in %.0f s"
                 % (renewed, took))
        t.note("%d retries answered 409 over %.1f s; %d heartbeat renewals"
               % (n409, took, renewed))


def clockstep_shim(t):
    """clockstep.c (beside this file) built into the run's temp dir: the
    LD_PRELOAD shim that steps the wall clock only."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        why = "no C compiler to build the clock shim (clockstep.c)"
        if in_ci():
            t.fail(why + "; in CI every tool is installed")
        t.skip(why)
    so = os.path.join(t.env.tmp, "clockstep.so")
    if not os.path.exists(so):
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "clockstep.c")
        p = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-shared",
                            "-fPIC", "-o", so, src, "-ldl"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        t.expect(p.returncode == 0, "building clockstep.so: %s"
                 % p.stdout.decode(errors="replace")[-600:])
    return so


JUMP_S = 3600           # the wall clock's step, each way
JUMP_LEASE_S = 4        # the clock check's lease: a beat every 1.33 s
JUMP_CALL_S = 14        # the owner's acquirer call
AHEAD_S = 7             # an hour ahead this long: past the lease from the
                        # last beat before the step


def retries_in_flight(t, fx, key, body, th, until):
    """Retries every 0.5 s while the owner lives, until the monotonic
    time until: each one 409 and the owner's lease live."""
    n = 0
    while th.is_alive() and time.monotonic() < until:
        rec = lease_row(t, key)
        r = t.post(PAY, body, key=key, fx=fx.name)
        if not th.is_alive() and r.status != 409:
            break           # the owner answered meanwhile: a replay
        t.expect_problem(r, 409, "idempotency-key-in-flight")
        expect_live_lease(t, rec, "the live owner's lease")
        n += 1
        time.sleep(0.5)
    return n


def app_clock_behind(fx):
    """Seconds the app's newest log line is behind the real clock."""
    lines = [ln for ln in fx.app_log_lines() if "time" in ln]
    if not lines:
        return None
    stamp = time.mktime(time.strptime(lines[-1]["time"][:19],
                                      "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return time.time() - stamp


@check("leases: the app host's wall clock steps an hour forward, then two "
       "hours back, while the owner is inside a 14 s acquirer call "
       "(an LD_PRELOAD shim, the monotonic clock untouched as in a real "
       "step) -> "
       "the heartbeat keeps renewing, every retry meanwhile is 409, the "
       "owner answers 201; one charge, one payment, replay byte-identical")
def _(t):
    env = t.env
    shim = clockstep_shim(t)
    offset = os.path.join(env.tmp, "clock-offset")
    with open(offset, "w") as f:
        f.write("0\n")
    app_env = {"LD_PRELOAD": shim, "CLOCKSTEP_FILE": offset}
    if os.environ.get("ASAN_OPTIONS"):
        # The shim comes before the ASan runtime: allowed on purpose.
        app_env["ASAN_OPTIONS"] = (os.environ["ASAN_OPTIONS"] +
                                   ":verify_asan_link_order=0")
    key = env.new_key("lease-clock")
    body = env.payment_body("lease-clock")
    st0 = env.sim.stats()
    with LeaseFixture(t, "ls-clock", app_env=app_env,
                      lease="%ds" % JUMP_LEASE_S) as fx:
        slow_call(env, JUMP_CALL_S)
        th, out, t0 = owner_in_call(env, fx.name, key, body,
                                    JUMP_CALL_S + 30, st0)
        renew0 = metric(t, fx.name, "idem_lease_renewals_total")
        # Ahead first: a beat timed on the wall clock would then wait an
        # hour (the lease lapses, a retry takes over); behind next: it
        # would fire at once, over and over.
        with open(offset, "w") as f:
            f.write("%d\n" % JUMP_S)
        n = retries_in_flight(t, fx, key, body, th, t0 + AHEAD_S)
        skew = app_clock_behind(fx)
        t.expect(skew is not None and abs(skew + JUMP_S) < 60, "the app's "
                 "clock is not an hour ahead (its last log line is %r s "
                 "behind): the step did not reach it" % skew)
        renew_ahead = metric(t, fx.name, "idem_lease_renewals_total") - \
            renew0
        with open(offset, "w") as f:
            f.write("-%d\n" % JUMP_S)
        n += retries_in_flight(t, fx, key, body, th, t0 + JUMP_CALL_S + 30)
        skew = app_clock_behind(fx)
        t.expect(skew is not None and abs(skew - JUMP_S) < 60, "the app's "
                 "clock is not an hour behind (%r s behind)" % skew)
        th.join(10)
        took = time.monotonic() - t0
        t.expect("e" not in out, "the owner failed: %r" % out.get("e"))
        t.expect(took >= JUMP_CALL_S, "the owner answered after %.1f s, "
                 "before its %d s acquirer call ended" % (took, JUMP_CALL_S))
        renewed = metric(t, fx.name, "idem_lease_renewals_total") - renew0
        # A beat every lease/3: about 5 ahead and 5 behind; on a slow
        # machine fewer, but some in each; more than twice the expected
        # would be beats not paced by the monotonic clock.
        most = 2 * JUMP_CALL_S * 3 // JUMP_LEASE_S
        t.expect(renew_ahead >= 2 and renewed - renew_ahead >= 2 and
                 renewed <= most, "heartbeat renewals: %d while an hour "
                 "ahead, %d while an hour behind" % (renew_ahead,
                                                     renewed - renew_ahead))
        t.expect(n >= 10, "%d retries during the call" % n)
        exactly_once(t, key, body, out["r"], st0)
        t.note("%d retries answered 409 over %.1f s; renewals %d ahead, "
               "%d behind" % (n, took, renew_ahead, renewed - renew_ahead))


def stalled_then_restarted(t, fault):
    env, key, body, st0 = fresh(t, "lease-pgr-" + SHORT[fault])
    with LeaseFixture(t, "ls-main") as main, \
            LeaseFixture(t, "ls-s" + SHORT[fault], "stall-" + fault) as fx:
        out = {}

        def owner():
            try:
                out["r"] = env.post(PAY, body, key=key, fx=fx.name,
                                    timeout=60)
            except Exception as e:
                out["e"] = e
        th = threading.Thread(target=owner, daemon=True)
        th.start()
        want = "fault: stalling the request %s %s" % tuple(fault.split(":"))
        wait_until(lambda: any(ln.get("msg") == want
                               for ln in fx.app_log_lines()), 10,
                   "the owner stalled at %s" % fault)
        env.pg_restart()
        th.join(STALL_S + 20)
        t.expect(not th.is_alive(), "the owner did not answer")
        t.expect("e" not in out, "the owner failed: %r" % out.get("e"))
        t.expect_problem(out["r"], 503, "service-unavailable")
        t_503 = time.monotonic()
        rec = lease_row(t, key)
        # lib's idem_release(): a record still at its start (the stall
        # before payment_created's commit) is deleted, so that the retry
        # executes afresh; past a recovery point it stays, its lease
        # released, so that the retry resumes there.
        if fault == "before:payment_created":
            t.expect_eq(rec, None, "the record after the 503 at %s "
                        "(deleted: no recovery point passed)" % fault)
        else:
            t.expect(rec is not None and rec["state"] == "in_progress" and
                     rec["token"] is None and rec["left_s"] is None,
                     "the record after the 503 at %s: in progress, its "
                     "lease released on a fresh connection (%r)"
                     % (fault, rec))
        r = t.post(PAY, body, key=key, fx=main.name)
        took = time.monotonic() - t_503
        t.expect_not_replayed(r)
        exactly_once(t, key, body, r, st0)
        t.note("PostgreSQL restarted at %s: 503, then the first retry -> "
               "201 %.2f s later (the record %s)" % (
                   fault, took, "released" if rec else "deleted"))


for _fault in BOUNDARIES:
    @check("leases: PostgreSQL restarted while the owner waits at %s -> "
           "503, the lease released at once on a fresh connection, the "
           "first retry resumes -> 201; one charge, one payment, replay "
           "byte-identical" % _fault, needs=("faults", "pg_restart"))
    def _(t, fault=_fault):
        stalled_then_restarted(t, fault)


@check("leases: the heartbeat's session terminated (pg_terminate_backend) "
       "while the owner is inside a 20 s acquirer call -> the heartbeat "
       "reconnects, the lease never lapses, retries meanwhile are 409; one "
       "charge, one payment, replay byte-identical")
def _(t):
    env, key, body, st0 = fresh(t, "lease-hbkill")
    hb_sessions = ("select pid from pg_stat_activity where datname = %s "
                   "and application_name = 'idem heartbeat'"
                   % q(env.dbname))
    with LeaseFixture(t, "ls-main") as main:
        slow_call(env, 20)
        th, out, t_start = owner_in_call(env, main.name, key, body, 40,
                                         st0)
        old = wait_until(lambda: env.admin.rows(hb_sessions), 8,
                         "a session named 'idem heartbeat'")
        old = {row["pid"] for row in old}
        n = env.admin.int("select count(*) from (select "
                          "pg_terminate_backend(pid) from pg_stat_activity "
                          "where pid in (%s)) x"
                          % ",".join(str(p) for p in old))
        t.expect_eq(n, len(old), "heartbeat sessions terminated")
        wait_until(lambda: {row["pid"] for row in
                            env.admin.rows(hb_sessions)} - old, 8,
                   "the heartbeat back on a new session")
        n409, last409 = 0, 0.0
        while th.is_alive():
            rec = lease_row(t, key)
            r = t.post(PAY, body, key=key, fx=main.name)
            if not th.is_alive() and r.status != 409:
                break
            t.expect_problem(r, 409, "idempotency-key-in-flight")
            n409 += 1
            last409 = time.monotonic() - t_start
            expect_live_lease(t, rec, "the lease after its heartbeat's "
                              "session was terminated")
            time.sleep(0.5)
        th.join(5)
        t.expect("e" not in out, "the owner failed: %r" % out.get("e"))
        # Past the lease the pause gave: renewed by the new session only.
        t.expect(last409 >= LEASE_S + 4, "the last 409 %.1f s after the "
                 "call began: not past the pause's lease" % last409)
        exactly_once(t, key, body, out["r"], st0)
        t.note("%d retries answered 409 after the heartbeat's session was "
               "terminated, the last %.1f s into the call" % (n409,
                                                              last409))


# --- the completer and eviction against a client retry (lcenv's crash
# fixtures, whose lease is 3 s: the race is the point, not the lease) ---

def race(t, *fns):
    """Run each fn at once (released by one barrier); their results, or
    the exception each raised, in order."""
    bar = threading.Barrier(len(fns))
    res = [None] * len(fns)

    def run(i, fn):
        bar.wait(10)
        try:
            res[i] = ("ok", fn())
        except Exception as e:          # reported by the caller
            res[i] = ("error", e)
    ths = [threading.Thread(target=run, args=(i, fn), daemon=True)
           for i, fn in enumerate(fns)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(90)
    for i, th in enumerate(ths):
        t.expect(not th.is_alive() and res[i] is not None, "racer %d did "
                 "not finish" % i)
        t.expect(res[i][0] == "ok", "racer %d failed: %r" % (i, res[i][1]))
    return [r[1] for r in res]


def completer_races_retry(t, fault):
    from exactly_once import (abandoned, complete, one_charge,
                              succeeded_once, wait_lease_lapsed)
    env, key, body, st0, rec = abandoned(t, fault, "lrace-" + SHORT[fault])
    wait_lease_lapsed(t, rec)
    (done, left, _moved), r = race(t, lambda: complete(t),
                           lambda: env.post(PAY, body, key=key))
    # either-or: a race, by who takes the lapsed lease first; each branch
    # is checked below
    t.expect(r.status in (201, 409), "the client's retry answered %s"
             % r.status)
    if r.status == 409:
        t.expect_problem(r, 409, "idempotency-key-in-flight")
    again = completed_once(t, key, rec, body, st0, "both")
    if r.status == 201:
        t.expect_replay_of(again, r)
    t.expect_replay_of(t.post(PAY, body, key=key), again)
    t.note("client %s; completer completed %d, left %d" % (r.status, done,
                                                          left))


for _fault in BOUNDARIES[1:]:
    @check("leases: the completer and a client retry at once on the "
           "lapsed lease of an owner killed %s: one resumes, the other "
           "gets 409 or leaves it; one charge, one payment, the record "
           "completed, replays byte-identical" % _fault,
           needs=("faults",))
    def _(t, fault=_fault):
        completer_races_retry(t, fault)


def eviction_during_takeover(t, fault):
    from checks import evict
    from exactly_once import (abandoned, expire_now, one_charge,
                              succeeded_once, wait_lease_lapsed)
    env, key, body, st0, rec = abandoned(t, fault, "levict-" + SHORT[fault])
    expire_now(t, key)
    wait_lease_lapsed(t, rec)
    (n, _secs), r = race(t, lambda: evict(t),
                         lambda: env.post(PAY, body, key=key))
    # either-or: a race, by who takes the lapsed lease first; each branch
    # is checked below
    t.expect(r.status in (201, 409), "the client's retry answered %s"
             % r.status)
    if r.status == 409:
        # The eviction held the row; the next retry takes over.
        r = t.post(PAY, body, key=key)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    row = succeeded_once(t, body["description"])
    if fault != "before:payment_created":
        # Past a recovery point: never evicted, resumed in place.
        t.expect_eq(row["idem_key_id"], rec["id"], "payments.idem_key_id "
                    "(the record resumed, not evicted and replaced)")
    one_charge(t, row["id"], st0)
    completed_replayed(t, key, body, r)
    t.note("eviction deleted %d keys meanwhile" % n)


for _fault in ("before:payment_created", "after:charged"):
    @check("leases: eviction (idemctl evict) at once with the takeover of "
           "an expired record whose owner was killed %s: the record %s; "
           "one charge, one payment, replay byte-identical"
           % (_fault, "is evicted or taken over, never both" if
              _fault == "before:payment_created" else
              "past a recovery point is never evicted"),
           needs=("faults",))
    def _(t, fault=_fault):
        eviction_during_takeover(t, fault)


# --- eviction and a takeover in a forced order (not a race): each side
# held by the test while the other comes ---

EVICT_ONE = ("DELETE FROM idempotency_keys WHERE id IN (SELECT id FROM "
             "idempotency_keys k WHERE k.id = %d AND expires_at <= now() "
             "AND idem_free(k) FOR UPDATE SKIP LOCKED) RETURNING id")


class HeldSession(Session):
    """psql with its transaction kept open (harness.Session), named and
    with its backend's pid, so the test decides when it commits."""

    def __init__(self, t, name):
        super().__init__(t.env.conninfo + " application_name=" + name)
        self.pid = int(self.ask("select pg_backend_pid()"))

    def ask(self, sql, timeout=20):
        """Sends sql; its output, one string."""
        return "\n".join(self.run(sql, timeout))


def lock_waiters(t, but):
    return t.env.db.int(
        "select count(*) from pg_stat_activity where wait_event_type = "
        "'Lock' and pid <> %d and datname = current_database()" % but)


@check("leases: eviction forced first: its DELETE of an expired record "
       "whose owner was killed before:payment_created is held open, a "
       "retry comes and waits on the row, the eviction commits -> the "
       "retry executes afresh under a new record (evicted, then claimed: "
       "never both); one charge, one payment, replay byte-identical",
       needs=("faults",))
def _(t):
    from exactly_once import (abandoned, expire_now, one_charge,
                              succeeded_once, wait_lease_lapsed)
    env, key, body, st0, rec = abandoned(t, "before:payment_created",
                                         "levict-first")
    expire_now(t, key)
    wait_lease_lapsed(t, rec)
    ev = HeldSession(t, "lc-evict-held")
    try:
        t.expect_eq(ev.ask("begin"), "", "BEGIN of the held eviction")
        t.expect_eq(ev.ask(EVICT_ONE % rec["id"]), str(rec["id"]),
                    "the eviction's DELETE (the record was free)")
        out = {}

        def retry():
            try:
                out["r"] = env.post(PAY, body, key=key)
            except Exception as e:      # reported below
                out["e"] = e
        th = threading.Thread(target=retry, daemon=True)
        th.start()
        wait_until(lambda: lock_waiters(t, ev.pid) == 1 or
                   not th.is_alive(), 20, "the retry waiting on the row "
                   "the eviction holds")
        t.expect(th.is_alive(), "the retry answered while the eviction "
                 "held the row: %r" % out)
        t.expect_eq(ev.ask("commit"), "", "COMMIT of the eviction")
    finally:
        ev.close()
    th.join(30)
    t.expect("r" in out, "the retry failed: %r" % out.get("e"))
    r = out["r"]
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    now = expect_completed(t, key, 201)
    t.expect(now["id"] != rec["id"], "the record was evicted and claimed "
             "afresh (a new id), not taken over: id %s" % now["id"])
    row = succeeded_once(t, body["description"])
    t.expect_eq(row["idem_key_id"], now["id"], "payments.idem_key_id")
    one_charge(t, row["id"], st0)
    replays(t, key, body, r)


@check("leases: a takeover forced first: the retry of an owner killed "
       "before:payment_created takes the expired record over and stalls "
       "before its first commit; eviction runs meanwhile and leaves it "
       "(its lease is live); the new owner answers 201; one charge, one "
       "payment, replay byte-identical", needs=("faults",))
def _(t):
    from checks import evict
    from exactly_once import (abandoned, expire_now, one_charge,
                              succeeded_once, wait_lease_lapsed)
    env, key, body, st0, rec = abandoned(t, "before:payment_created",
                                         "ltake-first")
    expire_now(t, key)
    wait_lease_lapsed(t, rec)
    dead = lease_row(t, key)["token"]
    with LeaseFixture(t, "ls-stall", "stall-before:payment_created") as fx:
        out = {}

        def retry():
            try:
                out["r"] = env.post(PAY, body, key=key, fx=fx.name,
                                    timeout=STALL_S + 30)
            except Exception as e:      # reported below
                out["e"] = e
        th = threading.Thread(target=retry, daemon=True)
        th.start()
        wait_until(lambda: (lease_row(t, key) or {}).get("token") not in
                   (None, dead) or not th.is_alive(), 20,
                   "the retry's takeover committed")
        t.expect(th.is_alive(), "the retry answered before its stall: %r"
                 % out)
        taken = lease_row(t, key)
        t.expect(taken["left_s"] > 0, "the new owner's lease is live")
        n, _secs = evict(t)
        t.expect(th.is_alive(), "the retry answered before the eviction "
                 "ended (the stall is %d s)" % STALL_S)
        after = lease_row(t, key)
        t.expect(after is not None, "eviction deleted a record whose new "
                 "owner holds a live lease")
        t.expect_eq(after["token"], taken["token"], "the lease token "
                    "after the eviction")
        th.join(STALL_S + 30)
    t.expect("r" in out, "the retry failed: %r" % out.get("e"))
    r = out["r"]
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    fin = expect_completed(t, key, 201)
    row = succeeded_once(t, body["description"])
    t.expect_eq(row["idem_key_id"], fin["id"], "payments.idem_key_id")
    one_charge(t, row["id"], st0)
    replays(t, key, body, r)
    t.note("eviction deleted %d other keys meanwhile" % n)


def completer_holds_retry_waits(t, fault):
    """The completer owns the record (held inside its acquirer call): a
    client retry meanwhile is 409; released, the completer completes and
    the retry replays its answer."""
    from exactly_once import (abandoned, complete, one_charge,
                              succeeded_once, wait_lease_lapsed)
    env, key, body, st0, rec = abandoned(t, fault, "lhold-" + SHORT[fault])
    wait_lease_lapsed(t, rec)
    held = env.sim.stats()["held"]
    env.sim.control("hold", count=1)
    res = {}

    def run():
        try:
            res["c"] = complete(t)
        except Exception as e:          # reported below
            res["e"] = e
    th = threading.Thread(target=run, daemon=True)
    th.start()
    wait_until(lambda: env.sim.stats()["held"] > held or not th.is_alive(),
               30, "the completer inside its (held) acquirer call")
    t.expect(th.is_alive(), "the completer ended before its call was "
             "held: %r" % res)
    now = env.record(key)
    t.expect(now["leased"] and now["locked_at"] != rec["locked_at"],
             "the completer took the lease over: %r" % now)
    r = t.post(PAY, body, key=key)
    t.expect_problem(r, 409, "idempotency-key-in-flight")
    t.expect_eq(r.header("Retry-After"), "1", "Retry-After of the 409")
    env.sim.release()
    th.join(60)
    t.expect("c" in res, "the completer run failed: %r" % res.get("e"))
    t.expect(res["c"][0] >= 1, "the completer completed %d keys"
             % res["c"][0])
    again = completed_once(t, key, rec, body, st0, "the completer")
    t.expect_replay_of(t.post(PAY, body, key=key), again)


for _fault in ("after:payment_created", "before:charged"):
    @check("leases: the completer resuming an owner killed %s holds the "
           "lease inside its acquirer call: a client retry meanwhile -> "
           "409; then completed, the retry replays; one charge, one "
           "payment" % _fault, needs=("faults",))
    def _(t, fault=_fault):
        completer_holds_retry_waits(t, fault)
