#!/usr/bin/env python3
"""httpd.py - the HTTP server on loopback that unit/test_httpclient talks to.

  httpd.py [--tls CERT KEY]

Prints "port N" on stdout once it accepts connections; exits when its
stdin closes (the test went away).  HTTP/1.1 with keep-alive, so that a
client can reuse a connection; it counts the connections it accepted.

  GET  /hello          200 {"hello": "world", "n": 3}, X-Test: yes
  POST /echo           201 {"method", "content_type", "x_custom", "body"}
  GET  /status/N       N {"status": N}
  GET  /slow           the answer after 5 s
  GET  /big/N          N bytes of "a" with a Content-Length
  GET  /chunked/N      N bytes of "a", chunked (no length announced)
  GET  /redirect       302 to /hello, {"redirect": true}
  GET  /connections    {"connections": connections accepted so far,
                        "requests": requests other than this one so far}

Standard library only.
"""

import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONNECTIONS = 0
REQUESTS = 0
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        global CONNECTIONS
        with LOCK:
            CONNECTIONS += 1
        super().setup()

    def answer(self, status, data, ctype="application/json", extra=()):
        if not isinstance(data, bytes):
            data = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def count(self):
        global REQUESTS
        if self.path != "/connections":
            with LOCK:
                REQUESTS += 1

    def do_GET(self):
        self.count()
        p = self.path
        if p == "/redirect":
            return self.answer(302, {"redirect": True},
                               extra=[("Location", "/hello")])
        if p == "/hello":
            return self.answer(200, {"hello": "world", "n": 3},
                               extra=[("X-Test", "yes")])
        if p.startswith("/status/"):
            n = int(p[len("/status/"):])
            return self.answer(n, {"status": n})
        if p == "/slow":
            time.sleep(5)
            return self.answer(200, {"slow": True})
        if p.startswith("/big/"):
            return self.answer(200, b"a" * int(p[len("/big/"):]),
                               ctype="text/plain")
        if p.startswith("/chunked/"):
            n = int(p[len("/chunked/"):])
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while n > 0:
                k = min(n, 512)
                self.wfile.write(b"%x\r\n%s\r\n" % (k, b"a" * k))
                n -= k
            self.wfile.write(b"0\r\n\r\n")
            return None
        if p == "/connections":
            with LOCK:
                n, r = CONNECTIONS, REQUESTS
            return self.answer(200, {"connections": n, "requests": r})
        return self.answer(404, {"error": "no such resource"})

    def do_POST(self):
        self.count()
        n = int(self.headers.get("Content-Length") or "0")
        raw = self.rfile.read(n)
        if self.path == "/echo":
            return self.answer(201, {
                "method": self.command,
                "content_type": self.headers.get("Content-Type"),
                "x_custom": self.headers.get("X-Custom"),
                "body": json.loads(raw.decode()) if raw else None})
        return self.answer(404, {"error": "no such resource"})


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass    # a client that refused our certificate: expected here


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    if len(sys.argv) == 4 and sys.argv[1] == "--tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("port %d" % srv.server_address[1], flush=True)
    sys.stdin.read()
    os._exit(0)


if __name__ == "__main__":
    main()
