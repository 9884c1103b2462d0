"""s_boundary.py - the input boundary: the handler sees exactly what was
fingerprinted (no U+0000 in any string or member name), a body's values
are capped, an unknown API key is refused before its body is parsed, the
app's memory stays bounded whatever the body, and header spellings that a
web server maps onto Idempotency-Key or Authorization do not reach the
app as those."""

import json
import os
import time

from harness import check, instrumented
from env import NO_AUTH

PAY = "/v1/payments"
MIB = 1024 * 1024
# The app's defaults ([server] max_body, max_json_values; the cache's
# expiry IDEM_AUTH_CACHE_MS), as documented in idem(3).
MAX_BODY = MIB
MAX_VALUES = 10000
AUTH_CACHE_S = 5.0
# What a request may add to its process's peak RSS, as documented in
# idem(3).
RSS_BOUND = 16 * MAX_BODY


def zeros(size):
    """A JSON array of zeros, size bytes long: [0,0,...,0]."""
    n = (size - 1) // 2
    return b"[" + b"0," * (n - 1) + b"0]"


def refused(t, body, status, slug, says, what, prefix="nul"):
    """body POSTed under a new key -> status slug, its detail saying says
    (what: the check's words for it); nothing stored."""
    def fn(t):
        r = t.post(PAY, body, key=t.new_key(prefix))
        doc = t.expect_problem(r, status, slug)
        t.expect(says in doc.get("detail", ""),
                 "%s: %r" % (what, doc.get("detail")))
    t.expect_nothing_stored(fn)


# --- 1. U+0000 --------------------------------------------------------------

HIDDEN = (b'{"amount":100,"currency":"usd","description":"ok\\u0000%s",'
          b'"metadata":{"a\\u0000x":"1","a\\u0000y":"2"}}')


@check("U+0000 in a string and in member names (the review's body) -> 400 "
       "invalid-json, nothing stored; another hidden suffix under the same "
       "key -> 400 again, not 422")
def _(t):
    def fn(t):
        key = t.new_key("nul")
        r = t.post(PAY, HIDDEN % b"HIDDEN", key=key)
        doc = t.expect_problem(r, 400, "invalid-json")
        t.expect("U+0000" in doc.get("detail", ""),
                 "detail says why: %r" % doc.get("detail"))
        r = t.post(PAY, HIDDEN % b"OTHER", key=key)
        t.expect_problem(r, 400, "invalid-json")
    t.expect_nothing_stored(fn)


@check("U+0000 in a member name (\"amount\\u0000junk\") -> 400 invalid-json "
       "before the handler's allow-list sees \"amount\"")
def _(t):
    refused(t, b'{"amount\\u0000junk":100,"amount":100,"currency":"usd"}',
            400, "invalid-json", "member name",
            "detail names the member name")


@check("a raw NUL byte inside a JSON string -> 400 invalid-json saying so")
def _(t):
    refused(t, b'{"amount":100,"currency":"usd",'
            b'"description":"ok\x00HIDDEN"}', 400, "invalid-json", "NUL",
            "detail says why")


@check("an escaped backslash before u0000 is no NUL: 201, stored as sent")
def _(t):
    r = t.post(PAY, t.payment_body(description="a\\u0000b"),
               key=t.new_key("nul"))
    t.expect_status(r, 201)
    t.expect_eq(r.json().get("description"), "a\\u0000b", "description")


# --- 2. cap on values, unknown keys, memory ---------------------------------

@check("%d + 1 JSON values with a valid key -> 413 payload-too-large naming "
       "the cap, nothing stored" % MAX_VALUES)
def _(t):
    refused(t, b'{"amount":100,"currency":"usd","metadata":' +
            b"[" + b"0," * (MAX_VALUES - 4) + b"0]}", 413,
            "payload-too-large", "more than %d JSON values" % MAX_VALUES,
            "detail", prefix="cap")


@check("an unknown API key with an invalid JSON body -> 401 (refused "
       "before the body is parsed), not 400")
def _(t):
    def fn(t):
        r = t.post(PAY, b"{not json", key=t.new_key("unk"),
                   token="sk_bogus_%s" % t.env.run_id)
        t.expect_problem(r, 401, "unauthorized")
        t.expect_eq(r.header("WWW-Authenticate"), "Bearer",
                    "WWW-Authenticate")
    t.expect_nothing_stored(fn)


@check("an unknown API key with a 1 MiB [0,0,...] body -> 401")
def _(t):
    def fn(t):
        r = t.post(PAY, zeros(MAX_BODY), key=t.new_key("unk"),
                   token="sk_bogus_%s" % t.env.run_id)
        t.expect_problem(r, 401, "unauthorized")
    t.expect_nothing_stored(fn)


@check("a revoked key is refused before its body is parsed within the "
       "cache's expiry (%.0f s) of the revocation" % AUTH_CACHE_S,
       needs=("idemctl",))
def _(t):
    ten = t.new_tenant("revoked")
    r = t.post(PAY, t.payment_body(), key=t.new_key(), token=ten)
    t.expect_status(r, 201)
    # Known now: an invalid body gets as far as the JSON check.
    r = t.post(PAY, b"{not json", key=t.new_key(), token=ten)
    t.expect_problem(r, 400, "invalid-json")
    t.revoke(ten)
    revoked = time.monotonic()
    # The database is the authority: a valid body is refused at once.
    r = t.post(PAY, t.payment_body(), key=t.new_key(), token=ten)
    t.expect_problem(r, 401, "unauthorized")
    # And the cache lets it go within its expiry (at once, in the process
    # that saw flight 1 refuse it).
    while True:
        r = t.post(PAY, b"{not json", key=t.new_key(), token=ten)
        if r.status == 401 or time.monotonic() - revoked > AUTH_CACHE_S + 2:
            break
        time.sleep(0.05)
    t.expect_problem(r, 401, "unauthorized")
    t.note("refused before parsing %.2f s after the revocation"
           % (time.monotonic() - revoked))


def _rss_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def _reset_hwm(pid):
    """Peak RSS := current RSS (Linux: "5" to clear_refs); False if not."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@check("peak RSS (VmHWM) of an app process through unknown-key, over-cap, "
       "many-member, deep and 1 MiB string bodies: under its RSS before "
       "them + 16 x max_body, and under 32 MiB", needs=("pids",))
def _(t):
    pids = t.pids()
    if not pids:
        t.skip("no payments.fcgi process found (a wrapper in front?)")
    if any(instrumented(p) for p in pids):
        t.skip("the app runs under a sanitizer or valgrind")
    # The peak of this sequence, not of the suite's earlier scenarios.
    before = {}
    for pid in pids:
        before[pid] = _rss_kib(pid, "VmRSS") if _reset_hwm(pid) else 0
    bogus = "sk_bogus_%s" % t.env.run_id
    arr = zeros(MAX_BODY)
    members = b"{" + b",".join(b'"k%05d":0' % i
                               for i in range(MAX_VALUES - 1)) + b"}"
    deep = (b"[" * 60 + b"0" + b"]" * 60).ljust(MAX_BODY, b" ")
    text = (b'{"amount":100,"currency":"usd","description":"' +
            b"x" * (MAX_BODY - 64) + b'"}').ljust(MAX_BODY, b" ")
    escaped = (b'["' + b"\\u00e9" * ((MAX_BODY - 8) // 6) + b'"]')
    for _ in range(8):
        r = t.post(PAY, arr, key=t.new_key("rss"), token=bogus)
        t.expect_problem(r, 401, "unauthorized")
    for _ in range(4):
        r = t.post(PAY, arr, key=t.new_key("rss"))
        t.expect_problem(r, 413, "payload-too-large")
    # Each is refused for its own reason, named here: a parser that gave
    # up on a different one (or let one through) would show.
    got = []
    for body in (members, deep, text, escaped):
        r = t.post(PAY, body, key=t.new_key("rss"))
        got.append((r.status, r.problem_type().rsplit("/", 1)[-1]
                    if r.is_problem else None))
    t.expect_eq(got, [(400, "validation-error"), (400, "validation-error"),
                      (400, "validation-error"), (400, "validation-error")],
                "the answers to the many-member, deep, long-string and "
                "escaped bodies")
    for pid in sorted(t.pids()):
        hwm = _rss_kib(pid, "VmHWM")
        t.expect(hwm is not None, "VmHWM of pid %d readable" % pid)
        base = before.get(pid, 0)
        t.note("pid %d: VmHWM %d KiB, %d KiB above its RSS before"
               % (pid, hwm, hwm - base))
        t.expect((hwm - base) * 1024 < RSS_BOUND,
                 "pid %d peak RSS %d KiB above its RSS before (bound %d)"
                 % (pid, hwm - base, RSS_BOUND // 1024))
        t.expect(hwm * 1024 < 32 * MIB,
                 "pid %d peak RSS %d KiB (bound %d)" % (pid, hwm,
                                                       32 * MIB // 1024))


# --- 3. header spellings ----------------------------------------------------

# Every tchar but '-' (RFC 9110): what a web server may map to '_' in a
# CGI variable name.  lighttpd refuses other bytes in a field name.
ODD = "!#$%&'*+.^_`|~"


@check("Idempotency-Key spelt with any other tchar (%s) never reaches the "
       "app as the key: 400 idempotency-key-missing (or refused by the "
       "server), nothing stored" % ODD)
def _(t):
    def fn(t):
        for c in ODD:
            for name in ("Idempotency%sKey" % c, "idempotency%sKEY" % c):
                r = t.post(PAY, t.payment_body(), key=None,
                           headers=[(name, t.new_key("odd"))])
                if r.is_problem:
                    t.expect_problem(r, 400, "idempotency-key-missing")
                else:
                    t.answered_by(t.fixture, r)
                    t.expect(400 <= r.status < 500, "%s: %d"
                             % (name, r.status))
    t.expect_nothing_stored(fn)


@check("Idempotency-Key plus an odd spelling with another key: the record "
       "is under Idempotency-Key's value only")
def _(t):
    for c in ("_", ".", "~", "*"):
        real, other = t.new_key("real"), t.new_key("odd")
        r = t.post(PAY, t.payment_body(), key=real,
                   headers=[("Idempotency%sKey" % c, other)])
        if not r.is_problem and not (200 <= r.status < 300):
            t.answered_by(t.fixture, r)
            t.expect(400 <= r.status < 500, "%s: %d" % (c, r.status))
            continue
        t.expect_status(r, 201)
        t.expect_eq(len(t.key_rows(t.a, real)), 1,
                    "records under the real key (%r)" % c)
        t.expect_eq(len(t.key_rows(t.a, other)), 0,
                    "records under the odd spelling's key (%r)" % c)


@check("Authorization: case variants authenticate; spellings with another "
       "character, or two fields, do not (401), nothing stored")
def _(t):
    secret = "Bearer " + t.a.secret
    for name in ("authorization", "AUTHORIZATION"):
        r = t.post(PAY, t.payment_body(), key=t.new_key("au"),
                   token=NO_AUTH, headers=[(name, secret)])
        t.expect_status(r, 201)

    def fn(t):
        for name in ("Authorization_", "Author.ization", "X-Authorization",
                     "Authorization~"):
            r = t.post(PAY, t.payment_body(), key=t.new_key("au"),
                       token=NO_AUTH, headers=[(name, secret)])
            t.expect_problem(r, 401, "unauthorized")
        r = t.post(PAY, t.payment_body(), key=t.new_key("au"),
                   token=NO_AUTH, headers=[("Authorization", secret),
                                           ("Authorization", "Bearer x")])
        if r.is_problem:
            t.expect_problem(r, 401, "unauthorized")
        else:
            t.answered_by(t.fixture, r)
            t.expect(400 <= r.status < 500, "two fields: %d" % r.status)
    t.expect_nothing_stored(fn)
