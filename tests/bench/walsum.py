#!/usr/bin/env python3
"""walsum.py - what a run wrote to the WAL, per create, for tests/bench/run.

    walsum.py PG_WALDUMP WALDIR START END N REL...

Reads the records from START to END (LSNs as PostgreSQL prints them) with
pg_waldump and prints one line of "name=value" pairs, each divided by N
(the creates of the run).  REL is "relfilenode=KIND:TABLE:NAME", KIND r
(a table) or i (an index of TABLE); records are attributed by the first
block they modify.

  bytes:TABLE     bytes of the records of TABLE's heap (KIND r)
  ixbytes:TABLE   bytes of the records of TABLE's indexes
  bytes:commit    bytes of the transaction records (commits)
  bytes:other     everything else (a checkpoint, multixacts, ...)
  heap:TABLE:OP   heap records of TABLE: INSERT, UPDATE, HOT_UPDATE, LOCK
  ix:NAME         entries added to the index NAME: leaf inserts
                  (INSERT_LEAF, INSERT_POST, or a leaf split that carries
                  the new entry)
  fpi             full-page images
  records         all records

When END was not yet written when pg_waldump read, it stops there with an
error; what it printed up to then is counted ("partial=1").
"""
import re
import subprocess
import sys

LINE = re.compile(r"^rmgr: (\S+)\s+len \(rec/tot\):\s*\d+/\s*(\d+), .*?desc: (\S+)(.*)$")
REL = re.compile(r"blkref #\d+: rel \d+/\d+/(\d+)")


def main():
    waldump, waldir, start, end, n = sys.argv[1:6]
    n = max(int(n), 1)
    rels = {}
    for a in sys.argv[6:]:
        node, _, spec = a.partition("=")
        kind, table, name = spec.split(":", 2)
        rels[node] = (kind, table, name)
    try:
        p = subprocess.Popen([waldump, "-p", waldir, "-s", start, "-e", end],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    except OSError as e:
        sys.stderr.write("walsum.py: %s: %s\n" % (waldump, e))
        sys.exit(1)
    count = {}

    def add(k, v=1):
        count[k] = count.get(k, 0) + v

    for line in p.stdout:
        m = LINE.match(line)
        if not m:
            continue
        rmgr, size, op, rest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        # "INSERT+INIT": the first tuple of a new page
        op = op.split("+")[0]
        add("records")
        add("fpi", rest.count(" FPW"))
        r = REL.search(rest)
        rel = rels.get(r.group(1)) if r else None
        if rmgr == "Transaction":
            add("bytes:commit", size)
        elif rel is None or rmgr not in ("Heap", "Heap2", "Btree"):
            add("bytes:other", size)
        elif rel[0] == "r":
            add("bytes:" + rel[1], size)
            if rmgr == "Heap" and op in ("INSERT", "UPDATE", "HOT_UPDATE", "LOCK"):
                add("heap:%s:%s" % (rel[1], op))
        else:
            add("ixbytes:" + rel[1], size)
            if rmgr == "Btree" and (op in ("INSERT_LEAF", "INSERT_POST") or
                                    (op.startswith("SPLIT_") and "level 0" in rest)):
                add("ix:" + rel[2])
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait()
    out = ["%s=%.2f" % (k, v / n) for k, v in sorted(count.items())]
    # pg_waldump ends with an error at the first record not yet written
    out.append("partial=%d" % (1 if rc != 0 and "error" in err else 0))
    print(" ".join(out))


if __name__ == "__main__":
    main()
