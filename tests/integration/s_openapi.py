"""s_openapi.py - the API describes itself: GET /openapi.json is an OpenAPI
3.1 document (checked against tests/integration/openapi31.schema.json with
jsonschema, its schemas as JSON Schema 2020-12) listing every route, whose
x-idempotency retention equals what the config enforces; problem types
resolve to the app's own /problems/<slug> pages, carry instance, and 400
and 422 answers send Link rel="describedby".  Each operation has an
operationId and a summary, each declared 2XX its schema (real answers
validate against it), its response headers, and only the problem types it
can answer; servers "/" without [openapi] server_url; /metrics as it
behaves.  (tests/openapi/run.py lints the document and type-checks a
generated client.)"""

import json
import os
import re

from harness import check
from env import NO_AUTH

PAY = "/v1/payments"
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "openapi31.schema.json")
ROUTES = {("post", "/v1/payments"), ("get", "/v1/payments"),
          ("get", "/v1/payments/{id}"), ("post", "/v1/payments/{id}/refunds"),
          ("get", "/healthz"), ("get", "/openapi.json"),
          ("get", "/problems/{slug}"), ("post", "/v1/webhook_endpoints"),
          ("get", "/v1/webhook_endpoints"),
          ("get", "/v1/webhook_endpoints/{id}"),
          ("delete", "/v1/webhook_endpoints/{id}"),
          ("post", "/v1/webhook_endpoints/{id}/enable"),
          ("post", "/v1/webhook_endpoints/{id}/recover")}
IDEMPOTENT = {("post", "/v1/payments"), ("post", "/v1/payments/{id}/refunds"),
              ("post", "/v1/webhook_endpoints"),
              ("post", "/v1/webhook_endpoints/{id}/recover")}
# Signed sources' routes (idem_app_inbox): keyed by the message id, not by
# an Idempotency-Key; their records kept 7 days unless [route] ttl says.
INBOX = {("post", "/v1/acquirer/events")}
INBOX_HEADERS = [{"webhook-id", "webhook-timestamp", "webhook-signature"},
                 {"Stripe-Signature"}]
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _jsonschema(t):
    try:
        import jsonschema
    except ImportError:
        t.skip("python3-jsonschema is not installed")
    return jsonschema


def _doc(t):
    r = t.get("/openapi.json", token=NO_AUTH)
    t.expect_status(r, 200)
    t.expect_eq((r.header("Content-Type") or "").split(";")[0],
                "application/json", "Content-Type")
    return r.json_or_fail()


def _seconds(v):
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d)?", v.strip())
    return int(m.group(1)) * UNITS[m.group(2) or "s"]


def _settings(path):
    """The config file's settings: {(section, key): value}."""
    sect, vals = None, {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split(";", 1)[0].strip()
            if line.startswith("["):
                sect = line.strip("[]")
            elif "=" in line:
                k, v = (s.strip() for s in line.split("=", 1))
                vals[(sect, k)] = v
    return vals


def _route(method, pattern):
    """The config's section of a route."""
    return 'route "%s %s"' % (method.upper(), pattern)


def _limits(path, method, pattern):
    """(ttl, lease) in seconds for a route, as the config sets them:
    [route "M /p"] over [idempotency] over the defaults (24h, 10s); lease
    or its deprecated alias lock_timeout."""
    vals = _settings(path)
    route = _route(method, pattern)
    out = []
    for keys, dflt in ((("ttl",), "24h"), (("lease", "lock_timeout"), "10s")):
        v = dflt
        for sect in ("idempotency", route):     # the route's wins
            for key in keys:
                v = vals.get((sect, key), v)
        out.append(_seconds(v))
    return tuple(out)


def _exclude(path, method, pattern):
    """A route's fingerprint_exclude pointers as the config writes them
    (commas and blanks between), or None."""
    v = _settings(path).get((_route(method, pattern), "fingerprint_exclude"))
    return None if v is None else re.split(r"[\s,]+", v)


def _remember(path, method, pattern):
    """A route's remember window in seconds, or None when it has none."""
    v = _settings(path).get((_route(method, pattern), "remember"))
    return None if v is None else _seconds(v)


def _ops(doc):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if not method.startswith("x-"):
                yield method, path, op


@check("openapi: GET /openapi.json (public) validates against the OpenAPI "
       "3.1 structure; every schema in it is valid JSON Schema 2020-12")
def _(t):
    js = _jsonschema(t)
    doc = _doc(t)
    with open(SCHEMA) as f:
        meta = json.load(f)
    errors = sorted(js.Draft202012Validator(meta).iter_errors(doc),
                    key=lambda e: list(e.path))
    t.expect(not errors, "not an OpenAPI 3.1 document: %s"
             % "; ".join("%s: %s" % ("/".join(map(str, e.path)), e.message)
                         for e in errors[:5]))
    t.expect_eq(doc["openapi"], "3.1.0", "openapi version")
    n = 0
    for method, path, op in _ops(doc):
        for media in op.get("requestBody", {}).get("content", {}).values():
            js.Draft202012Validator.check_schema(media["schema"])
            n += 1
    t.expect(n >= 2, "request body schemas found: %d" % n)
    n = 0
    for method, path, op in _ops(doc):
        for resp in op["responses"].values():
            for media in resp.get("content", {}).values():
                js.Draft202012Validator.check_schema(media["schema"])
                n += 1
    t.expect(n >= 10, "response schemas found: %d" % n)


@check("openapi: every route is listed, with its path parameters, and the "
       "path templates match them")
def _(t):
    doc = _doc(t)
    got = {(m, p) for m, p, _op in _ops(doc)}
    t.expect(ROUTES <= got, "routes missing: %s" % sorted(ROUTES - got))
    for method, path, op in _ops(doc):
        names = {p["name"] for p in op.get("parameters", ())
                 if p["in"] == "path"}
        t.expect_eq(names, set(re.findall(r"\{([^}]+)\}", path)),
                    "path parameters of %s %s" % (method, path))


@check("openapi: every idempotent route has a required Idempotency-Key "
       "header and x-idempotency whose retention and lock timeout equal the "
       "running config's; the others have neither")
def _(t):
    if not t.env.config:
        t.skip("no --config given: cannot compare with the config")
    doc = _doc(t)
    for method, path, op in _ops(doc):
        keys = [p for p in op.get("parameters", ())
                if p["in"] == "header" and p["name"] == "Idempotency-Key"]
        x = op.get("x-idempotency")
        if (method, path) in INBOX:
            names = {p["name"] for p in op.get("parameters", ())
                     if p["in"] == "header" and p.get("required")}
            t.expect(not keys and names in INBOX_HEADERS and
                     op.get("security") == [] and x is not None and
                     x["retention_seconds"] == 7 * 86400,
                     "%s %s: its signature headers %r, no Idempotency-Key "
                     "nor API key, retention 7d: %r" % (method, path, names,
                                                         x))
            continue
        if (method, path) not in IDEMPOTENT:
            t.expect(not keys and x is None,
                     "%s %s is not idempotent but says so" % (method, path))
            continue
        t.expect(len(keys) == 1 and keys[0].get("required") is True,
                 "%s %s: Idempotency-Key header, required" % (method, path))
        ttl, lto = _limits(t.env.config, method,
                           re.sub(r"\{([^}]+)\}", r":\1", path))
        want = {"required": True, "retention_seconds": ttl,
                "lease_seconds": lto, "lock_timeout_seconds": lto}
        exclude = _exclude(t.env.config, method,
                           re.sub(r"\{([^}]+)\}", r":\1", path))
        if exclude is not None:
            want["fingerprint_exclude"] = exclude
        remember = _remember(t.env.config, method,
                             re.sub(r"\{([^}]+)\}", r":\1", path))
        if remember is not None:
            want["remember_seconds"] = remember
        t.expect_eq(x, want, "x-idempotency of %s %s" % (method, path))
    # The sample sets a week for payments: the document must say so.
    t.expect_eq(doc["paths"][PAY]["post"]["x-idempotency"]
                ["retention_seconds"], _limits(t.env.config, "post", PAY)[0],
                "payments retention")


@check("openapi: the create's body schema admits a valid payment and refuses "
       "what the server refuses (missing, out of range, unknown members)")
def _(t):
    js = _jsonschema(t)
    doc = _doc(t)
    schema = (doc["paths"][PAY]["post"]["requestBody"]["content"]
              ["application/json"]["schema"])
    v = js.Draft202012Validator(schema)
    good = {"amount": 100, "currency": "eur", "description": None,
            "metadata": {"order": "42"}}
    t.expect(v.is_valid(good), "a valid payment is refused by the schema")
    r = t.post(PAY, good, key=t.new_key())
    t.expect_status(r, 201)
    for body in ({"currency": "eur"}, {"amount": 0, "currency": "eur"},
                 {"amount": 1, "currency": "EUR"},
                 {"amount": 1, "currency": "eur", "amuont": 1},
                 {"amount": 1, "currency": "eur", "metadata": {"a": 1}},
                 {"amount": 1, "currency": "eur", "customer": ""}):
        t.expect(not v.is_valid(body), "schema admits %r" % body)
        r = t.post(PAY, body, key=t.new_key())
        t.expect_problem(r, 400, "validation-error")


@check("problems: every type is relative to the app (no foreign domain), "
       "resolves to a public text/html page naming its title and status; an "
       "unknown slug is a 404 problem")
def _(t):
    doc = _doc(t)
    text = json.dumps(doc)
    t.expect("idem.dev" not in text, "the document names idem.dev")
    types = doc["x-problem-types"]
    t.expect(len(types) >= 14, "problem types listed: %d" % len(types))
    for p in types:
        t.expect(p["type"].startswith("/problems/"),
                 "type %r is not the app's own" % p["type"])
        r = t.get(p["type"], token=NO_AUTH)
        t.expect_status(r, 200)
        t.expect_eq((r.header("Content-Type") or "").split(";")[0],
                    "text/html", "Content-Type of %s" % p["type"])
        page = r.body.decode()
        t.expect(p["title"] in page.replace("&quot;", '"') and
                 str(p["status"]) in page, "page of %s: %r"
                 % (p["type"], page[:200]))
    r = t.get("/problems/no-such-type", token=NO_AUTH)
    t.expect_problem(r, 404, "not-found")


@check("problems: a 400 and a 422 carry Link <type>; rel=\"describedby\" "
       "and instance (16 hex digits), replayed as stored; a 401 carries "
       "instance and no Link")
def _(t):
    # The handler's 400 (more than remains to refund) is stored.
    p, _ = t.create_payment(amount=300)
    path = PAY + "/" + p["id"] + "/refunds"
    k = t.new_key()
    r = t.post(path, {"amount": 301}, key=k)
    doc = t.expect_problem(r, 400, "validation-error", detail_has="amount")
    t.expect_eq(r.header("Link"), '<%s>; rel="describedby"' % doc["type"],
                "Link of the 400")
    t.expect(re.fullmatch(r"[0-9a-f]{16}", doc.get("instance", "")),
             "instance %r" % doc.get("instance"))
    again = t.post(path, {"amount": 301}, key=k)
    t.expect_eq(again.body, r.body, "replayed body (instance included)")
    t.expect_eq(again.header("Link"), r.header("Link"), "replayed Link")
    r = t.post(path, {"amount": 1}, key=k)
    doc = t.expect_problem(r, 422, "idempotency-key-reused")
    t.expect_eq(r.header("Link"), '<%s>; rel="describedby"' % doc["type"],
                "Link of the 422")
    r = t.get(PAY, token="sk_" + "0" * 64)
    doc = t.expect_problem(r, 401, "unauthorized")
    t.expect(r.header("Link") is None and
             re.fullmatch(r"[0-9a-f]{16}", doc.get("instance", "")),
             "401: no Link, an instance")


# Field values and whether each is a key (written here, not taken from the
# document): the documented pattern and the server must both agree.
KEY_VALUES = [
    ('"abc"', True), ("abc", True), ("*k", True), ('"K;x=1"', True),
    ("8e0f2a3c-5b7d-4e1f-9a2b-0c3d4e5f6a7b", True), ("1K", True),
    ("_b64-url", True), ('"a\\"b"', True), (" padded ", True),
    ("k" * 255, True), ("k" * 256, False),
    ("12345", False), ("12.5", False), ("?1", False), (":aGVsbG8=:", False),
    ("@1659578233", False), ('%"x"', False), ("K;x=1", False),
    ('"K";x=1', False), ("K, L", False), ("(a b)", False), ('""', False),
    ('"a\\qb"', False), ("a\\b", False), ('"abc', False),
]


@check("openapi: the Idempotency-Key pattern and the server agree on %d "
       "field values" % len(KEY_VALUES))
def _(t):
    doc = _doc(t)
    op = doc["paths"]["/v1/payments"]["post"]
    schema = [p for p in op["parameters"]
              if p["name"] == "Idempotency-Key"][0]["schema"]
    pattern = re.compile(schema["pattern"])
    for value, is_key in KEY_VALUES:
        t.expect_eq(bool(pattern.search(value)) and
                    len(value) <= schema["maxLength"], is_key,
                    "the pattern on %r" % value)
        r = t.post(PAY, t.payment_body(), key=value if not is_key else
                   value.replace("abc", t.new_key("oa")))
        if is_key:
            # either-or: a key without "abc" is the same in every run and fixture:
            # 201 the first time, 422 once an earlier body holds it
            t.expect(r.status in (201, 422), "%r: got %s" % (value,
                                                             r.status))
        else:
            t.expect_problem(r, 400, "idempotency-key-invalid")


def _schema(doc, method, path, status):
    """The JSON schema of one declared success, or None."""
    op = doc["paths"][path][method]
    return (op["responses"].get(str(status), {}).get("content", {})
            .get("application/json", {}).get("schema"))


@check("openapi: each operation has an operationId (unique) and a summary; "
       "each of the sample's operations declares its 2XX with a schema, and "
       "real answers validate against it (create, read, list with limit, "
       "refund, /healthz)")
def _(t):
    js = _jsonschema(t)
    doc = _doc(t)
    ids = [op.get("operationId") for _m, _p, op in _ops(doc)]
    t.expect(all(ids) and len(set(ids)) == len(ids), "operationIds: %r"
             % ids)
    for method, path, op in _ops(doc):
        t.expect(op.get("summary"), "%s %s: no summary" % (method, path))
        t.expect([c for c in op["responses"] if c.startswith("2")],
                 "%s %s: no 2XX" % (method, path))
        t.expect([c for c in op["responses"] if c.startswith("4")],
                 "%s %s: no 4xx" % (method, path))
    p, r = t.create_payment(amount=700, description=None)
    answers = [("post", PAY, 201, p),
               ("get", PAY + "/{id}", 200, t.get(PAY + "/" + p["id"]))]
    page = t.get(PAY + "?limit=1")
    t.expect_status(page, 200)
    answers.append(("get", PAY, 200, page))
    ref = t.post(PAY + "/" + p["id"] + "/refunds", {"amount": 5},
                 key=t.new_key())
    t.expect_status(ref, 201)
    answers.append(("post", PAY + "/{id}/refunds", 201, ref))
    answers.append(("get", "/healthz", 200, t.get("/healthz",
                                                  token=NO_AUTH)))
    for method, path, status, got in answers:
        body = got if isinstance(got, dict) else got.json_or_fail()
        schema = _schema(doc, method, path, status)
        t.expect(schema is not None, "%s %s: no schema for %d"
                 % (method, path, status))
        errs = [e.message for e in js.Draft202012Validator(schema)
                .iter_errors(body)]
        t.expect(not errs, "%s %s %d: the answer does not match its schema: "
                 "%s" % (method, path, status, "; ".join(errs[:3])))
    t.expect_eq(len(page.json_or_fail()["data"]), 1, "limit=1")


@check("openapi: response headers: Location on the create's 201, "
       "Idempotency-Key-Expires and Idempotent-Replayed on the idempotent "
       "routes' answers, Retry-After on every 409 and 503; a replay sends "
       "what is declared")
def _(t):
    doc = _doc(t)
    heads = doc["components"]["headers"]
    t.expect({"Location", "IdempotencyKeyExpires", "IdempotentReplayed",
              "RetryAfter"} <= set(heads), "components/headers: %r"
             % sorted(heads))

    def declared(method, path, status):
        return set(doc["paths"][path][method]["responses"][str(status)]
                   .get("headers", {}))
    created = declared("post", PAY, 201)
    t.expect({"Location", "Idempotency-Key-Expires",
              "Idempotent-Replayed"} <= created, "201 headers: %r" % created)
    for method, path, op in _ops(doc):
        for code in ("409", "503"):
            if code in op["responses"]:
                t.expect("Retry-After" in declared(method, path, code),
                         "%s %s %s: no Retry-After" % (method, path, code))
    k = t.new_key()
    first = t.post(PAY, t.payment_body(), key=k)
    again = t.post(PAY, t.payment_body(), key=k)
    t.expect_status(again, 201)
    for r in (first, again):
        t.expect(r.header("Location") and
                 r.header("Idempotency-Key-Expires"),
                 "Location and Idempotency-Key-Expires sent")
    t.expect_eq(again.header("Idempotent-Replayed"), "true",
                "Idempotent-Replayed of the replay")


@check("openapi: servers \"/\" without [openapi] server_url; application "
       "problem types only on the routes that declare them (payment-declined "
       "only with an acquirer); /metrics (if served here) asks no credentials "
       "and answers without them")
def _(t):
    doc = _doc(t)
    conf = ""
    if t.env.config:
        with open(t.env.config) as f:
            conf = f.read()
    if "server_url" not in conf:
        t.expect(doc.get("servers") == [{"url": "/"}],
                 "servers: %r" % doc.get("servers"))
    types = {p["type"]: p["status"] for p in doc["x-problem-types"]}
    t.expect(types.get("/problems/payment-declined") == 402,
             "payment-declined listed with 402")
    on_402 = [(m, p) for m, p, op in _ops(doc) if "402" in op["responses"]]
    t.expect_eq(on_402, [("post", PAY)] if "acquirer_url" in conf else [],
                "operations that can answer 402")
    for method, path, op in _ops(doc):
        for code, resp in op["responses"].items():
            if "application/problem+json" not in resp.get("content", {}):
                continue
            enum = (resp["content"]["application/problem+json"]["schema"]
                    ["allOf"][1]["properties"]["type"]["enum"])
            t.expect(all(types.get(u) == int(code) for u in enum),
                     "%s %s %s: %r" % (method, path, code, enum))
    m = doc["paths"].get("/metrics", {}).get("get")
    if m is None:
        t.note("/metrics is not served on this socket ([metrics] listen)")
        return
    t.expect(m["security"] == [] and "401" not in m["responses"],
             "/metrics: security %r, responses %r"
             % (m["security"], sorted(m["responses"])))
    r = t.get("/metrics", token=NO_AUTH)
    # either-or: a local-only route, 404 when the web server hands on a
    # peer that is not loopback; the 200's body is checked below
    t.expect(r.status in (200, 404), "GET /metrics without credentials: %s"
             % r.status)
    if r.status == 200:
        t.expect((r.header("Content-Type") or "").startswith("text/plain"),
                 "Content-Type of /metrics")
