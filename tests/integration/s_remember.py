"""s_remember.py - [route] remember: late retries recognised (the test
config sets remember = 30d on POST /v1/payments, tests/lib/idem.sh).  Once
a key's record has expired and been evicted, the same request under it is
answered 410 idempotency-key-expired and executes nothing; another request
under the key executes; once the window has passed and the trace is
evicted, the same request executes again.  Expiry and the end of the window
are brought forward in SQL (the ttl is at least 1 h, the window 30 days);
eviction is idemctl evict, as an operator runs it."""

import hashlib
import re
import struct

from harness import check, q

PAY = "/v1/payments"
REMEMBER_S = 30 * 86400          # tests/lib/idem.sh


def _expire(t, key):
    n = t.db.int("with u as (update idempotency_keys set expires_at = "
                 "now() - interval '1 second' where api_key_id = %d and "
                 "key = %s returning 1) select count(*) from u"
                 % (t.a.id, q(key)))
    t.expect_eq(n, 1, "records expired by SQL")


def _evict(t):
    """idemctl evict; returns (keys evicted, traces forgotten)."""
    out = t.idemctl_run("evict")
    m = re.search(r"^evicted (\d+) keys in ", out, re.M)
    t.expect(m is not None, "idemctl evict printed %r" % out)
    f = re.search(r"^forgot (\d+) remembered keys in ", out, re.M)
    return int(m.group(1)), int(f.group(1)) if f else 0


def _digest(t, key):
    """The key's digest as the middleware computes its lock id: 64 bits of
    SHA-256(SHA-256(secret), key), big-endian, signed."""
    h = hashlib.sha256(hashlib.sha256(t.a.secret.encode()).digest() +
                       key.encode()).digest()
    return struct.unpack(">q", h[:8])[0]


def _traces(t, key):
    return t.db.int("select count(*) from idem_remembered where key_digest "
                    "= %d and forget_at > now()" % _digest(t, key))


def _first(t, label):
    """A payment under a new key, described "LABEL KEY", answered 201:
    (the key, the body, the answer)."""
    k = t.new_key(label)
    body = t.payment_body(description="%s %s" % (label, k))
    r = t.post(PAY, body, key=k)
    t.expect_status(r, 201)
    return k, body, r


def _executed_anew(t, body, k, first):
    """body under k executes: 201, not a replay, not the first payment."""
    r = t.post(PAY, body, key=k)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    t.expect(r.json()["id"] != first.json()["id"], "the first payment "
             "answered again")


def _payments(t, description):
    return t.db.int("select count(*) from payments where api_key_id = %d "
                    "and description = %s" % (t.a.id, q(description)))


@check("remember: the same request after its key expired and was evicted "
       "-> 410 idempotency-key-expired, again and again, one payment; "
       "another body under the key executes (201)", needs=("idemctl",))
def _(t):
    k, body, first = _first(t, "rem")
    t.expect_eq(t.db.int("select remember_ms / 1000 from idempotency_keys "
                         "where api_key_id = %d and key = %s"
                         % (t.a.id, q(k))), REMEMBER_S,
                "the record's remember window (s)")
    _expire(t, k)
    n, _ = _evict(t)
    t.expect(n >= 1, "idemctl evict evicted %d keys" % n)
    t.expect_eq(t.key_rows(t.a, k), [], "the key's record after eviction")
    # The trace's digest is the one the middleware looks up (its lock id).
    t.expect_eq(t.db.int("select idem_key_digest64(secret_hash, %s) from "
                         "api_keys where id = %d" % (q(k), t.a.id)),
                _digest(t, k), "the SQL key digest vs the middleware's")
    t.expect_eq(_traces(t, k), 1, "traces of the key")
    before = t.db.counts()
    for i in (1, 2):
        r = t.post(PAY, body, key=k)
        doc = t.expect_problem(r, 410, "idempotency-key-expired",
                               detail_has="do not retry")
        t.expect_not_replayed(r)
        t.expect(r.header("Location") is None, "a Location on the 410")
        t.note("retry %d: 410, detail %r" % (i, doc["detail"]))
    t.expect_counts_unchanged(before, "rows after the 410s")
    t.expect_eq(_payments(t, body["description"]), 1, "payments of the body")
    _executed_anew(t, dict(body, amount=body["amount"] + 1), k, first)
    t.expect_eq(_payments(t, body["description"]), 2, "payments of the key")
    # The key now holds the other request, live: the first body is 422.
    t.expect_problem(t.post(PAY, body, key=k), 422, "idempotency-key-reused")


@check("remember: a key never seen, and an expired key's other tenant, "
       "execute (201) on a route that remembers", needs=("idemctl",))
def _(t):
    k, body, _ = _first(t, "remnew")
    _expire(t, k)
    n, _ = _evict(t)
    t.expect(n >= 1, "idemctl evict evicted %d keys" % n)
    t.expect_eq(t.key_rows(t.a, k), [], "tenant a's record after eviction")
    # Tenant a's trace is there and answers: without it tenant b's 201
    # below would show nothing about isolation.
    t.expect_eq(_traces(t, k), 1, "tenant a's traces of the key")
    t.expect_problem(t.post(PAY, body, key=k), 410,
                     "idempotency-key-expired")
    # Tenant b, same key and body: its own key space.
    r = t.post(PAY, body, key=k, token=t.b.secret)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    t.expect_eq(t.db.int("select count(*) from payments where api_key_id "
                         "= %d and description = %s" % (t.b.id,
                                                        q(body["description"]))),
                1, "tenant b's payments of the body")


@check("remember: expired but not yet evicted, the same request is 410 "
       "too; another request replaces the record and the first one's trace "
       "is kept; each body is 410 once its own record is evicted",
       needs=("idemctl",))
def _(t):
    k, body, _ = _first(t, "remx")
    _expire(t, k)
    t.expect_problem(t.post(PAY, body, key=k), 410,
                     "idempotency-key-expired")
    t.expect_eq(_traces(t, k), 0, "traces before eviction (the record "
                "itself answers)")
    other = dict(body, amount=body["amount"] + 1)
    second = t.post(PAY, other, key=k)
    t.expect_status(second, 201)
    t.expect_eq(_traces(t, k), 1, "traces once the record was replaced")
    t.expect_replay_of(t.post(PAY, other, key=k), second)
    _expire(t, k)
    _evict(t)
    t.expect_eq(_traces(t, k), 2, "traces after eviction")
    for b in (body, other):
        t.expect_problem(t.post(PAY, b, key=k), 410,
                         "idempotency-key-expired")
    t.expect_eq(_payments(t, body["description"]), 2, "payments of the key")


@check("remember: once the window has passed and idemctl evict forgot the "
       "trace, the same request executes again (201, a second payment)",
       needs=("idemctl",))
def _(t):
    k, body, first = _first(t, "remw")
    _expire(t, k)
    _evict(t)
    t.expect_problem(t.post(PAY, body, key=k), 410,
                     "idempotency-key-expired")
    n = t.db.int("with u as (update idem_remembered set forget_at = now() - "
                 "interval '1 second' where key_digest = %d returning 1) "
                 "select count(*) from u" % _digest(t, k))
    t.expect_eq(n, 1, "traces whose window was ended by SQL")
    _, forgotten = _evict(t)
    t.expect(forgotten >= 1, "idemctl evict forgot %d traces" % forgotten)
    t.expect_eq(t.db.int("select count(*) from idem_remembered where "
                         "key_digest = %d" % _digest(t, k)), 0,
                "rows of the key left in idem_remembered")
    _executed_anew(t, body, k, first)
    t.expect_eq(_payments(t, body["description"]), 2, "payments of the body")


@check("remember: /openapi.json states remember_seconds in the route's "
       "x-idempotency and 410 idempotency-key-expired among its answers, "
       "only where the route remembers")
def _(t):
    r = t.get("/openapi.json")
    t.expect_status(r, 200)
    doc = r.json()
    post = doc["paths"][PAY]["post"]
    t.expect_eq(post["x-idempotency"].get("remember_seconds"), REMEMBER_S,
                "POST /v1/payments x-idempotency.remember_seconds")
    t.expect("410" in post["responses"], "POST /v1/payments answers 410: %r"
             % sorted(post["responses"]))
    t.expect("idempotency-key-expired" in r.body.decode(), "the 410's "
             "problem type is named")
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if (path, method) == (PAY, "post") or not isinstance(op, dict):
                continue
            t.expect("remember_seconds" not in op.get("x-idempotency", {})
                     and "410" not in op.get("responses", {}),
                     "%s %s remembers" % (method.upper(), path))
