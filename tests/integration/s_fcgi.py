"""s_fcgi.py - the app spoken to directly over FastCGI, on the socket the
fixture's web server uses.  This reaches what no web server lets through
(CONTENT_LENGTH "abc", an empty Idempotency-Key) and shows what the app
itself does with CONTENT_LENGTH as each server sends it (absent, "",
"0")."""

import json
import socket
import time

from env import NO_AUTH
from harness import check

PAY = "/v1/payments"
VALID = json.dumps({"amount": 100, "currency": "usd"}).encode()


def fcheck(name):
    """A direct-FastCGI check: nothing stored, worker alive afterwards."""
    def deco(fn):
        @check("fcgi: " + name, needs=("fcgi",))
        def wrapper(t):
            t.expect_nothing_stored(fn)
        return fn
    return deco


def _post(t, body_len, stdin=VALID, key=None, **kw):
    p = t.fcgi_params("POST", PAY, body_len=body_len,
                      key=key if key is not None else t.new_key("fcgi"),
                      **kw)
    return t.fcgi(p, stdin)


@fcheck("CONTENT_LENGTH=abc -> 400 (from the app)")
def _(t):
    r = _post(t, "abc")
    t.expect_status(r, 400)
    t.expect(r.is_problem, "400 is not application/problem+json")
    t.expect_problem(r, 400, "validation-error")


@fcheck("CONTENT_LENGTH=-1 -> 400")
def _(t):
    r = _post(t, "-1")
    t.expect_problem(r, 400, "validation-error")


@fcheck("CONTENT_LENGTH=12abc -> 400")
def _(t):
    r = _post(t, "12abc")
    t.expect_problem(r, 400, "validation-error")


@fcheck("CONTENT_LENGTH with 30 digits -> 400 validation-error (not a "
        "number: more than 19 digits)")
def _(t):
    r = _post(t, "9" * 30)
    t.expect_problem(r, 400, "validation-error")


@fcheck("POST with CONTENT_LENGTH absent (= 0) -> 400 invalid-json")
def _(t):
    r = _post(t, None, stdin=b"")
    t.expect_problem(r, 400, "invalid-json")


@fcheck("POST with CONTENT_LENGTH empty (= 0) -> 400 invalid-json")
def _(t):
    r = _post(t, "", stdin=b"")
    t.expect_problem(r, 400, "invalid-json")


@fcheck("CONTENT_LENGTH over max_body -> 413 before any body is sent")
def _(t):
    p = t.fcgi_params("POST", PAY, body_len=str(2 * 1024 * 1024),
                      key=t.new_key("fcgi"))
    started = time.monotonic()
    try:
        r = t.fcgi(p, b"", send_stdin=False, timeout=10)
    except socket.timeout:
        t.fail("no answer within 10 s: the app waits for the body")
    t.expect_problem(r, 413, "payload-too-large")
    t.expect(time.monotonic() - started < 5, "413 took %.1fs"
             % (time.monotonic() - started))


@fcheck("HTTP_IDEMPOTENCY_KEY empty -> 400 idempotency-key-invalid")
def _(t):
    r = _post(t, str(len(VALID)), key="")
    t.expect_problem(r, 400, "idempotency-key-invalid")


for _label, _key in (("DEL (0x7f)", b"ab\x7fcd"), ("TAB inside", b"ab\tcd"),
                     ("byte 0x80", b"ab\x80cd"), ("newline", b"ab\ncd")):
    @fcheck("HTTP_IDEMPOTENCY_KEY with %s -> 400 idempotency-key-invalid"
            % _label)
    def _(t, key=_key):
        r = _post(t, str(len(VALID)), key=key)
        t.expect_problem(r, 400, "idempotency-key-invalid")


@fcheck("body shorter than CONTENT_LENGTH, then EOF -> 400 "
        "validation-error, nothing stored")
def _(t):
    r = _post(t, str(len(VALID) + 50))
    t.expect_problem(r, 400, "validation-error",
                     detail_has="shorter than Content-Length")


@check("fcgi: client goes away mid-body -> nothing stored under its key, "
       "worker alive; the retry with the key whole -> 201, not a replay",
       needs=("fcgi",))
def _(t):
    k = t.new_key("fcgi")
    p = t.fcgi_params("POST", PAY, body_len=str(len(VALID)), key=k)
    t.fcgi(p, VALID, close_after=5)
    # No sleep: the half request can never be handed to a worker (its
    # body never ends), so the retry must find the key free: a record of
    # it would answer a replay, a request still held a 409.
    again = t.fcgi(p, VALID)
    t.expect_status(again, 201)
    t.expect_not_replayed(again)
    t.expect_eq(t.db.int("select count(*) from idempotency_keys where "
                         "api_key_id = %d and key = '%s'" % (t.a.id, k)),
                1, "key records of this key (the retry's only)")
    why = t.alive()
    t.expect(why is None, "worker not alive afterwards: %s" % why)


@check("fcgi: GET /healthz with CONTENT_LENGTH absent, \"\" and \"0\" "
       "-> 200", needs=("fcgi",))
def _(t):
    for cl in (None, "", "0"):
        r = t.fcgi(t.fcgi_params("GET", "/healthz", body_len=cl,
                                 token=NO_AUTH))
        t.expect_eq(r.status, 200, "status with CONTENT_LENGTH %r" % cl)


@check("fcgi: POST /v1/payments directly -> 201, then replay",
       needs=("fcgi",))
def _(t):
    k = t.new_key("fcgi")
    p = t.fcgi_params("POST", PAY, body_len=str(len(VALID)), key=k)
    first = t.fcgi(p, VALID)
    t.expect_status(first, 201)
    again = t.fcgi(p, VALID)
    t.expect_replay_of(again, first)
