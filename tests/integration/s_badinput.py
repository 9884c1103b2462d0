"""s_badinput.py - hostile or broken requests, some as raw bytes on a
socket.  Each must get a clear 4xx, store nothing, and leave the worker
alive (the same app process answers /healthz afterwards).  Where the web
server answers before the app, the test name says so."""

import json

from harness import check

PAY = "/v1/payments"


def _raw_post(t, extra_headers, body, key=None, path=PAY):
    key = key if key is not None else t.new_key("raw").encode()
    head = (b"POST " + path.encode() + b" HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\n"
            b"Connection: close\r\n"
            b"Authorization: Bearer " + t.a.secret.encode() + b"\r\n"
            b"Content-Type: application/json\r\n"
            b"Idempotency-Key: " + key + b"\r\n")
    return t.raw(head + extra_headers + b"\r\n" + body)


def _clear_4xx(t, r, status=None, slug=None):
    """A 4xx; if it is the app's problem, it must be well-formed."""
    if r.is_problem:
        t.answered_by("the app", r)
        # The slug the app gives for this input, written in the check;
        # None: the app never sees this input (the server refuses it),
        # so a problem from it is itself wrong.
        t.expect(slug is not None, "the app answered a problem (%s) to "
                 "input the web server should refuse" % r.problem_type())
        t.expect_problem(r, status or r.status, slug)
    else:
        t.answered_by(t.fixture, r)
    if status:
        t.expect_status(r, status)
    t.expect(400 <= r.status < 500, "expected a 4xx, got %s" % r.status)


def _alive(t):
    why = t.alive()
    t.expect(why is None, "worker not alive afterwards: %s" % why)


def bad(name, needs=()):
    """Register a bad-input check: fn(t) sends it and asserts the answer;
    this wrapper asserts nothing stored and the worker alive."""
    def deco(fn):
        @check(name, needs=needs)
        def wrapper(t):
            if not getattr(t.env, "known_pids", None):
                t.remember_pids()
            before = t.db.counts()
            fn(t)
            t.expect_counts_unchanged(before)
            _alive(t)
        return fn
    return deco


VALID = json.dumps({"amount": 100, "currency": "usd"}).encode()


@bad("raw: Content-Length: abc -> 400")
def _(t):
    r = _raw_post(t, b"Content-Length: abc\r\n", VALID)
    _clear_4xx(t, r, 400, "validation-error")


@bad("raw: Content-Length: -1 -> 400")
def _(t):
    r = _raw_post(t, b"Content-Length: -1\r\n", VALID)
    _clear_4xx(t, r, 400, "validation-error")


@bad("raw: two different Content-Length headers -> 400")
def _(t):
    r = _raw_post(t, b"Content-Length: 2\r\nContent-Length: 30\r\n", VALID)
    _clear_4xx(t, r, 400)


@bad("raw: two Idempotency-Key header fields -> 400")
def _(t):
    k = t.new_key("dup").encode()
    r = _raw_post(t, b"Idempotency-Key: " + k + b"-2\r\n"
                  b"Content-Length: %d\r\n" % len(VALID), VALID, key=k)
    _clear_4xx(t, r, 400, "idempotency-key-invalid")


@bad("raw: NUL byte in Idempotency-Key -> 4xx")
def _(t):
    r = _raw_post(t, b"Content-Length: %d\r\n" % len(VALID), VALID,
                  key=b"abc\x00def")
    _clear_4xx(t, r, slug="idempotency-key-invalid")


@bad("raw: 64 KiB header -> 4xx")
def _(t):
    r = _raw_post(t, b"X-Filler: " + b"f" * 65536 + b"\r\n"
                  b"Content-Length: %d\r\n" % len(VALID), VALID)
    _clear_4xx(t, r)


@bad("raw: 300 KiB Idempotency-Key -> 4xx")
def _(t):
    r = _raw_post(t, b"Content-Length: %d\r\n" % len(VALID), VALID,
                  key=b"k" * (300 * 1024))
    _clear_4xx(t, r, slug="idempotency-key-invalid")


@bad("2 MiB body -> 413 payload-too-large")
def _(t):
    body = b'{"amount":100,"currency":"usd","description":"' + \
        b"x" * (2 * 1024 * 1024 - 50)
    body += b'"}'.rjust(2 * 1024 * 1024 - len(body), b" ")
    assert len(body) == 2 * 1024 * 1024
    r = _raw_post(t, b"Content-Length: %d\r\n" % len(body), body)
    if r.is_problem:
        t.answered_by("the app", r)
    else:
        t.answered_by(t.fixture, r)
    t.expect_problem(r, 413, "payload-too-large")


@bad("body of max_body + 1 bytes (1 MiB + 1) -> 413 payload-too-large")
def _(t):
    body = VALID + b" " * (1024 * 1024 + 1 - len(VALID))
    r = t.post(PAY, body, key=t.new_key())
    t.expect_problem(r, 413, "payload-too-large")


@check("body of exactly max_body (1 MiB, JSON padded with spaces) -> 201")
def _(t):
    body = VALID + b" " * (1024 * 1024 - len(VALID))
    r = t.post(PAY, body, key=t.new_key())
    t.expect_status(r, 201)


@bad("non-JSON body -> 400 invalid-json")
def _(t):
    r = t.post(PAY, b"\x00\x01\x02binary garbage\xff", key=t.new_key())
    t.expect_problem(r, 400, "invalid-json")


@bad("10000-level deep nesting -> 400")
def _(t):
    deep = b'{"amount":100,"currency":"usd","metadata":' + \
        b'{"a":' * 10000 + b'"x"' + b"}" * 10000 + b"}"
    r = t.post(PAY, deep, key=t.new_key())
    t.expect_problem(r, 400, ("invalid-json", "validation-error"))


@bad("10000-level deep array nesting -> 400")
def _(t):
    r = t.post(PAY, b"[" * 10000 + b"]" * 10000, key=t.new_key())
    t.expect_problem(r, 400, ("invalid-json", "validation-error"))


@bad("unterminated 10000-level nesting -> 400 invalid-json")
def _(t):
    r = t.post(PAY, b"[" * 10000, key=t.new_key())
    t.expect_problem(r, 400, "invalid-json")


@bad("invalid UTF-8 in a member name -> 400 invalid-json")
def _(t):
    r = t.post(PAY, b'{"amount":100,"currency":"usd","\xe9t\xe9":"x"}',
               key=t.new_key())
    t.expect_problem(r, 400, "invalid-json")


def _number_check(name, body):
    """A number the JSON layer refuses (invalid-json) or the declared body
    does (validation-error: an integer member takes integer literals within
    +-(2^53-1)); both before the handler: nothing stored."""
    @check(name)
    def _(t):
        if not getattr(t.env, "known_pids", None):
            t.remember_pids()
        before = t.db.counts()
        r = t.post(PAY, body, key=t.new_key())
        doc = t.expect_problem(r, 400, ("invalid-json", "validation-error"))
        after = t.db.counts()
        t.expect_eq(after["payments"], before["payments"], "payments rows")
        t.expect_eq(after["idempotency_keys"] - before["idempotency_keys"],
                    0, "new idempotency_keys rows for a %s"
                    % doc["type"].rsplit("/", 1)[-1])
        _alive(t)


_number_check("huge number literal (1e400) -> 400, no payment",
              b'{"amount":1' + b"0" * 400 + b',"currency":"usd"}')
_number_check("amount beyond 2^63 -> 400, no payment",
              b'{"amount":99999999999999999999,"currency":"usd"}')
_number_check("amount 2^63 exactly -> 400, no payment",
              b'{"amount":9223372036854775808,"currency":"usd"}')
_number_check("amount -2^63 - 1 -> 400, no payment",
              b'{"amount":-9223372036854775809,"currency":"usd"}')


@check("the worker is alive after the bad inputs: /healthz 200, "
       "a POST -> 201")
def _(t):
    _alive(t)
    r = t.post(PAY, t.payment_body(), key=t.new_key())
    t.expect_status(r, 201)
    if t.env.root_pids:
        t.expect(bool(t.pids()), "no payments.fcgi process found")
