#!/usr/bin/env python3
"""sqlsum.py - checksums of the SQL that create.sql mirrors, for
tests/bench/run: it tells when the middleware's or the handler's SQL has
changed since create.sql was written.

    sqlsum.py SRCDIR          print "NAME=SUM" for each statement
    sqlsum.py SRCDIR FILE     compare with the "-- mirrors:" line of FILE
                              (NAME=SUM ...); print the names that differ
                              (nothing: all the same)

The statements: sql_lookup and sql_complete of lib/request/idempotency.c,
the outbox's enqueue of lib/runtime/outbox.c
(C string literals) and the INSERT INTO payments that
apps/payments/payments.c defers.  Whitespace is normalised; the sum is the
first 12 hex digits of SHA-256.
"""
import hashlib
import re
import sys

LIT = r'(?:"(?:[^"\\\n]|\\.)*"\s*)+'


def join(lits):
    parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"', lits)
    s = "".join(p.replace('\\"', '"').replace("\\\\", "\\") for p in parts)
    return re.sub(r"\s+", " ", s).strip()


def sums(srcdir):
    out = {}
    with open(srcdir + "/lib/request/idempotency.c") as f:
        src = f.read()
    for name in ("sql_lookup", "sql_complete"):
        m = re.search(r"static const char %s\[\]\s*=\s*(%s);" % (name, LIT),
                      src)
        out[name] = join(m.group(1)) if m else ""
    with open(srcdir + "/apps/payments/payments.c") as f:
        src = f.read()
    out["payments_insert"] = ""
    for m in re.finditer(r"idem_req_defer(?:_args)?\(\s*req,\s*(%s)," % LIT, src):
        s = join(m.group(1))
        if s.startswith("INSERT INTO payments"):
            out["payments_insert"] = s
            break
    with open(srcdir + "/lib/runtime/outbox.c") as f:
        src = f.read()
    m = re.search(r"idem_req_defer_args\(req,\s*(%s)," % LIT, src)
    out["outbox_enqueue"] = join(m.group(1)) if m else ""
    return {k: hashlib.sha256(v.encode()).hexdigest()[:12] if v else "missing"
            for k, v in out.items()}


def main():
    now = sums(sys.argv[1])
    if len(sys.argv) < 3:
        for k, v in now.items():
            print("%s=%s" % (k, v))
        return
    want = {}
    with open(sys.argv[2]) as f:
        for line in f:
            if line.startswith("-- mirrors:"):
                for kv in line.split(":", 1)[1].split():
                    k, _, v = kv.partition("=")
                    want[k] = v
    for k, v in want.items():
        if now.get(k) != v:
            print(k)


if __name__ == "__main__":
    main()
