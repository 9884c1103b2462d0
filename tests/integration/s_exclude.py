"""s_exclude.py - [route] fingerprint_exclude: members a client may change
between retries of one operation (the test config excludes
/metadata/trace_id on POST /v1/payments).  A retry that differs only there
replays the first answer, byte for byte, and executes nothing; the first
request's body is what was stored; any other difference is still 422, and
/openapi.json states the exclusion in x-idempotency."""

from harness import check

PAY = "/v1/payments"
EXCLUDED = "/metadata/trace_id"     # tests/lib/idem.sh


def _payments_for(t, description):
    return t.db.int("select count(*) from payments where api_key_id = %d "
                    "and description = '%s'" % (t.a.id, description))


def _first(t, label, trace_id):
    """A payment under a new key, described "LABEL KEY", its metadata
    trace_id and o = "1", answered 201: (the key, the body, the answer)."""
    k = t.new_key(label)
    body = t.payment_body(description="%s %s" % (label, k),
                          metadata={"trace_id": trace_id, "o": "1"})
    r = t.post(PAY, body, key=k)
    t.expect_status(r, 201)
    return k, body, r


@check("fingerprint_exclude: a retry that changes only an excluded member "
       "replays the first answer byte for byte; one payment, with the "
       "first request's value")
def _(t):
    k, first_body, first = _first(t, "excl", "first")
    t.expect_not_replayed(first)
    t.expect_eq(first.json()["metadata"], {"trace_id": "first", "o": "1"},
                "the first answer's metadata")
    again = t.post(PAY, dict(first_body, metadata={"o": "1",
                                                   "trace_id": "second"}),
                   key=k)
    t.expect_replay_of(again, first)
    t.expect_eq(again.json()["metadata"]["trace_id"], "first",
                "trace_id in the replayed answer")
    # the member absent altogether: still the same operation
    gone = t.post(PAY, dict(first_body, metadata={"o": "1"}), key=k)
    t.expect_replay_of(gone, first)
    t.expect_eq(_payments_for(t, "excl " + k), 1,
                "payments for the key and tenant")
    rows = t.db.rows("select metadata->>'trace_id' as trace_id from payments"
                     " where api_key_id = %d and description = 'excl %s'"
                     % (t.a.id, k))
    t.expect_eq([r["trace_id"] for r in rows], ["first"],
                "the stored trace_id")


@check("fingerprint_exclude: a retry that changes any other member, "
       "even beside the excluded one, is 422 idempotency-key-reused and "
       "executes nothing")
def _(t):
    k, body, _ = _first(t, "excl2", "a")
    for label, other in (
            ("another metadata member",
             dict(body, metadata={"trace_id": "a", "o": "2"})),
            ("the amount, trace_id changed too",
             dict(body, amount=body["amount"] + 1,
                  metadata={"trace_id": "b", "o": "1"})),
            ("trace_id's value moved to another metadata member",
             dict(body, metadata={"trace": "a", "o": "1"}))):
        r = t.post(PAY, other, key=k)
        t.expect_problem(r, 422, "idempotency-key-reused")
        t.note("%s: 422" % label)
    t.expect_eq(_payments_for(t, "excl2 " + k), 1,
                "payments for the key and tenant")


@check("fingerprint_exclude: /openapi.json states it in the route's "
       "x-idempotency, and only there")
def _(t):
    r = t.get("/openapi.json")
    t.expect_status(r, 200)
    doc = r.json()
    post = doc["paths"]["/v1/payments"]["post"]["x-idempotency"]
    t.expect_eq(post.get("fingerprint_exclude"), [EXCLUDED],
                "POST /v1/payments x-idempotency.fingerprint_exclude")
    others = [(p, m) for p, item in doc["paths"].items()
              for m, op in item.items()
              if isinstance(op, dict) and "fingerprint_exclude" in
              op.get("x-idempotency", {}) and (p, m) != ("/v1/payments",
                                                         "post")]
    t.expect_eq(others, [], "other operations with fingerprint_exclude")
