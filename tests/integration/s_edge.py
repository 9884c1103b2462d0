"""s_edge.py - the edge the web server and the app show a client (issue
20, items 5-6): HEAD on every GET route answers the GET's status and
headers (Content-Length included) without a body; the errors the web
server answers itself (a body over its limit, a 64 KiB header, a DEL byte
in a header, HTTP/9.9, a backend that is down) are application/problem+json
from the sample config's static pages, each with a type under the app's
problem_base whose page resolves.  What each server does differs; the
table below says it per fixture."""

from env import NO_AUTH
from harness import check

PROBLEM_BASE = "/problems/"

# Per fixture: the status the server itself answers, or None where it
# passes the request on to the app (then the app's answer is checked).
#   header64k: a 64 KiB header field; del: a DEL byte in a header value;
#   http99: "HTTP/9.9"; down: a mount of the fixture's config whose
#   backend is not running (the sample's error pages apply to it too).
EDGE = {
    "lighttpd":           {"header64k": 431, "del": 400, "http99": 505,
                           "down": 503},
    "lighttpd-spawnfcgi": {"header64k": 431, "del": 400, "http99": 505,
                           "down": 503},
    # nginx says 494 for too large headers; the sample answers it as 431.
    # It passes a DEL byte in a header value on to the app.
    "nginx":              {"header64k": 431, "del": None, "http99": 505,
                           "down": 502},
    # Apache says 400 (not 431) for a too large header field and passes
    # HTTP/9.9 on to the app.
    "apache-proxy":       {"header64k": 400, "del": 400, "http99": None,
                           "down": 503},
    "apache-fcgid":       {"header64k": 400, "del": 400, "http99": None,
                           "down": None},
}
SLUG = {400: "bad-request", 413: "payload-too-large", 431:
        "header-fields-too-large", 502: "bad-gateway", 503:
        "service-unavailable", 505: "http-version-not-supported"}


def edge(t, what):
    row = EDGE.get(t.env.fixture)
    if row is None:
        t.skip("no expectations for fixture %s" % t.env.fixture)
    return row[what]


def server_problem(t, r, status):
    """r: the server's own status answered as problem+json from the
    sample's page, whose type resolves to the app's page of that type."""
    t.answered_by("the web server's error page")
    doc = t.expect_problem(r, status, SLUG[status])
    t.expect_eq(doc["type"], PROBLEM_BASE + SLUG[status], "problem type")
    page = t.get(doc["type"], token=NO_AUTH)
    t.expect_eq(page.status, 200, "GET %s (the type's page)" % doc["type"])
    t.expect((page.header("Content-Type") or "").startswith("text/html"),
             "the type's page is HTML: %r" % page.header("Content-Type"))
    t.expect(SLUG[status].encode() in page.body,
             "the page documents %s" % SLUG[status])


def head_like_get(t, path, token=None):
    kw = {} if token is None else {"token": token}
    g = t.get(path, **kw)
    h = t.request("HEAD", path, **kw)
    t.expect_eq(h.status, g.status, "HEAD %s status (the GET's)" % path)
    t.expect_eq(h.body, b"", "HEAD %s body" % path)
    for name in ("Content-Type", "Content-Length"):
        t.expect_eq(h.header(name), g.header(name),
                    "HEAD %s %s (the GET's)" % (path, name))
    t.expect_eq(h.header("Content-Length"), str(len(g.body)),
                "HEAD %s Content-Length vs the GET's body" % path)
    return g


@check("HEAD on every GET route: the GET's status, Content-Type and "
       "Content-Length, no body (/healthz, /openapi.json, a problem "
       "type's page, /v1/payments, /v1/payments/:id, an unknown id)")
def _(t):
    t.expect_eq(head_like_get(t, "/healthz", NO_AUTH).status, 200,
                "GET /healthz")
    t.expect_eq(head_like_get(t, "/openapi.json", NO_AUTH).status, 200,
                "GET /openapi.json")
    t.expect_eq(head_like_get(t, PROBLEM_BASE + "not-found",
                              NO_AUTH).status, 200, "GET problem page")
    t.expect_eq(head_like_get(t, "/v1/payments").status, 200,
                "GET /v1/payments")
    p, _ = t.create_payment()
    t.expect_eq(head_like_get(t, "/v1/payments/%s" % p["id"]).status, 200,
                "GET /v1/payments/:id")
    t.expect_eq(head_like_get(t, "/v1/payments/pay_nope").status, 404,
                "GET an unknown payment")
    t.expect_eq(head_like_get(t, "/v1/payments", NO_AUTH).status, 401,
                "GET /v1/payments without credentials")


@check("405 on a GET route lists HEAD in Allow")
def _(t):
    r = t.post("/healthz", {}, token=NO_AUTH, key=t.new_key("edge"))
    t.expect_problem(r, 405, "method-not-allowed")
    t.expect_eq(r.header("Allow"), "GET, HEAD", "Allow")


@check("a body over the web server's limit (Content-Length 64 MiB) -> "
       "413 problem+json from the sample's page")
def _(t):
    r = t.raw(("POST /v1/payments HTTP/1.1\r\nHost: %s\r\n"
               "Content-Type: application/json\r\n"
               "Content-Length: %d\r\nConnection: close\r\n\r\n"
               % (t.env.host, 64 << 20)).encode() + b"{" * 4096)
    server_problem(t, r, 413)


@check("a 64 KiB header field -> 431 (Apache: 400) problem+json from the "
       "sample's page")
def _(t):
    want = edge(t, "header64k")
    r = t.raw(("GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\n"
               "Connection: close\r\n\r\n"
               % (t.env.host, "a" * 65536)).encode())
    server_problem(t, r, want)


@check("a DEL byte in a header value -> 400 problem+json from the "
       "sample's page (nginx: passed on, the app answers)")
def _(t):
    want = edge(t, "del")
    r = t.raw(("GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Odd: a\x7fb\r\n"
               "Connection: close\r\n\r\n" % t.env.host).encode())
    if want is None:
        t.answered_by("the app")
        t.expect_status(r, 200)
        t.expect_eq(r.json_or_fail().get("status"), "ok", "/healthz body")
        return
    server_problem(t, r, want)


@check("HTTP/9.9 -> 505 problem+json from the sample's page (Apache: "
       "passed on, the app answers)")
def _(t):
    want = edge(t, "http99")
    r = t.raw(("GET /healthz HTTP/9.9\r\nHost: %s\r\n"
               "Connection: close\r\n\r\n" % t.env.host).encode())
    if want is None:
        t.answered_by("the app")
        t.expect_status(r, 200)
        return
    server_problem(t, r, want)


@check("a backend that is down -> 502/503 problem+json from the sample's "
       "page")
def _(t):
    want = edge(t, "down")
    if want is None:
        t.skip("mod_fcgid starts its backends itself: no mount to a "
               "backend that is down in this fixture")
    r = t.get("/.idem-test-down/healthz", token=NO_AUTH)
    server_problem(t, r, want)
