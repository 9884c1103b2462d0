#!/usr/bin/env python3
"""sockets.py - who can reach the app's sockets (issue 20, items 3-4).
Unix sockets are private by default (mode 0660: another local user cannot
connect), [server|metrics] socket_mode and socket_group are applied, a
socket inherited on fd 0 is left as it is; [server] allow and the
FCGI_WEB_SERVER_ADDRS convention close other TCP peers before a byte is
read (counted as reason="peer", logged); a [metrics] listen unix socket
checks its peer's uid (SO_PEERCRED) against [metrics] allow_uid, the
client run as another user with runuser; a scrape answers quickly while
8 and 64 idle connections are open on the metrics port.  Prints TAP.
Usage:
  sockets.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import re
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_args, run_main  # noqa: E402
from direct import (App, api_key, done, free_port, check, wait_for,  # noqa
                    write_conf)
import httpc  # noqa: E402  (tests/integration, on the path via direct)

SCRAPE_BOUND = 0.5     # seconds: a scrape while idle peers stay


def fcgi_bytes(uri="/healthz"):
    p = httpc.fcgi_params({"REQUEST_METHOD": "GET", "REQUEST_URI": uri,
                           "SCRIPT_NAME": "", "PATH_INFO": uri,
                           "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1",
                           "SERVER_PROTOCOL": "HTTP/1.1"})

    def rec(t, c):
        return struct.pack("!BBHHBx", 1, t, 1, len(c), 0) + c
    return (rec(httpc.FCGI_BEGIN_REQUEST, struct.pack("!HB5x", 1, 0)) +
            rec(httpc.FCGI_PARAMS, p) + rec(httpc.FCGI_PARAMS, b"") +
            rec(httpc.FCGI_STDIN, b""))


def tcp_exchange(port, source, data, timeout=5):
    """Connect to 127.0.0.1:port from source, send data, read to EOF:
    (bytes received, 'eof' | 'reset' | 'timeout')."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    got, how = b"", "eof"
    try:
        if data:
            s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except ConnectionResetError:
        how = "reset"
    except BrokenPipeError:
        how = "reset"
    except socket.timeout:
        how = "timeout"
    finally:
        s.close()
    return got, how


def unix_exchange(path, data, enough=None):
    """Connect to the unix socket path, send data, read to EOF, or until
    enough(bytes so far) holds: the bytes received."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(path)
    s.sendall(data)
    got = b""
    while not (enough and enough(got)):
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    return got


def status_of(cgi):
    m = re.match(rb"Status: (\d+)", cgi)
    return int(m.group(1)) if m else None


def fcgi_stdout(data):
    out = b""
    while len(data) >= 8:
        _, t, _, n, pad = struct.unpack("!BBHHBx", data[:8])
        if t == httpc.FCGI_STDOUT:
            out += data[8:8 + n]
        data = data[8 + n + pad:]
    return out


def start(builddir, conf, listen, logpath, env=None, stdin=None):
    """payments.fcgi, -l listen (or fd 0 when listen is None), once its
    workers run."""
    log = open(logpath, "w+")
    args = [os.path.join(builddir, "apps/payments/payments.fcgi"), "-c",
            conf]
    if listen is not None:
        args += ["-l", listen]
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen(args, stderr=log, env=e, stdin=stdin)
    wait_for(lambda: p.poll() is not None or
             "workers" in open(logpath).read(), 10)
    return p, log


def stop(p):
    p.terminate()
    try:
        return p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        return None


def as_nobody(code):
    """Python code run as the user nobody: (returncode, stdout)."""
    # The system's interpreter: the suite's may live where nobody can't go.
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else \
        sys.executable
    r = subprocess.run(["runuser", "-u", "nobody", "--", py, "-c", code], capture_output=True, text=True,
                       timeout=20)
    return r.returncode, r.stdout.strip() + r.stderr.strip()


UNIX_GET = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1] if len(sys.argv) > 1 else %r)
except PermissionError:
    print("EACCES"); sys.exit(0)
got = b""
try:
    s.sendall(b"GET /metrics HTTP/1.0\\r\\n\\r\\n")
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
except (ConnectionResetError, BrokenPipeError):
    pass
print(got.split(b"\\r\\n", 1)[0].decode() or "CLOSED")
"""


def mode_of(path):
    st = os.stat(path)
    return stat.S_IMODE(st.st_mode), st.st_gid


def main():
    a = run_args()
    tmp = tempfile.mkdtemp(prefix="idem-sockets.")
    os.chmod(tmp, 0o755)        # nobody may reach the sockets' files
    conf = os.path.join(tmp, "app.ini")
    msock = os.path.join(tmp, "metrics.sock")

    # --- 1. defaults: both unix sockets 0660, the process's group ---------
    write_conf(conf, a.pghost, a.pgport,
               "[metrics]\nlisten = unix:%s\n" % msock)
    api_key(a.builddir, a.srcdir, conf, "sockets-%d" % os.getpid())
    sock = os.path.join(tmp, "app.sock")
    app = App(a.builddir, conf, sock, os.path.join(tmp, "app.log"))
    wait_for(lambda: os.path.exists(msock), 10)
    m, g = mode_of(sock)
    check.expect(m == 0o660 and g == os.getegid(), "FastCGI socket: mode 0660 by "
                 "default, the process's group (%04o, gid %d)" % (m, g))
    m, g = mode_of(msock)
    check.expect(m == 0o660, "[metrics] listen socket: mode 0660 by default (%04o)"
                 % m)
    rc, out = as_nobody(UNIX_GET % sock)
    check.expect(out == "EACCES", "another local user (nobody) cannot connect to "
                 "the FastCGI socket", out)
    rc, out = as_nobody(UNIX_GET % msock)
    check.expect(out == "EACCES", "nor to the metrics socket", out)
    check.expect(app.stop() == 0, "the app exits 0")

    # --- 2. socket_mode and socket_group; allow_uid via SO_PEERCRED -------
    for f in (sock, msock):
        if os.path.exists(f):
            os.unlink(f)
    write_conf(conf, a.pghost, a.pgport,
               "[server]\nsocket_mode = 0600\nsocket_group = nogroup\n"
               "[metrics]\nlisten = unix:%s\nsocket_mode = 0666\n"
               "socket_group = nogroup\nallow_uid = 0\n" % msock)
    app = App(a.builddir, conf, sock, os.path.join(tmp, "app2.log"))
    wait_for(lambda: os.path.exists(msock), 10)
    nogroup = 65534
    m, g = mode_of(sock)
    check.expect(m == 0o600 and g == nogroup, "socket_mode = 0600, socket_group = "
                 "nogroup applied to the FastCGI socket (%04o, gid %d)" % (m, g))
    m, g = mode_of(msock)
    check.expect(m == 0o666 and g == nogroup, "and to the metrics socket (%04o, "
                 "gid %d)" % (m, g))
    rc, out = as_nobody(UNIX_GET % msock)
    check.expect(out == "CLOSED", "allow_uid = 0: nobody (uid 65534) reaches the "
                 "0666 metrics socket but is closed without an answer", out)
    got = unix_exchange(msock, b"GET /metrics HTTP/1.0\r\n\r\n")
    check.expect(got.startswith(b"HTTP/1.1 200") and
                 re.search(rb'idem_connections_rejected_total\{reason="metrics_peer"'
                           rb'\} 1\n', got) is not None,
                 "uid 0 is answered 200, and the refusal counted "
                 "(reason=\"metrics_peer\" 1)", got[:200])
    logs = [ln for ln in app.log_lines()
            if "refused: not in [metrics] allow_uid" in ln.get("msg", "")]
    check.expect(len(logs) == 1 and "uid 65534" in logs[0]["msg"],
                 "the refusal logged once, with the uid", logs)
    check.expect(app.stop() == 0, "the app exits 0")

    os.unlink(msock)
    write_conf(conf, a.pghost, a.pgport,
               "[metrics]\nlisten = unix:%s\nsocket_mode = 0666\n"
               "allow_uid = nobody\n" % msock)
    app = App(a.builddir, conf, sock + "3", os.path.join(tmp, "app3.log"))
    wait_for(lambda: os.path.exists(msock), 10)
    rc, out = as_nobody(UNIX_GET % msock)
    check.expect(out == "HTTP/1.1 200 OK", "allow_uid = nobody (a name): nobody is "
                 "answered 200", out)
    check.expect(app.stop() == 0, "the app exits 0")

    # --- 3. a socket inherited on fd 0 is left as it is -------------------
    isock = os.path.join(tmp, "inherited.sock")
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(isock)
    os.chmod(isock, 0o604)
    ls.listen(16)
    write_conf(conf, a.pghost, a.pgport, "")
    p, _ = start(a.builddir, conf, None, os.path.join(tmp, "app4.log"),
                 stdin=ls.fileno())
    ls.close()
    end = struct.pack("!BB", 1, httpc.FCGI_END_REQUEST)
    got = unix_exchange(isock, fcgi_bytes(), lambda got: end in got)
    m, _ = mode_of(isock)
    check.expect(status_of(fcgi_stdout(got)) == 200 and m == 0o604,
                 "fd 0 socket: served (/healthz 200) and its mode left at 0604 "
                 "(%04o)" % m, got[:200])
    check.expect(stop(p) == 0, "the app exits 0")

    # --- 4. [server] allow and FCGI_WEB_SERVER_ADDRS on TCP ---------------
    for how, extra, env in (
            ("[server] allow = 127.0.0.2", "[server]\nallow = 127.0.0.2\n",
             None),
            ("FCGI_WEB_SERVER_ADDRS=127.0.0.2", "",
             {"FCGI_WEB_SERVER_ADDRS": "127.0.0.2"})):
        port = free_port()
        write_conf(conf, a.pghost, a.pgport, extra)
        logp = os.path.join(tmp, "tcp-%d.log" % port)
        p, log = start(a.builddir, conf, "127.0.0.1:%d" % port, logp,
                       env=env)
        t0 = time.monotonic()
        got, end = tcp_exchange(port, "127.0.0.1", b"")
        took = time.monotonic() - t0
        check.expect(got == b"" and end in ("eof", "reset") and took < 1,
                     "%s: a peer from 127.0.0.1 that sends nothing is closed at "
                     "once (%.3f s, %s)" % (how, took, end))
        got, end = tcp_exchange(port, "127.0.0.1", fcgi_bytes())
        check.expect(got == b"", "%s: a whole request from 127.0.0.1 gets no byte "
                     "back (%s)" % (how, end))
        got, end = tcp_exchange(port, "127.0.0.2",
                                fcgi_bytes("/metrics"))
        body = fcgi_stdout(got)
        check.expect(status_of(body) == 200 and
                     re.search(rb'idem_connections_rejected_total\{reason="peer"\} '
                               rb'2\n', body) is not None,
                     "%s: 127.0.0.2 is served, and the 2 refusals counted "
                     "(reason=\"peer\")" % how, body[:300])
        log.flush()
        lines = [ln for ln in open(logp)
                 if "refused: not in [server] allow" in ln]
        check.expect(len(lines) == 1 and "127.0.0.1" in lines[0],
                     "%s: logged once (the 1st refusal; then the 10th, 100th...)"
                     % how, lines)
        check.expect(stop(p) == 0, "the app exits 0")

    # --- 5. scrapes while idle peers hold the metrics port ----------------
    mport = free_port()
    write_conf(conf, a.pghost, a.pgport,
               "[metrics]\nlisten = 127.0.0.1:%d\n" % mport)
    p, log = start(a.builddir, conf, os.path.join(tmp, "app5.sock"),
                   os.path.join(tmp, "app5.log"))
    for n in (8, 64):
        idle = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", mport), timeout=5)
            if i % 2:
                s.sendall(b"G")     # half of them began a head
            idle.append(s)
        t0 = time.monotonic()
        got, end = tcp_exchange(mport, "127.0.0.1",
                                b"GET /metrics HTTP/1.0\r\n\r\n")
        took = time.monotonic() - t0
        check.expect(got.startswith(b"HTTP/1.1 200") and took < SCRAPE_BOUND,
                     "%d idle connections open: a scrape answers 200 in %.1f ms "
                     "(bound %d ms)" % (n, took * 1e3, SCRAPE_BOUND * 1e3),
                     got[:100])
        for s in idle:
            s.close()
    # HEAD /metrics: the GET's head, no body.
    got, end = tcp_exchange(mport, "127.0.0.1",
                            b"HEAD /metrics HTTP/1.0\r\n\r\n")
    head, _, body = got.partition(b"\r\n\r\n")
    m = re.search(rb"Content-Length: (\d+)", head)
    check.expect(head.startswith(b"HTTP/1.1 200") and m is not None and
                 int(m.group(1)) > 1000 and body == b"",
                 "HEAD /metrics: 200, the GET's Content-Length (%s), no body (%d "
                 "bytes)" % (m.group(1).decode() if m else None, len(body)), got[:200])
    # A refused address: closed at accept, before reading.
    got, end = tcp_exchange(mport, "127.0.0.3",
                            b"GET /metrics HTTP/1.0\r\n\r\n")
    check.expect(got == b"", "a peer not in [metrics] allow (127.0.0.3) gets no "
                 "byte back (%s)" % end)
    check.expect(stop(p) == 0, "the app exits 0")
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
