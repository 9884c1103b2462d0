#!/usr/bin/env python3
"""lifecycle.py - lifecycle tests of idem's phased payments: worker crashes
at each phase boundary and resumption after the lock timeout, the card
acquirer declining, failing and timing out, reclaim, eviction, the
janitor's fleet lock, and the metrics.  Prints TAP.

  lifecycle.py --pg CONNINFO [--srcdir DIR] [--builddir DIR] [--tmp DIR]
               [--only TEXT]... [--keep]

CONNINFO is a libpq key=value connection string of a running PostgreSQL
server where we may create databases (run.sh starts a private one when
none is given).  Two databases are created for the run, migrated with
idemctl and dropped at the end.  It starts the acquirer simulator
(tests/acquirer/acquirer.py) and eight lighttpd fixtures, each spawning
BUILDDIR's payments.fcgi through bin-path with its own config file:
"main", "deny" ([metrics] allow = 10.9.9.9), four with IDEM_FAULT set
(before:payment_created, after:payment_created, before:charged,
after:charged) sharing main's database, and "j1", "j2" (evict_interval
1s) on the second database.

Exit status: 0 when no check failed, 1 otherwise, 2 on a usage error.
"""

import argparse
import os
import shutil
import signal
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pg", required=True, help="libpq conninfo (key=value)")
    ap.add_argument("--srcdir", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--builddir", help="where apps/ were built (default: "
                    "srcdir)")
    ap.add_argument("--tmp", help="work directory (default: a new temp dir)")
    ap.add_argument("--only", action="append",
                    help="run only checks whose name contains this")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (logs, configs)")
    args = ap.parse_args()
    args.srcdir = os.path.abspath(args.srcdir)
    args.builddir = os.path.abspath(args.builddir or args.srcdir)
    made_tmp = False
    if not args.tmp:
        args.tmp = tempfile.mkdtemp(prefix="idem-lc.")
        made_tmp = True
    args.tmp = os.path.abspath(args.tmp)
    os.makedirs(args.tmp, exist_ok=True)
    os.chmod(args.tmp, 0o755)

    sys.path.insert(0, os.path.join(args.srcdir, "tests", "integration"))
    sys.path.insert(0, HERE)
    import harness
    import lcenv
    import checks  # noqa: F401 (registers the checks)

    sys.stdout.reconfigure(line_buffering=True)

    def on_signal(signum, frame):
        # Once: the cleanup below must not be interrupted by a second one.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("# interrupted by signal %d: cleaning up" % signum)
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    env = lcenv.Env(args)
    rc = 1
    try:
        try:
            env.setup(lambda msg: print("# " + msg, flush=True))
        except Exception as e:
            print("not ok 1 - [lifecycle] setup: databases, acquirer "
                  "simulator, lighttpd fixtures")
            diag = str(e) if isinstance(e, harness.Failed) else \
                traceback.format_exc()
            for ln in diag.rstrip().splitlines():
                print("#   " + ln)
            for fx in env.fx.values():
                for ln in fx.logs_tail(8):
                    print("#   [%s] %s" % (fx.name, ln))
            print("1..1", flush=True)
            return 1
        passed, failed, skipped = harness.run_checks(env, args.only)
        print("# lifecycle: %d passed, %d failed, %d skipped"
              % (passed, failed, skipped))
        if failed:
            for name in ("main", "f-apc", "j1"):
                fx = env.fx.get(name)
                for ln in fx.logs_tail(12) if fx else ():
                    print("#   [%s] %s" % (name, ln))
            print("# logs (lighttpd and payments.fcgi stderr) are in %s"
                  % args.tmp if args.keep else
                  "# rerun with --keep to keep the logs")
        rc = 1 if failed else 0
    finally:
        env.teardown()
        if made_tmp and not args.keep:
            shutil.rmtree(args.tmp, ignore_errors=True)
        elif args.keep:
            print("# kept %s" % args.tmp)
        sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
