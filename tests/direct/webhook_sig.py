#!/usr/bin/env python3
"""webhook_sig.py - idem's webhook signatures (idem_webhook_sign(3))
checked by an independent implementation, the specification's reference
library (the npm package standardwebhooks, in tests/openapi/node_modules
from its package-lock.json, installed by tests/lib/deps.sh), both ways:
what idem signs the library verifies, what the library signs idem verifies
(byte for byte the same signature), and each rejects what was changed
after signing (body, timestamp, id), a stale or future timestamp and
another secret.  idem's side is tests/direct/webhook_tool (make check), a
client of idem.h; the library's is tests/direct/webhook_sig.js.  Needs no
database (the suite's arguments are accepted).  Prints TAP.
Usage: webhook_sig.py --builddir B --srcdir S [--pghost H --pgport P]
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True
from direct import run_main, done, missing, check  # noqa: E402

# The specification's example ("Signature scheme").
VECTOR = ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
          "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
          b'{"test": 2432232314}',
          "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
TOLERANCE = 300     # the library's, fixed


def tool(bin_, args, body):
    p = subprocess.run([bin_] + [str(a) for a in args], input=body,
                       capture_output=True, timeout=30)
    return p.returncode, p.stdout.decode().strip()


def main():
    ap = argparse.ArgumentParser()
    for a in ("--builddir", "--srcdir"):
        ap.add_argument(a, required=True)
    for a in ("--pghost", "--pgport"):
        ap.add_argument(a)
    args = ap.parse_args()
    src = os.path.abspath(args.srcdir)
    module = os.path.join(src, "tests", "openapi", "node_modules",
                          "standardwebhooks")
    script = os.path.join(src, "tests", "direct", "webhook_sig.js")
    bin_ = os.path.join(os.path.abspath(args.builddir), "tests", "direct",
                        "webhook_tool")
    check.expect(os.access(bin_, os.X_OK), "tests/direct/webhook_tool is "
                 "built", "%s missing: make check builds it" % bin_)
    why = None
    if shutil.which("node") is None:
        why = "node is not installed"
    elif not os.path.isfile(os.path.join(module, "package.json")):
        why = "standardwebhooks not installed in tests/openapi/" \
              "node_modules (npm ci there: tests/lib/deps.sh)"
    if why is not None:
        missing("signatures checked against standardwebhooks", why)
        return done()

    now = int(time.time())
    secrets = []
    for _ in range(2):
        rc, s = tool(bin_, ["secret"], b"")
        secrets.append(s)
    check.expect(all(s.startswith("whsec_") and len(s) == 38 for s in secrets)
                 and secrets[0] != secrets[1], "idem_webhook_secret_new: two "
                 "different whsec_ secrets", secrets)
    # Keys of other lengths, one written without its prefix.
    secrets.append("whsec_" + base64.b64encode(os.urandom(32)).decode())
    secrets.append(base64.b64encode(os.urandom(64)).decode())
    bodies = [
        ("JSON", json.dumps({"id": "evt_1", "type": "payment.succeeded",
                             "data": {"amount": 1250}}).encode()),
        ("UTF-8", '{"name": "Zoë €5 日本"}'.encode()),
        ("empty", b""),
        ("binary, NUL and 0xff", bytes(range(256)) * 3),
        ("CRLF and blanks", b'{\r\n  "a" : 1 \r\n}\n'),
        ("100 KiB", b"x" * 102400),
    ]
    ids = ["evt_" + os.urandom(16).hex(), "msg_p5jXN8AQM9LWM0D4loKWxJek",
           "evt.with.dots", "evt_ü"]

    # One batch for the library: every signature it makes, every check.
    cases, expect = [], []

    def node(case, what):
        case = dict(case)
        case["body"] = base64.b64encode(case["body"]).decode()
        cases.append(case)
        expect.append(what)

    # The vector, signed by the library: its output is the published one.
    node({"op": "sign", "secret": VECTOR[0], "id": VECTOR[1],
          "ts": VECTOR[2], "body": VECTOR[3]}, ("vector",))
    combos = []
    for i, (bname, body) in enumerate(bodies):
        secret = secrets[i % len(secrets)]
        mid = ids[i % len(ids)]
        rc, sig = tool(bin_, ["sign", secret, mid, now], body)
        combos.append((bname, body, secret, mid, rc, sig))
        node({"op": "sign", "secret": secret, "id": mid, "ts": now,
              "body": body}, ("same", len(combos) - 1))
        node({"op": "verify", "secret": secret, "id": mid, "ts": str(now),
              "sigs": sig, "body": body}, ("accept", "%s body, idem's "
              "signature" % bname))
        # Changed after signing: each must be refused.
        node({"op": "verify", "secret": secret, "id": mid, "ts": str(now),
              "sigs": sig, "body": body + b" "}, ("reject", "%s body with "
              "a byte more" % bname))
        if body:
            node({"op": "verify", "secret": secret, "id": mid,
                  "ts": str(now), "sigs": sig,
                  "body": bytes([body[0] ^ 1]) + body[1:]},
                 ("reject", "%s body with its first byte changed" % bname))
        node({"op": "verify", "secret": secret, "id": mid,
              "ts": str(now + 1), "sigs": sig, "body": body},
             ("reject", "%s body, timestamp + 1" % bname))
        node({"op": "verify", "secret": secret, "id": mid + "x",
              "ts": str(now), "sigs": sig, "body": body},
             ("reject", "%s body, another id" % bname))
        node({"op": "verify", "secret": secrets[(i + 1) % len(secrets)],
              "id": mid, "ts": str(now), "sigs": sig, "body": body},
             ("reject", "%s body, another secret" % bname))
    # Out of time, though correctly signed by idem.
    for delta, word in ((-TOLERANCE - 60, "old"), (TOLERANCE + 60, "new")):
        rc, sig = tool(bin_, ["sign", secrets[0], ids[0], now + delta],
                       bodies[0][1])
        node({"op": "verify", "secret": secrets[0], "id": ids[0],
              "ts": str(now + delta), "sigs": sig, "body": bodies[0][1]},
             ("reject-" + word, "a timestamp %d s %s" % (
                 abs(delta), "ago" if delta < 0 else "ahead")))
    # Rotation: another secret's signature first, idem's second.
    rc, other = tool(bin_, ["sign", secrets[1], ids[0], now], bodies[0][1])
    rc, sig = tool(bin_, ["sign", secrets[0], ids[0], now], bodies[0][1])
    node({"op": "verify", "secret": secrets[0], "id": ids[0],
          "ts": str(now), "sigs": other + " " + sig, "body": bodies[0][1]},
         ("accept", "two signatures, the second one idem's"))

    p = subprocess.run(["node", script], input=json.dumps(
        {"module": module, "cases": cases}).encode(), capture_output=True,
        timeout=120)
    check.expect(p.returncode == 0, "the reference library ran",
                 p.stderr.decode()[-2000:])
    results = json.loads(p.stdout)
    check.expect(len(results) == len(cases), "one result per case (%d)"
                 % len(cases))

    for case, what, res in zip(cases, expect, results):
        kind = what[0]
        body = base64.b64decode(case["body"])
        if kind == "vector":
            check.expect(res.get("sig") == VECTOR[4], "the library signs the "
                         "specification's vector as published", res)
            rc, sig = tool(bin_, ["sign", VECTOR[0], VECTOR[1], VECTOR[2]],
                           VECTOR[3])
            check.expect(rc == 0 and sig == VECTOR[4], "idem signs it the same", sig)
        elif kind == "same":
            bname, _, secret, mid, rc, sig = combos[what[1]]
            check.expect(rc == 0 and res.get("sig") == sig, "%s body: the library's "
                         "signature is idem's, byte for byte" % bname,
                         (sig, res))
            # The library's signature, verified by idem; then changed.
            v = tool(bin_, ["verify", secret, mid, now, res.get("sig", ""),
                            now, TOLERANCE], body)
            check.expect(v == (0, "ok"), "%s body: idem verifies the library's "
                         "signature" % bname, v)
            v = tool(bin_, ["verify", secret, mid, now, res.get("sig", ""),
                            now, TOLERANCE], body + b" ")
            check.expect(v == (1, "mismatch"), "%s body: idem refuses it for a body "
                         "with a byte more" % bname, v)
            v = tool(bin_, ["verify", secret, mid, now + 1,
                            res.get("sig", ""), now, TOLERANCE], body)
            check.expect(v == (1, "mismatch"), "%s body: idem refuses it for "
                         "timestamp + 1" % bname, v)
            v = tool(bin_, ["verify", secret, mid + "x", now,
                            res.get("sig", ""), now, TOLERANCE], body)
            check.expect(v == (1, "mismatch"), "%s body: idem refuses it for "
                         "another id" % bname, v)
        elif kind == "accept":
            check.expect(res.get("ok") is True, "the library accepts: %s" % what[1],
                         res)
            v = tool(bin_, ["verify", case["secret"], case["id"],
                            case["ts"], case["sigs"], now, TOLERANCE], body)
            check.expect(v == (0, "ok"), "idem accepts: %s" % what[1], v)
        elif kind == "reject":
            check.expect(res.get("ok") is False and "No matching signature" in
                         res.get("error", ""), "the library refuses: %s" % what[1],
                         res)
            v = tool(bin_, ["verify", case["secret"], case["id"],
                            case["ts"], case["sigs"], now, TOLERANCE], body)
            check.expect(v == (1, "mismatch"), "idem refuses: %s" % what[1], v)
        else:
            word = kind.split("-")[1]
            check.expect(res.get("ok") is False and "too " + word in
                         res.get("error", ""), "the library refuses: %s" % what[1],
                         res)
            v = tool(bin_, ["verify", case["secret"], case["id"],
                            case["ts"], case["sigs"], now, TOLERANCE], body)
            check.expect(v == (1, "too_" + word), "idem refuses: %s (too_%s)"
                         % (what[1], word), v)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
