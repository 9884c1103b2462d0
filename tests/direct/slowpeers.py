#!/usr/bin/env python3
"""slowpeers.py - no peer holds a worker, no input ends the process: the
app listening itself (threads = 4, read_timeout = 2s) while 64 FastCGI
connections are stalled at each stage of a request (one byte, half a
record header, half a params record, half a body without credentials,
half a body with credentials).  Meanwhile /healthz and an authenticated
create answer within 100 ms, each measured in this one process; every
stalled connection is closed after read_timeout; the process's fds and
RSS return to their level; the libfcgi crashers of
tests/fuzz/regression/fcgi close their connection only, and are counted in
idem_connections_rejected_total.  Prints TAP.  Usage:
  slowpeers.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import json
import os
import re
import select
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_args, run_main  # noqa: E402
from direct import App, api_key, done, check, wait_for, write_conf  # noqa: E402
import httpc  # noqa: E402  (tests/integration, on the path via direct)

THREADS = 4
READ_TIMEOUT = 2.0
PER_STAGE = 64
BOUND = 0.100          # seconds: each answer while the stalls stay
BODY = b'{"amount":100,"currency":"usd"}'


def record(rtype, content, req_id=1):
    return struct.pack("!BBHHBx", 1, rtype, req_id, len(content), 0) + \
        content


def params(method, uri, secret=None, body_len=None, key=None):
    p = {"REQUEST_METHOD": method, "REQUEST_URI": uri, "SCRIPT_NAME": "",
         "PATH_INFO": uri, "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1",
         "SERVER_PROTOCOL": "HTTP/1.1"}
    if body_len is not None:
        p["CONTENT_LENGTH"] = str(body_len)
        p["CONTENT_TYPE"] = "application/json"
    if secret is not None:
        p["HTTP_AUTHORIZATION"] = "Bearer " + secret
    if key is not None:
        p["HTTP_IDEMPOTENCY_KEY"] = key
    return p


def connect_unix(s, path, seconds):
    """connect() as a blocking peer does, for at most seconds: with a
    timeout set, a unix socket whose backlog is full (the app accepting
    more slowly than this loop connects, as under ASan) answers EAGAIN at
    once instead of waiting, so wait for the app here."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return s.connect(path)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def stages(secret):
    """The bytes each stalled connection sends, by stage."""
    begin = record(httpc.FCGI_BEGIN_REQUEST, struct.pack("!HB5x", 1, 0))
    pr = httpc.fcgi_params(params("GET", "/healthz"))
    half_params = struct.pack("!BBHHBx", 1, httpc.FCGI_PARAMS, 1, len(pr),
                              0) + pr[:len(pr) // 2]

    def half_body(sec, key):
        p = httpc.fcgi_params(params("POST", "/v1/payments", sec,
                                     len(BODY), key))
        return (begin + record(httpc.FCGI_PARAMS, p) +
                record(httpc.FCGI_PARAMS, b"") +
                struct.pack("!BBHHBx", 1, httpc.FCGI_STDIN, 1, len(BODY),
                            0) + BODY[:len(BODY) // 2])
    return [("one byte", b"\x01"),
            ("half a record header", begin[:4]),
            ("half a params record", begin + half_params),
            ("half a body without credentials", half_body(None, "sp-nc")),
            ("half a body with credentials", half_body(secret, "sp-c"))]


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def timed(sock, p, stdin=b""):
    """(seconds, Response or None) of one request, in this process."""
    t0 = time.monotonic()
    try:
        r = httpc.fcgi_request(sock, p, stdin, timeout=5)
    except (OSError, ConnectionError):
        r = None
    return time.monotonic() - t0, r


def rejected(sock):
    _, r = timed(sock, params("GET", "/metrics"))
    out = {}
    if r is None or r.status != 200:
        return out
    for m in re.finditer(r'idem_connections_rejected_total\{reason="(\w+)"\}'
                         r' (\d+)', r.body.decode()):
        out[m.group(1)] = int(m.group(2))
    return out


def warm_app(a, name, key_prefix, threads=THREADS,
             read_timeout=READ_TIMEOUT):
    """A payments.fcgi of the program's own on tmp/app.sock ([server]
    threads, read_timeout in seconds) and create(), a payment
    under a new key each call; warmed: the pool's connection, the auth
    cache, the allocator.  Returns (tmp, sock, secret, app, create)."""
    tmp = tempfile.mkdtemp(prefix="idem-%s." % name)
    conf = os.path.join(tmp, "app.ini")
    write_conf(conf, a.pghost, a.pgport,
               "[server]\nthreads = %d\nread_timeout = %ds\n"
               % (threads, read_timeout))
    secret = api_key(a.builddir, a.srcdir, conf,
                     "%s-%d" % (name, os.getpid()))
    sock = os.path.join(tmp, "app.sock")
    app = App(a.builddir, conf, sock, os.path.join(tmp, "app.log"))
    n_key = [0]

    def create():
        n_key[0] += 1
        return timed(sock, params("POST", "/v1/payments", secret, len(BODY),
                                  "%s-%d-%d" % (key_prefix, os.getpid(),
                                                n_key[0])),
                     BODY)

    for _ in range(3):
        timed(sock, params("GET", "/healthz"))
        create()
    return tmp, sock, secret, app, create


def main():
    a = run_args()
    tmp, sock, secret, app, create = warm_app(a, "slowpeers", "sp")
    pid = app.proc.pid
    fd0, rss0 = fds(pid), rss_kib(pid)
    before = rejected(sock)
    check.expect(before.get("read_timeout") == 0 and
                 before.get("params_too_large") == 0,
                 "idem_connections_rejected_total starts at 0 for read_timeout and "
                 "params_too_large", before)

    conns = []
    for name, data in stages(secret):
        for _ in range(PER_STAGE):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # An app that stops accepting fills its backlog: connect()
            # would wait for ever.
            s.settimeout(5)
            try:
                connect_unix(s, sock, 5)
                s.sendall(data)
            except OSError as e:
                check.expect(False, "%d stalled connections are open in the app"
                             % (len(stages(secret)) * PER_STAGE),
                             "connection %d (%s): %r" % (len(conns) + 1, name, e))
                app.stop()
                return done()
            conns.append((name, s, time.monotonic()))
    # (A pool or janitor connection of the baseline may close meanwhile.)
    accepted = wait_for(lambda: fds(pid) >= fd0 - 2 + len(conns),
                        READ_TIMEOUT)
    opened = time.monotonic()
    check.expect(app.proc.poll() is None and accepted,
                 "%d stalled connections are open in the app (fds %d -> %d, %.2f s "
                 "after the first)" % (len(conns), fd0, fds(pid),
                                       opened - conns[0][2]))

    health = [timed(sock, params("GET", "/healthz")) for _ in range(5)]
    creates = [create() for _ in range(3)]
    elapsed = time.monotonic() - opened
    first = health[0][0]
    worst_h = max(t for t, _ in health)
    worst_c = max(t for t, _ in creates)
    check.expect(elapsed < READ_TIMEOUT, "the answers came while the stalls stayed "
                 "(%.2fs of %.1fs)" % (elapsed, READ_TIMEOUT))
    check.expect(all(r is not None and r.status == 200 for _, r in health) and
                 worst_h <= BOUND, "GET /healthz -> 200 within 100 ms while %d "
                 "connections stall (first %.1f ms, worst %.1f ms)"
                 % (len(conns), first * 1e3, worst_h * 1e3),
                 [(round(t, 4), r and r.status) for t, r in health])
    check.expect(all(r is not None and r.status == 201 for _, r in creates) and
                 worst_c <= BOUND, "an authenticated POST /v1/payments -> 201 within "
                 "100 ms meanwhile (worst %.1f ms)" % (worst_c * 1e3),
                 [(round(t, 4), r and r.status) for t, r in creates])
    rss_peak = rss_kib(pid)

    # Each stalled connection: EOF (no answer), after read_timeout.
    closed = {}
    pending = {s.fileno(): (name, s, t0) for name, s, t0 in conns}
    deadline = time.monotonic() + READ_TIMEOUT + 10
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select(list(pending), [], [], 1)
        for fd in r:
            name, s, t0 = pending.pop(fd)
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            closed.setdefault(name, []).append((time.monotonic() - t0,
                                                data))
    for name, _ in stages(secret):
        got = closed.get(name, [])
        waits = [t for t, _ in got]
        check.expect(len(got) == PER_STAGE and all(d == b"" for _, d in got) and
                     min(waits) >= READ_TIMEOUT - 0.05 and
                     max(waits) <= READ_TIMEOUT + 3,
                     "%s: all %d closed without an answer after read_timeout "
                     "(%.2f s to %.2f s)" % (name, PER_STAGE, min(waits or [0]),
                                             max(waits or [0])),
                     "%d closed" % len(got))
    for _, s, _ in conns:
        s.close()

    after = wait_for(lambda: fds(pid) <= fd0 + 1 and fds(pid), 5)
    fd1 = fds(pid)
    check.expect(fd1 <= fd0 + 1, "fds back to their level: %d before, %d while "
                 "stalled, %d after" % (fd0, fd0 + len(conns), fd1), after)
    rss1 = rss_kib(pid)
    check.expect(rss1 <= rss0 + 4096, "RSS back to its level (within 4 MiB): %d KiB "
                 "before, %d KiB while stalled, %d KiB after" % (rss0, rss_peak, rss1))
    counts = rejected(sock)
    check.expect(counts.get("read_timeout", 0) - before.get("read_timeout", 0) ==
                 len(conns), "idem_connections_rejected_total{reason=\"read_timeout\"} "
                 "counts the %d: %s" % (len(conns), counts.get("read_timeout")))

    # The libfcgi crashers: that connection closed, the process alive.
    reg = os.path.join(a.srcdir, "tests/fuzz/regression/fcgi")
    for f in sorted(os.listdir(reg)):
        with open(os.path.join(reg, f), "rb") as fh:
            data = fh.read()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(READ_TIMEOUT + 5)
        s.connect(sock)
        t0 = time.monotonic()
        s.sendall(data)
        try:
            eof = s.recv(4096) == b""
        except OSError:
            eof = False
        took = time.monotonic() - t0
        s.close()
        t, r = timed(sock, params("GET", "/healthz"))
        check.expect(eof and took < READ_TIMEOUT / 2 and app.proc.poll() is None and
                     r is not None and r.status == 200,
                     "%s (%d bytes): its connection closed at once (%.3f s), the "
                     "process alive, /healthz -> 200 (%.1f ms)"
                     % (f, len(data), took, t * 1e3))
    counts2 = rejected(sock)
    check.expect(counts2.get("params_too_large", 0) - counts.get("params_too_large",
                                                                 0) ==
                 len(os.listdir(reg)), "each is counted under reason "
                 "\"params_too_large\": %s" % counts2)
    logged = [ln for ln in app.log_lines()
              if "closed: params_too_large" in ln.get("msg", "")]
    check.expect(len(logged) == len(os.listdir(reg)) and
                 all("from unix" in ln["msg"] for ln in logged),
                 "logged once each, with the peer", json.dumps(logged))
    check.expect(app.stop() == 0, "the app exits 0 on SIGTERM afterwards")
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
