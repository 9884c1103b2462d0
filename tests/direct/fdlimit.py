#!/usr/bin/env python3
"""fdlimit.py - the descriptor limit is a state, not a spin: the app
listening itself (threads = 4, a [metrics] listen socket of its own) with
RLIMIT_NOFILE lowered to 128, then 200 idle FastCGI connections opened to
it (they cannot all be accepted) and a scrape sent to the metrics
listener.  While saturated the process spends under 0.05 CPU-seconds per
second (its utime + stime over 2 s), and logs at most one line a second
about it per listener.  Once the idle connections close, a new /healthz
is answered within 100 ms of the first close, the waiting scrape within
the metrics listener's pause (1 s) plus slack, and
idem_connections_rejected_total{reason="fd_limit"} has counted the
failed accepts.  Prints TAP.  Usage:
  fdlimit.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import re
import resource
import select
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_args, run_main  # noqa: E402
from direct import (App, api_key, done, free_port, check, scrape,  # noqa
                    wait_for, write_conf)
from slowpeers import connect_unix, fds, params, timed  # noqa

THREADS = 4
NOFILE = 128
IDLE = 200
WINDOW = 2.0            # seconds of saturation measured
CPU_BOUND = 0.05        # CPU-seconds per second while saturated
BOUND = 0.100           # seconds from the first close to /healthz's answer
SCRAPE_BOUND = BOUND     # the metrics listener the same
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of the whole process (all threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK    # fields 14 and 15


def fd_limit(port):
    """The counter as the metrics listener shows it, or None."""
    _, text = scrape(port)
    m = re.search(r'(?m)^idem_connections_rejected_total'
                  r'\{reason="fd_limit"\} (\d+)$', text)
    return int(m.group(1)) if m else None


def limit_lines(app, what):
    return [ln for ln in app.log_lines() if what in ln.get("msg", "")]


def open_idle(sock, n):
    """n connections that send nothing; stops at the first failure."""
    conns = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            connect_unix(s, sock, 5)
        except OSError:
            s.close()
            break
        conns.append(s)
    return conns


def scrape_started(port):
    """A scrape sent to the metrics listener; its answer read later."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


class Waiting(threading.Thread):
    """A GET /healthz sent while the app is saturated: it waits in the
    listening socket's backlog; done is when its answer came."""

    def __init__(self, sock):
        threading.Thread.__init__(self, daemon=True)
        self.sock, self.done, self.status = sock, None, None
        self.start()

    def run(self):
        _, r = timed(self.sock, params("GET", "/healthz"))
        self.done = time.monotonic()
        self.status = r and r.status


def answered_by(s, deadline):
    """The time the first byte of s's answer came, or None by deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            return None
        try:
            got = s.recv(65536)
        except OSError:
            got = b""
        return time.monotonic() if got.startswith(b"HTTP/1.1 200") \
            else None


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-fdlimit.")
    conf = os.path.join(tmp, "app.ini")
    mport = free_port()
    # read_timeout outlasts the test's saturation: the idle connections
    # are closed by this test, not by the app.
    write_conf(conf, a.pghost, a.pgport,
               "[server]\nthreads = %d\nread_timeout = 20s\n"
               "[metrics]\nlisten = 127.0.0.1:%d\n" % (THREADS, mport))
    api_key(a.builddir, a.srcdir, conf, "fdlimit-%d" % os.getpid())
    sock = os.path.join(tmp, "app.sock")
    app = App(a.builddir, conf, sock, os.path.join(tmp, "app.log"))
    pid = app.proc.pid
    t, r = timed(sock, params("GET", "/healthz"))
    check.expect(r is not None and r.status == 200, "the app answers /healthz "
                 "(%.1f ms)" % (t * 1e3))
    before = fd_limit(mport)
    check.expect(before == 0, "idem_connections_rejected_total{reason=\"fd_limit\"} "
                 "is exposed and starts at 0", before)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    fd0 = fds(pid)

    idle = open_idle(sock, IDLE)
    full = wait_for(lambda: fds(pid) >= NOFILE - 1, 5)
    saturated = time.monotonic()
    check.expect(len(idle) == IDLE and full, "%d idle connections opened, the app at "
                 "its limit (%d descriptors of %d; %d before)"
                 % (len(idle), fds(pid), NOFILE, fd0))
    scrape = scrape_started(mport)
    waiting = Waiting(sock)
    # A moment for the threads to find the limit, then the window.
    time.sleep(0.2)
    lines0 = (len(limit_lines(app, "runtime: no descriptor")),
              len(limit_lines(app, "metrics: accept")))
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(WINDOW)
    c1, t1 = cpu_seconds(pid), time.monotonic()
    rate = (c1 - c0) / (t1 - t0)
    check.expect(rate < CPU_BOUND, "while saturated the process spends %.3f "
                 "CPU-seconds per second (< %.2f) over %.1f s"
                 % (rate, CPU_BOUND, t1 - t0))
    lines1 = (len(limit_lines(app, "runtime: no descriptor")),
              len(limit_lines(app, "metrics: accept")))
    most = int(t1 - t0) + 1
    check.expect(lines1[0] >= 1 and lines1[0] - lines0[0] <= most,
                 "the FastCGI listener's limit is logged, at most once a second "
                 "(%d lines in all, %d in %.1f s)" % (lines1[0], lines1[0] - lines0[0],
                                                      t1 - t0),
                 limit_lines(app, "runtime: no descriptor")[-3:])
    check.expect(lines1[1] >= 1 and lines1[1] - lines0[1] <= most,
                 "the metrics listener's too (%d lines in all, %d in %.1f s)"
                 % (lines1[1], lines1[1] - lines0[1], t1 - t0),
                 limit_lines(app, "metrics: accept")[-3:])

    # Descriptors freed: served at once.
    freed = time.monotonic()
    for s in idle:
        s.close()
    t, r = timed(sock, params("GET", "/healthz"))
    took = time.monotonic() - freed
    waiting.join(5)
    check.expect(waiting.status == 200 and waiting.done - freed <= BOUND,
                 "the GET /healthz that waited in the backlog while saturated -> 200 "
                 "within %d ms of the idle connections' close (%s)"
                 % (BOUND * 1e3, "%.1f ms" % ((waiting.done - freed) * 1e3)
                    if waiting.done else "no answer"), waiting.status)
    check.expect(r is not None and r.status == 200 and took <= BOUND,
                 "a new GET /healthz -> 200 within %d ms of the idle connections' "
                 "close (%.1f ms)" % (BOUND * 1e3, took * 1e3), r and r.status)
    at = answered_by(scrape, freed + SCRAPE_BOUND + 5)
    scrape.close()
    check.expect(at is not None and at - freed <= SCRAPE_BOUND,
                 "the scrape waiting on the metrics listener is answered within "
                 "%.1f s of the close (%s)" % (SCRAPE_BOUND, "%.3f s" % (at - freed)
                                               if at else "no answer"))
    after = fd_limit(mport) or 0
    # Each listener fails once as it pauses, once a second after, and once
    # per descriptor freed at most: a spin would count without end.
    most = 2 * (int(freed - saturated) + 2) + 2 * IDLE
    check.expect(2 <= after <= most, "idem_connections_rejected_total"
                 "{reason=\"fd_limit\"} counts the failed accepts of both listeners: "
                 "%d (2 to %d)" % (after, most))
    back = wait_for(lambda: fds(pid) <= fd0 + 2, 5)
    check.expect(back, "the descriptors are back to their level (%d, %d before)"
                 % (fds(pid), fd0))
    check.expect(app.stop() == 0, "the app exits 0 on SIGTERM afterwards")
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
