#!/usr/bin/env python3
"""webhook_receiver.py - a webhook receiver on loopback, for the tests of
the payments sample's events and for scripts/demo.

As a module (the tests, the one receiver they all use): Receiver()
listens on 127.0.0.1 (port 0: a free one; stop() and start() again keep
the port, for "the receiver was down"), records every delivery
(Delivery: its path, headers, body, status, when), and answers as told:

    r = Receiver()           # 2xx answers are 204 (ok_status=200: 200)
    r.fail_first = True      # 500 to the first attempt of each webhook-id
    r.status = 503           # this status to everything (None: 204)
    r.headers = {"Retry-After": "3"}   # headers sent with every answer
    r.plans["/a"] = lambda n: 500 if n <= 2 else 200
                             # the n-th POST (from 1) to /a gets plan(n)
    r.hold()                 # arriving deliveries wait (r.waiting counts
    r.release()              # them) until release(), then are answered
    r.hold(first_only=True)  # only a webhook-id's first arrival waits:
                             # its redeliveries are answered at once
    r.hold(path="/b")        # POSTs to /b wait until r.release("/b")
    ...

got() lists the deliveries answered; on(path) and ids(path) every POST
to path as it arrived (a held one too: its status is None until it is
answered). url is its /hooks URL, url_of(path) another path's.

Like a receiver should, it applies an event once: the first delivery of a
webhook-id answered 2xx is "applied", later ones (redeliveries) are only
acknowledged (applied_ids()).

As a program (the demo):

    webhook_receiver.py --port PORT --secret-file FILE

prints "listening on 127.0.0.1:PORT" once it accepts, then a line per
delivery: the time, webhook-id, the event type, the object's id and
whether the signature is valid under the secret in FILE (read on each
delivery: the secret exists only once the endpoint is registered).

The signature is checked here with Python's hmac, independently of the C
library: "v1," + base64(HMAC-SHA256(key, id.timestamp.body)), the key the
base64 after "whsec_" (Standard Webhooks).  Standard library only.
"""

import argparse
import base64
import hashlib
import hmac
import http.server
import json
import socket
import sys
import threading
import time


def sign(secret, msg_id, timestamp, body):
    """The Standard Webhooks signature "v1,<base64>" of body."""
    if not secret.startswith("whsec_"):
        raise ValueError("a secret starts with whsec_")
    key = base64.b64decode(secret[len("whsec_"):])
    mac = hmac.new(key, b"%s.%s." % (msg_id.encode(), str(timestamp).encode())
                   + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def verify(secret, msg_id, timestamp, signatures, body, tolerance=300):
    """None when one of the space-separated signatures matches and the
    timestamp is within tolerance seconds of now; else what is wrong."""
    if not msg_id or not timestamp or not signatures:
        return "a webhook-id, webhook-timestamp or webhook-signature is "\
               "missing"
    try:
        ts = int(timestamp)
    except ValueError:
        return "webhook-timestamp %r is not a number" % timestamp
    if abs(time.time() - ts) > tolerance:
        return "webhook-timestamp %d is %d s from now" % (
            ts, int(time.time() - ts))
    want = sign(secret, msg_id, timestamp, body)
    for s in signatures.split(" "):
        if hmac.compare_digest(s.encode(), want.encode()):
            return None
    return "no signature matches (want %s)" % want


class Delivery:
    """One POST the receiver got."""

    def __init__(self, path, headers, body, status, at):
        self.path = path
        self.headers = headers          # {lower-case name: value}
        self.body = body                # bytes
        self.status = status            # what the receiver answered
        self.at = at                    # time.monotonic() at its arrival
        self.wall = time.time()         # the same, on the wall clock
        self.id = headers.get("webhook-id")
        self.timestamp = headers.get("webhook-timestamp")
        self.signature = headers.get("webhook-signature")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<delivery %s %s -> %s>" % (self.id, self.body[:80],
                                           self.status)


class Receiver:
    def __init__(self, port=0, ok_status=204):
        self.port = port
        self.ok_status = ok_status  # a 2xx answer when nothing else is told
        self.status = None          # None: ok_status (or a plan's, or
        self.fail_first = False     # fail_first's 500)
        self.headers = {}           # more headers of every answer
        self.plans = {}             # path -> plan(n): the n-th POST's status
        self.held_paths = {}        # path -> the Event that releases it
        self.arrivals = []          # every POST as it arrived (Delivery)
        self.deliveries = []
        self.applied = {}           # webhook-id -> 1 once applied
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.released.set()
        self.waiting = 0            # deliveries held now (hold())
        self.hold_first_only = False
        self.arrived = set()        # webhook-ids that arrived (held or not)
        self.held_ids = []          # webhook-ids of deliveries held
        self.conns = set()          # open connections (kept alive)
        self.server = None
        self.thread = None
        self.start()

    @property
    def url(self):
        return self.url_of("/hooks")

    def url_of(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def _handler(self):
        rcv = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with rcv.lock:
                    rcv.conns.add(self.connection)

            def finish(self):
                with rcv.lock:
                    rcv.conns.discard(self.connection)
                super().finish()

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                hs = {k.lower(): v for k, v in self.headers.items()}
                d = Delivery(self.path, hs, body, None, time.monotonic())
                with rcv.lock:
                    again = hs.get("webhook-id") in rcv.arrived
                    rcv.arrived.add(hs.get("webhook-id"))
                    rcv.arrivals.append(d)
                    n = len(rcv.on_locked(self.path))
                    plan = rcv.plans.get(self.path)
                    gate = rcv.held_paths.get(self.path)
                if gate is not None:
                    gate.wait(60)
                if not rcv.released.is_set() and not (
                        again and rcv.hold_first_only):
                    with rcv.lock:
                        rcv.waiting += 1
                        rcv.held_ids.append(hs.get("webhook-id"))
                    rcv.released.wait(60)
                    with rcv.lock:
                        rcv.waiting -= 1
                with rcv.lock:
                    wid = hs.get("webhook-id")
                    seen = [d for d in rcv.deliveries if d.id == wid]
                    if rcv.status is not None:
                        status = rcv.status
                    elif plan is not None:
                        status = plan(n)
                    elif rcv.fail_first and not seen:
                        status = 500
                    else:
                        status = rcv.ok_status
                    d.status = status
                    rcv.deliveries.append(d)
                    # Deduplicated on webhook-id: applied once, acked after.
                    if 200 <= status < 300 and wid not in rcv.applied:
                        rcv.applied[wid] = 1
                try:
                    self.send_response(status)
                    for k, v in rcv.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass    # the sender was killed meanwhile

            def log_message(self, *a):
                pass

        return H

    def start(self):
        """Listen (again, on the same port once it had one)."""
        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", self.port), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def stop(self):
        """Stop listening and close the connections kept alive: new ones
        are refused until start()."""
        for path in list(self.held_paths):
            self.release(path)
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(10)
            self.server = None
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def hold(self, first_only=False, path=None):
        if path is not None:
            with self.lock:
                self.held_paths[path] = threading.Event()
            return
        self.hold_first_only = first_only
        self.released.clear()

    def release(self, path=None):
        if path is None:
            self.released.set()
            return
        with self.lock:
            gate = self.held_paths.pop(path, None)
        if gate is not None:
            gate.set()

    # --- what it got ---
    def got(self, wid=None):
        with self.lock:
            return [d for d in self.deliveries if wid is None or d.id == wid]

    def on_locked(self, path):
        return [d for d in self.arrivals if d.path == path]

    def on(self, path):
        """Every POST to path as it arrived, answered or held."""
        with self.lock:
            return self.on_locked(path)

    def ids(self, path):
        return [d.id for d in self.on(path)]

    def applied_ids(self):
        with self.lock:
            return sorted(self.applied)

    def of_object(self, obj_id, etype=None):
        """Deliveries whose data is the object obj_id (and of etype)."""
        out = []
        for d in self.got():
            try:
                doc = d.json()
            except ValueError:
                continue
            if (doc.get("data") or {}).get("id") == obj_id and \
                    (etype is None or doc.get("type") == etype):
                out.append(d)
        return out



# --- the demo's receiver ------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--secret-file", required=True)
    args = ap.parse_args()

    def secret():
        try:
            with open(args.secret_file) as f:
                return f.read().strip()
        except OSError:
            return None

    class Demo(Receiver):
        def _handler(self):
            base = Receiver._handler(self)

            class H(base):
                def do_POST(self):
                    base.do_POST(self)
                    d = rcv.got()[-1]
                    s = secret()
                    why = verify(s, d.id, d.timestamp, d.signature,
                                 d.body) if s else "no secret yet"
                    try:
                        doc = d.json()
                        what = "%s %s" % (doc.get("type"),
                                          (doc.get("data") or {}).get("id"))
                    except ValueError:
                        what = "(not JSON)"
                    print("%s  %s  %s  signature %s" % (
                        time.strftime("%H:%M:%S"), d.id, what,
                        "valid" if why is None else "INVALID: " + why),
                        flush=True)
            return H

    rcv = Demo(args.port)
    print("listening on 127.0.0.1:%d" % rcv.port, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    rcv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
