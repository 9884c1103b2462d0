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
#   body: Content-Length 64 MiB; header64k: a 64 KiB header field; del: a DEL byte in a header value;
#   http99: "HTTP/9.9"; down: a mount of the fixture's config whose
#   backend is not running (the sample's error pages apply to it too).
EDGE = {
    "lighttpd":           {"body": 413, "header64k": 431, "del": 400, "http99": 505,
                           "down": 503},
    "lighttpd-spawnfcgi": {"body": 413, "header64k": 431, "del": 400, "http99": 505,
                           "down": 503},
    # nginx says 494 for too large headers; the sample answers it as 431.
    # It passes a DEL byte in a header value on to the app.
    "nginx":              {"body": 413, "header64k": 431, "del": None, "http99": 505,
                           "down": 502},
    # Apache says 400 (not 431) for a too large header field and passes
    # HTTP/9.9 on to the app.  A Content-Length over LimitRequestBody is
    # not answered 413 by Apache before the body: mod_fcgid hands the
    # request to the app (which answers), mod_proxy_fcgi streams the body
    # to the app and waits for the client's.
    "apache-proxy":       {"body": None, "header64k": 400, "del": 400, "http99": None,
                           "down": 503},
    "apache-fcgid":       {"body": None, "header64k": 400, "del": 400, "http99": None,
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
    t.answered_by("the web server's error page", r)
    doc = t.expect_problem(r, status, SLUG[status])
    t.expect_eq(doc["type"], PROBLEM_BASE + SLUG[status], "problem type")
    page = t.get(doc["type"], token=NO_AUTH)
    t.expect_eq(page.status, 200, "GET %s (the type's page)" % doc["type"])
    t.expect((page.header("Content-Type") or "").startswith("text/html"),
             "the type's page is HTML: %r" % page.header("Content-Type"))
    t.expect(SLUG[status].encode() in page.body,
             "the page documents %s" % SLUG[status])


def raw_healthz(t, header="", version="1.1"):
    """GET /healthz sent as it is written (t.raw), with one more header
    line (CRLF included), in HTTP/version."""
    return t.raw(("GET /healthz HTTP/%s\r\nHost: %s\r\n%s"
                  "Connection: close\r\n\r\n"
                  % (version, t.env.host, header)).encode())


def app_or_server(t, r, want):
    """want None: the server passed the request on and the app answered
    /healthz 200 (True); else the server's own want as server_problem."""
    if want is None:
        t.answered_by("the app", r)
        t.expect_status(r, 200)
        return True
    server_problem(t, r, want)
    return False


def head_like_get(t, path, token=None):
    kw = {} if token is None else {"token": token}
    g = t.get(path, **kw)
    h = t.request("HEAD", path, **kw)
    t.expect_eq(h.status, g.status, "HEAD %s status (the GET's)" % path)
    t.expect_eq(h.body, b"", "HEAD %s body" % path)
    for name in ("Content-Type", "Content-Length"):
        t.expect_eq(h.header(name), g.header(name),
                    "HEAD %s %s (the GET's)" % (path, name))
    # Apache's mod_proxy_fcgi answers both chunked, without the app's
    # Content-Length; elsewhere it is the GET body's length.
    if g.header("Content-Length") is not None or \
            t.env.fixture != "apache-proxy":
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
    if t.env.fcgi_addr:
        # The app's own answer, whatever the server makes of it.
        g = t.fcgi(t.fcgi_params("GET", "/healthz", token=NO_AUTH))
        h = t.fcgi(t.fcgi_params("HEAD", "/healthz", token=NO_AUTH))
        t.expect(h.status == g.status == 200 and h.body == b"" and
                 h.header("Content-Length") == str(len(g.body)) and
                 g.header("Content-Length") == str(len(g.body)),
                 "the app's HEAD /healthz on its socket: 200, "
                 "Content-Length %r (GET: %r, %d bytes), body %r"
                 % (h.header("Content-Length"), g.header("Content-Length"),
                    len(g.body), h.body[:50]))


@check("405 on a GET route lists HEAD in Allow")
def _(t):
    r = t.post("/healthz", {}, token=NO_AUTH, key=t.new_key("edge"))
    t.expect_problem(r, 405, "method-not-allowed")
    t.expect_eq(r.header("Allow"), "GET, HEAD", "Allow")


@check("a body over the web server's limit (Content-Length 64 MiB) -> "
       "413 problem+json from the sample's page (Apache mod_fcgid: the "
       "app answers, problem+json)")
def _(t):
    want = edge(t, "body")
    try:
        r = t.raw(("POST /v1/payments HTTP/1.1\r\nHost: %s\r\n"
                   "Content-Type: application/json\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n"
                   % (t.env.host, 64 << 20)).encode() + b"{" * 4096,
                  timeout=5 if want is None else 20)
    except OSError as e:
        if want is not None:
            raise
        t.skip("%s answers nothing before the whole body (%r): it streams "
               "the body to the app" % (t.env.fixture, e))
    if want is None:
        t.answered_by("the app", r)
        t.expect(400 <= r.status < 500, "a 4xx: %d" % r.status)
        t.expect_eq((r.header("Content-Type") or "").split(";")[0],
                    "application/problem+json", "Content-Type")
        return
    server_problem(t, r, want)


@check("a 64 KiB header field -> 431 (Apache: 400) problem+json from the "
       "sample's page")
def _(t):
    want = edge(t, "header64k")
    server_problem(t, raw_healthz(t, "X-Big: %s\r\n" % ("a" * 65536)), want)


@check("a DEL byte in a header value -> 400 problem+json from the "
       "sample's page (nginx: passed on, the app answers)")
def _(t):
    want = edge(t, "del")
    r = raw_healthz(t, "X-Odd: a\x7fb\r\n")
    if app_or_server(t, r, want):
        t.expect_eq(r.json_or_fail().get("status"), "ok", "/healthz body")


@check("HTTP/9.9 -> 505 problem+json from the sample's page (Apache: "
       "passed on, the app answers)")
def _(t):
    want = edge(t, "http99")
    app_or_server(t, raw_healthz(t, version="9.9"), want)


@check("a backend that is down -> 502/503 problem+json from the sample's "
       "page")
def _(t):
    want = edge(t, "down")
    if want is None:
        t.skip("mod_fcgid starts its backends itself: no mount to a "
               "backend that is down in this fixture")
    r = t.get("/.idem-test-down/healthz", token=NO_AUTH)
    server_problem(t, r, want)
