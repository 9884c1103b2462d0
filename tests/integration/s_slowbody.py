"""s_slowbody.py - a slow body holds no worker of the app: clients that
send half of a POST's body and stall, more of them than the app has
threads, through the web server (which may buffer the body, or stream it
to the app as Apache's mod_proxy_fcgi does), while /healthz must still
answer promptly; then each stalled request is finished and answered."""

import json
import socket
import time

import httpc
from env import NO_AUTH
from harness import check

PAY = "/v1/payments"
STALLED = 12            # more than the fixture's threads (8)
PROMPT = 1.0            # seconds for /healthz while they stall
# Fixtures whose server streams a body to the app as it comes (Apache's
# mod_proxy_fcgi); the others buffer it whole, so the app sees nothing of
# a stalled request.
STREAMING = ("apache-proxy",)


def _app_connections(addr):
    """Connections the app has accepted on its FastCGI address (a unix
    socket path or 127.0.0.1:PORT), from /proc/net."""
    if addr.startswith("/"):
        with open("/proc/net/unix") as f:
            rows = [ln.split() for ln in f.readlines()[1:]]
        # accepted ends carry the listener's path; St 03 = connected
        return sum(1 for r in rows if len(r) >= 8 and r[7] == addr and
                   r[5] == "03")
    port = int(addr.rsplit(":", 1)[1])
    with open("/proc/net/tcp") as f:
        rows = [ln.split() for ln in f.readlines()[1:]]
    # local address ends in the port (hex); st 01 = established
    return sum(1 for r in rows if int(r[1].rsplit(":", 1)[1], 16) == port
               and r[3] == "01")


@check("slow body: %d clients stalled in half a POST body (with and "
       "without credentials) hold no worker: /healthz answers promptly, "
       "then each finished request is answered (201, or 401 without "
       "credentials)" % STALLED)
def _(t):
    socks = []
    try:
        for i in range(STALLED):
            authed = i % 2 == 0
            body = json.dumps(t.payment_body(description="slow %d" % i),
                              separators=(",", ":")).encode()
            head = ("POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                    "Content-Type: application/json\r\n"
                    "Content-Length: %d\r\nIdempotency-Key: %s\r\n"
                    % (PAY, t.env.host, len(body), t.new_key("slow")))
            if authed:
                head += "Authorization: Bearer %s\r\n" % t.env.a.secret
            s = socket.create_connection((t.env.host, t.env.port),
                                         timeout=30)
            s.sendall(head.encode() + b"\r\n" + body[:len(body) // 2])
            socks.append((s, body[len(body) // 2:], authed))
        # A streaming server hands the halves to the app: wait until the
        # app holds them all (a condition, not a sleep), so that /healthz
        # is asked while they are in the app.
        if t.fixture in STREAMING and t.env.fcgi_addr:
            deadline = time.monotonic() + 30
            while _app_connections(t.env.fcgi_addr) < STALLED:
                if time.monotonic() > deadline:
                    t.fail("the app holds %d connections, not the %d "
                           "stalled requests, 30 s after they were sent"
                           % (_app_connections(t.env.fcgi_addr), STALLED))
                time.sleep(0.05)
        worst = 0.0
        for _ in range(3):
            t0 = time.monotonic()
            try:
                r = t.get("/healthz", token=NO_AUTH, timeout=10)
            except OSError as e:
                t.fail("/healthz while %d bodies stall: %r" % (STALLED, e))
            worst = max(worst, time.monotonic() - t0)
            t.expect_status(r, 200)
        t.note("/healthz while stalled: worst %.0f ms" % (worst * 1e3))
        t.expect(worst < PROMPT, "/healthz took %.2f s while %d bodies "
                 "stall (at most %.1f s)" % (worst, STALLED, PROMPT))
        statuses = []
        for s, rest, authed in socks:
            s.sendall(rest)
            statuses.append((httpc.read_response(s).status,
                             201 if authed else 401))
        t.expect(all(got == want for got, want in statuses),
                 "finished requests answered (got, want): %s" % statuses)
    finally:
        for s, _, _ in socks:
            s.close()
