#!/usr/bin/env python3
"""perfsum.py - one line of where the CPU went during a run, for
tests/bench/run with BENCH_PERF=1.

    perfsum.py NAME DIR

DIR holds the text reports of "perf record -a -e cpu-clock" of the run:
perf-comm.txt (by process name), perf-pg.txt (postgres, by symbol, with
children) and perf-app.txt (payments.fcgi, by library and symbol).  The
line gives each process's share of all samples of the machine, the part
of it PostgreSQL spent parsing, analysing, planning, executing and
committing, and the part of payments.fcgi spent in the kernel.
"""
import re
import sys

OURS = ("postgres", "payments.fcgi", "lighttpd", "nginx", "wrk", "pgbench")


def main():
    name, d = sys.argv[1:3]
    share = {}
    with open(d + "/perf-comm.txt") as f:
        for line in f:
            m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
            if m:
                share[m.group(2)] = share.get(m.group(2), 0) + float(m.group(1))
    fn = {}
    with open(d + "/perf-pg.txt") as f:
        for line in f:
            m = re.match(r"\s*([\d.]+)%\s+[\d.]+%\s+\[.\]\s+(\S+)", line)
            if m and m.group(2) not in fn:
                fn[m.group(2)] = float(m.group(1))
    kernel = 0.0
    with open(d + "/perf-app.txt") as f:
        for line in f:
            m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[k\]", line)
            if m:
                kernel += float(m.group(1))

    def f(*names):
        return sum(fn.get(n, 0) for n in names)

    parts = ["%s %.0f%%" % (c, share[c]) for c in OURS
             if share.get(c, 0) >= 0.5]
    parts.append("other %.0f%%" % (100 - sum(share.get(c, 0) for c in OURS)))
    out = "%-22s %s" % (name, ", ".join(parts))
    if share.get("postgres", 0) > 0:
        out += ("; postgres: parse %.0f, analyze %.0f, plan %.0f, execute "
                "%.0f, commit %.0f" % (
                    f("raw_parser"),
                    f("parse_analyze_fixedparams", "parse_analyze_varparams"),
                    f("pg_plan_queries"), f("PortalRun"),
                    f("CommitTransactionCommand")))
    if share.get("payments.fcgi", 0) > 0:
        out += "; payments.fcgi in the kernel: %.0f" % kernel
    print(out)


if __name__ == "__main__":
    main()
