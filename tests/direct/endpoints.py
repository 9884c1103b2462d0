#!/usr/bin/env python3
"""endpoints.py - the webhook endpoint routes every app gets
(idem_app_webhook_routes(), which payments.fcgi calls), over real FastCGI
against a database of its own, with a receiver on loopback
(tests/lib/webhook_receiver.py; [webhooks] allow_private = on):

- the limit: [webhooks] max_endpoints = 5 per tenant; the sixth create
  answers 422 webhook-endpoint-limit and creates nothing; another tenant
  is not counted; a delete makes room.  Race-free: a create blocked behind
  another transaction's uncommitted create at the limit answers 422 once
  that commits, and 8 concurrent creates of a fresh tenant make exactly 5;
- the pages: limit, starting_after, has_more as GET /v1/payments (and its
  validation: 400 for limit 0, 101, a word, an unknown or another
  tenant's cursor);
- health: enabled, disabled_reason, last_success, failing_since from the
  columns (set here in SQL as a dispatcher would), in GET /:id and the
  list; POST /:id/enable clears disabled_at, disabled_reason and
  failing_since;
- recovery: a delivery dead after a 500 (max_attempts = 1) recovered with
  POST /:id/recover {"since"} (202 {"requeued": 1}) reaches the receiver
  again under its original webhook-id, signed; a replay of the recover
  requeues nothing more; then idemctl events recover ID --since 1h does
  the same for another;
- tenant isolation: another tenant's id answers 404 to GET, DELETE,
  enable and recover, and changes nothing;
- /openapi.json lists the six operations and webhook-endpoint-limit.

Every wait is for a condition with a deadline.  Prints TAP.  Usage:
  endpoints.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_main, run_args, DEADLINE  # noqa: E402
from direct import App, fresh_db, api_key, conf_text, done, check, wait_for, write  # noqa: E402
from harness import Session, wait_until  # noqa: E402
from webhook_receiver import Receiver, verify  # noqa: E402

MAX = 5
PATH = "/v1/webhook_endpoints"
EV = ["payment.succeeded"]
CONF = ("[server]\nthreads = 8\n[webhooks]\nallow_private = on\n"
        "max_endpoints = %d\nmax_attempts = 1\ninterval = 100ms\n"
        "backoff = 100ms\nbackoff_max = 500ms\ntimeout = 2s\n" % MAX)


def split(raw):
    """(headers as a lower-case dict, the JSON body or None)."""
    head, _, b = raw.partition(b"\r\n\r\n")
    hs = {}
    for line in head.decode(errors="replace").split("\r\n"):
        k, _, v = line.partition(":")
        hs[k.strip().lower()] = v.strip()
    return hs, (json.loads(b) if b.strip() else None)


class Run:
    def __init__(self, a, tmp):
        self.a = a
        self.tmp = tmp
        self.db = fresh_db(a, "idem_endpoints")
        self.conf = os.path.join(tmp, "app.ini")
        write(self.conf, conf_text(a.pghost, a.pgport, self.db.name, CONF))
        self.keys = {t: api_key(a.builddir, a.srcdir, self.conf, t)
                     for t in ("alpha", "beta", "gamma", "delta")}
        self.app = App(a.builddir, self.conf, os.path.join(tmp, "app.sock"),
                       os.path.join(tmp, "app.log"))
        self.n = 0

    def call(self, tenant, method, uri, doc=None, key=None):
        """(status, headers, JSON body) of one request."""
        body = json.dumps(doc).encode() if doc is not None else b""
        st, raw = self.app.request(self.keys[tenant], method, uri, body,
                                   key=key)
        hs, b = split(raw)
        return (int(st.split()[1]) if st.startswith("Status:") else st,
                hs, b)

    def create(self, tenant, url="http://127.0.0.1:9/hook", key=None):
        self.n += 1
        return self.call(tenant, "POST", PATH, {"url": url, "events": EV},
                         key or "ep-%d" % self.n)

    def live(self, tenant):
        return int(self.db.sql(
            "SELECT count(*) FROM idem_webhook_endpoints w JOIN api_keys k "
            "ON k.id = w.api_key_id WHERE k.name = '%s' AND w.deleted_at "
            "IS NULL" % tenant))

    def tenant_id(self, tenant):
        return self.db.sql("SELECT id FROM api_keys WHERE name = '%s'"
                           % tenant)


def is_problem(r, status, slug):
    return r[0] == status and r[2] is not None and \
        str(r[2].get("type", "")).endswith("/" + slug)


def check_limit(run):
    made = [run.create("alpha") for _ in range(MAX)]
    first = made[0]
    g = run.call("alpha", "GET", "%s/%d" % (PATH, first[2]["id"])) \
        if first[0] == 201 else first
    check.expect(all(m[0] == 201 for m in made) and
       sorted(first[2]) == ["events", "id", "secret", "url"] and
       g[0] == 200 and g[2] == {
           "id": first[2]["id"], "url": first[2]["url"], "events": EV,
           "created": g[2].get("created"), "enabled": True,
           "disabled_reason": None, "last_success": None,
           "failing_since": None} and isinstance(g[2]["created"], int),
       "%d creates: 201 each {id, url, events, secret}; GET /:id: the "
       "endpoint and the health of a new one (enabled, nulls), no secret"
       % MAX, ([m[:3:2] for m in made], g))
    r = run.create("alpha")
    check.expect(is_problem(r, 422, "webhook-endpoint-limit") and
       r[1].get("content-type") == "application/problem+json" and
       run.live("alpha") == MAX,
       "one more: 422 webhook-endpoint-limit, nothing created", r)
    replay = run.call("alpha", "POST", PATH, {"url": "http://127.0.0.1:9/"
                                              "hook", "events": EV},
                      "ep-%d" % run.n)
    check.expect(replay[0] == 422 and replay[1].get("idempotent-replayed") == "true",
       "its retry with the same key replays the 422", replay)
    r = run.create("beta")
    check.expect(r[0] == 201, "another tenant is not counted: 201", r)
    d = run.call("alpha", "DELETE", "%s/%d" % (PATH, made[0][2]["id"]))
    r = run.create("alpha")
    check.expect(d[0] == 204 and r[0] == 201 and run.live("alpha") == MAX,
       "a delete makes room for one: 204, then 201", (d, r))
    return [m[2]["id"] for m in made[1:]] + [r[2]["id"]]


def check_race(run):
    """A create at the limit waits for another transaction's uncommitted
    create (the tenant's row lock), then counts it: 422."""
    gid = run.tenant_id("gamma")
    for _ in range(MAX - 1):
        run.create("gamma")
    s = Session("host=%s port=%s dbname=%s user=postgres"
                % (run.a.pghost, run.a.pgport, run.db.name))
    out = {}
    try:
        s.run("BEGIN")
        s.run("SELECT id FROM idem_webhook_endpoint_create(%s, "
              "'http://127.0.0.1:9/held', '{payment.succeeded}', "
              "'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', %d)" % (gid, MAX))
        t = threading.Thread(target=lambda: out.setdefault(
            "r", run.create("gamma")))
        t.start()
        waiting = wait_for(lambda: run.db.sql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' "
            "AND wait_event_type = 'Lock'" % run.db.name) == "1", DEADLINE)
        s.run("COMMIT")
        t.join(DEADLINE)
    finally:
        s.close()
    check.expect(waiting and is_problem(out.get("r", (0, {}, None)), 422,
                              "webhook-endpoint-limit") and
       run.live("gamma") == MAX,
       "a create waiting behind an uncommitted create at the limit: 422 "
       "once that commits, %d endpoints" % MAX, (waiting, out))
    # A burst: 8 creates of a fresh tenant at once, exactly MAX pass.
    res = []
    ts = [threading.Thread(target=lambda: res.append(run.create("delta")))
          for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(DEADLINE)
    codes = sorted(r[0] for r in res)
    check.expect(codes == [201] * MAX + [422] * (8 - MAX) and
       run.live("delta") == MAX,
       "8 concurrent creates: %d x 201, %d x 422, %d endpoints"
       % (MAX, 8 - MAX, MAX), codes)


def check_pages(run, ids):
    want = sorted(ids, reverse=True)
    p1 = run.call("alpha", "GET", PATH + "?limit=2")
    p2 = run.call("alpha", "GET", PATH + "?limit=2&starting_after=%d"
                  % p1[2]["data"][-1]["id"]) if p1[0] == 200 else p1
    p3 = run.call("alpha", "GET", PATH + "?limit=2&starting_after=%d"
                  % p2[2]["data"][-1]["id"]) if p2[0] == 200 else p2
    got = [[e["id"] for e in p[2]["data"]] if p[0] == 200 else None
           for p in (p1, p2, p3)]
    check.expect(got == [want[0:2], want[2:4], want[4:5]] and
       [p[2]["has_more"] for p in (p1, p2, p3)] == [True, True, False] and
       all(p[2]["object"] == "list" for p in (p1, p2, p3)),
       "limit=2: pages of 2, 2, 1, newest first, has_more true, true, "
       "false", got)
    all_ = run.call("alpha", "GET", PATH)
    check.expect(all_[0] == 200 and [e["id"] for e in all_[2]["data"]] == want and
       all_[2]["has_more"] is False and
       all("secret" not in e for e in all_[2]["data"]),
       "no limit: the default 10, all %d, no secrets" % len(want), all_)
    beta_id = run.call("beta", "GET", PATH)[2]["data"][0]["id"]
    bad = {q: run.call("alpha", "GET", PATH + "?" + q) for q in (
        "limit=0", "limit=101", "limit=ten", "starting_after=x",
        "starting_after=%d" % beta_id, "starting_after=999999")}
    check.expect(all(is_problem(r, 400, "validation-error") for r in bad.values()),
       "400 validation-error: limit 0, 101, ten; starting_after x, "
       "another tenant's id, an unknown id",
       {q: r[:3:2] for q, r in bad.items()})


def check_health(run, ids):
    eid = ids[0]
    run.db.sql("UPDATE idem_webhook_endpoints SET disabled_at = now(), "
               "disabled_reason = 'gone: 410', last_success_at = "
               "to_timestamp(1700000000), failing_since = "
               "to_timestamp(1700000100) WHERE id = %d" % eid)
    g = run.call("alpha", "GET", "%s/%d" % (PATH, eid))
    lst = [e for e in run.call("alpha", "GET", PATH)[2]["data"]
           if e["id"] == eid]
    want = {"enabled": False, "disabled_reason": "gone: 410",
            "last_success": 1700000000, "failing_since": 1700000100}
    check.expect(g[0] == 200 and all(g[2].get(k) == v for k, v in want.items()) and
       "secret" not in g[2] and lst and
       all(lst[0].get(k) == v for k, v in want.items()),
       "GET /:id and the list show the health columns (a disabled "
       "endpoint)", (g, lst))
    other = {m: run.call("beta", m, "%s/%d%s" % (PATH, eid, s), doc, key)
             for m, s, doc, key in (
                 ("GET", "", None, None), ("DELETE", "", None, None),
                 ("POST", "/enable", None, None),
                 ("POST", "/recover", {"since": 0}, "b-rec"))}
    row = run.db.sql("SELECT deleted_at IS NULL, disabled_at IS NOT NULL "
                     "FROM idem_webhook_endpoints WHERE id = %d" % eid)
    check.expect(all(is_problem(r, 404, "not-found") for r in other.values()) and
       row == "t|t" and
       eid not in [e["id"] for e in run.call("beta", "GET",
                                             PATH)[2]["data"]],
       "another tenant: 404 to GET, DELETE, enable and recover of the "
       "id, not in its list; the endpoint is unchanged",
       ({m: r[:3:2] for m, r in other.items()}, row))
    r = run.call("alpha", "POST", "%s/%d/recover" % (PATH, eid),
                 {"since": 0}, "rec-disabled")
    check.expect(is_problem(r, 400, "validation-error") and "enable" in
       r[2].get("detail", ""), "recover of a disabled endpoint: 400, "
       "enable it first", r)
    e = run.call("alpha", "POST", "%s/%d/enable" % (PATH, eid))
    row = run.db.sql("SELECT disabled_at IS NULL, disabled_reason IS NULL, "
                     "failing_since IS NULL, extract(epoch FROM "
                     "last_success_at)::bigint FROM idem_webhook_endpoints "
                     "WHERE id = %d" % eid)
    check.expect(e[0] == 200 and e[2]["enabled"] is True and
       e[2]["disabled_reason"] is None and e[2]["failing_since"] is None
       and e[2]["last_success"] == 1700000000 and
       row == "t|t|t|1700000000",
       "POST /:id/enable: 200, enabled; disabled_at, disabled_reason, "
       "failing_since cleared, last_success kept", (e, row))
    bad = [run.call("alpha", "GET", PATH + "/" + s) for s in
           ("0", "01", "x", "99999999999999999")]
    check.expect(all(is_problem(r, 404, "not-found") for r in bad),
       "ids 0, 01, x and beyond 2^53: 404", [r[:3:2] for r in bad])


def delivery(run, wid, eid):
    """state|attempts of event wid's delivery to endpoint eid."""
    return run.db.sql("SELECT d.state, d.attempts FROM idem_deliveries d "
                      "JOIN idem_events e ON e.id = d.event WHERE "
                      "e.event_id = '%s' AND d.endpoint = %d" % (wid, eid))


def dead_event(run, rcv, key, eid):
    """A payment whose event the receiver answers 500 (fail_first) once:
    dead at once (max_attempts = 1).  Its webhook-id."""
    p = run.call("beta", "POST", "/v1/payments", {"amount": 100,
                                                   "currency": "eur"}, key)
    got = wait_until(lambda: rcv.of_object(p[2]["id"]), DEADLINE,
                        "the first delivery of " + key)
    wid = got[0].id
    wait_until(lambda: delivery(run, wid, eid) == "dead|1", DEADLINE,
                  "the delivery of %s dead" % key)
    return wid


def check_recover(run):
    rcv = Receiver()
    rcv.fail_first = True
    try:
        c = run.create("beta", url=rcv.url)
        eid, secret = c[2]["id"], c[2]["secret"]
        wid = dead_event(run, rcv, "pay-1", eid)
        since = int(time.time()) - 600
        uri = "%s/%d/recover" % (PATH, eid)
        r = run.call("beta", "POST", uri, {"since": since}, "rec-1")
        wait_until(lambda: delivery(run, wid, eid) == "delivered|1",
                      DEADLINE, "the recovered delivery delivered")
        again = [x for x in rcv.got(wid) if x.status == 204]
        d = again[0] if again else None
        check.expect(r[0] == 202 and r[2] == {"requeued": 1} and
           len(rcv.got(wid)) == 2 and d is not None and
           verify(secret, d.id, d.timestamp, d.signature, d.body) is None
           and d.body == rcv.got(wid)[0].body,
           "recover: 202 {\"requeued\": 1}; the receiver gets the dead "
           "delivery again under its original webhook-id, signed, the "
           "same body", (r, rcv.got()))
        rep = run.call("beta", "POST", uri, {"since": since}, "rec-1")
        fresh = run.call("beta", "POST", uri, {"since": since}, "rec-2")
        check.expect(rep[0] == 202 and rep[1].get("idempotent-replayed") == "true"
           and fresh[2] == {"requeued": 0} and
           delivery(run, wid, eid) == "delivered|1",
           "its replay requeues nothing more; a new recover finds nothing "
           "failed (delivered at its first attempt since)",
           (rep, fresh, delivery(run, wid, eid)))
        bad = [run.call("beta", "POST", uri, doc, "rec-bad-%d" % i)
               for i, doc in enumerate(({}, {"since": -1},
                                        {"since": "yesterday"},
                                        {"since": 10 ** 15}))]
        check.expect(all(is_problem(b, 400, "validation-error") for b in bad),
           "since missing, negative, a string, past year 9999: 400",
           [b[:3:2] for b in bad])
        wid2 = dead_event(run, rcv, "pay-2", eid)
        idemctl = os.path.join(run.a.builddir, "apps/idemctl/idemctl")
        cli = subprocess.run([idemctl, "-c", run.conf, "events", "recover",
                              str(eid), "--since", "1h"],
                             capture_output=True, text=True, timeout=60)
        wait_until(lambda: delivery(run, wid2, eid) == "delivered|1",
                      DEADLINE, "the delivery idemctl recovered delivered")
        check.expect(cli.returncode == 0 and "1 deliveries due again" in cli.stdout
           and [x.status for x in rcv.got(wid2)] == [500, 204],
           "idemctl events recover ID --since 1h: the dead delivery "
           "again, under its webhook-id", (cli.stdout, cli.stderr,
                                           rcv.got(wid2)))
        errs = [subprocess.run([idemctl, "-c", run.conf, "events",
                                "recover"] + args, capture_output=True,
                               text=True, timeout=60)
                for args in (["99999999", "--since", "1h"],
                             [str(eid), "--since", "soon"],
                             [str(eid), "--since"], ["x", "--since", "1h"])]
        check.expect([e.returncode for e in errs] == [1, 2, 2, 2] and
           "no live endpoint" in errs[0].stderr,
           "idemctl events recover: an unknown endpoint exits 1; a bad "
           "duration or id, a missing one, exit 2",
           [(e.returncode, e.stderr[-120:]) for e in errs])
    finally:
        rcv.stop()


def check_openapi(run):
    st, raw = run.app.request(run.keys["alpha"], "GET", "/openapi.json")
    doc = split(raw)[1] if st.startswith("Status: 200") else {}
    ops = {o.get("operationId") for p in doc.get("paths", {}).values()
           for o in p.values() if isinstance(o, dict)}
    want = {"createWebhookEndpoint", "listWebhookEndpoints",
            "getWebhookEndpoint", "deleteWebhookEndpoint",
            "enableWebhookEndpoint", "recoverWebhookEndpoint"}
    create = doc.get("paths", {}).get(PATH, {}).get("post", {})
    check.expect(want <= ops and "webhook-endpoint-limit" in json.dumps(
        create.get("responses", {}).get("422", {})),
       "/openapi.json: the six operations; the create's 422 names "
       "webhook-endpoint-limit", sorted(ops))
    check.expect("webhook_endpoint.disabled" in doc.get("webhooks", {}) and
                 '"webhook_endpoint.disabled"' in json.dumps(
                     create.get("requestBody", {})),
                 "/openapi.json: webhook_endpoint.disabled is a webhook a "
                 "tenant may subscribe to (among the create's events)",
                 sorted(doc.get("webhooks", {})))


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-endpoints-")
    run = None
    try:
        run = Run(a, tmp)
        ids = check_limit(run)
        check_race(run)
        check_pages(run, ids)
        check_health(run, ids)
        check_recover(run)
        check_openapi(run)
    except Exception as e:  # noqa: BLE001 (any: a failed check, not a crash)
        check.expect(False, "the run went through", repr(e))
    finally:
        if run is not None:
            st = run.app.stop()
            check.expect(st == 0, "the app exits 0 on SIGTERM", st)
        shutil.rmtree(tmp, ignore_errors=True)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
