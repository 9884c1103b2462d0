"""s_stored.py - what is stored, and when.  A refusal before the handler
(authentication, method, media type, body limit, invalid JSON, declared
validation, an integer that is not exactly one) stores nothing and leaves
the key free: the corrected retry with the same key executes, once.  An
integer member accepts only integer literals as written, never a rounded
one."""

from env import NO_AUTH
from harness import check, q

PAY = "/v1/payments"
MAX_BODY = 1024 * 1024          # [server] max_body of the test config


def _payments_for(t, description):
    return t.db.int("select count(*) from payments where api_key_id = %d "
                    "and description = %s" % (t.a.id, q(description)))


def _refused_then_once(t, label, refuse, status, slug):
    """refuse(t, key, body) answers status/slug and stores nothing; the
    corrected request with the same key then executes (201), a retry of it
    replays, and exactly one payment exists for that key and tenant."""
    k = t.new_key(label)
    body = t.payment_body(description="once " + k)
    before = t.db.counts()
    r = refuse(t, k, body)
    if r.is_problem:
        t.answered_by("the app", r)
    t.expect_problem(r, status, slug)
    t.expect_counts_unchanged(before, "row counts after the refusal")
    t.expect_eq(len(t.key_rows(t.a, k)), 0, "records of the key")
    first = t.post(PAY, body, key=k)
    t.expect_status(first, 201)
    t.expect_not_replayed(first)
    again = t.post(PAY, body, key=k)
    t.expect_replay_of(again, first)
    t.expect_eq(_payments_for(t, body["description"]), 1,
                "payments for the key and tenant")
    rows = t.key_rows(t.a, k)
    t.expect_eq([(x["state"], x["response_status"]) for x in rows],
                [("completed", 201)], "the key's record")


REFUSALS = [
    ("authentication (no credentials)", "auth",
     lambda t, k, b: t.post(PAY, b, key=k, token=NO_AUTH),
     401, "unauthorized"),
    ("authentication (unknown secret)", "auth2",
     lambda t, k, b: t.post(PAY, b, key=k, token="sk_" + "0" * 64),
     401, "unauthorized"),
    ("method (PUT)", "meth",
     lambda t, k, b: t.request("PUT", PAY, b, key=k),
     405, "method-not-allowed"),
    ("media type (text/plain)", "ctype",
     lambda t, k, b: t.post(PAY, b, key=k, ctype="text/plain"),
     415, "unsupported-media-type"),
    ("body limit (max_body + 1 bytes)", "size",
     lambda t, k, b: t.post(PAY, t.encode_body(b) +
                            b" " * (MAX_BODY + 1 - len(t.encode_body(b))),
                            key=k),
     413, "payload-too-large"),
    ("invalid JSON", "json",
     lambda t, k, b: t.post(PAY, t.encode_body(b)[:-1], key=k),
     400, "invalid-json"),
    ("declared validation (amount 0)", "valid",
     lambda t, k, b: t.post(PAY, dict(b, amount=0), key=k),
     400, "validation-error"),
    ("declared validation (an unknown member)", "valid2",
     lambda t, k, b: t.post(PAY, dict(b, amuont=1), key=k),
     400, "validation-error"),
    ("an inexact integer (amount 100.000000000000001)", "exact",
     lambda t, k, b: t.post(PAY, t.encode_body(b).replace(
         b'"amount":1000', b'"amount":100.000000000000001'), key=k),
     400, "validation-error"),
]

for _name, _label, _refuse, _status, _slug in REFUSALS:
    @check("refused before the handler: %s -> %d %s, nothing stored; the "
           "corrected retry with the same key executes, once"
           % (_name, _status, _slug))
    def _(t, label=_label, refuse=_refuse, status=_status, slug=_slug):
        _refused_then_once(t, label, refuse, status, slug)


# The handler's own 4xx is stored and replayed: s_refunds.py ("refund
# more than remains").


# The amount as the client wrote it: the expected answer of each literal
# (status, problem type or None, the detail's words or the stored amount).
NOT_LITERAL = "amount: must be an integer written without a fraction or " \
    "an exponent"
OUT_OF_RANGE = "amount: must be an integer from 1 to 1000000000000"
AMOUNTS = [
    (b"100.000000000000001", 400, "validation-error", NOT_LITERAL),
    (b"999999999999.9999999", 400, "validation-error", NOT_LITERAL),
    (b"1e2", 400, "validation-error", NOT_LITERAL),
    (b"1E2", 400, "validation-error", NOT_LITERAL),
    (b"1.0", 400, "validation-error", NOT_LITERAL),
    (b"-0", 400, "validation-error", OUT_OF_RANGE),
    (b"9007199254740993", 400, "validation-error", OUT_OF_RANGE),
    (b"1000000000001", 400, "validation-error", OUT_OF_RANGE),
    (b"1e400", 400, "invalid-json", None),
    (b"100", 201, None, 100),
    (b"1000000000000", 201, None, 1000000000000),
]

for _lit, _status, _slug, _want in AMOUNTS:
    @check("amount %s -> %d%s" % (_lit.decode(), _status,
                                  " " + _slug if _slug else
                                  " (amount %s stored)" % _want))
    def _(t, lit=_lit, status=_status, slug=_slug, want=_want):
        k = t.new_key("amt")
        body = (b'{"amount":' + lit + b',"currency":"eur","description":'
                b'"amount ' + k.encode() + b'"}')
        before = t.db.counts()
        r = t.post(PAY, body, key=k)
        if slug is not None:
            t.expect_problem(r, status, slug, detail_has=want)
            t.expect_counts_unchanged(before)
            return
        t.expect_status(r, status)
        t.expect_eq(r.json()["amount"], want, "amount in the answer")
        t.expect_eq(t.db.int("select amount from payments where "
                             "api_key_id = %d and description = %s"
                             % (t.a.id, q("amount " + k))), want,
                    "amount stored")
