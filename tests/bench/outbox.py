#!/usr/bin/env python3
"""outbox.py - the outbox rows of tests/bench/run (BENCH_TESTS=outbox):
creates at a fixed pace, and the figures from what the receiver
(receiver.c) recorded.  Standard library only.

    outbox.py paced HOST:PORT SECRET RATE SECONDS OUT
        POST /v1/payments with a new Idempotency-Key RATE times a second
        for SECONDS, on one kept connection, each at its time on a fixed
        schedule (not after the previous answer: an open loop while the
        app keeps up); OUT gets "PAYMENT-ID T201" per 201 (T201: the
        time the answer was read, CLOCK_REALTIME).  Prints one line:
        PACED sent=N ok=N late=N (late: sent more than 10 ms after its
        time: the app did not keep up, the rate is lower than asked).

    outbox.py latency PACED EVENTS ARRIVALS
        EVENTS: "EVENT-ID PAYMENT-ID CREATED" per event (idem_events:
        webhook-id, data.id, created_at in epoch seconds); ARRIVALS: the
        receiver's log ("T EVENT-ID").  For each paced payment, its
        event's first arrival minus the 201 (a lower bound of the time
        from the commit: the 201 is read after it) and minus created_at
        (an upper bound: created_at is now(), the start of the
        transaction, before the commit).  Prints one line:
        LATENCY n=N missing=N redelivered=N p50_201_ms=X p99_201_ms=X
        max_201_ms=X p50_db_ms=X p99_db_ms=X max_db_ms=X

    outbox.py rate ARRIVALS SKIP
        The arrivals after the first SKIP lines: how many, and their rate
        between the first and the last.  Prints one line:
        RATE n=N secs=X per_s=X
"""

import http.client
import json
import os
import sys
import time


def pctl(xs, p):
    """The p-th percentile (nearest rank) of the sorted list xs."""
    if not xs:
        return 0.0
    i = max(1, -(-len(xs) * p // 100))
    return xs[int(i) - 1]


def paced(base, secret, rate, secs, out):
    host, port = base.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    body = '{"amount":1234,"currency":"eur","description":"benchmark"}'
    tag = "%d-%d" % (os.getpid(), int(time.time()))
    n = int(rate * secs)
    sent = ok = late = 0
    t0 = time.monotonic() + 0.05
    with open(out, "w") as f:
        for i in range(n):
            at = t0 + i / rate
            d = at - time.monotonic()
            if d > 0:
                # the schedule: an open loop, not a wait for a condition
                time.sleep(d)
            elif d < -0.010:
                late += 1
            conn.request("POST", "/v1/payments", body, {
                "Authorization": "Bearer " + secret,
                "Content-Type": "application/json",
                "Idempotency-Key": '"o-%s-%d"' % (tag, i)})
            r = conn.getresponse()
            data = r.read()
            t201 = time.time()
            sent += 1
            if r.status != 201:
                continue
            ok += 1
            f.write("%s %.6f\n" % (json.loads(data)["id"], t201))
    print("PACED sent=%d ok=%d late=%d" % (sent, ok, late))


def read_arrivals(path, skip=0):
    out = []
    with open(path) as f:
        for i, line in enumerate(f):
            if i < skip:
                continue
            t, _, wid = line.strip().partition(" ")
            out.append((float(t), wid))
    return out


def latency(paced_file, events_file, arrivals_file):
    t201 = {}
    with open(paced_file) as f:
        for line in f:
            pid, t = line.split()
            t201[pid] = float(t)
    ev = {}         # payment id -> (event id, created)
    with open(events_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                ev[parts[1]] = (parts[0], float(parts[2]))
    first = {}
    redelivered = 0
    for t, wid in read_arrivals(arrivals_file):
        if wid in first:
            redelivered += 1
        else:
            first[wid] = t
    a, b = [], []
    missing = 0
    for pid, t in t201.items():
        e = ev.get(pid)
        if e is None or e[0] not in first:
            missing += 1
            continue
        a.append((first[e[0]] - t) * 1000)
        b.append((first[e[0]] - e[1]) * 1000)
    a.sort()
    b.sort()
    print("LATENCY n=%d missing=%d redelivered=%d p50_201_ms=%.1f "
          "p99_201_ms=%.1f max_201_ms=%.1f p50_db_ms=%.1f p99_db_ms=%.1f "
          "max_db_ms=%.1f" % (len(a), missing, redelivered, pctl(a, 50),
                              pctl(a, 99), a[-1] if a else 0, pctl(b, 50),
                              pctl(b, 99), b[-1] if b else 0))


def rate(arrivals_file, skip):
    arr = read_arrivals(arrivals_file, skip)
    n = len(arr)
    secs = arr[-1][0] - arr[0][0] if n > 1 else 0.0
    print("RATE n=%d secs=%.3f per_s=%.0f" % (
        n, secs, (n - 1) / secs if secs > 0 else 0))


def main(argv):
    if len(argv) == 7 and argv[1] == "paced":
        paced(argv[2], argv[3], float(argv[4]), float(argv[5]), argv[6])
    elif len(argv) == 5 and argv[1] == "latency":
        latency(argv[2], argv[3], argv[4])
    elif len(argv) == 4 and argv[1] == "rate":
        rate(argv[2], int(argv[3]))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
