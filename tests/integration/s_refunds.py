"""s_refunds.py - POST /v1/payments/:id/refunds."""

import time

from harness import check, q

PAY = "/v1/payments"


def _paid(t, amount):
    """A payment of amount made for the check: (its id, the path of its
    refunds)."""
    pid = t.create_payment(amount=amount)[0]["id"]
    return pid, PAY + "/" + pid + "/refunds"


def _expect_refunded(t, pid, amount):
    """The payments row's amount_refunded is amount."""
    t.expect_eq(t.payment_row(pid)["amount_refunded"], amount,
                "amount_refunded")


def _refunds_sum(t, pid):
    return t.db.int("select coalesce(sum(amount), 0) from refunds "
                    "where payment_id = %s" % q(pid))


@check("refund partial -> 201 refund object; amount_refunded increases")
def _(t):
    pid, path = _paid(t, 500)
    r = t.post(path, {"amount": 200}, key=t.new_key())
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    ref = r.json_or_fail()
    t.expect(isinstance(ref.get("id"), str) and ref["id"].startswith("re_"),
             "refund id %r is not re_..." % ref.get("id"))
    t.expect_eq(ref.get("object"), "refund", "object")
    t.expect_eq(ref.get("payment"), pid, "payment")
    t.expect_eq(ref.get("amount"), 200, "amount")
    t.expect(type(ref.get("created")) is int and
             abs(ref["created"] - time.time()) < 300,
             "created %r is not the current unix time" % ref.get("created"))
    g = t.get(PAY + "/" + pid)
    t.expect_status(g, 200)
    t.expect_eq(g.json_or_fail().get("amount_refunded"), 200,
                "GET amount_refunded")
    rows = t.db.rows("select payment_id, api_key_id, amount from refunds "
                     "where id = %s" % q(ref["id"]))
    t.expect_eq(rows, [{"payment_id": pid, "api_key_id": t.a.id,
                        "amount": 200}], "refunds row")


@check("refund without amount refunds the remainder")
def _(t):
    pid, path = _paid(t, 500)
    t.expect_status(t.post(path, {"amount": 120}, key=t.new_key()), 201)
    r = t.post(path, {}, key=t.new_key())
    t.expect_status(r, 201)
    t.expect_eq(r.json_or_fail().get("amount"), 380, "refund amount")
    _expect_refunded(t, pid, 500)


@check("refund key row: route POST /v1/payments/:id/refunds has the "
       "default ttl 24h")
def _(t):
    _, path = _paid(t, 500)
    k = t.new_key()
    t.expect_status(t.post(path, {"amount": 1}, key=k), 201)
    rows = t.key_rows(t.a, k)
    t.expect_eq(len(rows), 1, "idempotency_keys rows")
    t.expect_eq(rows[0]["response_status"], 201, "response_status")
    t.expect(abs(rows[0]["ttl_s"] - 86400) < 120,
             "expires_at - created_at = %ss, want 24h" % rows[0]["ttl_s"])


@check("refund more than remains -> 400 validation-error, stored and "
       "replayed like a 201")
def _(t):
    pid, path = _paid(t, 300)
    t.expect_status(t.post(path, {"amount": 200}, key=t.new_key()), 201)
    k = t.new_key()
    first = t.post(path, {"amount": 101}, key=k)
    t.expect_problem(first, 400, "validation-error", detail_has="amount")
    t.expect_not_replayed(first)
    t.expect_eq(len(t.key_rows(t.a, k)), 1,
                "idempotency_keys rows for the rejected refund")
    again = t.post(path, {"amount": 101}, key=k)
    t.expect_replay_of(again, first)
    _expect_refunded(t, pid, 200)
    t.expect_eq(_refunds_sum(t, pid), 200, "sum of refunds rows")


@check("replayed refund: same refund id, no second refund row")
def _(t):
    pid, path = _paid(t, 300)
    k = t.new_key()
    first = t.post(path, {"amount": 100}, key=k)
    t.expect_status(first, 201)
    again = t.post(path, {"amount": 100}, key=k)
    t.expect_replay_of(again, first)
    t.expect_eq(_refunds_sum(t, pid), 100, "sum of refunds rows")
    _expect_refunded(t, pid, 100)


@check("refund of an unknown payment -> 404 not-found")
def _(t):
    r = t.post(PAY + "/pay_nope" + t.run_id + "/refunds", {"amount": 1},
               key=t.new_key())
    t.expect_problem(r, 404, "not-found")


for _label, _body in (("amount 0", {"amount": 0}),
                      ("amount negative", {"amount": -5}),
                      ("amount a string", {"amount": "10"}),
                      ("amount fractional", {"amount": 2.5})):
    @check("refund validation: %s -> 400 validation-error naming amount"
           % _label)
    def _(t, body=_body):
        pid, path = _paid(t, 300)
        r = t.post(path, body, key=t.new_key())
        t.expect_problem(r, 400, "validation-error", detail_has="amount")
        _expect_refunded(t, pid, 0)


@check("refund without Idempotency-Key -> 400 idempotency-key-missing; "
       "invalid JSON -> 400 invalid-json")
def _(t):
    _, path = _paid(t, 300)
    before = t.db.counts()
    t.expect_problem(t.post(path, {"amount": 1}), 400,
                     "idempotency-key-missing")
    t.expect_problem(t.post(path, b'{"amount":', key=t.new_key()), 400,
                     "invalid-json")
    t.expect_counts_unchanged(before)
