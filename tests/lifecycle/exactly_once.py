"""exactly_once.py - the interleaving matrix of the phased create: at each
phase boundary (or inside the acquirer call), one of: a duplicate, the
record's TTL running out, the lease lapsing, the owner killed, the
completer, PostgreSQL restarted.  After each: at most one acquirer charge
for the key, at most one succeeded payment, the record completed (or
reported unfinished) and every acknowledged 2xx what a replay returns.

The owner is held inside the acquirer call by the simulator's "hold" mode
(the charge is made, the answer waits for POST /release), so that what
happens meanwhile is decided by the test, not by timing.  Registered into
checks.py's list (run.py imports both).
"""

import os
import re
import subprocess
import threading
import time

from harness import check, q
from lcenv import (PAY, DEADLINE_S, LOCK_TIMEOUT_S, Fixture, fresh,
                   wait_until, write_config)

LONG_DEADLINE_S = 60    # the "long" fixture's route deadline
from checks import (FAULT_FX, POINT_LEFT, charge_of, completed_replayed,
                    crash, evict, expect_completed, expect_record,
                    expect_succeeded, replays, retry_until_resumed)


# --- helpers ---

class Owner:
    """Request A, sent in a thread through fixture fx and held by the
    simulator inside its acquirer call until release()."""

    def __init__(self, t, key, body, fx="main"):
        self.t, self.key, self.body = t, key, body
        self.resp = None
        self.error = None
        held = t.env.sim.stats()["held"]
        t.env.sim.control("hold", count=1)

        def run():
            try:
                self.resp = t.env.post(PAY, body, key=key, fx=fx, timeout=30)
            except Exception as e:      # reported by answer()
                self.error = e
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        wait_until(lambda: t.env.sim.stats()["held"] > held or
                   not self.thread.is_alive(), DEADLINE_S + 5,
                   "request A inside its (held) acquirer call")
        t.expect(self.thread.is_alive(), "request A answered before its "
                 "acquirer call was held: %r %r" % (self.resp, self.error))

    def answer(self):
        """Release the held call and wait for A's answer."""
        self.t.env.sim.release()
        self.thread.join(30)
        self.t.expect(not self.thread.is_alive(), "request A did not answer "
                      "within 30 s of its acquirer call's release")
        self.t.expect(self.error is None, "request A failed: %r"
                      % self.error)
        return self.resp

    def succeeded(self, st0):
        """Release A: its 201 made the one succeeded payment, charged once
        since st0.  Returns (A's answer, the payments row, the charge)."""
        ra = self.answer()
        row = expect_succeeded(self.t, ra, self.body["description"])
        return ra, row, one_charge(self.t, row["id"], st0)


def on_long_fixture(t, fn):
    """fn() with a fixture "long" running whose route deadline (60 s) and
    lease (lock_timeout 90 s) outlast what the check does while A is held:
    A's wait is then bounded only by the acquirer client's own 5 s
    timeout, not by the main fixture's 2 s deadline, which a loaded
    machine overran."""
    env = t.env
    conf = os.path.join(env.tmp, "long.ini")
    write_config(conf, env.conninfo, "lc-long", env.sim.url,
                 deadline=LONG_DEADLINE_S, lock_timeout=LONG_DEADLINE_S + 30)
    fx = env.fx["long"] = Fixture("long", env.tmp, env.app, conf)
    try:
        fx.start()
        fx.wait_ready()
        fn()
    finally:
        problem = fx.stop()
        del env.fx["long"]
    t.expect(not problem, "the long fixture: %s" % problem)


def one_charge(t, pid, st0):
    """Exactly one acquirer charge since st0, under one derived key, for
    payment pid; returns the charge."""
    st = t.env.sim.stats()
    t.expect_eq(st["charges"] - st0["charges"], 1, "acquirer charges for "
                "the key")
    t.expect_eq(st["conflicts"], st0["conflicts"], "acquirer key conflicts")
    k, c = charge_of(t, pid, st)
    t.expect_eq(c["charges"], 1, "charges under the derived key")
    return c


def succeeded_once(t, desc):
    rows = t.env.payments_described(desc)
    t.expect_eq(len(rows), 1, "payments rows of the request")
    return rows[0]


def expire_now(t, key):
    """The record's TTL runs out now (what a short TTL or a request resumed
    near the end of its window comes to)."""
    n = t.env.db.int(
        "with u as (update idempotency_keys set expires_at = now() - "
        "interval '1 millisecond' where api_key_id = %d and key = %s "
        "returning 1) select count(*) from u" % (t.env.tenant.id, q(key)))
    t.expect_eq(n, 1, "records expired by SQL")


def lapse_lease_now(t, key):
    n = t.env.db.int(
        "with u as (update idempotency_keys set lease_until = now() - "
        "interval '1 millisecond' where api_key_id = %d and key = %s and "
        "state = 'in_progress' returning 1) select count(*) from u"
        % (t.env.tenant.id, q(key)))
    t.expect_eq(n, 1, "leases lapsed by SQL")


def expect_409(t, r, what):
    t.expect_problem(r, 409, "idempotency-key-in-flight")
    t.expect_eq(r.header("Retry-After"), "1", "Retry-After of the 409 (%s)"
                % what)


def unfinished_gauge(t):
    return float(t.env.metrics().get("idem_unfinished_keys", -1))


# --- the two reproductions of the double charge ---

@check("exactly-once: repro 1, [route \"POST /v1/payments\"] ttl = 2s "
       "under the %g s lease is refused at startup with file:line and why"
       % LOCK_TIMEOUT_S)
def _(t):
    env = t.env
    conf = os.path.join(env.tmp, "short-ttl.ini")
    with open(env.conf["main"]) as f:
        text = f.read()
    t.expect("ttl = 7d\n" in text, "the fixture config has no route ttl")
    text = text.replace("ttl = 7d\n", "ttl = 2s\n")
    with open(conf, "w") as f:
        f.write(text)
    line = text.splitlines().index("ttl = 2s") + 1
    p = subprocess.run([env.app, "-c", conf], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=20)
    err = p.stderr.decode(errors="replace")
    t.expect(p.returncode != 0, "payments.fcgi started with ttl 2s "
             "(exit %d): %s" % (p.returncode, err))
    want = ("%s:%d: ttl (2000ms) of [route \"POST /v1/payments\"] must be "
            "at least its deadline + lease" % (conf, line))
    t.expect(want in err, "stderr %r lacks %r" % (err, want))


@check("exactly-once: repro 1's timeline, A inside the acquirer call "
       "when its record expires (2 s TTL at 2.3 s): B with the same key "
       "and body -> 409 while A lives; A -> 201; one charge, one succeeded "
       "payment, B's retry replays A's 201")
def _(t):
    env, key, body, st0 = fresh(t, "rp1")
    a = Owner(t, key, body)
    expire_now(t, key)
    b = t.post(PAY, body, key=key)
    expect_409(t, b, "B while A lives")
    ra, row, c = a.succeeded(st0)
    t.expect_eq(row["acquirer_charge"], c["id"], "payments.acquirer_charge")
    completed_replayed(t, key, body, ra)


@check("exactly-once: repro 2, default TTL, expires_at set to now() at "
       "1 s while A is in the acquirer call, retry at 1.3 s -> 409; A -> "
       "201, one charge, one succeeded payment, record A's")
def _(t):
    on_long_fixture(t, lambda: _repro2(t))


def _repro2(t):
    env, key, body, st0 = fresh(t, "rp2")
    a = Owner(t, key, body, fx="long")
    rec = env.record(key)
    expire_now(t, key)
    for i in range(3):
        expect_409(t, t.post(PAY, body, key=key), "retry %d" % (i + 1))
    after = env.record(key)
    t.expect_eq(after["id"], rec["id"], "record id after the retries (A's, "
                "not replaced)")
    ra, row, _ = a.succeeded(st0)
    t.expect_eq(row["idem_key_id"], rec["id"], "payments.idem_key_id")
    completed_replayed(t, key, body, ra)


# --- inside the external call ---

@check("exactly-once: A's lease lapses inside the acquirer call (forced): "
       "B takes over and resumes under the same derived key (one charge); "
       "A's fenced phase commit raises -> 503 Retry-After, its effects "
       "rolled back; B's 201 is what replays")
def _(t):
    env, key, body, st0 = fresh(t, "lap")
    a = Owner(t, key, body)
    rec = env.record(key)
    lapse_lease_now(t, key)
    rb = t.post(PAY, body, key=key)      # its acquirer call: approve
    row = expect_succeeded(t, rb, body["description"])
    t.expect_eq(row["idem_key_id"], rec["id"], "the record B resumed (A's)")
    ra = a.answer()
    t.expect_problem(ra, 503, "service-unavailable")
    t.expect_eq(ra.header("Retry-After"), "1", "Retry-After of A's 503")
    c = one_charge(t, row["id"], st0)
    t.expect_eq(c["calls"], 2, "acquirer calls under the derived key (A "
                "and B)")
    again = succeeded_once(t, body["description"])
    t.expect_eq((again["status"], again["acquirer_charge"]),
                ("succeeded", c["id"]), "the payment after A's rollback")
    completed_replayed(t, key, body, rb)


@check("exactly-once: a duplicate while A waits in the acquirer call -> "
       "409 (three times), no acquirer call; A -> 201, one charge")
def _(t):
    env, key, body, st0 = fresh(t, "dup")
    a = Owner(t, key, body)
    calls = env.sim.stats()["calls"]
    for i in range(3):
        expect_409(t, t.post(PAY, body, key=key), "duplicate %d" % (i + 1))
    t.expect_eq(env.sim.stats()["calls"], calls, "acquirer calls made by "
                "the duplicates")
    ra, _, _ = a.succeeded(st0)
    replays(t, key, body, ra)


@check("exactly-once: PostgreSQL restarted while A waits in the acquirer "
       "call -> A 503 service-unavailable (its connection died with the "
       "server: the fenced commit fails); the retry resumes -> 201, one "
       "charge, one succeeded payment", needs=("pg_restart",))
def _(t):
    env, key, body, st0 = fresh(t, "pgr")
    a = Owner(t, key, body)
    env.pg_restart()
    ra = a.answer()
    t.expect_problem(ra, 503, "service-unavailable")
    t.expect_eq(ra.header("Retry-After"), "1", "Retry-After of A's 503")
    env.fx["main"].wait_ready()
    ra, n409 = retry_until_resumed(t, key, body)
    row = expect_succeeded(t, ra, body["description"])
    one_charge(t, row["id"], st0)
    completed_replayed(t, key, body, ra)


# --- the owner killed at each phase boundary, its TTL run out ---

def crashed_and_expired(t, fault, label):
    env = t.env
    key, body = env.new_key(label), env.payment_body(label)
    desc = body["description"]
    st0 = env.sim.stats()
    crash(t, fault, key, body)
    rec = expect_record(t, key, "in_progress", POINT_LEFT[fault], True,
                        "after the crash")
    expire_now(t, key)
    # Within the dead owner's lease: 409, expired or not.
    expect_409(t, t.post(PAY, body, key=key), "retry within the lease")
    unfinished = POINT_LEFT[fault] != "started"
    evict(t)
    t.expect(env.record(key) is not None, "eviction deleted the record "
             "while its lease was live")
    if unfinished:
        t.expect(unfinished_gauge(t) >= 1, "idem_unfinished_keys with an "
                 "expired record past %s" % POINT_LEFT[fault])
        out = env.ctl(env.conf["main"], "stats")
        t.expect("unfinished id=%s " % rec["id"] in out, "idemctl stats "
                 "does not list the unfinished record %s: %r"
                 % (rec["id"], out))
    r, n409 = retry_until_resumed(t, key, body)
    row = expect_succeeded(t, r, desc)
    if unfinished:
        t.expect_eq(row["idem_key_id"], rec["id"], "payments.idem_key_id "
                    "(the expired record was resumed, not replaced)")
        one_charge(t, row["id"], st0)
    else:
        # Nothing of the dead owner committed: executed afresh.
        one_charge(t, row["id"], st0)
    completed_replayed(t, key, body, r)
    t.note("%d retries answered 409 before the resume" % n409)


for _fault in sorted(FAULT_FX):
    def _make(fault):
        @check("exactly-once: owner killed %s, its TTL run out: 409 within "
               "the lease, never evicted%s, then resumed -> one charge, "
               "one succeeded payment, replayed"
               % (fault.replace(":", " "),
                  "" if POINT_LEFT[fault] == "started" else
                  ", reported unfinished"), needs=("faults",))
        def _(t):
            crashed_and_expired(t, fault, "cx-" + fault.split(":")[0][:3] +
                                fault.split(":")[1][:3])
    _make(_fault)


# --- the completer ---

def in_progress_ids(t):
    """ids of the main database's in_progress records (any tenant's)."""
    return {r["id"] for r in t.env.db.rows(
        "select id from idempotency_keys where state = 'in_progress'")}


def complete(t):
    """idemctl complete --app payments.fcgi: one completer run; its
    (completed, left) counts, and the ids of the records that left
    in_progress during the run (what it completed, unless another writer
    finished one meanwhile: so the checks can assert its count exactly,
    whatever earlier checks left behind)."""
    env = t.env
    before = in_progress_ids(t)
    p = env.ctl_run(env.conf["main"], "complete", "--app", env.app,
                    timeout=60)
    out = p.stdout.decode()
    m = re.match(r"^completed (\d+) keys, (\d+) left$", out.strip())
    t.expect(m is not None, "idemctl complete printed %r (exit %d): %s"
             % (out, p.returncode, p.stderr.decode(errors="replace")[-600:]))
    done, left = int(m.group(1)), int(m.group(2))
    t.expect_eq(p.returncode, 0 if left == 0 else 1, "idemctl complete's "
                "exit status with %d left" % left)
    return done, left, before - in_progress_ids(t)


def abandoned(t, fault, label):
    """A record whose owner was killed at fault, with no client retry:
    (env, key, body, the simulator's stats before, the record)."""
    env, key, body, st0 = fresh(t, label)
    crash(t, fault, key, body)
    rec = expect_record(t, key, "in_progress", POINT_LEFT[fault], True,
                        "after the crash")
    return env, key, body, st0, rec


def wait_lease_lapsed(t, rec):
    """Until the record's lease has lapsed by the database's clock (what the
    completer and a takeover go by)."""
    wait_until(lambda: t.env.db.int(
        "select count(*) from idempotency_keys where id = %d and "
        "lease_until <= now()" % rec["id"]) == 1, LOCK_TIMEOUT_S + 10,
        "the dead owner's lease lapsed")


def late_retry_replays(t, key, body, status, pid):
    env = t.env
    calls = env.sim.stats()["calls"]
    r = t.post(PAY, body, key=key)
    t.expect_status(r, status)
    t.expect_eq(r.header("Idempotent-Replayed"), "true", "a late retry "
                "after the completer is a replay")
    if status == 201:
        t.expect_eq(r.json_or_fail().get("id"), pid, "the replayed payment")
    t.expect_eq(env.sim.stats()["calls"], calls, "acquirer calls made by "
                "the late retry")
    t.expect_replay_of(t.post(PAY, body, key=key), r)


def completer_finishes(t, fault, label):
    env, key, body, st0, rec = abandoned(t, fault, label)
    pid = env.payments_described(body["description"])[0]["id"]
    # A live lease is never taken: the owner might still be running.
    done, left, moved = complete(t)
    after = env.record(key)
    t.expect_eq((after["state"], after["locked_at"]),
                ("in_progress", rec["locked_at"]), "the record after a "
                "completer run within its lease")
    t.expect_eq(done, len(moved), "keys idemctl complete says it "
                "completed vs records that left in_progress meanwhile")
    wait_lease_lapsed(t, rec)
    done, left, moved = complete(t)
    t.expect(rec["id"] in moved, "the lapsed record was not completed")
    t.expect_eq(done, len(moved), "keys idemctl complete says it "
                "completed vs records that left in_progress meanwhile "
                "(this check's and any lapsed leftover)")
    fin = expect_completed(t, key, 201)
    t.expect_eq(fin["id"], rec["id"], "the completed record (the same)")
    row = succeeded_once(t, body["description"])
    t.expect_eq((row["id"], row["status"]), (pid, "succeeded"), "the "
                "payment after the completer")
    one_charge(t, pid, st0)
    late_retry_replays(t, key, body, 201, pid)


for _fault in ("after:payment_created", "before:charged", "after:charged"):
    def _make_c(fault):
        @check("exactly-once: completer, owner killed %s and no client "
               "retry: left alone while the lease is live, then idemctl "
               "complete resumes it at '%s' -> completed 201, one charge, "
               "one succeeded payment; a late retry replays it"
               % (fault.replace(":", " "), POINT_LEFT[fault]),
               needs=("faults",))
        def _(t):
            completer_finishes(t, fault, "cm-" + fault.split(":")[0][:3] +
                               fault.split(":")[1][:3])
    _make_c(_fault)


@check("exactly-once: completer and a client retry at once on a lapsed "
       "lease: one of them resumes, the other gets 409 or leaves it; one "
       "charge, one succeeded payment, the record completed and replayed",
       needs=("faults",))
def _(t):
    env, key, body, st0, rec = abandoned(t, "after:payment_created", "race")
    wait_lease_lapsed(t, rec)
    res = {}
    th = threading.Thread(target=lambda: res.update(c=complete(t)),
                          daemon=True)
    th.start()
    r = t.post(PAY, body, key=key)
    th.join(60)
    t.expect("c" in res, "the completer run did not finish")
    # Two right answers, by who takes the lapsed lease first: the client
    # resumes (201, not a replay), or the completer holds it (409), or the
    # completer finished first (201 replay); the completer's count must
    # match in each.
    # either-or: the three right answers of the race above
    t.expect(r.status in (201, 409), "the client's retry answered %s"
             % r.status)
    done, left, moved = res["c"]
    client_resumed = r.status == 201 and \
        r.header("Idempotent-Replayed") != "true"
    t.expect(rec["id"] in moved or client_resumed, "the record left "
             "in_progress during neither")
    t.expect_eq(done + (1 if client_resumed and rec["id"] in moved else 0),
                len(moved), "keys idemctl complete says it completed vs "
                "records that left in_progress meanwhile")
    if r.status == 409:
        t.expect_eq(r.header("Retry-After"), "1", "Retry-After of the 409")
    fin = expect_completed(t, key, 201)
    t.expect_eq(fin["id"], rec["id"], "the completed record")
    row = succeeded_once(t, body["description"])
    one_charge(t, row["id"], st0)
    t.note("client %s; completer completed %d, left %d"
           % (r.status, res["c"][0], res["c"][1]))
    again = t.post(PAY, body, key=key)
    t.expect_status(again, 201)
    t.expect_eq(again.header("Idempotent-Replayed"), "true", "the retry "
                "after both")
    if r.status == 201:
        t.expect_replay_of(again, r)


@check("exactly-once: completer on a record whose handler now refuses "
       "(the acquirer declines the completer's call): 402 stored, the "
       "payment failed, one declined charge; a late retry replays the 402",
       needs=("faults",))
def _(t):
    env, key, body, st0, rec = abandoned(t, "after:payment_created", "cref")
    pid = env.payments_described(body["description"])[0]["id"]
    wait_lease_lapsed(t, rec)
    env.sim.control("decline", count=1)
    done, left, moved = complete(t)
    t.expect(rec["id"] in moved, "the lapsed record was not completed")
    t.expect_eq(done, len(moved), "keys idemctl complete says it "
                "completed vs records that left in_progress meanwhile")
    expect_completed(t, key, 402)
    row = succeeded_once(t, body["description"])
    t.expect_eq((row["id"], row["status"], row["acquirer_status"]),
                (pid, "failed", "declined"), "the payment after the "
                "completer")
    one_charge(t, pid, st0)
    late_retry_replays(t, key, body, 402, pid)


@check("exactly-once: completer while A waits in the acquirer call (its "
       "lease live, its TTL run out): completes nothing, the record "
       "untouched; A -> 201, one charge")
def _(t):
    env, key, body, st0 = fresh(t, "clive")
    on_long_fixture(t, lambda: _clive(t, key, body, st0))


def _clive(t, key, body, st0):
    env = t.env
    a = Owner(t, key, body, fx="long")
    expire_now(t, key)
    rec = env.record(key)
    t0 = time.monotonic()
    done, left, moved = complete(t)
    took = time.monotonic() - t0
    # The one window left: apps/payments' acquirer client gives up after
    # 5 s (ACQUIRER_TIMEOUT_MS), answers A 503 and releases the lease.
    # If that happened during the completer run, say so: that is not the
    # completer taking a live lease.
    t.expect(a.thread.is_alive(), "A was answered (%r) during the %.1f s "
             "completer run: its held acquirer call was cut by the "
             "acquirer client's own 5 s timeout, so the lease was no "
             "longer live" % (a.resp and a.resp.status, took))
    after = env.record(key)
    for k in ("id", "state", "recovery_point", "locked_at"):
        t.expect_eq(after[k], rec[k], "the completer changed the live "
                    "record's %s" % k)
    t.expect(rec["id"] not in moved, "the live record left in_progress")
    t.expect_eq(done, len(moved), "keys idemctl complete says it "
                "completed vs records that left in_progress meanwhile "
                "(none of them A's)")
    ra, _, _ = a.succeeded(st0)
    replays(t, key, body, ra)


@check("exactly-once: the janitor's completer (a process with "
       "evict_interval 1s) finishes a record abandoned after "
       "'payment_created' on its own: completed 201, one charge, "
       "idem_keys_completed_total counts it; a late retry replays it",
       needs=("faults",))
def _(t):
    env, key, body, st0, rec = abandoned(t, "after:payment_created", "jan")
    pid = env.payments_described(body["description"])[0]["id"]
    conf = os.path.join(env.tmp, "janitor.ini")
    write_config(conf, env.conninfo, "lc-janitor", env.sim.url,
                 evict_interval="1s")
    fx = env.fx["janitor"] = Fixture("janitor", env.tmp, env.app, conf)
    try:
        fx.start()
        fx.wait_ready()
        wait_until(lambda: (env.record(key) or {}).get("state") ==
                   "completed", LOCK_TIMEOUT_S + 15, "the janitor "
                   "completed the abandoned record")
        expect_completed(t, key, 201)
        row = succeeded_once(t, body["description"])
        t.expect_eq((row["id"], row["status"]), (pid, "succeeded"),
                    "the payment")
        one_charge(t, pid, st0)
        m = env.metrics(fx="janitor")
        t.expect(m.get("idem_keys_completed_total", 0) >= 1,
                 "idem_keys_completed_total of the janitor's process: %r"
                 % m.get("idem_keys_completed_total"))
        late_retry_replays(t, key, body, 201, pid)
    finally:
        problem = fx.stop()
        del env.fx["janitor"]
    t.expect(not problem, "the janitor's fixture: %s" % problem)
