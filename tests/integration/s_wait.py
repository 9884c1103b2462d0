"""s_wait.py - Prefer: wait=N (RFC 7240) on a duplicate of a key in flight:
it waits up to min(N, [idempotency] max_wait) for the first request and
answers as a retry would then (the first's stored answer, replayed, with
Preference-Applied); past N, the 409 of today; without the preference, the
409 at once.  The first request is held by a trigger that sleeps in
pg_sleep (one per check, keyed on the payment's description)."""

import os
import threading
import time

from harness import check, q

PAY = "/v1/payments"
# Under a wrapper (valgrind) the app is many times slower: the timing
# targets below are the product's for the app as built, so they are
# asserted only then; the answers are asserted always.
NATIVE = not os.environ.get("IDEM_APP_WRAPPER")
# How much longer the first request is held there, so that the duplicates
# still find it in flight.
SLOW = 1 if NATIVE else 4


def _sleep(seconds):
    return "perform pg_sleep(%g)" % (seconds * SLOW)


def _first(t, body, key):
    """Send body in a thread; returns (thread, out dict)."""
    out = {}

    def run():
        try:
            out["r"] = t.env.post(PAY, body, key=key, timeout=30)
            out["t"] = time.monotonic()
        except Exception as e:          # reported by the caller
            out["e"] = e
    th = threading.Thread(target=run)
    th.start()
    return th, out


def _timed_post(t, body, key, prefer=None):
    hs = [("Prefer", prefer)] if prefer else None
    t0 = time.monotonic()
    r = t.post(PAY, body, key=key, headers=hs, timeout=30)
    return r, time.monotonic() - t0


def _payments(t, desc):
    return t.db.int("select count(*) from payments where api_key_id = %d "
                    "and description = %s" % (t.a.id, q(desc)))


def _slow(t, tag, desc, action):
    return t.db.before_insert("%s_%s" % (tag, t.run_id), "payments",
                              "new.description = %s" % q(desc), action)


_WARM = set()


def _two_app_processes(t):
    """Under mod_fcgid (one request per process), two payments held at
    once, long enough for it to spawn a second process (it waits about
    1 s for a busy one first); its processes then stay (FcgidIdleTimeout).
    Else a duplicate would wait for a spawn, not for the first request."""
    if t.env.fixture != "apache-fcgid" or t.run_id in _WARM:
        return
    _WARM.add(t.run_id)
    desc = "warm-" + t.run_id
    drop = _slow(t, "warm", desc, "perform pg_sleep(2.5)")
    try:
        runs = [_first(t, t.payment_body(description=desc),
                       t.new_key("warm")) for _ in range(2)]
        for th, out in runs:
            th.join(30)
            t.expect("r" in out and out["r"].status == 201,
                     "warm-up payment: %r" % out)
    finally:
        t.db.run(drop)


class _InFlight:
    """A payment held in the app by a trigger running action (PL/pgSQL)
    for its description: on entry the first request is sent and has
    reached the trigger; .key, .body; .first() its response once it
    ended.  On exit the trigger is dropped."""

    def __init__(self, t, tag, action):
        _two_app_processes(t)
        self.t, self.tag, self.action = t, tag, action

    def __enter__(self):
        t = self.t
        self.desc = "%s-%s" % (self.tag, t.run_id)
        self.drop = _slow(t, self.tag, self.desc, self.action)
        self.key = t.new_key(self.tag)
        self.body = t.payment_body(description=self.desc)
        self.th, self.out = _first(t, self.body, self.key)
        if not t.db.await_sleeping():
            self.th.join(30)
            t.db.run(self.drop)
            t.fail("the first request never reached the slow trigger")
        return self

    def first(self):
        self.th.join(30)
        self.t.expect("r" in self.out, "first request failed: %r"
                      % self.out.get("e"))
        return self.out["r"]

    def __exit__(self, *exc):
        self.th.join(30)
        self.t.db.run(self.drop)
        return False


@check("Prefer: wait=5 on a duplicate while the first takes 1 s -> the "
       "first's answer replayed within 1.2 s, Preference-Applied: wait=5; "
       "one payment")
def _(t):
    with _InFlight(t, "wait", _sleep(1)) as f:
        dup, took = _timed_post(t, f.body, f.key, prefer="wait=5")
        first = f.first()
        t.expect_status(first, 201)
        t.expect_replay_of(dup, first)
        t.expect_eq(dup.header("Preference-Applied"), "wait=5",
                    "Preference-Applied")
        # The target: the duplicate of a 1 s request answered
        # within 1.2 s of being sent (it was sent once the first slept).
        t.expect(took < 1.2 or not NATIVE, "the duplicate answered after "
                 "%.2fs (target < 1.2s)" % took)
        t.note("the duplicate answered after %.2fs" % took)
        t.expect_eq(_payments(t, f.desc), 1, "payments for the key")


@check("Prefer: wait=5 while the first fails (5xx, nothing stored) -> the "
       "duplicate, a retry like any other, executes and fails the same way; "
       "nothing stored, no payment")
def _(t):
    with _InFlight(t, "waitfail", _sleep(1) + "; raise exception "
                   "'declined by the test trigger'") as f:
        dup, took = _timed_post(t, f.body, f.key, prefer="wait=5")
        t.expect_problem(f.first(), 500, "internal-error")
        t.expect_problem(dup, 500, "internal-error")
        t.expect_eq(dup.header("Preference-Applied"), "wait=5",
                    "Preference-Applied")
        t.expect_eq(dup.header("Idempotent-Replayed"), None,
                    "Idempotent-Replayed on the duplicate")
        t.note("the duplicate answered after %.2fs" % took)
        t.expect_eq(t.key_rows(t.a, f.key), [], "records of the key")
        t.expect_eq(_payments(t, f.desc), 0, "payments for the key")


@check("Prefer: wait=1 while the first takes 3 s -> 409 "
       "idempotency-key-in-flight after about 1 s, no Preference-Applied; "
       "then the first's answer replays")
def _(t):
    with _InFlight(t, "waitlong", _sleep(3)) as f:
        dup, took = _timed_post(t, f.body, f.key, prefer="wait=1")
        t.expect_problem(dup, 409, "idempotency-key-in-flight")
        t.expect_eq((dup.header("Retry-After") or "").strip(), "1",
                    "Retry-After")
        t.expect_eq(dup.header("Preference-Applied"), None,
                    "Preference-Applied on the 409")
        # It waited (at least 0.8 s: the last poll may end up to one
        # interval early) and not much past 1 s (a loaded machine: 2.5).
        t.expect(0.8 <= took and (took < 2.5 or not NATIVE), "the 409 came "
                 "after %.2fs (want about 1s)" % took)
        first = f.first()
        t.expect_status(first, 201)
        t.expect_replay_of(t.post(PAY, f.body, key=f.key), first)
        t.expect_eq(_payments(t, f.desc), 1, "payments for the key")


@check("no wait preference (or an unusable one) -> 409 at once, as without "
       "Prefer")
def _(t):
    with _InFlight(t, "nowait", _sleep(2)) as f:
        for prefer in (None, "return=minimal", "wait=0", "wait=soon"):
            r, took = _timed_post(t, f.body, f.key, prefer=prefer)
            t.expect_problem(r, 409, "idempotency-key-in-flight")
            t.expect_eq(r.header("Preference-Applied"), None,
                        "Preference-Applied (Prefer: %s)" % prefer)
            # At once: well under the first's 2 s sleep.
            t.expect(took < 1.0 or not NATIVE, "Prefer: %s: the 409 came "
                     "after %.2fs" % (prefer, took))
        t.expect_status(f.first(), 201)
