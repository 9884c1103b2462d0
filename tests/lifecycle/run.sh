#!/bin/sh
# tests/lifecycle/run.sh - the lifecycle tests of idem (crashes at phase
# boundaries, lock timeout, reclaim, eviction, the janitor's fleet lock,
# metrics), TAP on stdout.  A wrapper for run.py, which takes the same
# arguments:
#
#   tests/lifecycle/run.sh [--srcdir DIR] [--builddir DIR] [--pg CONNINFO]
#                          [--tmp DIR] [--only TEXT]... [--keep]
#
# Without --pg a private PostgreSQL is started (tests/lib/pg.sh) and
# stopped at the end.  Needs python3, psql, lighttpd and BUILDDIR's
# payments.fcgi and idemctl.  Exit status 0 only when no check failed.
here=$(cd "$(dirname "$0")" && pwd) || exit 2
exec "${PYTHON:-python3}" "$here/run.py" "$@"
