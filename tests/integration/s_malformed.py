"""s_malformed.py - a table of malformed requests (headers, keys, bodies,
encodings, JSON depth and size, numbers out of range, methods, paths).
Each gets its documented 4xx problem and leaves no payment; a rejection
before the handler (declared validation included) stores nothing at all;
the worker survives every one."""

from env import NO_AUTH
from harness import check

PAY = "/v1/payments"
OK = {"amount": 100, "currency": "eur"}

# stage: "pre" = rejected before the handler (no row anywhere);
#        "server" = the web server may answer first (with its own page and
#        the same status; nothing kept)


def post(body=None, key=True, ctype="application/json", token=None,
         headers=None, path=PAY, method="POST"):
    def send(t):
        k = t.new_key("mal") if key is True else key
        kw = {"key": k, "headers": headers}
        if ctype is not None:
            kw["ctype"] = ctype
        else:
            kw["ctype"] = None
        if token is not None:
            kw["token"] = token
        return t.request(method, path, OK if body is None else body, **kw)
    return send


def get(path, token=None):
    def send(t):
        return t.request("GET", path, **({} if token is None else
                                          {"token": token}))
    return send


def deep(n):
    return ("[" * n + "]" * n).encode()


def rows(status, slug, stage, *cases):
    """The table's rows for cases (name, send) that have one outcome."""
    return [(name, send, status, slug, stage) for name, send in cases]


CASES = [
    # --- Idempotency-Key -----------------------------------------------------
    ("key missing", post(key=None), 400, "idempotency-key-missing", "pre"),
    *rows(400, "idempotency-key-invalid", "pre",
          ("key empty sf-string", post(key='""')),
          ("key with a space inside", post(key="a b")),
          ("key of 256 characters", post(key="k" * 256)),
          ("key with a non-ASCII byte", post(key="caf\xe9")),
          ("key with an unbalanced quote", post(key='"abc')),
          ("key with a bad escape", post(key='"a\\qb"')),
          ("key with sf parameters", post(key='"abc";x=1')),
          ("key as an inner list", post(key='("a" "b")')),
          ("key with a tab inside", post(key="a\tb")),
          ("key with a quote inside a token", post(key='ab"c'))),
    # --- Authorization ---------------------------------------------------------
    *rows(401, "unauthorized", "pre",
          ("Basic credentials", post(
              token=NO_AUTH, headers=[("Authorization", "Basic dTpw")])),
          ("Bearer without a secret", post(
              token=NO_AUTH, headers=[("Authorization", "Bearer ")])),
          ("unknown Bearer secret", post(token="sk_" + "0" * 64)),
          ("Bearer of 300 characters", post(token="x" * 300))),
    # --- media type ------------------------------------------------------------
    *rows(415, "unsupported-media-type", "pre",
          ("Content-Type text/plain", post(ctype="text/plain")),
          ("no Content-Type", post(ctype=None)),
          ("Content-Type application/jsonx",
           post(ctype="application/jsonx")),
          ("Content-Type application/json-patch+json",
           post(ctype="application/json-patch+json"))),
    # --- JSON --------------------------------------------------------------------
    *rows(400, "invalid-json", "pre",
          ("empty body", post(body=b"")),
          ("trailing garbage", post(body=b'{"amount":1,"currency":"eur"} x')),
          ("two JSON values", post(body=b"{}{}")),
          ("duplicate member names",
           post(body=b'{"amount":1,"amount":2,"currency":"eur"}')),
          ("duplicate names via an escape",
           post(body=b'{"amount":1,"\\u0061mount":2,"currency":"eur"}')),
          ("lone surrogate escape", post(
              body=b'{"amount":1,"currency":"eur","description":"\\ud800"}')),
          ("invalid UTF-8 in a string", post(
              body=b'{"amount":1,"currency":"eur","description":"\xc3\x28"}')),
          ("overlong UTF-8 encoding", post(
              body=b'{"amount":1,"currency":"eur","description":"\xc0\xaf"}')),
          ("raw NUL byte in the body",
           post(body=b'{"amount":1,"currency":"eur"\x00}')),
          ("a comment", post(body=b'{"amount":1 /* c */,"currency":"eur"}')),
          ("single-quoted strings", post(body=b"{'amount':1}")),
          ("nesting 65 levels", post(body=deep(65))),
          ("nesting 10000 levels", post(body=deep(10000))),
          ("number 1e400", post(body=b'{"amount":1e400,"currency":"eur"}')),
          ("NaN", post(body=b'{"amount":NaN,"currency":"eur"}'))),
    # --- declared validation (before the handler: nothing stored) --------------
    *rows(400, "validation-error", "pre",
          ("top-level null", post(body=b"null")),
          ("top-level array", post(body=b"[]")),
          ("amount 0", post(body={"amount": 0, "currency": "eur"})),
          ("amount negative", post(body={"amount": -5, "currency": "eur"})),
          ("amount 1.5", post(body={"amount": 1.5, "currency": "eur"})),
          ("amount as a string",
           post(body={"amount": "100", "currency": "eur"})),
          ("amount 2^63", post(body=b'{"amount":9223372036854775808,'
                                    b'"currency":"eur"}')),
          ("currency upper case", post(body={"amount": 1, "currency": "EUR"})),
          ("currency not ISO 4217",
           post(body={"amount": 1, "currency": "zzz"})),
          ("currency a number", post(body={"amount": 1, "currency": 978})),
          ("description of 1001 characters", post(body={
              "amount": 1, "currency": "eur", "description": "d" * 1001})),
          ("metadata with a number value", post(body={
              "amount": 1, "currency": "eur", "metadata": {"a": 1}})),
          ("an unknown field", post(body={
              "amount": 1, "currency": "eur", "amuont": 2}))),
    # --- methods and paths -----------------------------------------------------
    *rows(405, "method-not-allowed", "pre",
          ("PUT on /v1/payments", post(method="PUT")),
          ("DELETE on a payment",
           post(method="DELETE", path="/v1/payments/pay_abc"))),
    *rows(404, "not-found", "pre",
          ("trailing slash", get("/v1/payments/")),
          ("unknown path", get("/v1/pay"))),
    *rows(404, "not-found", "server",
          ("%00 in a path segment", get("/v1/payments/pay_%00")),
          ("encoded dot-dot segment", get("/v1/payments/%2e%2e"))),
    *rows(400, "validation-error", "pre",
          ("limit=0", get(PAY + "?limit=0")),
          ("limit=abc", get(PAY + "?limit=abc")),
          ("limit=1000", get(PAY + "?limit=1000")),
          ("starting_after not an id",
           get(PAY + "?starting_after=%27%3B--"))),
    # --- sizes -------------------------------------------------------------------
    ("a 16 KiB header", post(headers=[("X-Pad", "p" * 16384)]), 400, None,
     "server"),
]


# What each web server answers itself, where it does not pass the request
# on (the fixture's first word: lighttpd, nginx, apache): the status of its
# own page.  A server not named here passes the request on to the app.
SERVER_STATUS = {
    "%00 in a path segment": {"lighttpd": 400, "nginx": 400, "apache": 404},
    "a 16 KiB header": {"lighttpd": 431, "nginx": 431, "apache": 400},
}


def _server_says(name):
    by = SERVER_STATUS.get(name)
    return "" if by is None else " (or the web server's page: %s)" % \
        ", ".join("%s %d" % (k, v) for k, v in sorted(by.items()))


def _case(name, send, status, slug, stage):
    @check("malformed: %s -> %s%s%s" % (name, status, " " + (
        slug if isinstance(slug, str) else "/".join(slug)) if slug else "",
        _server_says(name)))
    def _(t):
        before = t.db.counts()
        r = send(t)
        server = SERVER_STATUS.get(name, {}).get(t.fixture.split("-")[0])
        if stage == "server" and server is not None and not r.is_problem:
            # the web server answered before the app: its own page, with
            # the status it gives
            t.answered_by(t.fixture, r)
            t.expect_status(r, server)
        elif slug is None:
            t.answered_by("the app", r)
            t.expect_status(r, status)
        else:
            t.answered_by("the app", r)
            t.expect_problem(r, status, slug)
        # every stage is before the handler: nothing stored at all
        t.expect_counts_unchanged(before)
        why = t.alive()
        t.expect(why is None, "worker not alive afterwards: %s" % why)


for _c in CASES:
    _case(*_c)
