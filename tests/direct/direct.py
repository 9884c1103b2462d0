"""direct.py - shared parts of the direct FastCGI tests: TAP output, an
API key, a payments.fcgi on its own socket, requests sent with cgi-fcgi."""

import json
import os
import subprocess
import sys
import time

N = 0
FAILED = 0


def ok(cond, name, diag=None):
    global N, FAILED
    N += 1
    print("%sok %d - %s" % ("" if cond else "not ", N, name))
    if not cond:
        FAILED += 1
        if diag is not None:
            print("#   " + str(diag).replace("\n", "\n#   "))
    sys.stdout.flush()
    return cond


def done():
    print("1..%d" % N)
    return 1 if FAILED else 0


def write_conf(path, host, port, extra=""):
    with open(path, "w") as f:
        f.write("[database]\nconninfo = host=%s port=%s dbname=postgres "
                "user=postgres\n%s" % (host, port, extra))


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
    """payments.fcgi listening on a unix socket of its own."""

    def __init__(self, builddir, conf, sock, logpath):
        self.sock = sock
        self.log = open(logpath, "w+")
        self.proc = subprocess.Popen(
            [os.path.join(builddir, "apps/payments/payments.fcgi"), "-c",
             conf, "-l", sock], stderr=self.log)
        deadline = time.time() + 10
        while not os.path.exists(sock) and time.time() < deadline:
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)

    def request(self, secret, method, uri, body=b"", key=None, timeout=20):
        """Returns (status line, headers+body bytes)."""
        env = dict(os.environ)
        env.update({"REQUEST_METHOD": method, "REQUEST_URI": uri,
                    "SCRIPT_NAME": "", "PATH_INFO": uri, "QUERY_STRING": "",
                    "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
                    "CONTENT_LENGTH": str(len(body)),
                    "CONTENT_TYPE": "application/json",
                    "HTTP_AUTHORIZATION": "Bearer " + secret})
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

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None
