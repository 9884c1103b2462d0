#!/usr/bin/env python3
"""acquirer.py - a card acquirer simulator for the tests of the phased
payment create (apps/payments/acquirer.c speaks to it).

  acquirer.py --port PORT [--host 127.0.0.1] [--quiet]

PORT 0 picks a free port.  Either way the first line on stdout is
"listening on HOST:PORT" once the server accepts connections.

The protocol, as the app uses it:

  POST /charges
      Content-Type: application/json
      Idempotency-Key: <the app's derived key>
      {"amount": <int>, "currency": "<str>", "reference": "<str>"}
  -> 200 {"id": "ch_...", "status": "approved" | "declined",
          "amount": ..., "currency": ..., "reference": ...}

Charges are deduplicated by Idempotency-Key: a repeated key answers the
charge created for it the first time (same id, same status) and does not
count a new charge.  A repeated key with other parameters (amount,
currency, reference) is refused with 422 and counted as a conflict.  A
request without a key, or with a malformed body, is 400 (not a charge).

The answer depends on the mode:
  approve   a new charge is approved (the default)
  decline   a new charge is declined
  fail      500, nothing is charged
  timeout   the charge is made (approved, or the key's earlier charge is
            looked up) and then the answer is held back 8 s: the client
            gives up first, the charge exists anyway
  hold      as approve, but the answer is held until POST /release (or
            20 s): the test decides what happens while the app waits; a
            client that closes its connection meanwhile ends the call
  slow      as approve, but the answer is sent only after a delay
            (POST /control's "delay", seconds, default 30): a long
            external call during which the app is alive; a client that
            closes its connection meanwhile ends the call there (the
            server stops working on it, as one whose client hung up)

Control and inspection (JSON in, JSON out):

  POST /control {"mode": M}              set the mode from now on (this
                                         also drops pending one-shots)
  POST /control {"mode": M, "count": N}  the next N charge calls use M,
                                         then the mode in force applies
                                         again (one-shots queue up)
  GET  /stats   {"charges": N, "calls": M, "conflicts": C, "mode": ...,
                 "pending": [[mode, left], ...], "held": H,
                 "overlaps": O,
                 "by_key": {KEY: {"charges": 0|1, "calls": k, "id": ...,
                                  "status": ..., "amount": ...,
                                  "currency": ..., "reference": ...,
                                  "spans": [[start, end], ...],
                                  "overlaps": o, "traceparent": T}}}
                charges: charges created (one per key at most);
                calls: POST /charges received (any outcome);
                spans: each call under the key, from the moment it was
                read to the moment it ended (answered, or its client
                gone), on CLOCK_MONOTONIC (seconds; end null while in
                flight); overlaps: calls that began while another call
                under the same key was in flight (O: all keys);
                traceparent: the W3C traceparent header of the last
                call under the key (null: none)
  POST /release answer every held call now (see hold); {"released": N}
  POST /reset   forget all charges and counters, mode approve

Standard library only.
"""

import argparse
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("approve", "decline", "fail", "timeout", "hold", "slow")
TIMEOUT_S = 8.0
HOLD_MAX_S = 20.0


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.mode = "approve"
        self.pending = []       # [[mode, calls left], ...]
        self.charges = 0
        self.calls = 0
        self.conflicts = 0
        self.overlaps = 0
        self.by_key = {}
        self.seq = 0
        self.held = 0                   # calls waiting for /release
        self.slow_s = 30.0              # the delay of mode slow
        self.release = threading.Event()

    def next_mode(self):
        """The mode of the charge call being served (lock held)."""
        while self.pending and self.pending[0][1] <= 0:
            self.pending.pop(0)
        if self.pending:
            self.pending[0][1] -= 1
            mode = self.pending[0][0]
            if self.pending[0][1] <= 0:
                self.pending.pop(0)
            return mode
        return self.mode

    def snapshot(self):
        with self.lock:
            return {"charges": self.charges, "calls": self.calls,
                    "conflicts": self.conflicts, "mode": self.mode,
                    "overlaps": self.overlaps,
                    "held": self.held,
                    "pending": [list(p) for p in self.pending],
                    "by_key": json.loads(json.dumps(self.by_key))}


STATE = State()
QUIET = False


def log(msg):
    if not QUIET:
        sys.stderr.write("acquirer: %s\n" % msg)
        sys.stderr.flush()


class Handler(BaseHTTPRequestHandler):
    server_version = "acquirer-sim/1"
    # HTTP/1.0: one request per connection, closed after the answer (the
    # app reads until the connection closes).
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):  # noqa: D102 (quiet by default)
        pass

    def answer(self, status, doc):
        data = json.dumps(doc, separators=(",", ":")).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            log("client went away before the answer (%d)" % status)

    def body(self):
        try:
            n = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            return None
        raw = self.rfile.read(n) if n > 0 else b""
        try:
            return json.loads(raw.decode("utf-8")) if raw else None
        except (ValueError, UnicodeDecodeError):
            return None

    def do_GET(self):
        if self.path == "/stats":
            return self.answer(200, STATE.snapshot())
        return self.answer(404, {"error": "no such resource"})

    def do_POST(self):
        if self.path == "/charges":
            return self.charge()
        if self.path == "/control":
            return self.control()
        if self.path == "/release":
            with STATE.lock:
                n, STATE.held = STATE.held, 0
                STATE.release.set()
                STATE.release = threading.Event()
            log("release: %d held" % n)
            return self.answer(200, {"released": n})
        if self.path == "/reset":
            with STATE.lock:
                STATE.release.set()
                STATE.reset()
            log("reset")
            return self.answer(200, {"ok": True})
        return self.answer(404, {"error": "no such resource"})

    def control(self):
        b = self.body()
        if not isinstance(b, dict) or b.get("mode") not in MODES:
            return self.answer(400, {"error": "mode must be one of %s"
                                     % ", ".join(MODES)})
        count = b.get("count")
        if count is not None and (type(count) is not int or count < 1):
            return self.answer(400, {"error": "count must be an integer "
                                     ">= 1"})
        delay = b.get("delay")
        if delay is not None and (type(delay) not in (int, float) or
                                  not 0 <= delay <= 120):
            return self.answer(400, {"error": "delay must be 0..120 s"})
        with STATE.lock:
            if delay is not None:
                STATE.slow_s = float(delay)
            if count is None:
                STATE.mode = b["mode"]
                STATE.pending = []
            else:
                STATE.pending.append([b["mode"], count])
        log("control: %s%s" % (b["mode"], "" if count is None
                               else " x%d" % count))
        return self.answer(200, STATE.snapshot())

    def charge(self):
        key = self.headers.get("Idempotency-Key")
        ctype = (self.headers.get("Content-Type") or "").split(";")[0]
        b = self.body()
        with STATE.lock:
            STATE.calls += 1
        if not key or ctype.strip().lower() != "application/json":
            return self.answer(400, {"error": "Content-Type: "
                                     "application/json and an "
                                     "Idempotency-Key are required"})
        if (not isinstance(b, dict) or type(b.get("amount")) is not int or
                b["amount"] <= 0 or not isinstance(b.get("currency"), str)
                or not isinstance(b.get("reference"), str) or
                set(b) - {"amount", "currency", "reference"}):
            return self.answer(400, {"error": "body must be {amount, "
                                     "currency, reference}"})
        params = {"amount": b["amount"], "currency": b["currency"],
                  "reference": b["reference"]}
        with STATE.lock:
            rec = STATE.by_key.get(key)
            if rec is None:
                rec = STATE.by_key[key] = dict(params, charges=0, calls=0,
                                               id=None, status=None,
                                               spans=[], overlaps=0)
            span = [time.monotonic(), None]
            if any(sp[1] is None for sp in rec["spans"]):
                rec["overlaps"] += 1
                STATE.overlaps += 1
                log("charge %s: begins while another call under the key "
                    "is in flight" % key)
            rec["spans"].append(span)
            rec["traceparent"] = self.headers.get("traceparent")
        try:
            return self.charge_key(key, params, rec)
        finally:
            with STATE.lock:
                span[1] = time.monotonic()

    def client_gone(self, seconds, ev=None):
        """Wait up to seconds (or until ev is set); True as soon as the
        client has closed its connection (it sends nothing more after its
        request)."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (ev is not None and ev.is_set()):
                return False
            if ev is not None:
                left = min(left, 0.02)  # looks at ev as often
            r, _, _ = select.select([self.connection], [], [], min(left, 0.5))
            if r:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
                time.sleep(min(left, 0.02))     # bytes after the request

    def charge_key(self, key, params, rec):
        with STATE.lock:
            mode = STATE.next_mode()
            rec["calls"] += 1
            if mode == "fail":
                log("charge %s: fail (500)" % key)
                resp = None
            elif any(rec[k] != v for k, v in params.items()):
                STATE.conflicts += 1
                log("charge %s: key reused with other parameters" % key)
                resp = (422, {"error": "Idempotency-Key reused with "
                              "different parameters"})
            else:
                if rec["id"] is None:
                    STATE.seq += 1
                    STATE.charges += 1
                    rec["charges"] = 1
                    rec["id"] = "ch_%06d%s" % (STATE.seq,
                                               os.urandom(4).hex())
                    rec["status"] = ("declined" if mode == "decline"
                                     else "approved")
                    log("charge %s: new %s %s (%s)" % (key, rec["id"],
                                                       rec["status"], mode))
                else:
                    log("charge %s: repeated key, same charge %s"
                        % (key, rec["id"]))
                resp = (200, {"id": rec["id"], "status": rec["status"],
                              "amount": rec["amount"],
                              "currency": rec["currency"],
                              "reference": rec["reference"]})
        if resp is None:
            return self.answer(500, {"error": "acquirer failure "
                                     "(simulated)"})
        if mode == "timeout":
            log("charge %s: holding the answer %.0f s" % (key, TIMEOUT_S))
            time.sleep(TIMEOUT_S)
        if mode == "slow":
            log("charge %s: answering in %.1f s" % (key, STATE.slow_s))
            if self.client_gone(STATE.slow_s):
                log("charge %s: the client went away: call ended" % key)
                return None
        if mode == "hold":
            with STATE.lock:
                STATE.held += 1
                ev = STATE.release
            log("charge %s: held until released" % key)
            if self.client_gone(HOLD_MAX_S, ev):
                log("charge %s: the client went away: call ended" % key)
                return None
        return self.answer(*resp)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global QUIET
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True,
                    help="port to listen on (0: any free one)")
    ap.add_argument("--quiet", action="store_true",
                    help="no log lines on stderr")
    args = ap.parse_args()
    QUIET = args.quiet
    srv = Server((args.host, args.port), Handler)

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    host, port = srv.server_address[:2]
    sys.stdout.write("listening on %s:%d\n" % (host, port))
    sys.stdout.flush()
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
