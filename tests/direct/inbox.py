#!/usr/bin/env python3
"""inbox.py - the payments sample receives its acquirer's signed events
exactly once (POST /v1/acquirer/events, [inbox "acquirer"]), each message
signed by a sender nobody here wrote: the npm packages standardwebhooks and
stripe (tests/lib/inbox_sender.py).  A payments.fcgi of its own on a
socket, a database of its own, a webhook receiver on loopback for the
sample's own payment.disputed (tests/lib/webhook_receiver.py):

- a dispute sent 3 times: applied once (status disputed), one outbound
  payment.disputed delivered, the 2nd and 3rd answers replayed;
- the same message twice at once (the first held on the payment's row
  lock): one 409 with Retry-After, the retry then replayed;
- another body under the same webhook-id: 422, nothing changed;
- a wrong secret, no signature, an old timestamp: 400 with the issue's
  problem types, nothing stored, the handler not run;
- a rotation: the old secret and the new one both accepted;
- a handler failure (5xx): nothing stored, the sender's retry runs it;
- an unknown payment and an unknown type: 200, counted, nothing changed;
- idemctl key show, /metrics and /openapi.json know the route; idemctl
  evict evicts an expired message record (sent again then, it runs again
  and the sample changes nothing: the payment is disputed already);
- the stripe scheme (a second process, [inbox] scheme = stripe): the body's
  id is the key, 3 sends applied once, a wrong secret and an old t 400.

No API key is sent to the inbox route.  Every wait is for a condition with
a deadline.  Prints TAP.  Usage:
  inbox.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_main, run_args, DEADLINE, WEBHOOKS  # noqa: E402
from direct import App, fresh_db, api_key, conf_text, done, missing, check, wait_for, write  # noqa: E402
from inbox_sender import Signer  # noqa: E402
from webhook_receiver import Receiver  # noqa: E402

ROUTE = "/v1/acquirer/events"
OLD = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"     # being rotated out
NEW = "whsec_" + base64.b64encode(b"the acquirer's new key!!").decode()
OTHER = "whsec_" + base64.b64encode(b"nobody's key, not ours!!").decode()
STRIPE = "whsec_stripe_endpoint_secret"


def inbox_conf(scheme, secrets):
    return ('[inbox "acquirer"]\nscheme = %s\nsecret = %s\ntolerance = 5m\n'
            % (scheme, " ".join(secrets)))


def status_of(head):
    return int(head.split()[1]) if head.startswith("Status: ") else None


def parts(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.decode(errors="replace"), body


def doc(raw):
    _, body = parts(raw)
    try:
        return json.loads(body)
    except ValueError:
        return None


class RowLock:
    """A psql session holding payment pid's row lock until release()."""

    def __init__(self, db, pid):
        self.p = subprocess.Popen(db.base + ["-d", db.name], text=True,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.p.stdin.write("BEGIN;\nSELECT id FROM payments WHERE id = '%s' "
                           "FOR UPDATE;\n" % pid)
        self.p.stdin.flush()
        self.p.stdout.readline()        # the row is locked once it answers

    def release(self):
        self.p.stdin.write("COMMIT;\n")
        self.p.stdin.close()
        self.p.wait(timeout=10)


class Run:
    def __init__(self, a, tmp, rcv):
        self.a, self.tmp, self.rcv = a, tmp, rcv
        self.db = fresh_db(a, "idem_inbox")
        self.conf = os.path.join(tmp, "app.ini")
        write(self.conf, conf_text(a.pghost, a.pgport, self.db.name, WEBHOOKS +
                                   inbox_conf("standard-webhooks",
                                              [OLD, NEW])))
        self.secret = api_key(a.builddir, a.srcdir, self.conf, "inbox")
        self.app = App(a.builddir, self.conf, os.path.join(tmp, "app.sock"),
                       os.path.join(tmp, "app.log"))
        self.signer = Signer(a.srcdir)

    def pay(self, n):
        """A new succeeded payment of the tenant: its id."""
        st, raw = self.app.request(self.secret, "POST", "/v1/payments",
                                   b'{"amount":500,"currency":"eur"}',
                                   key="pay-%d" % n)
        return (doc(raw) or {}).get("id")

    def message(self, pid, mid, etype="payment.disputed"):
        return json.dumps({"id": mid, "type": etype,
                           "data": {"payment": pid}}).encode()

    def send(self, body, headers, app=None):
        st, raw = (app or self.app).request(None, "POST", ROUTE, body,
                                            headers=headers)
        return status_of(st), raw

    def signed(self, body, mid, secret=NEW, ts=None,
               scheme="standard-webhooks"):
        return self.signer.sign([{"scheme": scheme, "secret": secret,
                                  "id": mid, "ts": ts or int(time.time()),
                                  "body": body}])[0]

    def status(self, pid):
        return self.db.sql("SELECT status FROM payments WHERE id = '%s'"
                           % pid)

    def records(self, key):
        return int(self.db.sql(
            "SELECT count(*) FROM idempotency_keys k JOIN api_keys a ON "
            "a.id = k.api_key_id WHERE a.inbox = 'acquirer' AND k.key = "
            "'%s'" % key))

    def events(self, pid):
        return int(self.db.sql("SELECT count(*) FROM idem_events WHERE "
                               "type = 'payment.disputed' AND body::jsonb "
                               "-> 'data' ->> 'id' = '%s'" % pid))

    def applied(self, pid):
        """The receiver's 2xx arrivals of pid's payment.disputed, once its
        delivery is recorded delivered."""
        got = wait_for(lambda: [d for d in self.rcv.of_object(
            pid, "payment.disputed") if 200 <= d.status < 300], DEADLINE)
        if got:
            wait_for(lambda: self.db.sql(
                "SELECT d.state FROM idem_deliveries d JOIN idem_events e "
                "ON e.id = d.event WHERE e.event_id = '%s'" % got[0].id)
                == "delivered", DEADLINE)
        return [d for d in self.rcv.of_object(pid, "payment.disputed")
                if 200 <= d.status < 300]


def replayed(raw):
    return b"\r\nIdempotent-Replayed: true" in parts(raw)[0].encode()


def problem(raw):
    return (doc(raw) or {}).get("type", "").rsplit("/", 1)[-1]


def check_three_times(r):
    pid = r.pay(1)
    body = r.message(pid, "evt_three")
    h = r.signed(body, "msg_three")
    got = [r.send(body, h) for _ in range(3)]
    check.expect([s for s, _ in got] == [200, 200, 200] and
       doc(got[0][1]) == {"received": True} and not replayed(got[0][1]) and
       replayed(got[1][1]) and replayed(got[2][1]),
       "standardwebhooks: a dispute sent 3 times -> 200, then 200 "
       "Idempotent-Replayed: true twice", [x[1][:300] for x in got])
    check.expect(r.status(pid) == "disputed" and r.events(pid) == 1,
       "the payment is disputed and one payment.disputed enqueued",
       (r.status(pid), r.events(pid)))
    got = r.applied(pid)
    check.expect(len(got) == 1, "one outbound payment.disputed delivered to the "
       "tenant's endpoint", [d.id for d in got])
    exp = r.db.sql("SELECT round(extract(epoch FROM expires_at - "
                   "created_at) / 86400) FROM idempotency_keys WHERE key = "
                   "'msg_three'")
    check.expect(exp == "7", "the message's record is kept 7 days (the route's "
       "retention)", exp)
    return pid, body, h


def check_concurrent(r):
    pid = r.pay(2)
    body = r.message(pid, "evt_twice")
    h = r.signed(body, "msg_twice")
    lock = RowLock(r.db, pid)
    first = {}
    t = threading.Thread(target=lambda: first.update(
        got=r.send(body, h)))
    t.start()
    blocked = wait_for(lambda: r.db.sql(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s' AND "
        "wait_event_type = 'Lock' AND query LIKE 'UPDATE payments%%'"
        % r.db.name) == "1", DEADLINE)
    s2, raw2 = r.send(body, h)
    lock.release()
    t.join(DEADLINE)
    s1, raw1 = first.get("got", (None, b""))
    head2 = parts(raw2)[0]
    check.expect(blocked and s2 == 409 and problem(raw2) ==
       "idempotency-key-in-flight" and "\r\nRetry-After: " in head2,
       "the same message twice at once: the second 409 "
       "idempotency-key-in-flight with Retry-After", raw2[:400])
    check.expect(s1 == 200 and not replayed(raw1), "the first one executes: 200",
       raw1[:300])
    s3, raw3 = r.send(body, h)
    check.expect(s3 == 200 and replayed(raw3) and r.events(pid) == 1 and
       r.status(pid) == "disputed", "the sender's retry gets the replay; "
       "applied once", raw3[:300])


def check_refusals(r, pid, body, h):
    other = r.message(pid, "evt_other", "payment.refund_failed")
    s, raw = r.send(other, r.signed(other, "msg_three"))
    check.expect(s == 422 and problem(raw) == "idempotency-key-reused" and
       r.events(pid) == 1, "another body under the same webhook-id: 422 "
       "idempotency-key-reused, nothing changed", raw[:300])
    pid4 = r.pay(4)
    body4 = r.message(pid4, "evt_refused")
    keys0 = r.db.sql("SELECT count(*) FROM idempotency_keys")
    cases = [
        ("a wrong secret", r.signed(body4, "msg_r1", secret=OTHER),
         "webhook-signature-invalid"),
        ("no signature", {"webhook-id": "msg_r2", "webhook-timestamp":
                          str(int(time.time()))},
         "webhook-signature-invalid"),
        ("the body changed after signing", dict(r.signed(body4, "msg_r3"),
                                                 **{"webhook-id": "msg_r4"}),
         "webhook-signature-invalid"),
        ("a timestamp 10 min old", r.signed(body4, "msg_r5",
                                            ts=int(time.time()) - 600),
         "webhook-timestamp-out-of-tolerance"),
        ("a timestamp 10 min ahead", r.signed(body4, "msg_r6",
                                              ts=int(time.time()) + 600),
         "webhook-timestamp-out-of-tolerance"),
    ]
    for name, hs, want in cases:
        s, raw = r.send(body4, hs)
        check.expect(s == 400 and problem(raw) == want, "%s: 400 %s" % (name, want),
           raw[:300])
    check.expect(r.db.sql("SELECT count(*) FROM idempotency_keys") == keys0 and
       r.status(pid4) == "succeeded" and r.events(pid4) == 0,
       "every refusal stored nothing and ran no handler")
    # The key is the webhook-id: the refused ones are still free.
    s, raw = r.send(body4, r.signed(body4, "msg_r1"))
    check.expect(s == 200 and not replayed(raw) and r.status(pid4) == "disputed",
       "the refused message, signed right, executes afresh", raw[:300])


def check_rotation(r):
    pid = r.pay(5)
    body = r.message(pid, "evt_old")
    # A webhook-id is the sender's, as written: digits only too.
    s, raw = r.send(body, r.signed(body, "1234567890", secret=OLD))
    check.expect(s == 200 and r.status(pid) == "disputed" and
       r.records("1234567890") == 1, "rotation: a message signed with the "
       "old secret is accepted too (its webhook-id all digits)", raw[:300])


def check_failure(r):
    body = json.dumps({"id": "evt_fail", "type": "charge.updated",
                       "data": {}}).encode()
    h = r.signed(body, "msg_fail")
    r.db.sql("ALTER TABLE acquirer_events_ignored ADD CONSTRAINT "
             "test_refuse CHECK (false) NOT VALID")
    s, raw = r.send(body, h)
    stored = r.records("msg_fail")
    r.db.sql("ALTER TABLE acquirer_events_ignored DROP CONSTRAINT "
             "test_refuse")
    check.expect(s is not None and s >= 500 and stored == 0, "a handler failure: "
       "%s, nothing stored" % s, raw[:300])
    s, raw = r.send(body, h)
    check.expect(s == 200 and not replayed(raw) and r.records("msg_fail") == 1,
       "the sender's retry runs it again: 200", raw[:300])


def check_ignored(r):
    cases = [("an unknown payment", r.message("pay_nosuch", "evt_u1"),
              "msg_u1", "unknown payment"),
             ("an unknown type", r.message(r.pay(6), "evt_u2",
                                           "payment.captured"), "msg_u2",
              "unknown type")]
    ev0 = r.db.sql("SELECT count(*) FROM idem_events")
    for name, body, mid, reason in cases:
        s, raw = r.send(body, r.signed(body, mid))
        row = r.db.sql("SELECT reason FROM acquirer_events_ignored WHERE "
                       "event_id = '%s'" % json.loads(body)["id"])
        check.expect(s == 200 and doc(raw) == {"received": True} and row == reason,
           "%s: 200, counted (%s)" % (name, reason), (raw[:300], row))
    check.expect(r.db.sql("SELECT count(*) FROM idem_events") == ev0 and
       r.db.sql("SELECT count(*) FROM payments WHERE status = 'disputed'")
       == "4", "they changed no payment and enqueued nothing")
    logged = [ln for ln in r.app.log_lines()
              if "ignored: unknown payment" in ln.get("msg", "")]
    check.expect(len(logged) == 1, "the unknown payment is logged", logged)


def check_tools(r):
    p = subprocess.run([os.path.join(r.a.builddir, "apps/idemctl/idemctl"),
                        "-c", r.conf, "key", "show", "inbox:acquirer",
                        "msg_three"], capture_output=True, text=True)
    check.expect(p.returncode == 0 and "completed" in p.stdout and
       ROUTE in p.stdout, "idemctl key show inbox:acquirer msg_three",
       p.stdout + p.stderr)
    st, raw = r.app.request(None, "GET", "/metrics")
    text = parts(raw)[1].decode()
    line = 'idem_requests_total{route="POST %s",outcome="replayed"}' % ROUTE
    check.expect(line + " " in text, "/metrics counts the route's replays",
       [ln for ln in text.splitlines() if ROUTE in ln][:8])
    st, raw = r.app.request(None, "GET", "/openapi.json")
    api = doc(raw) or {}
    op = api.get("paths", {}).get(ROUTE, {}).get("post", {})
    names = {p.get("name") for p in op.get("parameters", [])}
    check.expect({"webhook-id", "webhook-timestamp", "webhook-signature"} <= names and
       "Idempotency-Key" not in names and op.get("security") == [],
       "/openapi.json: the route with its signature headers, no API key",
       op.get("parameters"))
    enum = op.get("responses", {}).get("400", {}).get("content", {}).get(
        "application/problem+json", {}).get("schema", {}).get("allOf", [
            {}, {}])[1].get("properties", {}).get("type", {}).get("enum", [])
    check.expect({"/problems/webhook-signature-invalid",
        "/problems/webhook-timestamp-out-of-tolerance"} <= set(enum) and
       "/problems/idempotency-key-missing" not in enum,
       "/openapi.json: the route's 400 problem types", enum)
    check.expect("payment.disputed" in api.get("webhooks", {}),
       "/openapi.json: payment.disputed among the webhooks")


def check_eviction(r, pid, body, h):
    """An expired message record is evicted like any key; the message
    sent again after that runs again, and the sample changes nothing."""
    r.db.sql("UPDATE idempotency_keys SET expires_at = now() - interval "
             "'1 second' WHERE key = 'msg_three'")
    p = subprocess.run([os.path.join(r.a.builddir, "apps/idemctl/idemctl"),
                        "-c", r.conf, "evict"], capture_output=True,
                       text=True)
    check.expect(p.returncode == 0 and r.records("msg_three") == 0, "idemctl evict "
       "evicts the expired message record", p.stdout + p.stderr)
    s, raw = r.send(body, r.signed(body, "msg_three"))
    reason = r.db.sql("SELECT reason FROM acquirer_events_ignored WHERE "
                      "event_id = 'evt_three'")
    check.expect(s == 200 and not replayed(raw) and reason == "already disputed" and
       r.events(pid) == 1, "sent again after eviction: runs again, the "
       "payment already disputed, no second payment.disputed",
       (raw[:300], reason))


def check_stripe(r):
    conf = os.path.join(r.tmp, "stripe.ini")
    write(conf, conf_text(r.a.pghost, r.a.pgport, r.db.name,
                          inbox_conf("stripe", [STRIPE])))
    app = App(r.a.builddir, conf, os.path.join(r.tmp, "stripe.sock"),
              os.path.join(r.tmp, "stripe.log"))
    try:
        pid = r.pay(7)
        body = r.message(pid, "evt_stripe")
        h = r.signed(body, None, secret=STRIPE, scheme="stripe")
        got = [r.send(body, h, app) for _ in range(3)]
        check.expect([s for s, _ in got] == [200] * 3 and not replayed(got[0][1]) and
           replayed(got[1][1]) and replayed(got[2][1]) and
           r.status(pid) == "disputed" and r.events(pid) == 1 and
           r.records("evt_stripe") == 1, "stripe: generateTestHeaderString's "
           "message sent 3 times: applied once under the body's id",
           [x[1][:200] for x in got])
        pid = r.pay(8)
        body = r.message(pid, "evt_stripe2")
        for name, hs, want in [
                ("a wrong secret", r.signed(body, None, secret="whsec_no",
                                            scheme="stripe"),
                 "webhook-signature-invalid"),
                ("an old t", r.signed(body, None, secret=STRIPE,
                                      ts=int(time.time()) - 600,
                                      scheme="stripe"),
                 "webhook-timestamp-out-of-tolerance")]:
            s, raw = r.send(body, hs, app)
            check.expect(s == 400 and problem(raw) == want and
               r.records("evt_stripe2") == 0, "stripe: %s: 400 %s, nothing "
               "stored" % (name, want), raw[:300])
    finally:
        app.stop()


def main():
    a = run_args()
    why = Signer(a.srcdir).why_not()
    if why is not None:
        missing("inbox messages signed by standardwebhooks and stripe", why)
        return done()
    tmp = tempfile.mkdtemp(prefix="idem-inbox.")
    rcv = Receiver()
    r = None
    try:
        r = Run(a, tmp, rcv)
        st, raw = r.app.request(r.secret, "POST", "/v1/webhook_endpoints",
                                json.dumps({"url": rcv.url, "events": [
                                    "payment.succeeded"]}).encode(),
                                key="ep-1")
        # The sample's endpoint route lists the types it accepts itself
        # (apps/payments/endpoints.c, to be replaced by the library's
        # routes, which take the declared webhooks): subscribed here.
        r.db.sql("UPDATE idem_webhook_endpoints SET types = "
                 "'{payment.disputed}'")
        check.expect(status_of(st) == 201, "an endpoint for payment.disputed",
           raw[:300])
        pid, body, h = check_three_times(r)
        check_concurrent(r)
        check_refusals(r, pid, body, h)
        check_rotation(r)
        check_failure(r)
        check_ignored(r)
        check_tools(r)
        check_eviction(r, pid, body, h)
        check_stripe(r)
    finally:
        if r is not None:
            r.app.stop()
        rcv.stop()
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
