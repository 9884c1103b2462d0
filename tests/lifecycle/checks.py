"""checks.py - the lifecycle checks: crashes at phase boundaries and
resumption after the lock timeout, the acquirer's answers (declined,
failing, timing out), reclaim, eviction (bounded batches, memory not
effect), the janitor's fleet-wide lock, and the metrics.

They run in this order against the fixtures of lcenv.Env, all on one
database (the janitor checks on a second one), one after the other.
"""

import http.client
import os
import re
import subprocess
import threading
import time

from harness import Failed, check, pid_running, q
from lcenv import (PAY, ROUTE, EVICT_LOCK, LOCK_TIMEOUT_S, POOL_SIZE,
                   DEADLINE_S, fresh, wait_until)

LTO = LOCK_TIMEOUT_S

# Which fixture has which crash switch, and the recovery point a record
# is left at when its worker dies there.
FAULT_FX = {"before:payment_created": "f-bpc",
            "after:payment_created": "f-apc",
            "before:charged": "f-bch",
            "after:charged": "f-ach"}
POINT_LEFT = {"before:payment_created": "started",
              "after:payment_created": "payment_created",
              "before:charged": "payment_created",
              "after:charged": "charged"}
OUTCOMES = ("created", "replayed", "in_flight", "reused", "rejected",
            "error")


# --- helpers ---

def crash(t, fault, key, body, fx=None):
    """POST through fx (by default the fixture whose app has
    IDEM_FAULT=fault): its worker must be SIGKILLed there (the client sees
    a 5xx or no answer).  Returns the monotonic time the POST was sent (at
    or before the kill)."""
    fx = fx or t.env.fx[FAULT_FX[fault]]
    fx.wait_ready()             # lighttpd respawned it after an earlier crash
    before = fx.pids()
    t.expect(before, "[%s] no payments.fcgi process to crash" % fx.name)
    when, point = fault.split(":")
    nlog = len([ln for ln in fx.app_log_lines()
                if ln.get("msg", "").startswith("fault: killing")])
    r = None
    t0 = time.monotonic()
    try:
        r = t.post(PAY, body, key=key, fx=fx.name)
    except (OSError, http.client.HTTPException) as e:
        t.note("the crashed request: %s: %s" % (type(e).__name__, e))
    if r is not None and r.status < 500:
        t.fail("POST through %s (IDEM_FAULT=%s) answered %s; its worker "
               "should have been killed" % (fx.name, fault, r.status))
    wait_until(lambda: not any(pid_running(p) for p in before), 10,
               "[%s] the killed payments.fcgi %s is gone"
               % (fx.name, sorted(before)))
    lines = [ln for ln in fx.app_log_lines()
             if ln.get("msg", "").startswith("fault: killing")]
    t.expect_eq(len(lines), nlog + 1, "[%s] 'fault: killing' log lines"
                % fx.name)
    t.expect_eq(lines[-1]["msg"], "fault: killing the process %s %s"
                % (when, point), "the crash switch's log line")
    return t0


def expect_record(t, key, state, point, leased, what):
    rec = t.env.record(key)
    t.expect(rec is not None, "%s: no idempotency_keys row for the key"
             % what)
    t.expect_eq(rec["state"], state, "%s: state" % what)
    t.expect_eq(rec["recovery_point"], point, "%s: recovery_point" % what)
    if leased is not None:
        t.expect_eq(rec["leased"], leased,
                    "%s: leased (locked_at IS NOT NULL)" % what)
    return rec


def lease_age_now(t, locked_at):
    """Seconds from a lease's locked_at (text) to now, by the database."""
    return float(t.env.db.scalar(
        "select extract(epoch from clock_timestamp() - %s::timestamptz)"
        % q(locked_at)))


def in_flight_now(t, key, body):
    """A retry well within lock_timeout of the lease: 409, Retry-After: 1,
    and the record untouched."""
    rec = t.env.record(key)
    t.expect(rec is not None and rec["leased"], "no leased record to "
             "retry against: %r" % rec)
    if rec["age"] >= LTO - 0.5:
        t.fail("the lease is already %.2f s old: cannot retry within "
               "lock_timeout (%g s)" % (rec["age"], LTO))
    r = t.post(PAY, body, key=key)
    if r.status != 409:
        age = lease_age_now(t, rec["locked_at"])
        if age < LTO:
            t.fail("a retry %.2f s after the lease was taken (lock_timeout "
                   "%g s) answered %s, not 409" % (age, LTO, r.status))
        t.fail("this machine is too slow: the retry was answered %.2f s "
               "after the lease was taken (lock_timeout %g s)" % (age, LTO))
    t.expect_problem(r, 409, "idempotency-key-in-flight")
    t.expect_eq(r.header("Retry-After"), "1", "Retry-After of the 409")
    after = t.env.record(key)
    for k in ("id", "state", "recovery_point", "locked_at"):
        t.expect_eq(after[k], rec[k], "a 409 retry changed the record's %s"
                    % k)
    return r


def retry_until_resumed(t, key, body, fixed_lease=None):
    """Retry every 0.1 s: 409 while the lease is younger than lock_timeout,
    then the resumed answer (returned, with the number of 409s).  Timing is
    judged by the database's clock around each retry: a takeover answered
    before the lease was lock_timeout old is too early; a 409 to a retry
    sent when the lease was already older than that is a lease never taken
    over."""
    deadline = time.monotonic() + LTO + 15
    n409 = 0
    while True:
        rec = t.env.record(key)
        age = rec["age"] if rec else None
        if fixed_lease is not None and rec is not None and n409 > 0:
            t.expect_eq(rec["locked_at"], fixed_lease,
                        "locked_at after %d 409 retries (a 409 must not "
                        "renew the lease)" % n409)
        r = t.post(PAY, body, key=key)
        if r.status != 409:
            if age is not None:
                after = lease_age_now(t, rec["locked_at"])
                if after < LTO:
                    t.fail("answered %s while the lease was at most %.2f s "
                           "old (lock_timeout %g s): taken over too early"
                           % (r.status, after, LTO))
            return r, n409
        t.expect_problem(r, 409, "idempotency-key-in-flight")
        t.expect_eq(r.header("Retry-After"), "1", "Retry-After of the 409")
        if age is not None and age > LTO + 0.25:
            t.fail("409 although the lease was already %.2f s old when the "
                   "retry was sent (lock_timeout %g s): a dead owner's key "
                   "is not taken over" % (age, LTO))
        n409 += 1
        if time.monotonic() > deadline:
            t.fail("still 409 after %d retries" % n409)
        time.sleep(0.1)


def charge_of(t, pid, stats):
    """The one simulator record for payment pid (reference): (key, entry)."""
    recs = t.env.sim.by_reference(pid, stats)
    t.expect_eq(len(recs), 1, "acquirer Idempotency-Keys used for payment "
                "%s (one derived key per key record)" % pid)
    return recs[0]


def expect_succeeded(t, r, desc, pid=None):
    """r is the 201 of the payment described desc; exactly one payments row
    for it, succeeded.  Returns the row."""
    t.expect_status(r, 201)
    doc = r.json_or_fail()
    t.expect_eq(doc.get("status"), "succeeded", "status in the 201 body")
    if pid is not None:
        t.expect_eq(doc.get("id"), pid, "payment id of the resumed 201 (the "
                    "one phase 1 inserted)")
    t.expect_eq(r.header("Location"), "/v1/payments/%s" % doc.get("id"),
                "Location")
    rows = t.env.payments_described(desc)
    t.expect_eq(len(rows), 1, "payments rows for the request")
    t.expect_eq(rows[0]["id"], doc["id"], "payments row id vs 201 body")
    t.expect_eq(rows[0]["status"], "succeeded", "payments.status")
    t.expect_eq(rows[0]["acquirer_status"], "approved",
                "payments.acquirer_status")
    return rows[0]


def expect_completed(t, key, status):
    rec = expect_record(t, key, "completed", "finished", False,
                        "after completion")
    t.expect_eq(rec["response_status"], status, "stored response_status")
    return rec


def replays(t, key, body, first):
    calls = t.env.sim.stats()["calls"]
    again = t.post(PAY, body, key=key)
    t.expect_replay_of(again, first)
    t.expect_eq(t.env.sim.stats()["calls"], calls,
                "acquirer calls made by a replay")


def completed_replayed(t, key, body, r):
    """r is the 201 that made the payment: the record completed with it,
    and a retry replays it."""
    expect_completed(t, key, 201)
    replays(t, key, body, r)


def evict(t, *args, conf=None):
    out = t.env.ctl(conf or t.env.conf["main"], "evict", *args)
    m = re.match(r"^evicted (\d+) keys in ([0-9.]+) s$", out.strip())
    t.expect(m is not None, "idemctl evict printed %r" % out)
    return int(m.group(1)), float(m.group(2))


def reclaim(t):
    out = t.env.ctl(t.env.conf["main"], "reclaim")
    m = re.match(r"^reclaimed (\d+) keys$", out.strip())
    t.expect(m is not None, "idemctl reclaim printed %r" % out)
    return int(m.group(1))


def stale_in_progress(t):
    return t.env.db.int(
        "select count(*) from idempotency_keys where state = "
        "'in_progress' and locked_at < now() - %d * interval '1 second'"
        % int(LTO))


def expired_completed(t, db=None):
    return (db or t.env.db).int(
        "select count(*) from idempotency_keys where state = 'completed' "
        "and expires_at <= now()")


def wait_lease_older_than_lock_timeout(t, key):
    wait_until(lambda: (t.env.record(key) or {}).get("age", 0) > LTO + 0.05,
               LTO + 10, "the lease of %s older than lock_timeout" % key)


def bulk_insert(db, tenant_id, prefix, n, expired):
    """n completed key records of tenant_id; expired ones expire 1 h + g ms
    ago (g = 1..n: the larger g, the older), live ones in a day."""
    exp = ("now() - interval '1 hour' - g * interval '1 millisecond'"
           if expired else "now() + interval '1 day'")
    db.run(
        "insert into idempotency_keys (api_key_id, key, request_method, "
        "request_path, request_fingerprint, state, recovery_point, "
        "response_status, response_headers, response_body, locked_at, "
        "created_at, expires_at) "
        "select %d, %s || g, 'POST', '/v1/payments', "
        "sha256(convert_to(%s || g, 'UTF8')), 'completed', 'finished', 201, "
        "'{\"Content-Type\": \"application/json\"}'::jsonb, "
        "convert_to('{}', 'UTF8'), NULL, now() - interval '8 days', %s "
        "from generate_series(1, %d) g"
        % (tenant_id, q(prefix), q(prefix), exp, n))


# --- metrics access ---

@check("metrics: GET /metrics from 127.0.0.1 (allowed by default) -> 200 "
       "text/plain; with [metrics] allow = 10.9.9.9 -> 404 not-found")
def _(t):
    r = t.get("/metrics", token=None)
    t.expect_status(r, 200)
    t.expect((r.header("Content-Type") or "").startswith("text/plain"),
             "Content-Type %r" % r.header("Content-Type"))
    t.expect(b"idem_requests_total" in r.body, "no idem_requests_total")
    r = t.get("/metrics", token=None, fx="deny")
    t.expect_problem(r, 404, "not-found")
    t.expect(b"idem_" not in r.body, "the 404 carries metrics")
    # the same process serves everything else
    r = t.get("/healthz", token=None, fx="deny")
    t.expect_status(r, 200)


# --- crashes at phase boundaries ---

def phased_crash(t, fault, label, calls_for_key):
    env, key, body, st0 = fresh(t, label)
    desc = body["description"]
    crash(t, fault, key, body)

    rec = expect_record(t, key, "in_progress", POINT_LEFT[fault], True,
                        "after the crash")
    rows = env.payments_described(desc)
    t.expect_eq(len(rows), 1, "payments rows after the crash (phase 1 "
                "committed)")
    pid = rows[0]["id"]
    t.expect_eq(rows[0]["status"], "pending", "payments.status after the "
                "crash")
    st = env.sim.stats()
    if fault == "after:payment_created":
        t.expect_eq(st["calls"], st0["calls"], "acquirer calls before the "
                    "crash (killed before phase 2)")
        t.expect_eq(rows[0]["acquirer_charge"], None, "acquirer_charge")
    elif fault == "before:charged":
        k, c = charge_of(t, pid, st)
        t.expect_eq(c["charges"], 1, "charges made before the crash")
        t.expect_eq(rows[0]["acquirer_charge"], None, "acquirer_charge "
                    "(phase 2 did not commit)")
    else:
        k, c = charge_of(t, pid, st)
        t.expect_eq(rows[0]["acquirer_charge"], c["id"], "acquirer_charge "
                    "committed by phase 2")
        t.expect_eq(rows[0]["acquirer_status"], "approved",
                    "acquirer_status committed by phase 2")

    in_flight_now(t, key, body)
    r, n409 = retry_until_resumed(t, key, body)
    t.expect_not_replayed(r)
    row = expect_succeeded(t, r, desc, pid)
    st1 = env.sim.stats()
    t.expect_eq(st1["charges"] - st0["charges"], 1, "acquirer charges made "
                "for the request")
    t.expect_eq(st1["conflicts"], st0["conflicts"], "acquirer key conflicts")
    k, c = charge_of(t, pid, st1)
    t.expect_eq(c["charges"], 1, "charges under the derived key")
    t.expect_eq(c["calls"], calls_for_key, "acquirer calls under the "
                "derived key")
    t.expect_eq(row["acquirer_charge"], c["id"], "payments.acquirer_charge "
                "vs the acquirer's charge")
    t.expect_eq(row["idem_key_id"], rec["id"], "payments.idem_key_id")
    completed_replayed(t, key, body, r)
    t.note("%d retries answered 409 before the resume" % n409)


# fault: (label, acquirer calls under the derived key, what happens)
PHASED = {
    "after:payment_created": (
        "apc", 1, "worker killed after 'payment_created' commits -> 5xx; "
        "retry -> 409 until lock_timeout, then resumes -> 201; one charge, "
        "one succeeded payment, replayed byte-identical"),
    "before:charged": (
        "bch", 2, "worker killed after the acquirer call, before 'charged' "
        "commits -> 5xx; resumed retry charges again under the same key "
        "(deduplicated): one charge, one succeeded payment, replayed"),
    "after:charged": (
        "ach", 1, "worker killed after 'charged' commits -> 5xx; resumed "
        "retry finishes without calling the acquirer: one charge, one "
        "succeeded payment, replayed"),
}
for _fault, (_label, _calls, _what) in PHASED.items():
    @check("phased: " + _what, needs=("faults",))
    def _(t, fault=_fault, label=_label, calls=_calls):
        phased_crash(t, fault, label, calls_for_key=calls)


# --- the acquirer's answers ---

@check("declined card -> 402 payment-declined, stored: replayed "
       "byte-identical, payment failed, one declined charge")
def _(t):
    env, key, body, st0 = fresh(t, "dec")
    env.sim.control("decline")
    try:
        r = t.post(PAY, body, key=key)
    finally:
        env.sim.control("approve")
    doc = t.expect_problem(r, 402, "payment-declined")
    t.expect_not_replayed(r)
    rows = env.payments_described(body["description"])
    t.expect_eq(len(rows), 1, "payments rows")
    t.expect_eq(rows[0]["status"], "failed", "payments.status")
    t.expect_eq(rows[0]["acquirer_status"], "declined",
                "payments.acquirer_status")
    t.expect(rows[0]["id"] in doc["detail"], "the 402 detail does not name "
             "payment %s: %r" % (rows[0]["id"], doc["detail"]))
    st1 = env.sim.stats()
    t.expect_eq(st1["charges"] - st0["charges"], 1, "acquirer charges")
    k, c = charge_of(t, rows[0]["id"], st1)
    t.expect_eq((c["status"], c["calls"]), ("declined", 1),
                "the acquirer's charge (status, calls)")
    t.expect_eq(rows[0]["acquirer_charge"], c["id"],
                "payments.acquirer_charge")
    expect_completed(t, key, 402)
    replays(t, key, body, r)
    t.expect_eq(env.payments_described(body["description"])[0]["status"],
                "failed", "payments.status after the replay")


@check("acquirer 500 -> 503 service-unavailable, payment pending, lease "
       "released; the retry resumes at phase 2 at once -> 201 with one "
       "charge under the same key")
def _(t):
    env, key, body, st0 = fresh(t, "fail", once="fail")
    r = t.post(PAY, body, key=key)
    t.expect_problem(r, 503, "service-unavailable")
    t.expect_eq(r.header("Retry-After"), "1", "Retry-After of the 503")
    st1 = env.sim.stats()
    t.expect_eq(st1["pending"], [], "the one-shot fail was not used")
    t.expect_eq(st1["charges"], st0["charges"], "charges after a 500")
    rows = env.payments_described(body["description"])
    t.expect_eq(len(rows), 1, "payments rows after the 503")
    pid = rows[0]["id"]
    t.expect_eq((rows[0]["status"], rows[0]["acquirer_charge"]),
                ("pending", None), "payment after the 503 (status, charge)")
    expect_record(t, key, "in_progress", "payment_created", False,
                  "after the 503")
    r2 = t.post(PAY, body, key=key)
    t.expect_status(r2, 201)        # at once: no 409, no waiting
    t.expect_not_replayed(r2)
    expect_succeeded(t, r2, body["description"], pid)
    st2 = env.sim.stats()
    t.expect_eq(st2["charges"] - st0["charges"], 1, "acquirer charges")
    k, c = charge_of(t, pid, st2)
    t.expect_eq((c["charges"], c["calls"]), (1, 2),
                "the derived key's (charges, calls): the retry used the "
                "same key")
    completed_replayed(t, key, body, r2)


@check("acquirer timeout (answer held 8 s, charge made) -> 503 when the "
       "2 s route deadline cuts the client's wait, payment pending; the "
       "retry resumes at phase 2 -> 201 with the same single charge")
def _(t):
    env, key, body, st0 = fresh(t, "tmo", once="timeout")
    t0 = time.monotonic()
    r = t.post(PAY, body, key=key, timeout=30)
    took = time.monotonic() - t0
    t.expect_problem(r, 503, "service-unavailable")
    # Not before the route's deadline (the product's own target: the
    # deadline is what cuts the wait), and before 5 s, the acquirer
    # client's own timeout, which would otherwise be what answered: the
    # widest window that still tells the two apart on a loaded machine.
    t.expect(DEADLINE_S - 0.1 <= took < 4.9, "the 503 came "
             "after %.1f s (the route's deadline is %g s, the acquirer "
             "client's own timeout 5 s; the answer was held 8 s)"
             % (took, DEADLINE_S))
    rows = env.payments_described(body["description"])
    t.expect_eq(len(rows), 1, "payments rows after the 503")
    pid = rows[0]["id"]
    t.expect_eq((rows[0]["status"], rows[0]["acquirer_charge"]),
                ("pending", None), "payment after the 503 (status, charge)")
    st1 = env.sim.stats()
    k, c = charge_of(t, pid, st1)
    t.expect_eq(c["charges"], 1, "the charge made during the timeout")
    rec = expect_record(t, key, "in_progress", "payment_created", None,
                        "after the 503")
    t.note("after the 503: lease %s" % ("released" if not rec["leased"] else
                                        "kept, %.2f s old" % rec["age"]))
    r2, n409 = retry_until_resumed(t, key, body)
    t.expect_not_replayed(r2)
    row = expect_succeeded(t, r2, body["description"], pid)
    st2 = env.sim.stats()
    t.expect_eq(st2["charges"] - st0["charges"], 1, "acquirer charges")
    k2, c2 = charge_of(t, pid, st2)
    t.expect_eq((k2, c2["calls"]), (k, 2), "derived key and its calls")
    t.expect_eq(row["acquirer_charge"], c["id"], "payments.acquirer_charge "
                "is the charge made during the timeout")
    completed_replayed(t, key, body, r2)


# --- lock timeout ---

@check("lock timeout: retries within lock_timeout of a dead owner's lease "
       "-> 409 idempotency-key-in-flight, Retry-After: 1, lease untouched; "
       "the first retry after it takes over and resumes", needs=("faults",))
def _(t):
    env = t.env
    key, body = env.new_key("lock"), env.payment_body("lock")
    crash(t, "after:payment_created", key, body)
    rec = expect_record(t, key, "in_progress", "payment_created", True,
                        "after the crash")
    in_flight_now(t, key, body)
    r, n409 = retry_until_resumed(t, key, body, fixed_lease=rec["locked_at"])
    t.expect(n409 >= 2, "only %d more retries answered 409 within "
             "lock_timeout (%g s, retrying every 0.1 s)" % (n409, LTO))
    t.expect_not_replayed(r)
    expect_succeeded(t, r, body["description"],
                     env.payments_described(body["description"])[0]["id"])
    t.note("%d retries answered 409 before the resume" % n409)


# --- reclaim ---

@check("reclaim: a stuck record at 'started' is left alone while its lease "
       "is live, deleted once older than lock_timeout; a retry then "
       "executes afresh", needs=("faults",))
def _(t):
    env, key, body, st0 = fresh(t, "rcs")
    crash(t, "before:payment_created", key, body)
    rec = expect_record(t, key, "in_progress", "started", True,
                        "after the crash")
    t.expect_eq(env.payments_described(body["description"]), [],
                "payments rows (phase 1 never committed)")
    t.expect_eq(env.sim.stats()["calls"], st0["calls"], "acquirer calls")
    t.expect(rec["age"] < LTO - 0.5, "the lease is already %.2f s old"
             % rec["age"])
    reclaim(t)
    after = env.record(key)
    t.expect(after is not None, "reclaim deleted a record whose lease is "
             "live (%.2f s old, lock_timeout %g s)" % (rec["age"], LTO))
    t.expect_eq((after["id"], after["locked_at"]),
                (rec["id"], rec["locked_at"]),
                "record after reclaim with a live lease")
    wait_lease_older_than_lock_timeout(t, key)
    want = stale_in_progress(t)
    n = reclaim(t)
    t.expect_eq(n, want, "reclaimed count vs stuck records in the store")
    t.expect_eq(env.record(key), None, "the stuck 'started' record after "
                "reclaim")
    r = t.post(PAY, body, key=key)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    expect_succeeded(t, r, body["description"])
    new = expect_completed(t, key, 201)
    t.expect(new["id"] != rec["id"], "the key record was not recreated")
    t.expect_eq(env.sim.stats()["charges"] - st0["charges"], 1,
                "acquirer charges")


@check("reclaim: a stuck record past 'payment_created' older than "
       "lock_timeout gets its lease released (locked_at NULL); a retry "
       "resumes at once -> 201 with the phase-1 payment, one charge",
       needs=("faults",))
def _(t):
    env, key, body, st0 = fresh(t, "rcp")
    crash(t, "after:payment_created", key, body)
    rec = expect_record(t, key, "in_progress", "payment_created", True,
                        "after the crash")
    pid = env.payments_described(body["description"])[0]["id"]
    t.expect(rec["age"] < LTO - 0.5, "the lease is already %.2f s old"
             % rec["age"])
    reclaim(t)
    after = env.record(key)
    t.expect_eq((after["locked_at"], after["recovery_point"]),
                (rec["locked_at"], "payment_created"),
                "record after reclaim with a live lease")
    wait_lease_older_than_lock_timeout(t, key)
    want = stale_in_progress(t)
    n = reclaim(t)
    t.expect_eq(n, want, "reclaimed count vs stuck records in the store")
    after = expect_record(t, key, "in_progress", "payment_created", False,
                          "after reclaim")
    t.expect_eq(after["id"], rec["id"], "record id after reclaim")
    r = t.post(PAY, body, key=key)
    t.expect_status(r, 201)         # the first retry: no 409
    t.expect_not_replayed(r)
    expect_succeeded(t, r, body["description"], pid)
    st1 = env.sim.stats()
    t.expect_eq(st1["charges"] - st0["charges"], 1, "acquirer charges")
    expect_completed(t, key, 201)


# --- metrics ---

def req_counts(m):
    return {o: m.get('idem_requests_total{route="%s",outcome="%s"}'
                     % (ROUTE, o)) for o in OUTCOMES}


class Scraper:
    """Scrapes of one process (no other traffic) with what every scrape
    must show: the pool adds up to pool_size, the duration histogram's
    +Inf bucket equals its _count, and _count is exactly the number of
    requests that process answered since the first scrape (the requests we
    sent plus the scrapes before this one).

    The app counts a request only after its response has gone out (and
    after releasing the connection), so a scrape sent the moment a response
    arrived may not see it yet: scrape() repeats the scrape (every 50 ms,
    up to 5 s) until the count is complete; a count above what was sent
    fails at once.  until(m) adds a condition (None when met, else the
    reason); it may raise Failed."""

    def __init__(self, t, fx="main"):
        self.t, self.fx = t, fx
        self.first = None
        self.done = 0
        self.repeats = 0
        self.prev = None

    def sent_request(self, n=1):
        self.done += n

    def scrape(self, until=None):
        t = self.t
        deadline = time.monotonic() + 5
        while True:
            m = t.env.metrics(self.fx)
            for name in ('idem_pool_connections{state="idle"}',
                         'idem_pool_connections{state="busy"}',
                         "idem_request_duration_seconds_count",
                         'idem_request_duration_seconds_bucket{le="+Inf"}',
                         "idem_pool_wait_seconds_count",
                         "idem_in_progress_keys", "idem_eviction_lag_seconds",
                         "idem_keys_evicted_total"):
                t.expect(name in m, "metric %s missing" % name)
            t.expect_eq(m['idem_pool_connections{state="idle"}'] +
                        m['idem_pool_connections{state="busy"}'], POOL_SIZE,
                        "idem_pool_connections idle + busy vs pool_size")
            t.expect_eq(m['idem_request_duration_seconds_bucket{le="+Inf"}'],
                        m["idem_request_duration_seconds_count"],
                        "duration histogram +Inf bucket vs _count")
            count = m["idem_request_duration_seconds_count"]
            if self.first is None:
                self.first, self.done = count, 1
                why = until(m) if until else None
                if why is not None:
                    t.fail(why)
                self.prev = m
                return m
            want = self.first + self.done
            self.done += 1          # this scrape, once answered
            if count > want:
                t.fail("idem_request_duration_seconds_count rose by %d; "
                       "only %d requests were answered since"
                       % (count - self.first, want - self.first))
            why = until(m) if until else None
            if count == want and why is None:
                self.prev = m
                return m
            if time.monotonic() > deadline:
                t.fail(why or "idem_request_duration_seconds_count stays "
                       "at %d, %d requests were answered"
                       % (count - self.first, want - self.first))
            self.repeats += 1
            time.sleep(0.05)


@check("metrics: idem_requests_total counts created, replayed, reused "
       "(422), rejected (400), in_flight (409), error (503) exactly; "
       "idem_in_progress_keys = SQL; pool idle+busy = pool_size; histogram "
       "_count follows")
def _(t):
    env = t.env
    s = Scraper(t)
    m0 = s.scrape()

    def counted(want):
        def until(m):
            got = req_counts(m)
            for o in OUTCOMES:
                if got[o] > want[o]:
                    t.fail("idem_requests_total{outcome=\"%s\"} is %r, "
                           "expected %r: %r" % (o, got[o], want[o], got))
            return None if got == want else \
                "idem_requests_total: expected %r, got %r" % (want, got)
        return until

    def step(do, outcome, sends=1):
        want = req_counts(s.prev)
        do()
        s.sent_request(sends)
        want[outcome] += 1
        now = s.scrape(counted(want))
        t.expect_eq(now["idem_in_progress_keys"], env.db.int(
            "select count(*) from idempotency_keys where state = "
            "'in_progress'"), "idem_in_progress_keys vs SQL")
        return now

    key, body = env.new_key("met"), env.payment_body("met")
    first = []
    step(lambda: first.append(t.post(PAY, body, key=key)), "created")
    t.expect_status(first[0], 201)

    def replay():
        t.expect_replay_of(t.post(PAY, body, key=key), first[0])
    step(replay, "replayed")

    def reuse():
        t.expect_problem(t.post(PAY, dict(body, amount=999), key=key), 422,
                         "idempotency-key-reused")
    step(reuse, "reused")

    def rejected():
        t.expect_problem(t.post(PAY, body), 400, "idempotency-key-missing")
    step(rejected, "rejected")

    # A 409 needs a request in flight: one waits on the acquirer (its
    # answer held back; the client gives up after 5 s) with the lease of
    # phase 1 committed.
    k2, b2 = env.new_key("met409"), env.payment_body("met409")
    env.sim.control("timeout", count=1)
    bg = {}

    def slow():
        try:
            bg["r"] = env.post(PAY, b2, key=k2, timeout=30)
        except Exception as e:      # shown below
            bg["e"] = e
    th = threading.Thread(target=slow, daemon=True)
    th.start()
    try:
        wait_until(lambda: (env.record(k2) or {}).get("recovery_point") ==
                   "payment_created", 5, "the slow request's phase 1 "
                   "committed")
        m = step(lambda: in_flight_now(t, k2, b2), "in_flight")
        inprog = m["idem_in_progress_keys"]
        t.expect(inprog >= 1, "idem_in_progress_keys is %r with a request "
                 "in flight" % inprog)
    finally:
        th.join(30)
    t.expect("r" in bg, "the slow request: %r" % bg.get("e"))
    t.expect_problem(bg["r"], 503, "service-unavailable")
    want = req_counts(s.prev)
    want["error"] += 1
    s.sent_request(1)
    m = s.scrape(counted(want))
    t.expect_eq(m["idem_in_progress_keys"], inprog, "idem_in_progress_keys "
                "after the 503 (the key stays in progress)")

    want = req_counts(s.prev)
    r, n409 = retry_until_resumed(t, k2, b2)
    t.expect_status(r, 201)
    s.sent_request(n409 + 1)
    want["created"] += 1
    want["in_flight"] += n409
    m = s.scrape(counted(want))
    t.expect_eq(m["idem_in_progress_keys"], inprog - 1,
                "idem_in_progress_keys after the resume")
    t.expect_eq(m["idem_in_progress_keys"], env.db.int(
        "select count(*) from idempotency_keys where state = "
        "'in_progress'"), "idem_in_progress_keys vs SQL")
    t.expect(m["idem_pool_wait_seconds_count"] >
             m0["idem_pool_wait_seconds_count"],
             "idem_pool_wait_seconds_count did not count acquisitions")
    if s.repeats:
        t.note("%d scrapes were repeated: a request is counted only after "
               "its response went out" % s.repeats)


@check("metrics: idem_eviction_lag_seconds is 0 with nothing expired, >= "
       "the age of the oldest expired key when one exists, 0 after idemctl "
       "evict")
def _(t):
    env = t.env
    if env.db.int("select count(*) from idempotency_keys where expires_at "
                  "<= now()"):
        evict(t)
    left = env.db.rows("select key, state from idempotency_keys where "
                       "expires_at <= now()")
    t.expect_eq(left, [], "expired records that idemctl evict leaves")
    s = Scraper(t)
    m = s.scrape()
    t.expect_eq(m["idem_eviction_lag_seconds"], 0, "lag with nothing "
                "expired")
    key, body = env.new_key("lag"), env.payment_body("lag")
    r = t.post(PAY, body, key=key)
    s.sent_request()
    t.expect_status(r, 201)
    env.db.run("update idempotency_keys set expires_at = now() - interval "
               "'5 seconds' where api_key_id = %d and key = %s"
               % (env.tenant.id, q(key)))
    m = s.scrape()
    lag = m["idem_eviction_lag_seconds"]
    t.expect(5.0 <= lag < 60, "lag %r with a key expired 5 s ago" % lag)
    n, _ = evict(t)
    t.expect_eq(n, 1, "keys evicted")
    m = s.scrape()
    t.expect_eq(m["idem_eviction_lag_seconds"], 0, "lag after eviction")


# --- eviction ---

@check("evict: 200k expired + 10k live records; --batch 10000 "
       "--max-batches 3 evicts exactly 30000 (the oldest), the rest "
       "170000; the 10k live ones remain")
def _(t):
    env, db, bulk = t.env, t.env.db, t.env.bulk.id
    if expired_completed(t):
        evict(t)
    t.expect_eq(expired_completed(t), 0, "expired completed records before")
    try:
        bulk_insert(db, bulk, "bulk-exp-", 200000, expired=True)
        bulk_insert(db, bulk, "bulk-live-", 10000, expired=False)
        db.run("analyze idempotency_keys")
        cnt = ("select count(*) from idempotency_keys where api_key_id = %d "
               "and expires_at %s now()")
        t.expect_eq(db.int(cnt % (bulk, "<=")), 200000, "expired inserted")
        t.expect_eq(db.int(cnt % (bulk, ">")), 10000, "live inserted")
        n1, s1 = evict(t, "--batch", "10000", "--max-batches", "3")
        t.expect_eq(n1, 30000, "evicted by --max-batches 3")
        t.expect_eq(db.int(cnt % (bulk, "<=")), 170000,
                    "expired rows left after 3 batches")
        t.expect_eq(db.int(
            "select count(*) from idempotency_keys where api_key_id = %d "
            "and key like 'bulk-exp-%%' and substr(key, 10)::int > 170000"
            % bulk), 0, "of the 30000 oldest expired, rows left (eviction "
            "is oldest first)")
        n2, s2 = evict(t, "--batch", "10000")
        t.expect_eq(n2, 170000, "evicted by the unbounded run")
        t.expect_eq(n1 + n2, 200000, "evicted in all")
        t.expect_eq(db.int(cnt % (bulk, "<=")), 0, "expired rows left")
        t.expect_eq(db.int(cnt % (bulk, ">")), 10000, "live rows left")
        t.note("3 batches in %.2f s; the other 17 in %.2f s" % (s1, s2))
    finally:
        db.run("delete from idempotency_keys where api_key_id = %d" % bulk)


@check("evict: a real key expired by SQL and evicted -> the same POST "
       "runs again, but its derived acquirer key (tenant, key, body) is the "
       "same: no second charge, 422 idempotency-key-reused stored, the "
       "second payment failed; another body under the key executes anew "
       "with its own charge (expiry removes memory, not effect)")
def _(t):
    env, key, body, st0 = fresh(t, "evk")
    r1 = t.post(PAY, body, key=key)
    t.expect_status(r1, 201)
    p1 = r1.json()["id"]
    rec1 = expect_completed(t, key, 201)
    env.db.run("update idempotency_keys set expires_at = now() - interval "
               "'1 second' where id = %d" % rec1["id"])
    want = expired_completed(t)
    n, _ = evict(t)
    t.expect_eq(n, want, "evicted vs expired completed records")
    t.expect_eq(env.record(key), None, "the key's record after eviction")
    r2 = t.post(PAY, body, key=key)
    t.expect_problem(r2, 422, "idempotency-key-reused")
    t.expect_not_replayed(r2)
    rows = env.payments_described(body["description"])
    t.expect_eq([x["status"] for x in rows], ["succeeded", "failed"],
                "payments rows (the first stays, the second failed)")
    t.expect_eq(rows[0]["id"], p1, "the first payment")
    rec2 = expect_completed(t, key, 422)
    t.expect(rec2["id"] != rec1["id"], "same key record id after eviction")
    st1 = env.sim.stats()
    t.expect_eq(st1["charges"] - st0["charges"], 1, "acquirer charges")
    t.expect_eq(st1["conflicts"] - st0["conflicts"], 1, "acquirer key "
                "conflicts (the derived key, other payment)")
    t.expect_replay_of(t.post(PAY, body, key=key), r2)
    # Another body is another operation: its own derived key and charge.
    env.db.run("update idempotency_keys set expires_at = now() - interval "
               "'1 second' where id = %d" % rec2["id"])
    other = dict(body, amount=body["amount"] + 1)
    r3 = t.post(PAY, other, key=key)
    t.expect_status(r3, 201)
    p3 = r3.json()["id"]
    st2 = env.sim.stats()
    t.expect_eq(st2["charges"] - st1["charges"], 1, "acquirer charges for "
                "the other body")
    ka, _ = charge_of(t, p1, st2)
    kb, _ = charge_of(t, p3, st2)
    t.expect(ka != kb, "two operations charged under one derived key")


@check("evict: an expired key not yet evicted also executes anew (the "
       "record is replaced, the old payment stays)")
def _(t):
    env = t.env
    key, body = env.new_key("exk"), env.payment_body("exk")
    r1 = t.post(PAY, body, key=key)
    t.expect_status(r1, 201)
    rec1 = expect_completed(t, key, 201)
    env.db.run("update idempotency_keys set expires_at = now() - interval "
               "'1 second' where id = %d" % rec1["id"])
    r2 = t.post(PAY, dict(body, amount=body["amount"] + 1), key=key)
    t.expect_status(r2, 201)
    t.expect_not_replayed(r2)
    t.expect(r2.json()["id"] != r1.json()["id"], "the first payment was "
             "answered again")
    t.expect_eq(len(env.payments_described(body["description"])), 2,
                "payments rows")
    rec2 = expect_completed(t, key, 201)
    t.expect(rec2["id"] != rec1["id"], "the expired record was not replaced")
    t.expect_eq(env.db.int("select count(*) from idempotency_keys where "
                           "api_key_id = %d and key = %s"
                           % (env.tenant.id, q(key))), 1, "records of the key")


@check("evict: never an in_progress record whose lock is live, even "
       "expired; the expired completed one next to it goes")
def _(t):
    env, db, bulk = t.env, t.env.db, t.env.bulk.id
    try:
        db.run(
            "insert into idempotency_keys (api_key_id, key, request_method,"
            " request_path, request_fingerprint, state, recovery_point, "
            "locked_at, created_at, expires_at) values (%d, 'ip-live', "
            "'POST', '/v1/payments', sha256(convert_to('ip-live', 'UTF8')),"
            " 'in_progress', 'payment_created', now(), now() - interval "
            "'2 days', now() - interval '1 hour')" % bulk)
        bulk_insert(db, bulk, "ip-done-", 1, expired=True)
        want = expired_completed(t)
        n, _ = evict(t)
        t.expect_eq(n, want, "evicted vs expired completed records")
        left = db.rows("select key, state from idempotency_keys where "
                       "api_key_id = %d order by key" % bulk)
        t.expect_eq(left, [{"key": "ip-live", "state": "in_progress"}],
                    "records left")
    finally:
        db.run("delete from idempotency_keys where api_key_id = %d" % bulk)


# --- the janitor of two processes ---

def fleet_evicted(t):
    return {j: t.env.metrics(j)["idem_keys_evicted_total"]
            for j in ("j1", "j2")}


def fleet_expired(t):
    return t.env.fleet_db.int(
        "select count(*) from idempotency_keys where expires_at <= now()")


@check("janitor: two processes with evict_interval 1s; while another "
       "session holds the fleet lock both keep trying and neither evicts",
       needs=("j1", "j2"))
def _(t):
    env, fdb = t.env, t.env.fleet_db
    t.expect_eq(fleet_expired(t), 0, "expired records in the fleet store")
    base = fleet_evicted(t)
    env.fleet_base = base
    # A session-level lock on the janitor's key, held until terminated.
    with open(os.path.join(env.tmp, "lock-session.log"), "ab") as log:
        lock = subprocess.Popen(
            ["psql", "-X", "-q", "-At", "-d",
             env.fleet_conninfo + " application_name=lc-lock",
             "-c", "select pg_advisory_lock(%d)" % EVICT_LOCK,
             "-c", "select pg_sleep(120)"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    env.fleet_lock = lock
    wait_until(lambda: fdb.int(
        "select count(*) from pg_locks l join pg_stat_activity a using "
        "(pid) where a.application_name = 'lc-lock' and l.locktype = "
        "'advisory' and l.granted") == 1, 10, "the fleet lock held by the "
        "psql session")
    bulk_insert(fdb, env.fleet_tenant.id, "fleet-a-", 3000, expired=True)
    since = fdb.scalar("select clock_timestamp()")
    # Nothing but the janitor talks to j1 and j2 now: activity on their
    # connections after the insert is a tick, which found the lock taken.
    wait_until(lambda: fdb.int(
        "select count(distinct application_name) from pg_stat_activity "
        "where application_name in ('lc-j1', 'lc-j2') and state_change > %s"
        % q(since)) == 2, 10,
        "a janitor tick of both processes while the lock is held")
    t.expect_eq(fleet_expired(t), 3000, "expired records while the fleet "
                "lock is held elsewhere")
    t.expect_eq(fleet_evicted(t), base, "idem_keys_evicted_total of j1, j2")


@check("janitor: once the lock is released one process evicts them all; "
       "the evicted totals of both add up to the rows (3000, then 2000 "
       "more), no double counting", needs=("j1", "j2"))
def _(t):
    env, fdb = t.env, t.env.fleet_db
    lock = getattr(env, "fleet_lock", None)
    if lock is None:
        t.fail("the previous check did not get the fleet lock")
    fdb.run("select pg_terminate_backend(pid) from pg_stat_activity where "
            "application_name = 'lc-lock'")
    lock.wait(10)
    env.fleet_lock = None
    base = env.fleet_base
    wait_until(lambda: fleet_expired(t) == 0, 15, "all 3000 evicted")
    ev = fleet_evicted(t)
    d = {j: ev[j] - base[j] for j in ev}
    t.expect_eq(sum(d.values()), 3000, "evicted by j1 + j2 (%r)" % d)
    t.expect_eq(sorted(d.values()), [0, 3000], "evicted per process (one "
                "holds the lock for the whole batch)")
    bulk_insert(fdb, env.fleet_tenant.id, "fleet-b-", 2000, expired=True)
    wait_until(lambda: fleet_expired(t) == 0, 15, "the 2000 more evicted")
    ev2 = fleet_evicted(t)
    d2 = {j: ev2[j] - base[j] for j in ev2}
    t.expect_eq(sum(d2.values()), 5000, "evicted by j1 + j2 in all (%r)"
                % d2)
    def logged():
        return {j: sum(int(re.match(r"janitor: evicted (\d+) keys",
                                    ln["msg"]).group(1))
                       for ln in env.fx[j].app_log_lines()
                       if ln.get("msg", "").startswith("janitor: evicted"))
                for j in ("j1", "j2")}
    # Info lines reach the log within 100 ms of being made.
    want = {j: ev2[j] for j in ev2}
    try:
        wait_until(lambda: logged() == want, 5, "the log lines")
    except Failed:
        pass
    t.expect_eq(logged(), want, "'janitor: evicted N keys' log lines vs "
                "idem_keys_evicted_total")


# --- the end ---

@check("teardown: every payments.fcgi exits within 10 s of SIGTERM after "
       "its lighttpd stops")
def _(t):
    problems = t.env.stop_fixtures()
    t.expect_eq(problems, [], "processes that had to be killed")
