"""unknown_key.py - the measuring half of tests/bench/unknown-key: sends
requests straight over FastCGI to one payments.fcgi, one at a time, and
reports for each the app's own duration (duration_ms of its log line:
from reading the request to the response written) beside the client's
round trip, and the app's peak RSS.  Prints a table and PASS/MISS lines;
exit status 0."""

import argparse
import json
import os
import statistics
import sys
import time

MIB = 1024 * 1024
TARGET_MS = 20.0
TARGET_HWM = 32 * MIB


def vm(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sock", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--keys", required=True)
    ap.add_argument("--creates", type=int, default=50)
    ap.add_argument("--srcdir", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.srcdir, "tests", "integration"))
    import httpc  # noqa: E402

    secrets = [s.strip() for s in open(a.keys) if s.strip()]
    seq = [0]

    def post(secret, body):
        seq[0] += 1
        p = {"REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/payments",
             "SCRIPT_NAME": "", "PATH_INFO": "/v1/payments",
             "QUERY_STRING": "", "SERVER_PROTOCOL": "HTTP/1.1",
             "REMOTE_ADDR": "127.0.0.1", "CONTENT_LENGTH": str(len(body)),
             "CONTENT_TYPE": "application/json",
             "HTTP_AUTHORIZATION": "Bearer " + secret,
             "HTTP_IDEMPOTENCY_KEY": "bench-%d-%d" % (os.getpid(), seq[0])}
        t0 = time.perf_counter()
        r = httpc.fcgi_request("unix:" + a.sock, p, body)
        ms = (time.perf_counter() - t0) * 1000.0
        return r.status, app_ms(), ms

    logf = open(a.log)

    def app_ms():
        """duration_ms of the app's next request line (written after the
        response, so wait for it)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            line = logf.readline()
            if not line:
                time.sleep(0.002)
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "request":
                return float(rec["duration_ms"])
        return float("nan")

    # The largest array max_body (1 MiB) lets in: 1048575 bytes.
    n = (MIB - 1) // 2
    arr = b"[" + b"0," * (n - 1) + b"0]"
    # The pool connects on first use: that is not what is measured here.
    h = {"REQUEST_METHOD": "GET", "REQUEST_URI": "/healthz",
         "SCRIPT_NAME": "", "PATH_INFO": "/healthz", "QUERY_STRING": "",
         "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1"}
    httpc.fcgi_request("unix:" + a.sock, h, b"")
    app_ms()
    hwm0 = vm(a.pid, "VmHWM")
    print("app pid %d, VmHWM after GET /healthz %.1f MiB" % (a.pid, hwm0 / MIB))
    print("\n8 x unknown key, %d-byte [0,0,...] body:" % len(arr))
    bogus = []
    for i in range(8):
        st, app, ms = post("sk_bogus_%d" % i, arr)
        bogus.append(app)
        print("  %d: %d, app %6.2f ms (client round trip %6.2f ms), "
              "VmHWM %.1f MiB" % (i + 1, st, app, ms,
                                  vm(a.pid, "VmHWM") / MIB))
    hwm_bogus = vm(a.pid, "VmHWM")
    print("\n8 x valid key, the same body:")
    for i in range(8):
        st, app, ms = post(secrets[0], arr)
        print("  %d: %d, app %6.2f ms (client round trip %6.2f ms), "
              "VmHWM %.1f MiB" % (i + 1, st, app, ms,
                                  vm(a.pid, "VmHWM") / MIB))

    small = b'{"amount":100,"currency":"eur"}'
    post(secrets[0], small)     # warm the cache for key 0
    warm = [post(secrets[0], small)[1] for _ in range(a.creates)]
    cold = [post(s, small)[1] for s in secrets[1:a.creates + 1]]
    print("\ncreates (201), the app's time, p50 / p90:")
    for name, xs in (("warm cache (2 round trips)", warm),
                     ("cold, new secret (3 round trips)", cold)):
        xs = sorted(xs)
        print("  %-34s %6.2f / %6.2f ms (n=%d)"
              % (name, statistics.median(xs), xs[int(len(xs) * 0.9)],
                 len(xs)))

    worst = max(bogus)
    print("\nunknown key, the app's time: max %.2f ms, mean %.2f ms -> %s "
          "(< %.0f ms each)"
          % (worst, statistics.mean(bogus),
             "PASS" if worst < TARGET_MS else "MISS", TARGET_MS))
    print("VmHWM after the 8 unknown-key requests: %.1f MiB -> %s (< 32 MiB)"
          % (hwm_bogus / MIB, "PASS" if hwm_bogus < TARGET_HWM else "MISS"))
    print("VmHWM at the end: %.1f MiB" % (vm(a.pid, "VmHWM") / MIB))
    return 0


if __name__ == "__main__":
    sys.exit(main())
