#!/usr/bin/env python3
"""run.py - lifecycle tests of idem's phased payments: worker crashes at
each phase boundary and resumption after the lock timeout, the card
acquirer declining, failing and timing out, reclaim, eviction, the
janitor's fleet lock, and the metrics.  Prints TAP.

  tests/lifecycle/run.py [--srcdir DIR] [--builddir DIR] [--pg CONNINFO]
                         [--tmp DIR] [--only TEXT]... [--keep]

--pg: a libpq key=value conninfo of a running PostgreSQL server where
databases may be created (e.g. the one tests/run started).  Without it a
private throwaway cluster is started with tests/lib/pg.sh (pg_start) in
the work directory and stopped at the end.  Either way two databases are
created for the run, migrated with idemctl and dropped at the end.

It starts the acquirer simulator (tests/acquirer/acquirer.py) and eight
lighttpd fixtures on 127.0.0.1, each spawning BUILDDIR's payments.fcgi
through bin-path with its own config file: "main", "deny" ([metrics]
allow = 10.9.9.9), four with IDEM_FAULT in the app's environment
(before:payment_created, after:payment_created, before:charged,
after:charged) on main's database, and "j1", "j2" (evict_interval 1s) on
the second database.  The crash checks skip when payments.fcgi was built
without --enable-fault-injection.

--tmp: the work directory (default: a new one in $TMPDIR, removed at the
end unless --keep).  --only TEXT runs only the checks whose name contains
TEXT.  Exit status: 0 when no check failed, 1 otherwise, 2 on a usage
error.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True


class PrivatePG:
    """A throwaway cluster through tests/lib/pg.sh."""

    START = ('. "$1/common.sh" && . "$1/pg.sh" && pg_start "$2" >&2 && '
             'printf "%s\\n" "$PG_CONNINFO"')
    STOP = ('. "$1/common.sh" && . "$1/pg.sh" && '
            'PG_BINDIR=$(pg_find_bindir) && PG_DATA=$2/pg && PG_STARTED=1 '
            '&& pg_stop')
    RESTART = ('. "$1/common.sh" && . "$1/pg.sh" && '
               'PG_BINDIR=$(pg_find_bindir) && PG_DATA=$2/pg && '
               'PG_LOG=$2/pgrun/postgres.log && pg_restart')

    def __init__(self, srcdir, dir):
        self.lib = os.path.join(srcdir, "tests", "lib")
        self.dir = dir
        self.conninfo = None

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        p = subprocess.run(["bash", "-c", self.START, "pg", self.lib,
                            self.dir], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           timeout=180)
        lines = p.stdout.decode().splitlines()
        if p.returncode != 0 or not lines:
            raise RuntimeError("a private PostgreSQL did not start: %s"
                               % p.stderr.decode(errors="replace").strip())
        self.conninfo = lines[-1]
        return self.conninfo

    def restart(self):
        """pg_ctl restart -m fast: every connection is cut."""
        p = subprocess.run(["bash", "-c", self.RESTART, "pg", self.lib,
                            self.dir], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("pg_ctl restart failed: %s"
                               % p.stdout.decode(errors="replace"))

    def stop(self):
        if os.path.exists(os.path.join(self.dir, "pg", "postmaster.pid")):
            subprocess.run(["bash", "-c", self.STOP, "pg", self.lib,
                            self.dir], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL,
                           stdin=subprocess.DEVNULL, timeout=120)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--srcdir", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--builddir", help="where apps/ were built (default: "
                    "srcdir)")
    ap.add_argument("--pg", help="libpq conninfo (key=value) of a running "
                    "server; default: start a private one")
    ap.add_argument("--tmp", help="work directory (default: a new temp dir)")
    ap.add_argument("--only", action="append",
                    help="run only checks whose name contains this")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (configs, logs)")
    args = ap.parse_args()
    args.srcdir = os.path.abspath(args.srcdir)
    args.builddir = os.path.abspath(args.builddir or args.srcdir)
    made_tmp = not args.tmp
    if made_tmp:
        args.tmp = tempfile.mkdtemp(prefix="idem-lc.")
    args.tmp = os.path.abspath(args.tmp)
    os.makedirs(args.tmp, exist_ok=True)
    os.chmod(args.tmp, 0o755)
    sys.stdout.reconfigure(line_buffering=True)

    def on_signal(signum, frame):
        # Once: the cleanup below must not be interrupted by a second one.
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        print("# interrupted by signal %d: cleaning up" % signum)
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)

    sys.path.insert(0, os.path.join(args.srcdir, "tests", "lib"))
    sys.path.insert(0, os.path.join(args.srcdir, "tests", "integration"))
    sys.path.insert(0, HERE)
    import harness
    import lcenv
    import checks  # noqa: F401 (registers the checks)
    import exactly_once  # noqa: F401 (and the interleaving matrix)
    import leases  # noqa: F401 (and the heartbeat's leases)
    import lease_stall  # noqa: F401 (and an owner whose heartbeat stalls)
    import completer  # noqa: F401 (and the completer's schedule)
    import webhooks  # noqa: F401 (and the outbox through a PG restart)
    import inbox  # noqa: F401 (and a signed message through a PG restart)
    # The teardown check stops the fixtures: it goes last (a stable sort).
    harness.CHECKS.sort(key=lambda c: c[0].startswith("teardown:"))

    env = None
    pg = None
    rc = 1
    try:
        try:
            if not args.pg:
                pg = PrivatePG(args.srcdir, os.path.join(args.tmp, "pgc"))
                args.pg = pg.start()
                print("# private PostgreSQL: %s" % args.pg)
            env = lcenv.Env(args)
            if pg is not None:
                env.pg_restart = pg.restart
            env.setup(lambda msg: print("# " + msg))
        except Exception as e:
            print("not ok 1 - [lifecycle] setup: PostgreSQL, databases, "
                  "acquirer simulator, lighttpd fixtures")
            diag = str(e) if isinstance(e, (harness.Failed, RuntimeError)) \
                else traceback.format_exc()
            for ln in diag.rstrip().splitlines():
                print("#   " + ln)
            for fx in (env.fx.values() if env else ()):
                for ln in fx.logs_tail(8):
                    print("#   [%s] %s" % (fx.name, ln))
            print("1..1")
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
                  % args.tmp if args.keep or not made_tmp else
                  "# rerun with --keep to keep the logs")
        rc = 1 if failed else 0
    finally:
        if env is not None:
            env.teardown()
        if pg is not None:
            pg.stop()
        if made_tmp and not args.keep:
            shutil.rmtree(args.tmp, ignore_errors=True)
        elif args.keep:
            print("# kept %s" % args.tmp)
    return rc


if __name__ == "__main__":
    sys.exit(main())
