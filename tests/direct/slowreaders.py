#!/usr/bin/env python3
"""slowreaders.py - no peer holds a worker by not reading its answers
(issue 31, item 4): the app listening on TCP itself (threads = 4,
write_timeout = 3s) while four peers with 4 KiB receive buffers each
pipeline 400 GET /openapi.json on a kept connection, two of them reading
64 KiB every 8 s, two reading nothing.  Meanwhile /healthz and an
authenticated create answer within 100 ms, each measured in this one
process; the answers waiting for the slow peers are held against
[server] max_buffered (idem_buffered_bytes); each slow peer is reset
within write_timeout + 1 s of its last read and counted in
idem_connections_rejected_total{reason="write_timeout"}; a peer with the
same small buffer that reads on gets all its pipelined answers, whole and
in order; fds and the budget return to their level.  Then 150 such peers
not reading against max_buffered = 1MiB: what is held stays within it,
the peers past it are reset at once (reason="max_buffered").  Prints TAP.
Usage:
  slowreaders.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import re
import select
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_args, run_main  # noqa: E402
from direct import (App, api_key, done, free_port, check, wait_for,  # noqa
                    write_conf)
from slowpeers import (BODY, connect_unix, fds, params, record,  # noqa
                       rejected, timed)
import httpc  # noqa: E402  (tests/integration, on the path via direct)

THREADS = 4
WRITE_TIMEOUT = 3.0
PEERS_READING = 2      # read 64 KiB every 8 s
PEERS_MUTE = 2         # read nothing
PIPELINED = 400
STEADY = 20            # pipelined by the peer that reads on
RCVBUF = 4096
BOUND = 0.100          # seconds: each answer while the slow peers stay
CROWD = 150            # peers not reading, against
CROWD_BUDGET = 1024 * 1024     # max_buffered (with max_body 512KiB)
CROWD_PIPELINED = 10   # answers of 41 KB: more than a unix socket takes


def pipelined(n, uri="/openapi.json"):
    """n GET requests, ids 1..n, each asking to keep the connection."""
    out = b""
    p = httpc.fcgi_params(params("GET", uri))
    for i in range(1, n + 1):
        out += (record(httpc.FCGI_BEGIN_REQUEST,
                       struct.pack("!HB5x", 1, 1), i) +
                record(httpc.FCGI_PARAMS, p, i) +
                record(httpc.FCGI_PARAMS, b"", i) +
                record(httpc.FCGI_STDIN, b"", i))
    return out


def small_peer(port):
    """A TCP peer whose receive buffer is set before connect (so that its
    window stays small)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def send_behind(s, data):
    """sendall from a thread of its own (the app may stop reading)."""
    def run():
        try:
            s.sendall(data)
        except OSError:
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def answers(data):
    """[(request id, stdout)] of the whole answers in data, in order."""
    out, cur, i = [], {}, 0
    while len(data) - i >= 8:
        _, rtype, rid, clen, plen = struct.unpack("!BBHHBx", data[i:i + 8])
        if len(data) - i < 8 + clen + plen:
            break
        content = data[i + 8:i + 8 + clen]
        i += 8 + clen + plen
        if rtype == httpc.FCGI_STDOUT:
            cur[rid] = cur.get(rid, b"") + content
        elif rtype == httpc.FCGI_END_REQUEST:
            out.append((rid, cur.pop(rid, b"")))
    return out


def buffered(sock):
    _, r = timed(sock, params("GET", "/metrics"))
    m = r and re.search(rb"(?m)^idem_buffered_bytes (\d+)$", r.body)
    return int(m.group(1)) if m else None


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-slowreaders.")
    conf = os.path.join(tmp, "app.ini")
    write_conf(conf, a.pghost, a.pgport,
               "[server]\nthreads = %d\nwrite_timeout = %ds\n"
               % (THREADS, WRITE_TIMEOUT))
    secret = api_key(a.builddir, a.srcdir, conf,
                     "slowreaders-%d" % os.getpid())
    port = free_port()
    addr = "127.0.0.1:%d" % port
    app = App(a.builddir, conf, addr, os.path.join(tmp, "app.log"))
    pid = app.proc.pid
    n_key = [0]

    def create():
        n_key[0] += 1
        return timed(addr, params("POST", "/v1/payments", secret,
                                  len(BODY), "sr-%d-%d" % (os.getpid(),
                                                           n_key[0])),
                     BODY)

    for _ in range(3):
        timed(addr, params("GET", "/healthz"))
        create()
    _, doc = timed(addr, params("GET", "/openapi.json"))
    check.expect(doc is not None and doc.status == 200 and len(doc.body) > RCVBUF,
                 "GET /openapi.json -> 200, %d bytes: more than a slow peer's "
                 "buffer" % (len(doc.body) if doc else 0))
    before = rejected(addr)
    fd0 = fds(pid)      # (after a scrape: the pool's connections open)
    check.expect(before.get("write_timeout") == 0, "idem_connections_rejected_total"
                 "{reason=\"write_timeout\"} starts at 0", before)

    # The slow peers: each pipelines PIPELINED requests, then reads (or
    # not).
    slow = []
    for i in range(PEERS_READING + PEERS_MUTE):
        s = small_peer(port)
        slow.append({"s": s, "reads": i < PEERS_READING, "t0":
                     time.monotonic(), "last": time.monotonic(),
                     "closed": None, "got": 0})
        send_behind(s, pipelined(PIPELINED))
    poller = select.poll()
    by_fd = {}
    for p in slow:
        # No event asked: only a hang-up or an error (the app's reset).
        poller.register(p["s"].fileno(), 0)
        by_fd[p["s"].fileno()] = p
    probes, held, fds_peak = [], 0, 0
    deadline = time.monotonic() + WRITE_TIMEOUT + 3
    while time.monotonic() < deadline and \
            any(p["closed"] is None for p in slow):
        now = time.monotonic()
        for p in slow:
            if p["reads"] and p["closed"] is None and \
                    (p["got"] == 0 or now - p["last"] >= 8):
                try:
                    p["got"] += len(p["s"].recv(65536, socket.MSG_DONTWAIT))
                    p["last"] = time.monotonic()
                except OSError:
                    pass
        held = max(held, buffered(addr) or 0)
        fds_peak = max(fds_peak, fds(pid))
        probes.append(("healthz", timed(addr, params("GET", "/healthz"))))
        probes.append(("create", create()))
        for fd, ev in poller.poll(50):
            p = by_fd[fd]
            if p["closed"] is None:
                p["closed"] = time.monotonic()
                poller.unregister(fd)
    worst = max(t for _, (t, _) in probes)
    bad = [(n, round(t, 3), r and r.status) for n, (t, r) in probes
           if r is None or r.status not in (200, 201) or t > BOUND]
    check.expect(not bad and len(probes) >= 4, "GET /healthz -> 200 and an "
                 "authenticated POST /v1/payments -> 201 within 100 ms throughout "
                 "(%d answers while %d peers do not read; worst %.1f ms)"
                 % (len(probes), len(slow), worst * 1e3), bad[:10])
    check.expect(held > 0, "the answers waiting for them are held against "
                 "max_buffered (idem_buffered_bytes up to %d)" % held)
    for i, p in enumerate(slow):
        what = "reading 64 KiB every 8 s" if p["reads"] else "reading nothing"
        since_last = p["closed"] - p["last"] if p["closed"] else None
        since_open = p["closed"] - p["t0"] if p["closed"] else None
        check.expect(since_last is not None and since_last <= WRITE_TIMEOUT + 1 and
                     since_open >= WRITE_TIMEOUT - 0.05,
                     "slow peer %d (%s): reset %.2f s after its last read, %.2f s "
                     "after it connected (write_timeout %.0f s)"
                     % (i + 1, what, since_last or -1, since_open or -1,
                        WRITE_TIMEOUT), "closed: %r" % p["closed"])
        p["s"].close()
    counts = rejected(addr)
    check.expect(counts.get("write_timeout", 0) - before.get("write_timeout", 0) ==
                 len(slow), "idem_connections_rejected_total{reason=\"write_timeout\"}"
                 " counts the %d: %s" % (len(slow), counts.get("write_timeout")))
    logged = [ln for ln in app.log_lines()
              if "closed: write_timeout" in ln.get("msg", "")]
    check.expect(len(logged) == len(slow) and
                 all("from 127.0.0.1:" in ln["msg"] for ln in logged),
                 "logged once each, with the peer", logged)

    # A peer as small that reads on: every answer, whole, in order.
    s = small_peer(port)
    t0 = time.monotonic()
    sender = send_behind(s, pipelined(STEADY))
    data = b""
    s.settimeout(10)
    while len(answers(data)) < STEADY:
        try:
            b = s.recv(RCVBUF)
        except OSError:
            break
        if not b:
            break
        data += b
    took = time.monotonic() - t0
    got = answers(data)
    sender.join(5)
    s.close()
    want = httpc.parse_cgi_response
    check.expect([rid for rid, _ in got] == list(range(1, STEADY + 1)) and
                 all(want(out).body == doc.body for _, out in got),
                 "a peer with a %d-byte buffer that reads on gets its %d pipelined "
                 "answers whole and in order (%d bytes, %.2f s)"
                 % (RCVBUF, STEADY, len(data), took),
                 [rid for rid, _ in got][:30])

    # (A pool, heartbeat or janitor connection may open meanwhile.)
    fd1 = wait_for(lambda: fds(pid) <= fd0 + 1 and fds(pid), 5) or fds(pid)
    check.expect(fd1 <= fd0 + 1, "fds back to their level: %d before, %d while the "
                 "slow peers stayed, %d after" % (fd0, fds_peak, fd1), [os.readlink("/proc/%d/fd/%s" % (pid, f))
                                for f in os.listdir("/proc/%d/fd" % pid)])
    left = wait_for(lambda: buffered(addr) == 0, 5)
    check.expect(left, "nothing held against max_buffered afterwards "
                 "(idem_buffered_bytes %s)" % buffered(addr))
    check.expect(app.stop() == 0, "the app exits 0 on SIGTERM afterwards")
    crowd(a, tmp, secret)
    return done()


def crowd(a, tmp, secret):
    """Many peers not reading, a small budget: what waits for them stays
    within max_buffered, the peers past it are reset at once.  On a unix
    socket, whose send buffer does not grow (TCP's grows to megabytes
    and would take every answer)."""
    conf = os.path.join(tmp, "crowd.ini")
    write_conf(conf, a.pghost, a.pgport,
               "[server]\nthreads = %d\nwrite_timeout = %ds\n"
               "max_body = 512KiB\nmax_buffered = %d\n"
               % (THREADS, WRITE_TIMEOUT, CROWD_BUDGET))
    addr = os.path.join(tmp, "crowd.sock")
    app = App(a.builddir, conf, addr, os.path.join(tmp, "crowd.log"))
    before = rejected(addr)
    peers, held, probes = [], [], []
    for _ in range(CROWD):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        connect_unix(s, addr, 5)
        s.sendall(pipelined(CROWD_PIPELINED))
        peers.append(s)
        if len(peers) % 10 == 0:
            held.append(buffered(addr) or 0)
            probes.append(timed(addr, params("GET", "/healthz")))
    counts = rejected(addr)
    refused = counts.get("max_buffered", 0) - before.get("max_buffered", 0)
    check.expect(0 < max(held) <= CROWD_BUDGET and refused > 0,
                 "%d peers not reading, max_buffered %d: at most %d held, %d reset "
                 "for want of room (reason=\"max_buffered\")"
                 % (CROWD, CROWD_BUDGET, max(held), refused), held)
    worst = max(t for t, _ in probes)
    check.expect(all(r is not None and r.status == 200 for _, r in probes) and
                 worst <= BOUND, "GET /healthz -> 200 within 100 ms meanwhile "
                 "(worst %.1f ms)" % (worst * 1e3))
    late = wait_for(lambda: buffered(addr) == 0, WRITE_TIMEOUT + 3)
    counts = rejected(addr)
    closed = sum(counts.get(r, 0) - before.get(r, 0)
                 for r in ("write_timeout", "max_buffered"))
    check.expect(late and closed == CROWD and counts.get("write_timeout", 0) > 0,
                 "write_timeout closes the others: all %d closed, nothing held then "
                 "(%s)" % (CROWD, counts))
    for s in peers:
        s.close()
    check.expect(app.stop() == 0, "that app exits 0 on SIGTERM too")


if __name__ == "__main__":
    sys.exit(run_main(main))
