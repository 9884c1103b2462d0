"""s_query.py - declared query parameters (idem_app_route_query): GET
/v1/payments declares limit (integer 1..100, default 10) and
starting_after (1 to 64 characters).  Whatever breaks the declaration is
refused before the handler with 400 validation-error listing every failure
as errors[{"parameter", "detail"}]; /openapi.json states the parameters."""

from harness import check

PAY = "/v1/payments"


def _errors(t, r):
    t.expect_problem(r, 400, "validation-error")
    return [(e.get("parameter"), e.get("detail"))
            for e in r.json_or_fail().get("errors", [])]


REFUSED = [
    ("limit=0", [("limit", "must be an integer from 1 to 100")]),
    ("limit=1.5", [("limit", "must be an integer from 1 to 100")]),
    ("limit=%2B5", [("limit", "must be an integer from 1 to 100")]),
    ("limit=5&limit=6", [("limit", "is given more than once")]),
    ("lmit=5", [("lmit", "is not a parameter of this operation")]),
    ("starting_after=", [("starting_after",
                          "must be 1 to 64 characters long")]),
    ("limit=0&starting_after=" + "p" * 65 + "&page=2",
     [("limit", "must be an integer from 1 to 100"),
      ("starting_after", "must be 1 to 64 characters long"),
      ("page", "is not a parameter of this operation")]),
]

for _q, _want in REFUSED:
    @check("query parameters: ?%s -> 400 validation-error, errors %s"
           % (_q[:40], [p for p, _ in _want]))
    def _(t, qs=_q, want=_want):
        r = t.get(PAY + "?" + qs)
        t.expect_eq(_errors(t, r), want, "errors")
        t.expect(r.json_or_fail()["detail"].startswith(
            "%s: %s" % want[0]), "detail names the first failure: %r"
            % r.json_or_fail()["detail"])


@check("query parameters: a malformed %-escape or an encoded NUL -> 400 "
       "validation-error (on the app's own socket: web servers refuse some "
       "such URLs themselves)", needs=("fcgi",))
def _(t):
    for qs in ("limit=%2", "limit=%zz", "limit=1%00"):
        r = t.fcgi(t.fcgi_params("GET", PAY, query=qs))
        t.expect_problem(r, 400, "validation-error")
        t.expect_eq(r.json_or_fail().get("errors"), None,
                    "errors member (%s: the query string as a whole)" % qs)


@check("query parameters: limit defaults to 10; 1 and 100 are accepted",
       needs=("idemctl",))
def _(t):
    ten = t.new_tenant("query")
    for i in range(11):
        t.create_payment(tenant=ten, amount=100 + i)
    doc = t.get(PAY, token=ten).json_or_fail()
    t.expect_eq((len(doc["data"]), doc["has_more"]), (10, True),
                "default page: (items, has_more)")
    for lim, want in (("1", (1, True)), ("100", (11, False))):
        doc = t.get(PAY + "?limit=" + lim, token=ten).json_or_fail()
        t.expect_eq((len(doc["data"]), doc["has_more"]), want,
                    "limit=%s: (items, has_more)" % lim)


@check("query parameters: /openapi.json lists them with their schemas")
def _(t):
    op = t.get("/openapi.json").json_or_fail()["paths"][PAY]["get"]
    got = {p["name"]: (p["required"], p["schema"])
           for p in op.get("parameters", []) if p["in"] == "query"}
    t.expect_eq(got, {
        "limit": (False, {"type": "integer", "minimum": 1, "maximum": 100,
                          "default": 10}),
        "starting_after": (False, {"type": "string", "minLength": 1,
                                   "maxLength": 64}),
    }, "query parameters of GET /v1/payments")
    t.expect("400" in op["responses"], "GET /v1/payments documents its 400")
