"""s_tenants.py - keys and data are per tenant (API key)."""

from harness import check, q

PAY = "/v1/payments"


@check("tenants: same key + same body for tenants A and B -> two "
       "different payments, neither replayed")
def _(t):
    k = t.new_key("shared")
    body = t.payment_body(description="tenant " + t.run_id)
    ra = t.post(PAY, body, key=k, token=t.a)
    rb = t.post(PAY, body, key=k, token=t.b)
    t.expect_status(ra, 201)
    t.expect_status(rb, 201)
    t.expect_not_replayed(ra)
    t.expect_not_replayed(rb)
    ida, idb = ra.json()["id"], rb.json()["id"]
    t.expect(ida != idb, "both tenants got payment %s" % ida)
    t.expect_eq(t.payment_row(ida)["api_key_id"], t.a.id, "A's row owner")
    t.expect_eq(t.payment_row(idb)["api_key_id"], t.b.id, "B's row owner")
    t.expect_eq(len(t.key_rows(t.a, k)), 1, "A's key rows")
    t.expect_eq(len(t.key_rows(t.b, k)), 1, "B's key rows")
    # and each replays its own
    t.expect_replay_of(t.post(PAY, body, key=k, token=t.b), rb)
    t.expect_replay_of(t.post(PAY, body, key=k, token=t.a), ra)


@check("tenants: same key, different bodies per tenant -> no 422")
def _(t):
    k = t.new_key("shared2")
    t.expect_status(t.post(PAY, t.payment_body(amount=10), key=k,
                           token=t.a), 201)
    t.expect_status(t.post(PAY, t.payment_body(amount=20), key=k,
                           token=t.b), 201)


@check("tenants: B's GET of A's payment -> 404 not-found")
def _(t):
    p, _ = t.create_payment(tenant=t.a)
    r = t.get(PAY + "/" + p["id"], token=t.b)
    t.expect_problem(r, 404, "not-found")


@check("tenants: B's refund of A's payment -> 404 not-found, "
       "nothing refunded")
def _(t):
    p, _ = t.create_payment(tenant=t.a, amount=100)
    r = t.post(PAY + "/" + p["id"] + "/refunds", {"amount": 50},
               key=t.new_key(), token=t.b)
    t.expect_problem(r, 404, "not-found")
    t.expect_eq(t.payment_row(p["id"])["amount_refunded"], 0,
                "amount_refunded")
    t.expect_eq(t.db.int("select count(*) from refunds where payment_id = "
                         "%s" % q(p["id"])), 0, "refunds rows")


@check("tenants: list shows only the caller's own payments")
def _(t):
    pa, _ = t.create_payment(tenant=t.a)
    pb, _ = t.create_payment(tenant=t.b)
    for me, other, mine in ((t.a, t.b, pa), (t.b, t.a, pb)):
        r = t.get(PAY + "?limit=100", token=me)
        t.expect_status(r, 200)
        ids = [p["id"] for p in r.json_or_fail()["data"]]
        t.expect(mine["id"] in ids, "own newest payment not listed")
        owners = t.db.rows("select distinct api_key_id from payments where "
                           "id in (%s)" % ",".join(q(i) for i in ids))
        t.expect_eq([o["api_key_id"] for o in owners], [me.id],
                    "owners of listed payments")


@check("tenants: B listing with starting_after = A's payment id -> 400 "
       "validation-error (no such payment of B's), nothing of A's shown")
def _(t):
    pa, _ = t.create_payment(tenant=t.a)
    t.create_payment(tenant=t.b)
    r = t.get(PAY + "?limit=100&starting_after=" + pa["id"], token=t.b)
    # payments.c looks the cursor up among B's own payments only
    t.expect_problem(r, 400, "validation-error",
                     detail_has="starting_after: no such payment")
    t.expect(pa["id"] not in r.body.decode(errors="replace"),
             "the problem names A's payment id")
