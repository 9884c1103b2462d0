"""s_idem.py - exactly-once: replay, reuse, canonical-JSON fingerprints,
in-flight keys, and 5xx leaving nothing behind."""

import threading
import time

from harness import check, q

PAY = "/v1/payments"


def _reused(t, path, body, key):
    """POST body to path under key, already used for another request:
    422 idempotency-key-reused, nothing stored."""
    before = t.db.counts()
    r = t.post(path, body, key=key)
    t.expect_problem(r, 422, "idempotency-key-reused")
    t.expect_counts_unchanged(before)


@check("replay: same key + same body -> same status, Content-Type, "
       "Location, byte-identical body, Idempotent-Replayed: true")
def _(t):
    k = t.new_key()
    body = t.payment_body(customer="cus_r", metadata={"a": "b"})
    first = t.post(PAY, body, key=k)
    t.expect_status(first, 201)
    t.expect_not_replayed(first)
    t.expect(first.header("Location"), "no Location on the first 201")
    n = t.db.int("select count(*) from payments")
    for _ in range(3):
        again = t.post(PAY, body, key=k)
        t.expect_replay_of(again, first)
    t.expect_eq(t.db.int("select count(*) from payments"), n,
                "payments rows after 3 replays")
    t.expect_eq(len(t.key_rows(t.a, k)), 1, "idempotency_keys rows")


@check("40 sequential retries of a completed request are all replays "
       "(never 409: nothing is in flight)")
def _(t):
    k = t.new_key()
    body = t.payment_body()
    first = t.post(PAY, body, key=k)
    t.expect_status(first, 201)
    got = []
    for i in range(40):
        r = t.post(PAY, body, key=k)
        got.append(r.status)
        if r.status != 201:
            t.fail("retry %d (sequential, after the 201 was received) "
                   "answered %s %s; statuses so far %s"
                   % (i + 1, r.status, r.problem_type(), got))
        t.expect_replay_of(r, first)


@check("retries right after a 422 and after a replay still replay "
       "(never 409)")
def _(t):
    k = t.new_key()
    body = t.payment_body(amount=321)
    first = t.post(PAY, body, key=k)
    t.expect_status(first, 201)
    for i in range(20):
        r = t.post(PAY, t.payment_body(amount=322), key=k)
        t.expect_problem(r, 422, "idempotency-key-reused")
        r = t.post(PAY, body, key=k)
        if r.status == 409:
            t.fail("round %d: a retry right after a 422 answered 409 "
                   "although nothing was in flight" % (i + 1))
        t.expect_replay_of(r, first)


@check("same key + different body -> 422 idempotency-key-reused, "
       "nothing new stored")
def _(t):
    k, first = t.keyed_payment(amount=500)
    _reused(t, PAY, t.payment_body(amount=501), k)
    # the original is still what the key replays
    again = t.post(PAY, t.payment_body(amount=500), key=k)
    t.expect_replay_of(again, first)


@check("same key + body differing only in a string's case -> 422")
def _(t):
    k = t.new_key()
    t.expect_status(t.post(PAY, t.payment_body(description="Abc"), key=k),
                    201)
    r = t.post(PAY, t.payment_body(description="abc"), key=k)
    t.expect_problem(r, 422, "idempotency-key-reused")


@check("same key on another path (payments key on /refunds) -> 422 "
       "idempotency-key-reused")
def _(t):
    k, first = t.keyed_payment()
    pid = first.json()["id"]
    _reused(t, PAY + "/" + pid + "/refunds", {}, k)
    t.expect_eq(t.payment_row(pid)["amount_refunded"], 0, "amount_refunded")


@check("same key on refunds of another payment -> 422 "
       "idempotency-key-reused")
def _(t):
    p1, _ = t.create_payment()
    p2, _ = t.create_payment()
    k = t.new_key()
    r = t.post(PAY + "/" + p1["id"] + "/refunds", {"amount": 10}, key=k)
    t.expect_status(r, 201)
    _reused(t, PAY + "/" + p2["id"] + "/refunds", {"amount": 10}, k)


@check("a key past its expires_at is forgotten: reuse executes afresh "
       "(no 422, no replay)")
def _(t):
    k, first = t.keyed_payment(amount=111)
    t.db.run("update idempotency_keys set expires_at = now() - interval "
             "'1 second', created_at = now() - interval '2 days' "
             "where api_key_id = %d and key = %s" % (t.a.id, q(k)))
    r = t.post(PAY, t.payment_body(amount=222), key=k)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    t.expect(r.json()["id"] != first.json()["id"], "same payment id")
    again = t.post(PAY, t.payment_body(amount=222), key=k)
    t.expect_replay_of(again, r)
    t.expect_eq(len(t.key_rows(t.a, k)), 1, "idempotency_keys rows")


# --- RFC 8785: equivalent JSON texts are the same request --------------------

BASE = (b'{"amount":1000,"currency":"usd","description":"A caf\xc3\xa9/x",'
        b'"metadata":{"k1":"v1","k2":"v2"}}')
EQUIVALENT = [
    ("members reordered",
     b'{"metadata":{"k2":"v2","k1":"v1"},"description":"A caf\xc3\xa9/x",'
     b'"currency":"usd","amount":1000}'),
    ("whitespace and newlines",
     b' {\n\t"amount" : 1000 ,\r\n "currency":"usd", "description" : '
     b'"A caf\xc3\xa9/x" ,"metadata" : { "k1" : "v1" , "k2":"v2" } }\n'),
    ("\\u0041 for A and \\u00e9 for \xc3\xa9",
     b'{"amount":1000,"currency":"usd","description":"\\u0041 caf\\u00e9/x",'
     b'"metadata":{"k1":"v1","k2":"v2"}}'),
    ("\\/ for /",
     b'{"amount":1000,"currency":"usd","description":"A caf\xc3\xa9\\/x",'
     b'"metadata":{"k1":"v1","k2":"v2"}}'),
    ("escaped member name",
     b'{"\\u0061mount":1000,"currency":"usd","description":"A caf\xc3\xa9/x",'
     b'"metadata":{"k1":"v1","k2":"v2"}}'),
]

for _label, _variant in EQUIVALENT:
    @check("canonical JSON: %s -> replay, not 422" % _label)
    def _(t, variant=_variant):
        k = t.new_key("jcs")
        first = t.post(PAY, BASE, key=k)
        t.expect_status(first, 201)
        n = t.db.int("select count(*) from payments")
        again = t.post(PAY, variant, key=k)
        t.expect_replay_of(again, first)
        t.expect_eq(t.db.int("select count(*) from payments"), n,
                    "payments rows")


# The same amount spelled as a non-integer literal: the canonical form would
# be the same (RFC 8785), but an integer member takes integer literals only,
# so it is refused before the handler and the key stays as it was.
INEXACT = [b"1000.0", b"1e3", b"10.00E+2"]

for _lit in INEXACT:
    @check("canonical JSON: amount %s for 1000 -> 400 validation-error, "
           "the key's 201 untouched" % _lit.decode())
    def _(t, lit=_lit):
        k = t.new_key("jcs")
        first = t.post(PAY, BASE, key=k)
        t.expect_status(first, 201)
        before = t.db.counts()
        r = t.post(PAY, BASE.replace(b'"amount":1000', b'"amount":' + lit),
                   key=k)
        t.expect_problem(r, 400, "validation-error", detail_has="amount")
        t.expect_counts_unchanged(before)
        again = t.post(PAY, BASE, key=k)
        t.expect_replay_of(again, first)


# --- a key whose first request is still executing -----------------------------

def _trigger(t, name, table, when, action):
    fn = "idem_test_%s_%s" % (name, t.run_id)
    t.db.run(
        "create function %s() returns trigger language plpgsql as $$ "
        "begin if %s then %s; end if; return new; end $$; "
        "create trigger %s before insert on %s for each row "
        "execute function %s();" % (fn, when, action, fn, table, fn))
    return "drop trigger if exists %s on %s; drop function if exists %s();" \
        % (fn, table, fn)


@check("same key while the first is executing -> 409 "
       "idempotency-key-in-flight, Retry-After: 1; then replay")
def _(t):
    desc = "slow-" + t.run_id
    drop = _trigger(t, "slow", "payments",
                    "new.description = %s" % q(desc),
                    "perform pg_sleep(3)")
    try:
        k = t.new_key()
        body = t.payment_body(description=desc)
        out = {}

        def first():
            try:
                out["r"] = t.env.post(PAY, body, key=k, timeout=30)
            except Exception as e:      # reported below
                out["e"] = e
        th = threading.Thread(target=first)
        th.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if t.db.int("select count(*) from pg_stat_activity "
                        "where wait_event = 'PgSleep'") > 0:
                break
            time.sleep(0.05)
        else:
            th.join()
            t.fail("the first request never reached the slow trigger: %r"
                   % (out.get("r").describe() if "r" in out else out))
        second = t.post(PAY, body, key=k, timeout=15)
        third = t.post(PAY, t.payment_body(description=desc, amount=7),
                       key=k, timeout=15)
        th.join(30)
        t.expect("r" in out, "first request failed: %r" % out.get("e"))
        t.expect_problem(second, 409, "idempotency-key-in-flight")
        t.expect_eq((second.header("Retry-After") or "").strip(), "1",
                    "Retry-After")
        # verdict.c: a key held in flight is 409 whatever the body (the
        # fingerprint is compared only against a finished record)
        t.expect_problem(third, 409, "idempotency-key-in-flight")
        t.expect_status(out["r"], 201)
        t.expect_not_replayed(out["r"])
        again = t.post(PAY, body, key=k)
        t.expect_replay_of(again, out["r"])
        t.expect_eq(t.db.int("select count(*) from payments where "
                             "description = %s" % q(desc)), 1,
                    "payments rows")
    finally:
        t.db.run(drop)


# --- 5xx stores nothing ---------------------------------------------------------

@check("handler 5xx (DB trigger raises) stores nothing; the retry "
       "executes afresh -> 201")
def _(t):
    desc = "boom"
    k = t.new_key()
    body = t.payment_body(description=desc, customer="cus_" + t.run_id)
    n_boom = t.db.int("select count(*) from payments where api_key_id = %d "
                      "and description = 'boom' and customer = %s"
                      % (t.a.id, q(body["customer"])))
    drop = _trigger(t, "boom", "payments", "new.description = 'boom'",
                    "raise exception 'boom (test trigger)'")
    try:
        before = t.db.counts()
        r = t.post(PAY, body, key=k)
        t.expect_problem(r, (500, 503), ("internal-error",
                                         "service-unavailable"))
        t.expect_eq(t.key_rows(t.a, k), [], "idempotency_keys rows")
        t.expect_counts_unchanged(before)
        # still failing, still nothing stored (not a stored 500 replay)
        r = t.post(PAY, body, key=k)
        t.expect_problem(r, (500, 503), ("internal-error",
                                         "service-unavailable"))
        t.expect(not r.replayed, "a 5xx was replayed")
    finally:
        t.db.run(drop)
    r = t.post(PAY, body, key=k)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    t.expect_eq(t.db.int("select count(*) from payments where api_key_id = "
                         "%d and description = 'boom' and customer = %s"
                         % (t.a.id, q(body["customer"]))), n_boom + 1,
                "payments rows after the retry")
    t.expect_eq(len(t.key_rows(t.a, k)), 1, "idempotency_keys rows")


@check("refund 5xx (DB trigger raises) stores nothing; the retry "
       "executes afresh -> 201")
def _(t):
    p, _ = t.create_payment(amount=1000)
    path = PAY + "/" + p["id"] + "/refunds"
    k = t.new_key()
    drop = _trigger(t, "rboom", "refunds",
                    "new.payment_id = %s" % q(p["id"]),
                    "raise exception 'boom (test trigger)'")
    try:
        before = t.db.counts()
        r = t.post(path, {"amount": 250}, key=k)
        t.expect_problem(r, (500, 503), ("internal-error",
                                         "service-unavailable"))
        t.expect_counts_unchanged(before)
        t.expect_eq(t.payment_row(p["id"])["amount_refunded"], 0,
                    "amount_refunded after a failed refund")
    finally:
        t.db.run(drop)
    r = t.post(path, {"amount": 250}, key=k)
    t.expect_status(r, 201)
    t.expect_not_replayed(r)
    t.expect_eq(t.payment_row(p["id"])["amount_refunded"], 250,
                "amount_refunded after the retry")


@check("keep-alive: 20 requests on one HTTP connection (new, replays, "
       "422) answer correctly")
def _(t):
    import http.client
    conn = http.client.HTTPConnection(t.env.host, t.env.port, timeout=20)
    try:
        k = t.new_key("ka")
        body = t.env.encode_body(t.payment_body(amount=777))
        other = t.env.encode_body(t.payment_body(amount=778))
        hs = {"Authorization": "Bearer " + t.a.secret,
              "Content-Type": "application/json", "Idempotency-Key": k}
        first_body = None
        for i in range(20):
            b = other if i % 5 == 4 else body
            conn.request("POST", PAY, body=b, headers=hs)
            r = conn.getresponse()
            data = r.read()
            want = 422 if b is other else 201
            t.expect_eq(r.status, want, "request %d on the connection" % i)
            if want == 201:
                if first_body is None:
                    first_body = data
                t.expect_eq(data, first_body, "body of request %d" % i)
    finally:
        conn.close()


@check("a header spelled Idempotency_Key (underscore) is not taken for "
       "Idempotency-Key: 400 idempotency-key-missing, nothing stored")
def _(t):
    before = t.db.int("select count(*) from idempotency_keys")
    r = t.post(PAY, t.payment_body(), key=None,
               headers=[("Idempotency_Key", t.new_key())])
    t.expect_problem(r, 400, "idempotency-key-missing")
    t.expect_eq(t.db.int("select count(*) from idempotency_keys"), before,
                "idempotency_keys rows")
