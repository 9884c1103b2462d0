#!/bin/bash
# tests/lifecycle/run.sh - the lifecycle tests of idem (crashes at phase
# boundaries, lock timeout, reclaim, eviction, the janitor's fleet lock,
# metrics), TAP on stdout.
#
#   tests/lifecycle/run.sh [--srcdir DIR] [--builddir DIR] [--pg CONNINFO]
#                          [--only TEXT]... [--keep]
#
# --pg: a libpq key=value conninfo of a running PostgreSQL server where
# databases may be created (tests/run passes its own); without it a private
# throwaway cluster is started (tests/lib/pg.sh) and stopped at the end.
# Needs lighttpd, psql, python3 and BUILDDIR's payments.fcgi and idemctl.
# --only TEXT runs only the checks whose name contains TEXT; --keep keeps
# the temp dir (configs, lighttpd and payments.fcgi logs).
# Exit status 0 only when no check failed.

set -u
IDEM_PROG=tests/lifecycle/run.sh
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRCDIR=$(cd "$HERE/../.." && pwd)
BUILDDIR=
PG=
PASS=()

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; }

while [ $# -gt 0 ]; do
	case $1 in
	--srcdir) SRCDIR=$(cd "$2" && pwd) || exit 2; shift 2 ;;
	--srcdir=*) SRCDIR=$(cd "${1#*=}" && pwd) || exit 2; shift ;;
	--builddir) BUILDDIR=$(cd "$2" && pwd) || exit 2; shift 2 ;;
	--builddir=*) BUILDDIR=$(cd "${1#*=}" && pwd) || exit 2; shift ;;
	--pg) PG=$2; shift 2 ;;
	--pg=*) PG=${1#*=}; shift ;;
	--only) PASS+=(--only "$2"); shift 2 ;;
	--only=*) PASS+=(--only "${1#*=}"); shift ;;
	--keep) export IDEM_KEEP_TMP=1; PASS+=(--keep); shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "$IDEM_PROG: unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
done
[ -n "$BUILDDIR" ] || BUILDDIR=$SRCDIR

# shellcheck source=tests/lib/common.sh
. "$SRCDIR/tests/lib/common.sh"
# shellcheck source=tests/lib/pg.sh
. "$SRCDIR/tests/lib/pg.sh"

CHILD=
on_exit() {
	trap '' INT TERM HUP
	if [ -n "$CHILD" ] && idem_pid_running "$CHILD"; then
		kill -TERM "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	idem_run_cleanup
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

fail_setup() {
	echo "not ok 1 - [lifecycle] $1"
	[ $# -ge 2 ] && printf '%s\n' "$2" | sed 's/^/#   /'
	echo "1..1"
	exit 1
}

command -v psql >/dev/null || fail_setup "psql not found"
command -v python3 >/dev/null || fail_setup "python3 not found"

TMP=$(idem_mktemp idem-lc) || fail_setup "no temp dir"
idem_at_exit "idem_rm_tree '$TMP'"
if [ -z "$PG" ]; then
	idem_at_exit pg_stop
	pg_start "$TMP" 2>"$TMP/pg_start.err" ||
		fail_setup "a private PostgreSQL starts" "$(cat "$TMP/pg_start.err")"
	PG=$PG_CONNINFO
	echo "# private PostgreSQL: $PG"
fi

python3 "$HERE/lifecycle.py" --srcdir "$SRCDIR" --builddir "$BUILDDIR" \
    --pg "$PG" --tmp "$TMP/lc" "${PASS[@]}" &
CHILD=$!
wait "$CHILD"
rc=$?
CHILD=
exit "$rc"
