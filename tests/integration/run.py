#!/usr/bin/env python3
"""run.py - run the integration scenarios against one running server
fixture and print TAP.  tests/run starts the fixtures and calls this; it can
also be pointed at any running deployment (e.g. scripts/demo):

  tests/integration/run.py --fixture lighttpd --base 127.0.0.1:8080 \\
      --pg 'host=/tmp/x/pgrun port=5432 dbname=postgres user=postgres' \\
      --tenant a:NAME:SECRET --tenant b:NAME:SECRET \\
      [--idemctl 'apps/idemctl/idemctl' --config payments.ini] \\
      [--fcgi SOCKET|HOST:PORT] [--app-root-pid PID] [--only SUBSTR]

Exit status: 0 when no check failed, 1 otherwise, 2 on a usage error.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

import harness  # noqa: E402

# Scenario modules, in the order they run.
SCENARIOS = ["s_api", "s_idem", "s_refunds", "s_tenants", "s_concurrency",
             "s_badinput", "s_malformed", "s_fcgi", "s_boundary", "s_outage",
             "s_openapi", "s_stored", "s_slowbody", "s_exclude", "s_wait",
             "s_remember", "s_query", "s_edge", "s_webhooks"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixture", required=True,
                    help="name of the server fixture (shown in test names)")
    ap.add_argument("--base", required=True, help="HOST:PORT of the server")
    ap.add_argument("--pg", required=True, help="libpq conninfo")
    ap.add_argument("--tenant", action="append", default=[],
                    help="LABEL:NAME:SECRET (labels a and b are required)")
    ap.add_argument("--idemctl", help="idemctl command")
    ap.add_argument("--config", help="the app's config file")
    ap.add_argument("--fcgi", help="the app's FastCGI socket path or "
                    "HOST:PORT, for the direct checks")
    ap.add_argument("--app-root-pid", help="pid(s) (comma-separated) of the "
                    "app or of the server that spawned it")
    ap.add_argument("--only", action="append",
                    help="run only checks whose name contains this")
    args = ap.parse_args()

    for m in SCENARIOS:
        __import__(m)
    from env import Env
    env = Env(args)
    passed, failed, skipped = harness.run_checks(env, args.only)
    print("# %s: %d passed, %d failed, %d skipped"
          % (args.fixture, passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
