"""s_api.py - the HTTP surface: health, auth, routing, media type, JSON,
validation, the payment object, GET and list."""

import time

from env import NO_AUTH
from harness import check, q

PAY = "/v1/payments"


def _reject(t, r, status, slug, before, detail_has=None):
    """A pre-handler rejection: the problem, and nothing stored."""
    t.expect_problem(r, status, slug, detail_has)
    t.expect_counts_unchanged(before)


def _post_rejected(t, status, slug, body=None, detail_has=None, **kw):
    """POST body (a payment's unless given) with kw (key: a new one
    unless given) -> _reject: the problem, and nothing stored."""
    before = t.db.counts()
    kw.setdefault("key", t.new_key())
    r = t.post(PAY, t.payment_body() if body is None else body, **kw)
    _reject(t, r, status, slug, before, detail_has)


# --- health ------------------------------------------------------------------

@check("GET /healthz without auth -> 200")
def _(t):
    r = t.get("/healthz", token=NO_AUTH)
    t.expect_status(r, 200)


# --- auth ----------------------------------------------------------------------

@check("POST without Authorization -> 401 unauthorized, nothing stored")
def _(t):
    _post_rejected(t, 401, "unauthorized", token=NO_AUTH)


@check("POST with an unknown bearer token -> 401 unauthorized")
def _(t):
    _post_rejected(t, 401, "unauthorized",
                   token="sk_test_not_a_real_key_" + t.run_id)


@check("Authorization: Basic ... -> 401 unauthorized")
def _(t):
    _post_rejected(t, 401, "unauthorized", token=NO_AUTH,
                   headers=[("Authorization", "Basic dXNlcjpwYXNz")])


@check("GET /v1/payments without Authorization -> 401 unauthorized")
def _(t):
    r = t.get(PAY, token=NO_AUTH)
    t.expect_problem(r, 401, "unauthorized")


@check("revoked API key -> 401 unauthorized (idemctl api-key revoke)",
       needs=("idemctl",))
def _(t):
    ten = t.new_tenant("revoked")
    r = t.post(PAY, t.payment_body(), key=t.new_key(), token=ten)
    t.expect_status(r, 201)
    t.revoke(ten)
    t.expect(t.db.scalar("select count(*) from api_keys where name = %s "
                         "and revoked_at is null" % q(ten.name)) == "0",
             "api_keys.revoked_at not set after revoke")
    _post_rejected(t, 401, "unauthorized", token=ten)
    r = t.get(PAY, token=ten)
    t.expect_problem(r, 401, "unauthorized")


# --- routing -------------------------------------------------------------------

@check("unknown path -> 404 not-found")
def _(t):
    r = t.get("/v1/nothing-here")
    t.expect_problem(r, 404, "not-found")


@check("GET /v1/payments/UNKNOWN -> 404 not-found")
def _(t):
    r = t.get(PAY + "/pay_doesnotexist" + t.run_id)
    t.expect_problem(r, 404, "not-found")


def _allow(t, r, methods):
    t.expect_problem(r, 405, "method-not-allowed")
    allow = r.header("Allow")
    t.expect(allow is not None, "405 without an Allow header")
    got = {m.strip().upper() for m in allow.split(",")}
    for m in methods:
        t.expect(m in got, "Allow %r lacks %s" % (allow, m))


@check("DELETE /v1/payments -> 405 with Allow: GET, POST")
def _(t):
    r = t.request("DELETE", PAY)
    _allow(t, r, ("GET", "POST"))


@check("PUT /v1/payments/ID -> 405 with Allow: GET")
def _(t):
    p, _ = t.create_payment()
    r = t.request("PUT", PAY + "/" + p["id"], {"amount": 1})
    _allow(t, r, ("GET",))


@check("PATCH and DELETE /v1/payments/ID -> 405 with Allow: GET")
def _(t):
    p, _ = t.create_payment()
    for m in ("PATCH", "DELETE"):
        r = t.request(m, PAY + "/" + p["id"])
        _allow(t, r, ("GET",))


@check("GET /v1/payments/ID/refunds -> 405 with Allow: POST")
def _(t):
    p, _ = t.create_payment()
    r = t.get(PAY + "/" + p["id"] + "/refunds")
    _allow(t, r, ("POST",))


# --- idempotency key header -------------------------------------------------

@check("POST without Idempotency-Key -> 400 idempotency-key-missing, "
       "nothing stored")
def _(t):
    _post_rejected(t, 400, "idempotency-key-missing", key=None)


# (label, value, the web server may answer itself, other acceptable slugs)
BAD_KEYS = [
    ("empty sf-string \"\"", '""', False, ()),
    ("unterminated sf-string", '"abc', False, ()),
    ("sf-string with a bad escape", '"a\\qb"', False, ()),
    ("sf-string with trailing characters", '"abc"x', False, ()),
    ("bare token with a space", "a b", False, ()),
    ("256 characters", "k" * 256, False, ()),
    ("4000 characters", "k" * 4000, True, ()),
    ("non-ASCII bytes", "caf\u00e9".encode("utf-8"), True, ()),
    ("control character (0x01)", b"ab\x01cd", True, ()),
    # Some servers drop an empty header field, so the app sees none.
    ("empty value", "", True, ("idempotency-key-missing",)),
]


def reject_or_server(t, r, status, slug, before, alt=()):
    """Either the app's problem (slug, or one of alt with a note) or the
    web server's own 4xx; nothing stored either way."""
    if r.is_problem:
        t.answered_by("the app", r)
        doc = t.expect_problem(r, status, (slug,) + tuple(alt))
        if not doc["type"].endswith(slug):
            t.note("the app saw %s: %s passed the request on altered"
                   % (doc["type"].rsplit("/", 1)[-1], t.fixture))
            t.answered_by("the app, after %s altered the request"
                          % t.fixture, r)
    else:
        t.answered_by(t.fixture, r)
        t.expect(400 <= r.status < 500, "expected a 4xx from %s, got %s"
                 % (t.fixture, r.status))
    t.expect_counts_unchanged(before)


for _label, _val, _srv, _alt in BAD_KEYS:
    @check("Idempotency-Key %s -> 400 idempotency-key-invalid, nothing stored"
           % _label)
    def _(t, val=_val, srv=_srv, alt=_alt):
        before = t.db.counts()
        r = t.post(PAY, t.payment_body(), key=val)
        if srv:
            reject_or_server(t, r, 400, "idempotency-key-invalid", before,
                             alt)
        else:
            _reject(t, r, 400, "idempotency-key-invalid", before)


@check("Idempotency-Key of 255 characters is accepted (201)")
def _(t):
    key = (t.new_key("max") + "x" * 255)[:255]
    r = t.post(PAY, t.payment_body(), key=key)
    t.expect_status(r, 201)
    rows = t.key_rows(t.a, key)
    t.expect_eq(len(rows), 1, "idempotency_keys rows for the key")


@check("Idempotency-Key sf-string \"k\" and bare token k are the same key")
def _(t):
    k = t.new_key("sf")
    first = t.post(PAY, t.payment_body(), key='"%s"' % k)
    t.expect_status(first, 201)
    again = t.post(PAY, t.payment_body(), key=k)
    t.expect_replay_of(again, first)


# RFC 8941 Items that are not a String or a Token, and what the detail
# says of each (the header is passed on as sent by every fixture).
KEY_ITEMS = [
    ("an Integer", "12345", "an Integer"),
    ("a Decimal", "12.5", "a Decimal"),
    ("a Boolean", "?1", "a Boolean"),
    ("a Byte Sequence", ":aGVsbG8=:", "a Byte Sequence"),
    ("a Date", "@1659578233", "a Date"),
    ("a Display String", '%"caf%c3%a9"', "a Display String"),
    ("a Token with parameters", "K;x=1", "parameters"),
    ("a String with parameters", '"K";x=1', "parameters"),
    ("a list", "K, L", "a list"),
    ("an inner list", "(a b)", "an inner list"),
    ("an empty String", '""', "empty"),
]

for _label, _val, _why in KEY_ITEMS:
    @check("Idempotency-Key %s (%s) -> 400 idempotency-key-invalid saying "
           "so, nothing stored" % (_label, _val))
    def _(t, val=_val, why=_why):
        _post_rejected(t, 400, "idempotency-key-invalid", key=val,
                       detail_has=why)


@check("Idempotency-Key: a bare UUID starting with a digit is accepted "
       "(compatibility form) and is the same key quoted")
def _(t):
    k = "9" + t.new_key("uuid")
    first = t.post(PAY, t.payment_body(), key=k)
    t.expect_status(first, 201)
    t.expect_eq(len(t.key_rows(t.a, k)), 1, "records of the bare key")
    again = t.post(PAY, t.payment_body(), key='"%s"' % k)
    t.expect_replay_of(again, first)


@check("Idempotency-Key: the String \"K;x=1\" is the key K;x=1, while the "
       "bare K;x=1 (a Token with a parameter) is refused")
def _(t):
    k = t.new_key("par")
    first = t.post(PAY, t.payment_body(), key='"%s;x=1"' % k)
    t.expect_status(first, 201)
    t.expect_eq(len(t.key_rows(t.a, k + ";x=1")), 1,
                "records of the key K;x=1")
    _post_rejected(t, 400, "idempotency-key-invalid", key="%s;x=1" % k,
                   detail_has="parameters")


@check("Idempotency-Key sf-string with escapes \\\" and \\\\ is accepted")
def _(t):
    k = t.new_key("esc")
    first = t.post(PAY, t.payment_body(), key='"%s\\"q\\\\b"' % k)
    t.expect_status(first, 201)
    rows = t.key_rows(t.a, k + '"q\\b')
    t.expect_eq(len(rows), 1, "stored key is the unescaped string")


# --- media type and JSON ---------------------------------------------------------

@check("Content-Type: text/plain -> 415 unsupported-media-type, "
       "nothing stored")
def _(t):
    _post_rejected(t, 415, "unsupported-media-type", ctype="text/plain")


@check("no Content-Type on a JSON body -> 415 unsupported-media-type")
def _(t):
    _post_rejected(t, 415, "unsupported-media-type", ctype=None)


@check("Content-Type: application/json; charset=utf-8 is accepted (201)")
def _(t):
    r = t.post(PAY, t.payment_body(), key=t.new_key(),
               ctype="application/json; charset=utf-8")
    t.expect_status(r, 201)


BAD_JSON = [
    ("not JSON at all", b"amount=100&currency=usd"),
    ("empty body", b""),
    ("truncated object", b'{"amount": 100, "currency": '),
    ("trailing garbage", b'{"amount":100,"currency":"usd"} x'),
    ("duplicate member names", b'{"amount":100,"amount":200,"currency":"usd"}'),
    ("duplicate member names (escaped spelling)",
     b'{"amount":100,"\\u0061mount":200,"currency":"usd"}'),
    ("single quotes", b"{'amount':100,'currency':'usd'}"),
    ("NaN literal", b'{"amount":NaN,"currency":"usd"}'),
    ("lone surrogate escape", b'{"amount":1,"currency":"usd",'
                              b'"description":"\\ud800"}'),
    ("invalid UTF-8", b'{"amount":100,"currency":"usd","description":"\xff\xfe"}'),
    ("overlong UTF-8 encoding", b'{"amount":1,"currency":"usd",'
                                b'"description":"\xc0\xaf"}'),
    ("raw control character in a string",
     b'{"amount":1,"currency":"usd","description":"a\x01b"}'),
]

for _label, _body in BAD_JSON:
    @check("body %s -> 400 invalid-json, nothing stored" % _label)
    def _(t, body=_body):
        _post_rejected(t, 400, "invalid-json", body)


# --- validation ------------------------------------------------------------------

LONG = "d" * 1001
VALIDATION = [
    # (label, body, field the detail must name)
    ("amount missing", {"currency": "usd"}, "amount"),
    ("amount 0", {"amount": 0, "currency": "usd"}, "amount"),
    ("amount negative", {"amount": -5, "currency": "usd"}, "amount"),
    ("amount a string", {"amount": "100", "currency": "usd"}, "amount"),
    ("amount fractional", {"amount": 1.5, "currency": "usd"}, "amount"),
    ("amount null", {"amount": None, "currency": "usd"}, "amount"),
    ("amount boolean", {"amount": True, "currency": "usd"}, "amount"),
    ("currency missing", {"amount": 100}, "currency"),
    ("currency upper case", {"amount": 100, "currency": "USD"}, "currency"),
    ("currency 2 letters", {"amount": 100, "currency": "us"}, "currency"),
    ("currency 4 letters", {"amount": 100, "currency": "usdx"}, "currency"),
    ("currency a number", {"amount": 100, "currency": 840}, "currency"),
    ("description 1001 chars", {"amount": 100, "currency": "usd",
                                "description": LONG}, "description"),
    ("description a number", {"amount": 100, "currency": "usd",
                              "description": 12}, "description"),
    ("customer a number", {"amount": 100, "currency": "usd",
                           "customer": 12}, "customer"),
    ("metadata an array", {"amount": 100, "currency": "usd",
                           "metadata": []}, "metadata"),
    ("metadata a string", {"amount": 100, "currency": "usd",
                           "metadata": "x"}, "metadata"),
    ("metadata with a non-string value", {"amount": 100, "currency": "usd",
                                          "metadata": {"a": 1}}, "metadata"),
    ("currency non-ASCII letters", {"amount": 100, "currency": "\u00fcsd"},
     "currency"),
    ("description 1001 non-ASCII chars", {"amount": 100, "currency": "usd",
                                          "description": "\u00e9" * 1001},
     "description"),
]

for _label, _body, _field in VALIDATION:
    @check("validation: %s -> 400 validation-error naming %s, no payment"
           % (_label, _field))
    def _(t, body=_body, field=_field):
        before = t.db.int("select count(*) from payments")
        r = t.post(PAY, body, key=t.new_key())
        t.expect_problem(r, 400, "validation-error", detail_has=field)
        t.expect_eq(t.db.int("select count(*) from payments"), before,
                    "payments rows")


@check("validation-error stores nothing: the same key then executes the "
       "corrected body (201)")
def _(t):
    k = t.new_key()
    _post_rejected(t, 400, "validation-error", {"amount": 0,
                                                "currency": "usd"},
                   detail_has="amount", key=k)
    fixed = t.post(PAY, {"amount": 1, "currency": "usd"}, key=k)
    t.expect_status(fixed, 201)
    t.expect_not_replayed(fixed)


@check("description of exactly 1000 characters is accepted (201)")
def _(t):
    r = t.post(PAY, t.payment_body(description="x" * 1000), key=t.new_key())
    t.expect_status(r, 201)
    t.expect_eq(len(r.json()["description"]), 1000, "description length")


@check("description of 1000 non-ASCII characters (2000 bytes) is accepted "
       "(201)")
def _(t):
    r = t.post(PAY, t.payment_body(description="\u00e9" * 1000),
               key=t.new_key())
    t.expect_status(r, 201)
    t.expect_eq(r.json()["description"], "\u00e9" * 1000, "description")


@check("metadata {} and string values are accepted (201)")
def _(t):
    r = t.post(PAY, t.payment_body(metadata={}), key=t.new_key())
    t.expect_status(r, 201)
    r = t.post(PAY, t.payment_body(metadata={"order": "42", "x": ""}),
               key=t.new_key())
    t.expect_status(r, 201)
    t.expect_eq(r.json()["metadata"], {"order": "42", "x": ""}, "metadata")


# --- the payment object ----------------------------------------------------------

def _check_payment(t, p, body, tenant):
    t.expect(isinstance(p.get("id"), str) and p["id"].startswith("pay_")
             and len(p["id"]) > 4, "id %r is not pay_..." % p.get("id"))
    t.expect_eq(p.get("object"), "payment", "object")
    t.expect_eq(p.get("amount"), body["amount"], "amount")
    t.expect_eq(p.get("currency"), body["currency"], "currency")
    t.expect_eq(p.get("status"), "succeeded", "status")
    t.expect_eq(p.get("amount_refunded"), 0, "amount_refunded")
    for m in ("description", "customer"):
        t.expect(m in p, "payment has no %r member" % m)
        t.expect_eq(p[m], body.get(m), m)
    t.expect("metadata" in p, "payment has no 'metadata' member")
    if "metadata" in body:
        t.expect_eq(p["metadata"], body["metadata"], "metadata")
    else:
        t.expect(p["metadata"] in ({}, None),
                 "absent metadata came back as %r" % (p["metadata"],))
    t.expect(type(p.get("created")) is int, "created is not an integer")
    t.expect(abs(p["created"] - time.time()) < 300,
             "created %r is not the current unix time" % p["created"])
    row = t.payment_row(p["id"])
    t.expect(row is not None, "no payments row for %s" % p["id"])
    t.expect_eq(row["api_key_id"], tenant.id, "payments.api_key_id")
    t.expect_eq(row["amount"], body["amount"], "payments.amount")
    t.expect_eq(row["currency"], body["currency"], "payments.currency")


@check("POST /v1/payments -> 201 payment object, Location, DB row")
def _(t):
    body = {"amount": 4200, "currency": "eur",
            "description": "full " + t.run_id, "customer": "cus_123",
            "metadata": {"order": "A-1", "note": "caf\u00e9 \u2603"}}
    r = t.post(PAY, body, key=t.new_key())
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    ct = (r.header("Content-Type") or "").split(";")[0].strip()
    t.expect_eq(ct, "application/json", "Content-Type")
    p = r.json_or_fail()
    _check_payment(t, p, body, t.a)
    t.expect_eq(r.header("Location"), "/v1/payments/" + p["id"], "Location")


@check("POST /v1/payments minimal body -> optional fields null")
def _(t):
    body = {"amount": 1, "currency": "jpy"}
    r = t.post(PAY, body, key=t.new_key())
    t.expect_status(r, 201)
    _check_payment(t, r.json_or_fail(), body, t.a)


@check("idempotency_keys row: POST /v1/payments, status 201, "
       "route ttl 7d")
def _(t):
    k, r = t.keyed_payment()
    rows = t.key_rows(t.a, k)
    t.expect_eq(len(rows), 1, "idempotency_keys rows")
    row = rows[0]
    t.expect_eq(row["request_method"], "POST", "request_method")
    t.expect_eq(row["request_path"], "/v1/payments", "request_path")
    t.expect_eq(row["response_status"], 201, "response_status")
    t.expect(abs(row["ttl_s"] - 7 * 86400) < 120,
             "expires_at - created_at = %ss, want 7d ([route] ttl)"
             % row["ttl_s"])


@check("GET /v1/payments/ID -> 200, same object as created")
def _(t):
    p, r = t.create_payment(customer="cus_9", metadata={"k": "v"})
    g = t.get(PAY + "/" + p["id"])
    t.expect_status(g, 200)
    t.expect_eq(g.json_or_fail(), p, "GET body")


# --- list ------------------------------------------------------------------------

@check("list: newest first, limit, has_more, starting_after",
       needs=("idemctl",))
def _(t):
    ten = t.new_tenant("lister")
    ids = []
    for i in range(3):
        p, _ = t.create_payment(tenant=ten, amount=100 + i)
        ids.append(p["id"])
    r = t.get(PAY + "?limit=2", token=ten)
    t.expect_status(r, 200)
    doc = r.json_or_fail()
    t.expect_eq(doc.get("object"), "list", "object")
    t.expect_eq([p["id"] for p in doc.get("data", [])], [ids[2], ids[1]],
                "first page ids (newest first)")
    t.expect_eq(doc.get("has_more"), True, "has_more on the first page")
    t.expect_eq(doc["data"][0].get("object"), "payment", "data[0].object")
    r = t.get(PAY + "?limit=2&starting_after=" + ids[1], token=ten)
    t.expect_status(r, 200)
    doc = r.json_or_fail()
    t.expect_eq([p["id"] for p in doc.get("data", [])], [ids[0]],
                "second page ids")
    t.expect_eq(doc.get("has_more"), False, "has_more on the last page")
    r = t.get(PAY, token=ten)
    t.expect_status(r, 200)
    got = [p["id"] for p in r.json_or_fail().get("data", [])]
    t.expect_eq(got, ids[::-1], "default page")


for _lim in ("0", "101", "-1", "abc"):
    @check("list: limit=%s -> 400 validation-error" % _lim)
    def _(t, lim=_lim):
        r = t.get(PAY + "?limit=" + lim)
        t.expect_problem(r, 400, "validation-error", detail_has="limit")


@check("list: limit=1 and limit=100 -> 200")
def _(t):
    for lim in ("1", "100"):
        r = t.get(PAY + "?limit=" + lim)
        t.expect_status(r, 200)
        doc = r.json_or_fail()
        t.expect(len(doc["data"]) <= int(lim), "more than limit items")
        t.expect(type(doc["has_more"]) is bool, "has_more is not a bool")
