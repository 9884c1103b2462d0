"""hc.py - a small HTTP/1.1 client for the fault tests: optional keep-alive,
a hard timeout, the time each answer took, and the bits of a response the
checks look at.  Standard library only, but for tests/integration's httpc
(whose header lookup it shares).

A connection error is an answer too (Answer.status is None, Answer.error
names it): the fault scenarios count and retry them like any other.
"""

import json
import socket
import time

from httpc import Response


class Answer:
    __slots__ = ("status", "headers", "body", "elapsed", "error", "t0",
                 "t1")

    def __init__(self, status=None, headers=(), body=b"", elapsed=0.0,
                 error=None, t0=0.0, t1=0.0):
        self.status = status
        self.headers = list(headers)
        self.body = body
        self.elapsed = elapsed
        self.error = error
        self.t0, self.t1 = t0, t1

    # the first value of a header, by name in any case: self.headers are
    # (name, value) pairs as in tests/integration's responses
    header = Response.header

    @property
    def replayed(self):
        return (self.header("Idempotent-Replayed") or "").strip().lower() \
            == "true"

    @property
    def ctype(self):
        return (self.header("Content-Type") or "").split(";")[0].strip() \
            .lower()

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None

    def problem(self):
        """The problem document's slug ('' if not a problem+json body)."""
        if self.ctype != "application/problem+json":
            return ""
        doc = self.json()
        if not isinstance(doc, dict) or not isinstance(doc.get("type"), str):
            return ""
        return doc["type"].rstrip("/").rsplit("/", 1)[-1]

    def problem_ok(self, status, slug):
        """A well-formed RFC 9457 document of this status and slug."""
        doc = self.json() if self.ctype == "application/problem+json" \
            else None
        return (self.status == status and isinstance(doc, dict) and
                all(isinstance(doc.get(m), str)
                    for m in ("type", "title", "detail")) and
                doc.get("status") == status and self.problem() == slug)

    def payment_id(self):
        doc = self.json()
        if self.status == 201 and isinstance(doc, dict):
            return doc.get("id")
        return None

    def brief(self):
        if self.status is None:
            return "error %s after %.2fs" % (self.error, self.elapsed)
        s = "%s%s %s after %.2fs" % (self.status,
                                      " replay" if self.replayed else "",
                                      self.problem() or self.ctype,
                                      self.elapsed)
        return s

    def describe(self):
        if self.status is None:
            return self.brief()
        hs = "; ".join("%s: %s" % kv for kv in self.headers)
        return "%s [%s] %r" % (self.brief(), hs, self.body[:400])


class Client:
    """One HTTP connection to host:port, reused when keepalive is set."""

    def __init__(self, host, port, keepalive=True, timeout=30.0):
        self.host, self.port = host, port
        self.keepalive = keepalive
        self.timeout = timeout
        self.sock = None
        self.buf = b""

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.buf = b""

    def _connect(self, deadline):
        self.close()
        self.sock = socket.create_connection(
            (self.host, self.port), timeout=max(0.1, deadline - time.monotonic()))

    def _recv(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        self.sock.settimeout(left)
        b = self.sock.recv(65536)
        if not b:
            raise ConnectionError("connection closed by the server")
        self.buf += b

    def request(self, method, path, headers=(), body=None, timeout=None):
        timeout = self.timeout if timeout is None else timeout
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            resp = self._exchange(method, path, headers, body, deadline)
        except (OSError, ConnectionError, ValueError) as e:
            self.close()
            t1 = time.monotonic()
            return Answer(error="%s: %s" % (type(e).__name__, e),
                          elapsed=t1 - t0, t0=t0, t1=t1)
        t1 = time.monotonic()
        resp.elapsed, resp.t0, resp.t1 = t1 - t0, t0, t1
        return resp

    def _exchange(self, method, path, headers, body, deadline):
        if self.sock is None:
            self._connect(deadline)
        lines = ["%s %s HTTP/1.1" % (method, path),
                 "Host: %s:%d" % (self.host, self.port)]
        for k, v in headers:
            lines.append("%s: %s" % (k, v))
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: %d" % len(body or b""))
        if not self.keepalive:
            lines.append("Connection: close")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + \
            (body or b"")
        self.sock.settimeout(max(0.1, deadline - time.monotonic()))
        self.sock.sendall(data)
        while b"\r\n\r\n" not in self.buf:
            self._recv(deadline)
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        hl = head.decode("latin-1").split("\r\n")
        parts = hl[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError("bad status line %r" % hl[0])
        status = int(parts[1])
        hs = []
        for ln in hl[1:]:
            k, _, v = ln.partition(":")
            hs.append((k.strip(), v.strip()))
        a = Answer(status, hs)
        self.buf = rest
        te = (a.header("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._recv(deadline)
                size_line, _, self.buf = self.buf.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    self._recv(deadline)
                out += self.buf[:size]
                self.buf = self.buf[size + 2:]
                if size == 0:
                    break
            a.body = out
        elif a.header("Content-Length") is not None:
            n = int(a.header("Content-Length"))
            while len(self.buf) < n:
                self._recv(deadline)
            a.body, self.buf = self.buf[:n], self.buf[n:]
        else:
            try:
                while True:
                    self._recv(deadline)
            except ConnectionError:
                pass
            a.body, self.buf = self.buf, b""
            self.close()
        if not self.keepalive or \
                (a.header("Connection") or "").lower() == "close":
            self.close()
        return a


def payment_headers(secret, key, quoted=False):
    hs = [("Content-Type", "application/json")]
    if secret is not None:
        hs.append(("Authorization", "Bearer " + secret))
    if key is not None:
        if quoted:
            key = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
        hs.append(("Idempotency-Key", key))
    return hs


def body_of(obj):
    return json.dumps(obj, separators=(",", ":")).encode()
