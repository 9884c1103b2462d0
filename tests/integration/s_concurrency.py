"""s_concurrency.py - many requests at once."""

import threading
import time

from harness import check, q

PAY = "/v1/payments"


def _start(n, fn):
    """Start fn(i) in n threads released by one barrier; (threads, out):
    out[i] is None until fn(i) returned (an exception object where one
    raised)."""
    barrier = threading.Barrier(n)
    out = [None] * n

    def run(i):
        try:
            barrier.wait(30)
            out[i] = fn(i)
        except Exception as e:
            out[i] = e
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    return threads, out


def _together(n, fn):
    """Run fn(i) in n threads released by one barrier; results by index
    (an exception object where one raised)."""
    threads, out = _start(n, fn)
    for th in threads:
        th.join(120)
    return out


@check("64 concurrent identical requests, the first held in its payment's "
       "INSERT (a lock the test holds): exactly one payment, one fresh 201, "
       "the other 63 answered 409 in-flight while it is held; a retry "
       "after it replays it identically")
def _(t):
    k = t.new_key("burst")
    desc = "burst " + t.run_id
    body = t.payment_body(description=desc)
    # The owner's INSERT waits for a lock this session holds, so the 64
    # demonstrably overlap: the 63 others must be answered meanwhile.
    hold = t.db.session()
    drop = None
    try:
        hold.run("select pg_advisory_lock(4242, hashtext(%s))" % q(desc))
        drop = t.db.before_insert(
            "burst_%s" % t.run_id.replace("-", "_"), "payments",
            "new.description = %s" % q(desc),
            "perform pg_advisory_xact_lock(4242, hashtext(new.description))")
        threads, rs = _start(64, lambda i: t.env.post(PAY, body, key=k,
                                                      timeout=60))
        deadline = time.monotonic() + 30
        while (sum(r is not None for r in rs) < 63 and
               time.monotonic() < deadline):
            time.sleep(0.05)
        answered = [r for r in rs if r is not None]
        hold.close()
        for th in threads:
            th.join(120)
    finally:
        hold.close()
        if drop:
            t.db.run(drop)
    errors = [r for r in rs if isinstance(r, Exception)]
    t.expect(not errors, "%d requests failed, e.g. %r"
             % (len(errors), errors[:1]))
    t.expect(not [r for r in answered if r.status != 409], "answered "
             "while the first was held: %s" % sorted(r.status
                                                     for r in answered))
    fresh = [r for r in rs if r.status == 201 and not r.replayed]
    busy = [r for r in rs if r.status == 409]
    other = [r for r in rs if r.status not in (201, 409) or r.replayed]
    t.note("fresh %d, 409 %d, other %d (%d answered while held)"
           % (len(fresh), len(busy), len(other), len(answered)))
    t.expect(not other, "unexpected answers: %s"
             % "; ".join(r.describe()[:200] for r in other[:3]))
    t.expect_eq(len(fresh), 1, "non-replayed 201s")
    t.expect_eq(len(busy), 63, "409 answers")
    for r in busy:
        t.expect_problem(r, 409, "idempotency-key-in-flight")
        t.expect_eq((r.header("Retry-After") or "").strip(), "1",
                    "Retry-After")
    again = t.env.post(PAY, body, key=k, timeout=60)
    t.expect_replay_of(again, fresh[0])
    t.expect_eq(t.db.int("select count(*) from payments where api_key_id = "
                         "%d and description = %s" % (t.a.id, q(desc))), 1,
                "payments rows")
    t.expect_eq(len(t.key_rows(t.a, k)), 1, "idempotency_keys rows")


@check("concurrent refunds with different keys never exceed the amount")
def _(t):
    p, _ = t.create_payment(amount=1000)
    pid = p["id"]
    path = PAY + "/" + pid + "/refunds"
    keys = [t.new_key("cref") for _ in range(16)]
    rs = _together(16, lambda i: t.env.post(path, {"amount": 100},
                                            key=keys[i], timeout=60))
    errors = [r for r in rs if isinstance(r, Exception)]
    t.expect(not errors, "%d requests failed, e.g. %r"
             % (len(errors), errors[:1]))
    ok = [r for r in rs if r.status == 201]
    rejected = [r for r in rs if r.status == 400]
    other = [r for r in rs if r.status not in (201, 400)]
    t.expect(not other, "unexpected answers: %s"
             % "; ".join(r.describe()[:200] for r in other[:3]))
    for r in rejected:
        t.expect_problem(r, 400, "validation-error")
    row = t.payment_row(pid)
    total = t.db.int("select coalesce(sum(amount), 0) from refunds where "
                     "payment_id = %s" % q(pid))
    nrows = t.db.int("select count(*) from refunds where payment_id = %s"
                     % q(pid))
    t.expect(row["amount_refunded"] <= row["amount"],
             "amount_refunded %d exceeds amount %d"
             % (row["amount_refunded"], row["amount"]))
    t.expect_eq(total, row["amount_refunded"],
                "sum of refunds rows vs amount_refunded")
    t.expect_eq(nrows, len(ok), "refunds rows vs 201 answers")
    t.expect_eq(len(ok), 10, "201 answers (1000 / 100)")
    t.expect_eq(row["amount_refunded"], 1000, "amount_refunded")


@check("concurrent refunds with uneven amounts never exceed the amount")
def _(t):
    p, _ = t.create_payment(amount=1000)
    pid = p["id"]
    path = PAY + "/" + pid + "/refunds"
    amounts = [170, 230, 90, 310, 150, 260, 40, 120, 330, 70, 210, 180]
    keys = [t.new_key("uref") for _ in amounts]
    rs = _together(len(amounts), lambda i: t.env.post(
        path, {"amount": amounts[i]}, key=keys[i], timeout=60))
    t.expect(not [r for r in rs if isinstance(r, Exception)],
             "some requests failed")
    # either-or: each refund fits or not, by arrival order; the sums below
    # pin which did
    t.expect(all(r.status in (201, 400) for r in rs),
             "statuses %s" % sorted(r.status for r in rs))
    ok_sum = sum(amounts[i] for i, r in enumerate(rs) if r.status == 201)
    row = t.payment_row(pid)
    total = t.db.int("select coalesce(sum(amount), 0) from refunds where "
                     "payment_id = %s" % q(pid))
    t.expect(row["amount_refunded"] <= 1000, "amount_refunded %d > 1000"
             % row["amount_refunded"])
    t.expect_eq(total, row["amount_refunded"],
                "sum of refunds rows vs amount_refunded")
    t.expect_eq(ok_sum, total, "sum of 201 amounts vs refunds rows")
    # every rejected one really did not fit at the end
    for i, r in enumerate(rs):
        if r.status == 400:
            t.expect(amounts[i] > 1000 - row["amount_refunded"],
                     "refund of %d rejected although %d remained"
                     % (amounts[i], 1000 - row["amount_refunded"]))


@check("32 concurrent requests with different keys -> 32 fresh 201s, "
       "32 payments")
def _(t):
    desc = "spread " + t.run_id
    keys = [t.new_key("spread") for _ in range(32)]
    rs = _together(32, lambda i: t.env.post(
        PAY, t.payment_body(description=desc, amount=100 + i), key=keys[i],
        timeout=60))
    errors = [r for r in rs if isinstance(r, Exception)]
    t.expect(not errors, "%d requests failed, e.g. %r"
             % (len(errors), errors[:1]))
    t.expect_eq(sorted(r.status for r in rs), [201] * 32, "statuses")
    t.expect(not any(r.replayed for r in rs), "a replay among fresh keys")
    t.expect_eq(len({r.json()["id"] for r in rs}), 32, "distinct ids")
    t.expect_eq(t.db.int("select count(*) from payments where description "
                         "= %s" % q(desc)), 32, "payments rows")
