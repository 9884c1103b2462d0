"""completer.py - the completer cannot be starved, and two completers never
run the same record at once (issue 21, items 3 and 4).

- Ten abandoned phased records of a tenant whose API key was then revoked,
  plus one live record of another tenant: a janitor (evict_interval 1s)
  completes the live one within its first two runs; the ten are set aside
  as needing attention after one attempt each (idem_keys_attention,
  idemctl stats, idemctl key show), and idemctl key retry queues one again.
- idemctl key abandon: every retry of the key replays a stored 500
  idempotency-key-abandoned problem; nothing is charged again.
- Two completer processes started together, each taking one record: both
  are inside their acquirer call at the same time, on different records;
  each record is attempted once, charged once, completed once.

The ten revoked records are written by SQL (a phased record in progress at
'payment_created', unleased, never attempted: what a crashed owner leaves);
the live ones come from real crashes (IDEM_FAULT).  Registered into
checks.py's list (run.py imports it).
"""

import os
import re
import subprocess

from harness import check, q
from lcenv import PAY, DEADLINE_S, Fixture, wait_until, write_config
from checks import crash, expect_completed, expect_record
from exactly_once import (complete, one_charge, succeeded_once,
                          wait_lease_lapsed)

ABANDONED_TYPE = "/problems/idempotency-key-abandoned"


def drained(t):
    """One completer run first, so that records other checks left do not
    come before this check's own: (env, the simulator's stats after)."""
    complete(t)
    return t.env, t.env.sim.stats()


def revoked_ten(t, label):
    """A tenant with ten abandoned phased records, then its key revoked;
    (tenant, keys)."""
    env = t.env
    ten = env.new_tenant(env.conf["main"], env.db, label)
    keys = ["%s-%d" % (env.new_key(label), i) for i in range(10)]
    n = env.db.int(
        "with i as (insert into idempotency_keys (api_key_id, key, "
        "request_method, request_path, request_fingerprint, state, "
        "recovery_point, request_body, expires_at) select %d, k, 'POST', "
        "%s, sha256(convert_to(k, 'UTF8')), 'in_progress', "
        "'payment_created', convert_to('{\"amount\":1,\"currency\":\"eur\","
        "\"description\":\"' || k || '\"}', 'UTF8'), now() + interval '7d' "
        "from unnest(%s::text[]) k order by k returning 1) "
        "select count(*) from i"
        % (ten.id, q(PAY), q("{" + ",".join(keys) + "}")))
    t.expect_eq(n, 10, "abandoned records written for the revoked tenant")
    out = env.ctl(env.conf["main"], "api-key", "revoke", ten.name)
    t.expect_eq(out.strip(), "1 api key revoked", "idemctl api-key revoke")
    return ten, keys


def live_abandoned(t, label):
    """A record of the main tenant whose owner was killed after
    'payment_created', its lease lapsed; (key, body, record, payment)."""
    env = t.env
    key, body = env.new_key(label), env.payment_body(label)
    crash(t, "after:payment_created", key, body)
    rec = expect_record(t, key, "in_progress", "payment_created", True,
                        "after the crash")
    wait_lease_lapsed(t, rec)
    pid = env.payments_described(body["description"])[0]["id"]
    return key, body, rec, pid


def schedule(t, tenant_id, key):
    rows = t.env.db.rows(
        "select attempts, last_error, attention_reason, "
        "attention_at is not null as attention, state from idempotency_keys "
        "where api_key_id = %d and key = %s" % (tenant_id, q(key)))
    t.expect_eq(len(rows), 1, "records of key %s" % key)
    return rows[0]


@check("completer: ten abandoned records of a revoked tenant do not starve "
       "another tenant's: the janitor completes the live one within two "
       "runs, the ten end in needs-attention after one attempt each "
       "(idem_keys_attention, idemctl stats, key show, key retry)",
       needs=("faults",))
def _(t):
    env, st0 = drained(t)
    ten, keys = revoked_ten(t, "starve")
    key, body, rec, pid = live_abandoned(t, "live")
    conf = os.path.join(env.tmp, "janitor-c.ini")
    write_config(conf, env.conninfo, "lc-janitor-c", env.sim.url,
                 evict_interval="1s")
    fx = env.fx["janitor-c"] = Fixture("janitor-c", env.tmp, env.app, conf)
    runs = None
    try:
        fx.start()
        fx.wait_ready()

        def done():
            nonlocal runs
            if (env.record(key) or {}).get("state") != "completed":
                return False
            # read at once: a run ends about a second after the last
            runs = env.metrics(fx="janitor-c").get(
                "idem_janitor_run_duration_seconds_count")
            return True
        wait_until(done, 30, "the janitor completed the live record")
        t.expect(runs is not None and 1 <= runs <= 2, "janitor runs when "
                 "the live record was completed: %r (want at most 2)" % runs)
        expect_completed(t, key, 201)
        row = succeeded_once(t, body["description"])
        t.expect_eq((row["id"], row["status"]), (pid, "succeeded"),
                    "the live payment")
        one_charge(t, pid, st0)
        t.expect_eq(schedule(t, env.tenant.id, key)["attempts"], 1,
                    "completer attempts of the live record")
        for k in keys:
            s = schedule(t, ten.id, k)
            t.expect_eq((s["state"], s["attention"], s["attention_reason"],
                         s["attempts"], s["last_error"]),
                        ("in_progress", True, "hopeless", 1,
                         "the tenant's API key is revoked"),
                        "the revoked tenant's record %s" % k)
        m = env.metrics(fx="janitor-c")
        want = env.db.int("select count(*) from idempotency_keys where "
                          "state = 'in_progress' and attention_at is not "
                          "null")
        t.expect(want >= 10, "records needing attention: %d" % want)
        t.expect_eq(m.get("idem_keys_attention"), float(want),
                    "idem_keys_attention")
        # Later runs leave the ten alone.
        t0 = m.get("idem_janitor_run_duration_seconds_count")
        wait_until(lambda: env.metrics(fx="janitor-c").get(
            "idem_janitor_run_duration_seconds_count", 0) >= t0 + 2, 10,
            "two more janitor runs")
        for k in keys:
            t.expect_eq(schedule(t, ten.id, k)["attempts"], 1,
                        "attempts of %s after two more runs" % k)
    finally:
        problem = fx.stop()
        del env.fx["janitor-c"]
    t.expect(not problem, "the janitor's fixture: %s" % problem)
    out = env.ctl(env.conf["main"], "stats")
    m = re.search(r"^attention\s+(\d+)$", out, re.M)
    t.expect(m is not None and int(m.group(1)) >= 10,
             "idemctl stats' attention line: %r" % out[:400])
    listed = re.findall(r"^attention id=\d+ tenant=%d key=(\S+) "
                        r"recovery_point=payment_created attempts=1 "
                        r"reason=hopeless " % ten.id, out, re.M)
    t.expect_eq(sorted(listed), sorted(keys), "the ten listed by idemctl "
                "stats")
    out = env.ctl(env.conf["main"], "key", "show", ten.name, keys[0])
    got = dict(re.findall(r"^(\S+)\s+(.*)$", out, re.M))
    t.expect_eq((got.get("state"), got.get("recovery_point"),
                 got.get("attempts"), got.get("last_error"),
                 got.get("attention_reason"), got.get("lease")),
                ("in_progress", "payment_created", "1",
                 "the tenant's API key is revoked", "hopeless", "none"),
                "idemctl key show %s %s" % (ten.name, keys[0]))
    out = env.ctl(env.conf["main"], "key", "retry", ten.name, keys[0])
    t.expect(re.match(r"key record \d+ queued for the completer$",
                      out.strip()), "idemctl key retry said %r" % out)
    s = schedule(t, ten.id, keys[0])
    t.expect_eq((s["attention"], s["attempts"]), (False, 0),
                "the record after key retry")
    # A key with no record: an error, nothing changed.
    p = env.ctl_run(env.conf["main"], "key", "retry", ten.name,
                    "no-such-key", timeout=30)
    t.expect_eq(p.returncode, 1, "idemctl key retry of a missing key")


@check("completer: idemctl key abandon stores a 500 "
       "idempotency-key-abandoned problem; every retry replays it and "
       "nothing is charged again", needs=("faults",))
def _(t):
    env = t.env
    key, body, rec, pid = live_abandoned(t, "abandon")
    calls = env.sim.stats()["calls"]
    out = env.ctl(env.conf["main"], "key", "abandon", env.tenant.name, key)
    t.expect_eq(out.strip(), "key record %d abandoned: retries are "
                "answered 500 idempotency-key-abandoned" % rec["id"],
                "idemctl key abandon")
    expect_completed(t, key, 500)
    first = None
    for i in range(2):
        r = t.post(PAY, body, key=key)
        t.expect_problem(r, 500, "idempotency-key-abandoned")
        doc = r.json_or_fail()
        t.expect_eq(doc.get("type"), ABANDONED_TYPE, "the problem's type")
        if first is None:
            first = r.body
        t.expect_eq(r.body, first, "retry %d replays the same body" % i)
    t.expect_eq(env.sim.stats()["calls"], calls, "acquirer calls after the "
                "abandon")
    rows = env.payments_described(body["description"])
    t.expect_eq([(x["id"], x["status"] == "succeeded") for x in rows],
                [(pid, False)], "the payment row, not charged")
    p = env.ctl_run(env.conf["main"], "key", "abandon", env.tenant.name, key,
                    timeout=30)
    t.expect_eq(p.returncode, 1, "a second abandon of a completed record")


@check("completer: two completer processes started together take "
       "different records: both inside their acquirer calls at once, each "
       "record attempted once, charged once, completed once",
       needs=("faults",))
def _(t):
    env, st0 = drained(t)
    recs = [live_abandoned(t, "two%d" % i) for i in range(2)]
    held0 = env.sim.stats()["held"]
    env.sim.control("hold", count=2)
    procs = [subprocess.Popen([env.app, "-c", env.conf["main"], "complete",
                               "1"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = []
    try:
        wait_until(lambda: env.sim.stats()["held"] >= held0 + 2,
                   DEADLINE_S + 5, "both completers inside an acquirer call")
        leased = env.db.int(
            "select count(*) from idempotency_keys where id in (%s) and "
            "lease_until > now()" % ",".join(str(r[2]["id"]) for r in recs))
        t.expect_eq(leased, 2, "records leased while both calls are held")
    finally:
        env.sim.release()
        for p in procs:
            o, e = p.communicate(timeout=60)
            outs.append((p.returncode, o.decode().strip(),
                         e.decode(errors="replace")[-300:]))
    for rc, o, e in outs:
        t.expect_eq((rc, o), (0, "completed 1 keys, 0 left"),
                    "a completer process (stderr %r)" % e)
    st = env.sim.stats()
    t.expect_eq(st["charges"] - st0["charges"], 2, "acquirer charges")
    t.expect_eq(st["conflicts"], st0["conflicts"], "acquirer key conflicts")
    for key, body, rec, pid in recs:
        expect_completed(t, key, 201)
        row = succeeded_once(t, body["description"])
        t.expect_eq(row["status"], "succeeded", "payment %s" % pid)
        t.expect_eq(schedule(t, env.tenant.id, key)["attempts"], 1,
                    "completer attempts of %s" % key)
