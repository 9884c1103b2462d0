"""direct.py - shared parts of the direct FastCGI tests: TAP output
(harness.py's assertions, one test each: check.expect), an
API key, a payments.fcgi on its own socket, requests sent with cgi-fcgi;
a database of a test's own (psql), the eviction lock held, and scrapes of
a [metrics] listen socket."""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# free_port and instrumented are the integration harness's (re-exported
# for the tests here); tests/lib (the webhook receiver, the inbox sender)
# and tests/lifecycle (the acquirer simulator) follow this folder, whose
# inbox.py and webhooks.py come first.
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TESTS, "integration"))
sys.path += [os.path.join(TESTS, "lib"), os.path.join(TESTS, "lifecycle")]
from harness import Failed, free_port, instrumented  # noqa: E402,F401

N = 0
FAILED = 0
APPS = []       # every App started, stopped by run_main at the end
# How long a condition of a delivery or a request may take to hold: well
# under a second here, many times slower under a wrapper (valgrind).
DEADLINE = 30 if not os.environ.get("IDEM_APP_WRAPPER") else 120
# The dispatcher's retries, small so that a delivery's checks take
# seconds.
WEBHOOKS = "[webhooks]\nallow_private = on\ninterval = 100ms\n" \
    "backoff = 100ms\nbackoff_max = 500ms\ntimeout = 2s\n"


class Check:
    """harness.py's assertions (expect, expect_eq; Failed on a failure)
    for a direct program, where each assertion is one TAP test: one that
    holds prints "ok N - what"; one that fails prints "not ok N - what"
    with diag and raises Failed, which ends the program (run_main); the
    program's finally blocks clean up on the way out."""

    def expect(self, cond, what, diag=None):
        global N, FAILED
        N += 1
        print("%sok %d - %s" % ("" if cond else "not ", N, what))
        if not cond and diag is not None:
            print("#   " + str(diag).replace("\n", "\n#   "))
        sys.stdout.flush()
        if not cond:
            FAILED += 1
            raise Failed(what)
        return True     # (if check.expect(...): the failing branch raised)

    def expect_eq(self, got, want, what):
        self.expect(got == want, what, None if got == want else
                    "expected %r, got %r" % (want, got))


check = Check()


def run_main(main):
    """main() of a direct program, to sys.exit(): its done(), or, once an
    assertion failed, the plan of what ran; the apps it started and left
    running are stopped."""
    try:
        return main()
    except Failed:
        return done()
    finally:
        for app in APPS:
            if app.proc.poll() is None:
                app.stop()


def missing(name, why):
    """Check NAME cannot run for a missing tool (WHY): a failure in CI,
    a counted skip elsewhere (tests/lib/missing.py)."""
    global N, FAILED
    from missing import missing_tool
    line, failed = missing_tool(name, why)
    N += 1
    FAILED += 1 if failed else 0
    print(line.replace(" - ", " %d - " % N, 1))
    sys.stdout.flush()


def scratch(a, name):
    """A program's temporary directory and a database of its own
    (idem_NAME_PID on a's cluster), created: (tmp, Db).  remove_tmp(tmp,
    db) removes both."""
    tmp = tempfile.mkdtemp(prefix="idem-%s." % name)
    db = Db(a.pghost, a.pgport, "idem_%s_%d" % (name, os.getpid()))
    db.sql("CREATE DATABASE %s" % db.name, db="postgres")
    return tmp, db


def fresh_db(a, name):
    """A Db of database NAME on a's cluster, created anew (one a run
    before left is dropped first)."""
    db = Db(a.pghost, a.pgport, name)
    db.sql("DROP DATABASE IF EXISTS %s" % name, db="postgres")
    db.sql("CREATE DATABASE %s" % name, db="postgres")
    return db


def acquirer(tmp):
    """The acquirer simulator (tests/acquirer/acquirer.py) started, its
    log in tmp."""
    from lcenv import Simulator
    return Simulator(os.path.join(TESTS, "acquirer", "acquirer.py"),
                     os.path.join(tmp, "acquirer.log"))


def body_of(raw):
    """The JSON body of a cgi-fcgi answer, or None."""
    _, _, b = raw.partition(b"\r\n\r\n")
    return json.loads(b) if b.strip() else None


def remove_tmp(tmp, db=None):
    """A program's temporary directory removed, unless IDEM_KEEP_TMP=1
    (then named); db (a Db): its database dropped first."""
    if db is not None:
        db.sql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % db.name,
               db="postgres")
    if os.environ.get("IDEM_KEEP_TMP") != "1":
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("# kept %s" % tmp)


def run_args():
    """The arguments tests/run gives every program here."""
    ap = argparse.ArgumentParser()
    for o in ("--builddir", "--srcdir", "--pghost", "--pgport"):
        ap.add_argument(o, required=True)
    return ap.parse_args()


def done():
    print("1..%d" % N)
    return 1 if FAILED else 0


def write_conf(path, host, port, extra=""):
    write(path, conf_text(host, port, "postgres", extra))


def api_key(builddir, srcdir, conf, name):
    idemctl = os.path.join(builddir, "apps/idemctl/idemctl")
    subprocess.run([idemctl, "-c", conf, "migrate", "--dir",
                    os.path.join(srcdir, "sql"), "--dir",
                    os.path.join(srcdir, "apps", "payments", "sql")],
                   check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run([idemctl, "-c", conf, "api-key", "create", name],
                         check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


class App:
    """payments.fcgi listening on a unix socket of its own (or on
    HOST:PORT)."""

    def __init__(self, builddir, conf, sock, logpath):
        self.sock = sock
        self.log = open(logpath, "w+")
        self.proc = subprocess.Popen(
            [os.path.join(builddir, "apps/payments/payments.fcgi"), "-c",
             conf, "-l", sock], stderr=self.log)
        APPS.append(self)
        deadline = time.time() + 10
        while not listening(sock) and time.time() < deadline:
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)

    def request(self, secret, method, uri, body=b"", key=None, timeout=20,
                headers=None):
        """Returns (status line, headers+body bytes); uri may end in a
        query string.  secret None: no Authorization; headers: more
        request headers, by HTTP name ({"traceparent": ...})."""
        env = dict(os.environ)
        path, _, query = uri.partition("?")
        env.update({"REQUEST_METHOD": method, "REQUEST_URI": uri,
                    "SCRIPT_NAME": "", "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
                    "CONTENT_LENGTH": str(len(body)),
                    "CONTENT_TYPE": "application/json"})
        if secret is not None:
            env["HTTP_AUTHORIZATION"] = "Bearer " + secret
        for name, value in (headers or {}).items():
            env["HTTP_" + name.upper().replace("-", "_")] = value
        if key is not None:
            env["HTTP_IDEMPOTENCY_KEY"] = key
        try:
            p = subprocess.run(["cgi-fcgi", "-bind", "-connect", self.sock],
                               input=body, env=env, capture_output=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return "TIMEOUT", b""
        return p.stdout.split(b"\r\n", 1)[0].decode(errors="replace"), \
            p.stdout

    def log_lines(self):
        self.log.flush()
        with open(self.log.name) as f:
            return [json.loads(line) for line in f if line.startswith("{")]

    def terminate(self, timeout):
        """SIGTERM: (its exit status, None when it had to be killed after
        timeout seconds; how long it took)."""
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        return rc, time.time() - t0

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def listening(addr):
    """Does a unix socket file, or a HOST:PORT, take connections yet?"""
    if addr.startswith("/"):
        return os.path.exists(addr)
    host, _, port = addr.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def wait_for(cond, timeout, step=0.05):
    """cond() until true or timeout; its last value."""
    end = time.time() + timeout
    v = cond()
    while not v and time.time() < end:
        time.sleep(step)
        v = cond()
    return v


class Db:
    """psql on one database of the suite's cluster; sql() returns the
    unaligned, tuples-only output."""

    def __init__(self, host, port, name):
        self.base = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At",
                     "-h", host, "-p", str(port), "-U", "postgres"]
        self.name = name

    def sql(self, q, db=None):
        p = subprocess.run(self.base + ["-d", db or self.name, "-c", q],
                           capture_output=True, text=True, check=True)
        return p.stdout.strip()

    def hold_eviction(self):
        """A session holding the fleet's eviction lock (lib/private.h
        IDEM_EVICT_LOCK), so that no janitor evicts until release()."""
        return EvictionHold(self)


class EvictionHold:
    LOCK = 7236491087

    def __init__(self, d):
        self.p = subprocess.Popen(d.base + ["-d", d.name], text=True,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.p.stdin.write("SELECT pg_advisory_lock(%d);\n" % self.LOCK)
        self.p.stdin.flush()
        self.p.stdout.readline()    # the lock is held once psql answers

    def release(self):
        self.p.stdin.close()        # the session ends, the lock with it
        self.p.wait(timeout=10)


def conf_text(host, port, db, extra):
    return ("[database]\nconninfo = host=%s port=%s dbname=%s user=postgres\n"
            "%s" % (host, port, db, extra))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def scrape(port, path="/metrics"):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return None, ""


def gauge(text, name):
    m = re.search(r"(?m)^%s ([0-9.e+-]+)$" % re.escape(name), text)
    return float(m.group(1)) if m else None
