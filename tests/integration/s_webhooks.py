"""s_webhooks.py - the sample's webhooks end to end, behind each server
fixture: a receiver on loopback (tests/lib/webhook_receiver.py; the test
config has [webhooks] allow_private = on and a small backoff, see
tests/lib/idem.sh) registered with POST /v1/webhook_endpoints by a tenant
of the check's own (so no other check's payments reach it), the app's own
dispatcher thread delivering.  Every wait is for a condition, with a
deadline.  Signatures are checked by Python's hmac (webhook_receiver.py)
and, in a check of its own, by the npm package standardwebhooks
(tests/direct/webhook_sig.js, the package from tests/openapi/node_modules;
without it a skip, in CI a failure): neither shares code with libidem."""

import base64
import json
import os
import shutil
import subprocess
import sys

from harness import Failed, check, q, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from missing import in_ci  # noqa: E402
from webhook_receiver import Receiver, verify  # noqa: E402

PAY = "/v1/payments"
EP = "/v1/webhook_endpoints"
ALL = ["payment.succeeded", "payment.failed", "refund.created"]
# What the sample declares: also the acquirer's dispute (disputes.c), and
# the library's own announcement of a disabled endpoint
DECLARED = ALL + ["payment.disputed", "webhook_endpoint.disabled"]
# Commit to delivery is well under a second here; under a wrapper
# (valgrind) everything is many times slower.
DEADLINE = 30 if not os.environ.get("IDEM_APP_WRAPPER") else 120


def _wait(t, cond, what, timeout=DEADLINE):
    return wait_until(cond, timeout, what)


class Hook:
    """A tenant of the check's own, a receiver, and its endpoint."""

    def __init__(self, t, label, events=ALL):
        self.t = t
        self.tenant = t.new_tenant(label)
        self.rcv = Receiver()
        r = t.post(EP, {"url": self.rcv.url, "events": events},
                   key=t.new_key("ep"), token=self.tenant)
        t.expect_status(r, 201)
        self.ep = r.json_or_fail()
        self.secret = self.ep.get("secret", "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.t.request("DELETE", "%s/%s" % (EP, self.ep["id"]),
                           token=self.tenant)
        finally:
            self.rcv.stop()

    def pay(self, **over):
        p, r = self.t.create_payment(tenant=self.tenant, **over)
        return p

    def events(self):
        """The tenant's committed events (type, event id), in order."""
        return [(e["type"], e["event_id"]) for e in self.t.db.rows(
            "select type, event_id from idem_events where api_key_id = %d "
            "order by id" % self.tenant.id)]

    def one_delivery(self, obj_id, etype):
        """Wait for obj_id's event etype to be delivered (2xx); returns
        that delivery."""
        return _wait(self.t, lambda: [d for d in self.rcv.of_object(
            obj_id, etype) if 200 <= d.status < 300], "%s of %s delivered "
            "to the receiver" % (etype, obj_id))[0]

    def delivery_rows(self, event_id):
        return self.t.db.rows(
            "select d.state, d.attempts from idem_deliveries d join "
            "idem_events e on e.id = d.event where e.event_id = %s"
            % q(event_id))

    def settled(self, event_id):
        """Wait for event_id's deliveries to be recorded delivered: the
        dispatcher is done with them, so the arrivals counted after this
        are all there will be (a redelivery after a recorded 2xx would
        show as one more).  Returns the rows."""
        return _wait(self.t, lambda: [
            r for r in self.delivery_rows(event_id)
            if r["state"] == "delivered"], "the delivery of %s recorded "
            "delivered" % event_id)


# The reference library's side (tests/direct/webhook_sig.js, shared with
# tests/direct/webhook_sig.py), and the package it loads.
SIG_JS = os.path.join(os.path.dirname(HERE), "direct", "webhook_sig.js")
MODULE = os.path.join(os.path.dirname(HERE), "openapi", "node_modules",
                      "standardwebhooks")


def expect_signed(t, secret, d):
    """d carries the Standard Webhooks headers and a signature valid for
    secret, checked by Python's hmac (not libidem's code); the npm package
    standardwebhooks checks one delivery in a check of its own."""
    for h in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        t.expect(d.headers.get(h), "the delivery has no %s header: %r"
                 % (h, d.headers))
    why = verify(secret, d.id, d.timestamp, d.signature, d.body)
    t.expect(why is None, "Python hmac: %s" % why)
    # Another secret must fail: the check can fail.
    t.expect(verify(OTHER, d.id, d.timestamp, d.signature, d.body)
             is not None, "the signature also verifies under another key")


OTHER = "whsec_" + base64.b64encode(b"x" * 24).decode()


def expect_signed_npm(t, secret, d):
    """The npm package standardwebhooks accepts d under secret and refuses
    it under another.  Without node or the package: a failure in CI
    (tests/lib/missing.py: every tool is installed there), else a skip."""
    node = shutil.which("node")
    if node is None or not os.path.isfile(os.path.join(MODULE,
                                                       "package.json")):
        why = ("node is not installed" if node is None else
               "standardwebhooks is not installed (npm ci in tests/openapi: "
               "tests/lib/deps.sh)")
        if in_ci():
            t.fail("%s (in CI every tool is installed)" % why)
        t.skip(why)
    cases = [{"op": "verify", "secret": key, "id": d.id,
              "ts": d.timestamp, "sigs": d.signature,
              "body": base64.b64encode(d.body).decode()}
             for key in (secret, OTHER)]
    p = subprocess.run([node, SIG_JS], input=json.dumps(
        {"module": MODULE, "cases": cases}).encode(), capture_output=True,
        timeout=60)
    try:
        res = json.loads(p.stdout)
    except ValueError:
        raise Failed("webhook_sig.js: exit %d: %s" % (
            p.returncode, p.stderr.decode(errors="replace")))
    t.expect(res[0].get("ok") is True, "standardwebhooks refuses the "
             "delivery: %s" % res[0].get("error"))
    t.expect(res[1].get("ok") is False, "standardwebhooks accepts it "
             "under another secret")


# --- the endpoints ----------------------------------------------------------

@check("webhook endpoints: POST -> 201 {id, url, events, secret} (a retry "
       "with the key replays it: the same secret), GET lists it without "
       "the secret, another tenant neither sees nor deletes it, DELETE -> "
       "204 then 404", needs=("idemctl",))
def _(t):
    tenant = t.new_tenant("ep")
    url = "https://hooks.example.org/idem/" + t.run_id
    k = t.new_key("ep")
    body = {"url": url, "events": ["refund.created", "payment.succeeded"]}
    r = t.post(EP, body, key=k, token=tenant)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    ep = r.json_or_fail()
    t.expect_eq(sorted(ep), ["events", "id", "secret", "url"], "members")
    t.expect(isinstance(ep["id"], int) and ep["id"] > 0, "id %r" % ep["id"])
    t.expect_eq(ep["url"], url, "url")
    t.expect_eq(ep["events"], body["events"], "events")
    t.expect(ep["secret"].startswith("whsec_") and
             len(base64.b64decode(ep["secret"][6:])) >= 24,
             "secret %r is not whsec_ and base64 of 24 bytes or more"
             % ep["secret"])
    again = t.post(EP, body, key=k, token=tenant)
    t.expect_replay_of(again, r)
    t.expect_eq(t.db.int("select count(*) from idem_webhook_endpoints "
                         "where api_key_id = %d" % tenant.id), 1,
                "endpoints after the retry")
    lst = t.get(EP, token=tenant)
    t.expect_status(lst, 200)
    doc = lst.json_or_fail()
    t.expect_eq(doc.get("object"), "list", "object")
    t.expect_eq(doc.get("has_more"), False, "has_more")
    t.expect_eq([(e["id"], e["url"], e["events"], "secret" in e)
                 for e in doc["data"]], [(ep["id"], url, body["events"],
                                          False)], "the list")
    t.expect(isinstance(doc["data"][0].get("created"), int), "created")
    other = t.get(EP, token=t.b)
    t.expect_status(other, 200)
    t.expect(ep["id"] not in [e["id"] for e in other.json()["data"]],
             "tenant b lists tenant a's endpoint")
    path = "%s/%d" % (EP, ep["id"])
    t.expect_problem(t.request("DELETE", path, token=t.b), 404, "not-found")
    d = t.request("DELETE", path, token=tenant)
    t.expect_status(d, 204)
    t.expect_eq(d.body, b"", "the 204's body")
    t.expect_eq(t.get(EP, token=tenant).json()["data"], [],
                "the list after DELETE")
    t.expect_problem(t.request("DELETE", path, token=tenant), 404,
                     "not-found")
    for bad in ("0", "abc", "12x", "99999999999999999999"):
        t.expect_problem(t.request("DELETE", "%s/%s" % (EP, bad),
                                   token=tenant), 404, "not-found")


@check("webhook endpoints: a bad body is 400 validation-error naming the "
       "member (no URL scheme but http(s), no events, an unknown or "
       "repeated event), and stores nothing", needs=("idemctl",))
def _(t):
    tenant = t.new_tenant("epbad")
    ok_url = "https://hooks.example.org/x"
    for label, body, ptr in (
            ("no url", {"events": ["payment.succeeded"]}, "url"),
            ("ftp url", {"url": "ftp://example.org/",
                         "events": ["payment.succeeded"]}, "url"),
            ("a url with userinfo", {"url": "https://u:p@example.org/",
                                     "events": ["payment.succeeded"]},
             "url"),
            ("no events", {"url": ok_url, "events": []}, "events"),
            ("events not an array", {"url": ok_url,
                                     "events": "payment.succeeded"},
             "events"),
            ("an unknown event", {"url": ok_url,
                                  "events": ["payment.refunded"]},
             "events[0]"),
            ("a repeated event", {"url": ok_url, "events": [
                "refund.created", "refund.created"]}, "events[1]")):
        k = t.new_key("epbad")
        r = t.post(EP, body, key=k, token=tenant)
        t.expect_problem(r, 400, "validation-error", detail_has=ptr)
        t.expect_eq(t.key_rows(tenant, k), [], "key rows after %s" % label)
        t.note("%s: 400 (%s)" % (label, r.json().get("detail")))
    t.expect_eq(t.db.int("select count(*) from idem_webhook_endpoints "
                         "where api_key_id = %d" % tenant.id), 0,
                "endpoints stored")


# --- the events -------------------------------------------------------------

@check("webhooks: a payment -> exactly one payment.succeeded, signed "
       "(verified independently), {id, type, created, data} with data = "
       "GET /v1/payments/:id; a replay of the create delivers nothing more",
       needs=("idemctl",))
def _(t):
    with Hook(t, "wh1") as h:
        k = t.new_key("wh1")
        first = t.post(PAY, t.payment_body(description="wh1"), key=k,
                       token=h.tenant)
        t.expect_status(first, 201)
        pid = first.json()["id"]
        d = h.one_delivery(pid, "payment.succeeded")
        expect_signed(t, h.secret, d)
        doc = d.json()
        t.expect_eq(sorted(doc), ["created", "data", "id", "type"],
                    "the body's members")
        t.expect_eq(doc["type"], "payment.succeeded", "type")
        t.expect_eq(doc["id"], d.id, "the body's id and webhook-id")
        t.expect(isinstance(doc["created"], int) and
                 abs(doc["created"] - first.json()["created"]) <= 5,
                 "created %r" % doc["created"])
        g = t.get("%s/%s" % (PAY, pid), token=h.tenant)
        t.expect_status(g, 200)
        t.expect_eq(doc["data"], g.json(), "data against GET")
        t.expect_eq(d.headers.get("content-type", "").split(";")[0],
                    "application/json", "Content-Type")
        again = t.post(PAY, t.payment_body(description="wh1"), key=k,
                       token=h.tenant)
        t.expect_replay_of(again, first)
        # A later payment's event delivered: the replay's, had it made
        # one, would have committed before it.
        p2 = h.pay(description="wh1 control")
        d2 = h.one_delivery(p2["id"], "payment.succeeded")
        h.settled(d.id)
        h.settled(d2.id)
        ev = h.events()
        t.expect_eq([e[0] for e in ev], ["payment.succeeded"] * 2,
                    "the tenant's events (the create, the control)")
        t.expect_eq(ev[0][1], d.id, "the first event's id")
        t.expect_eq(len(h.rcv.got(d.id)), 1, "deliveries of the first "
                    "event")
        t.expect_eq(len(h.rcv.got()), 2, "deliveries in all")
        t.expect_eq(h.delivery_rows(d.id), [{"state": "delivered",
                                             "attempts": 1}],
                    "its delivery row")


@check("webhooks: a delivery's signature verified by the npm package "
       "standardwebhooks (not libidem's code), and refused under another "
       "secret", needs=("idemctl",))
def _(t):
    with Hook(t, "whnpm") as h:
        p = h.pay(description="whnpm")
        expect_signed_npm(t, h.secret, h.one_delivery(p["id"],
                                                      "payment.succeeded"))


@check("webhooks: a refund -> one refund.created, data the refund as "
       "created; an endpoint not subscribed to it gets none",
       needs=("idemctl",))
def _(t):
    with Hook(t, "wh2", events=["refund.created"]) as h:
        p = h.pay(amount=700)
        r = t.post("%s/%s/refunds" % (PAY, p["id"]), {"amount": 300},
                   key=t.new_key("wh2"), token=h.tenant)
        t.expect_status(r, 201)
        ref = r.json()
        d = h.one_delivery(ref["id"], "refund.created")
        expect_signed(t, h.secret, d)
        t.expect_eq(d.json()["data"], ref, "data against the refund")
        # Subscribed to refunds only: the payment made no delivery (its
        # event committed before the refund's, which has arrived).
        t.expect_eq([x.json()["type"] for x in h.rcv.got()],
                    ["refund.created"], "the types delivered")


@check("webhooks: a create rolled back (500: a trigger fails its INSERT) "
       "makes no event, ever; its retry with the key makes one, delivered "
       "once", needs=("idemctl",))
def _(t):
    with Hook(t, "wh3") as h:
        desc = "wh3 " + t.run_id
        drop = t.db.before_insert("wh3_%s" % t.run_id, "payments",
                                  "new.description = %s" % q(desc),
                                  "raise exception 'injected failure'")
        try:
            k = t.new_key("wh3")
            body = t.payment_body(description=desc)
            r = t.post(PAY, body, key=k, token=h.tenant)
            t.expect_status(r, 500)
            t.expect_eq(h.events(), [], "events after the rolled-back create")
            t.db.run(drop)
            drop = None
            ok = t.post(PAY, body, key=k, token=h.tenant)
            t.expect_status(ok, 201)
            d = h.one_delivery(ok.json()["id"], "payment.succeeded")
            ev = h.events()
            t.expect_eq(ev, [("payment.succeeded", d.id)],
                        "the tenant's events: the retry's only")
            t.expect_eq([x.id for x in h.rcv.got()], [d.id],
                        "deliveries: the retry's only")
        finally:
            if drop:
                t.db.run(drop)


@check("webhooks: a receiver answering 500 to each first attempt gets it "
       "again with the same webhook-id; deduplicating on it, it applies "
       "each of three events exactly once", needs=("idemctl",))
def _(t):
    with Hook(t, "wh4") as h:
        h.rcv.fail_first = True
        p1 = h.pay(amount=500)
        p2 = h.pay(amount=600)
        r = t.post("%s/%s/refunds" % (PAY, p1["id"]), {"amount": 100},
                   key=t.new_key("wh4"), token=h.tenant)
        t.expect_status(r, 201)
        want = {(p1["id"], "payment.succeeded"),
                (p2["id"], "payment.succeeded"),
                (r.json()["id"], "refund.created")}
        ids = {}
        for obj, etype in want:
            ids[h.one_delivery(obj, etype).id] = (obj, etype)
        t.expect_eq(len(ids), 3, "distinct webhook-ids")
        t.expect_eq(sorted(h.rcv.applied_ids()), sorted(ids),
                    "events applied")
        for wid in ids:
            rows = h.settled(wid)
            got = h.rcv.got(wid)
            t.expect_eq([x.status for x in got], [500, 204],
                        "answers to %s's attempts (no redelivery after "
                        "the 204 was recorded)" % wid)
            t.expect(len({x.body for x in got}) == 1,
                     "%s's body changed between attempts" % wid)
            t.expect_eq(rows, [{"state": "delivered", "attempts": 2}],
                        "%s's delivery row" % wid)
        t.expect_eq(sorted(e[1] for e in h.events()), sorted(ids),
                    "the tenant's events")


@check("webhooks: a receiver down for a while (connections refused) gets "
       "the event once it is back, after failed attempts recorded",
       needs=("idemctl",))
def _(t):
    with Hook(t, "wh5") as h:
        h.rcv.stop()
        p = h.pay()
        ev = _wait(t, h.events, "the event committed")
        wid = ev[0][1]
        _wait(t, lambda: any(r["attempts"] >= 2 and r["state"] == "pending"
                             for r in h.delivery_rows(wid)),
              "two failed attempts recorded while the receiver is down")
        # Nothing can arrive at a stopped receiver: what shows that no
        # attempt counted as delivered is the row, still pending.
        rows = t.db.rows(
            "select d.state, d.last_status, d.delivered_at is null as "
            "undelivered, d.last_error is not null as erred from "
            "idem_deliveries d join idem_events e on e.id = d.event where "
            "e.event_id = %s" % q(wid))
        t.expect_eq(rows, [{"state": "pending", "last_status": None,
                            "undelivered": True, "erred": True}],
                    "the delivery while the receiver is down")
        h.rcv.start()
        d = h.one_delivery(p["id"], "payment.succeeded")
        t.expect_eq(d.id, wid, "webhook-id")
        expect_signed(t, h.secret, d)
        rows = h.settled(wid)
        t.expect_eq(len(h.rcv.got()), 1, "deliveries once back")
        t.expect(rows[0]["attempts"] >= 3, "the delivery row: %r" % rows)


@check("webhooks: /openapi.json lists payment.succeeded, payment.failed, "
       "refund.created, payment.disputed and webhook_endpoint.disabled "
       "under webhooks, each data the "
       "object's schema")
def _(t):
    doc = t.get("/openapi.json").json_or_fail()
    hooks = doc.get("webhooks") or {}
    t.expect_eq(sorted(hooks), sorted(DECLARED), "webhooks")
    pay = doc["paths"]["/v1/payments/{id}"]["get"]["responses"]["200"][
        "content"]["application/json"]["schema"]
    for etype in DECLARED:
        op = hooks[etype]["post"]
        s = op["requestBody"]["content"]["application/json"]["schema"]
        t.expect_eq(s["properties"]["type"].get("const"), etype,
                    "%s: type" % etype)
        t.expect_eq(sorted(s["required"]), ["created", "data", "id", "type"],
                    "%s: required" % etype)
        t.expect_eq(sorted(p["name"] for p in op["parameters"]),
                    ["webhook-id", "webhook-signature", "webhook-timestamp"],
                    "%s: headers" % etype)
        if etype.startswith("payment."):
            t.expect_eq(s["properties"]["data"]["properties"],
                        pay["properties"], "%s: data" % etype)
    t.expect_eq(sorted(doc["paths"]["/v1/webhook_endpoints"]),
                ["get", "post"], "/v1/webhook_endpoints")
    t.expect_eq(sorted(doc["paths"]["/v1/webhook_endpoints/{id}"]),
                ["delete", "get"], "/v1/webhook_endpoints/{id}")
