#!/usr/bin/env python3
"""fcgiload.py - requests sent straight over FastCGI, one at a time, on one
kept connection (FCGI_KEEP_CONN, as nginx with fastcgi_keep_conn), for
tests/bench/floor-run: the same bytes to payments.fcgi and to the floor.

    fcgiload.py SOCKET SECRET create PREFIX N    N new keys PREFIX-0 ..
    fcgiload.py SOCKET SECRET replay PREFIX N POOL
                                    N requests on the keys PREFIX-0 ..
                                    PREFIX-(POOL-1), created before

Each request is POST /v1/payments with the same small JSON body.  Prints
"sent N bad B": B counts the answers other than 201 without
Idempotent-Replayed (create) or 201 with Idempotent-Replayed: true
(replay), so that a create answered as a replay, or a replay executed
again, is not counted as what it was meant to measure; exits 1 when B > 0.
"""
import socket
import struct
import sys

BODY = b'{"amount":1234,"currency":"eur","description":"benchmark"}'


def pair(name, value):
    out = b""
    for n in (len(name), len(value)):
        out += struct.pack("B", n) if n < 128 else struct.pack(">I", n | 1 << 31)
    return out + name + value


def record(typ, content):
    return struct.pack(">BBHHBx", 1, typ, 1, len(content), 0) + content


def request(secret, key):
    params = {
        b"REQUEST_METHOD": b"POST", b"REQUEST_URI": b"/v1/payments",
        b"SCRIPT_NAME": b"", b"PATH_INFO": b"/v1/payments",
        b"QUERY_STRING": b"", b"SERVER_PROTOCOL": b"HTTP/1.1",
        b"REMOTE_ADDR": b"127.0.0.1",
        b"CONTENT_LENGTH": str(len(BODY)).encode(),
        b"CONTENT_TYPE": b"application/json",
        b"HTTP_AUTHORIZATION": b"Bearer " + secret,
        b"HTTP_IDEMPOTENCY_KEY": key,
    }
    p = b"".join(pair(k, v) for k, v in params.items())
    # role 1 (responder), flags 1 (keep the connection)
    return (record(1, struct.pack(">HB5x", 1, 1)) + record(4, p) +
            record(4, b"") + record(5, BODY) + record(5, b""))


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""

    def need(self, n):
        while len(self.buf) < n:
            d = self.s.recv(65536)
            if not d:
                raise EOFError("the application closed the connection")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def roundtrip(self, data):
        self.s.sendall(data)
        out = b""
        while True:
            _, typ, _, clen, plen = struct.unpack(">BBHHB", self.need(8)[:7])
            content = self.need(clen + plen)[:clen]
            if typ == 6:
                out += content
            elif typ == 3:
                return out


def answer(resp):
    """The status and whether Idempotent-Replayed: true is among the
    headers, e.g. ("201", False)."""
    head = resp.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    st = head[0].split()[1].decode() \
        if head[0].lower().startswith(b"status:") else "200"
    replayed = any(h.lower().replace(b" ", b"") ==
                   b"idempotent-replayed:true" for h in head)
    return st, replayed


def main():
    a = sys.argv
    if len(a) < 6 or a[3] not in ("create", "replay"):
        sys.exit(__doc__)
    sock, secret, mode, prefix, n = a[1], a[2].encode(), a[3], a[4], int(a[5])
    pool = int(a[6]) if mode == "replay" else n
    want = ("201", mode == "replay")
    c = Conn(sock)
    bad = 0
    first = None
    for i in range(n):
        key = ("%s-%d" % (prefix, i % pool)).encode()
        got = answer(c.roundtrip(request(secret, key)))
        if got != want:
            bad += 1
            first = first or "%s%s" % (got[0], " replayed" if got[1]
                                       else " not replayed")
    print("sent %d bad %d%s" % (n, bad, " (first: %s)" % first if first else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
