# tests/lib/common.sh - small shell functions shared by tests/run, scripts/test
# and scripts/demo.  Source it; it defines functions only (and a few
# variables prefixed IDEM_), it runs nothing by itself.
#
# POSIX-ish bash: the callers are bash scripts.

# The tests/ folder (absolute: callers may change directory).
IDEM_TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Messages go to stderr so that stdout stays machine-readable.
idem_say() { printf '%s\n' "$*" >&2; }
idem_die() { printf '%s: error: %s\n' "${IDEM_PROG:-${0##*/}}" "$*" >&2; exit 2; }

# --- cleanup stack -----------------------------------------------------------
# idem_at_exit CMD... registers a command; they run in reverse order once,
# from the EXIT trap (also on INT/TERM, which are turned into an exit).
IDEM_CLEANUP=()
IDEM_CLEANED=0
idem_at_exit() { IDEM_CLEANUP+=("$*"); }
idem_run_cleanup() {
	[ "$IDEM_CLEANED" = 1 ] && return 0
	IDEM_CLEANED=1
	local i
	for ((i = ${#IDEM_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${IDEM_CLEANUP[$i]}" || true
	done
}
idem_install_traps() {
	trap 'idem_run_cleanup' EXIT
	trap 'idem_say "interrupted"; exit 130' INT
	trap 'idem_say "terminated"; exit 143' TERM
	trap 'exit 129' HUP
}

# --- temp dir ------------------------------------------------------------------
# idem_mktemp PREFIX: prints a fresh directory.  Mode 755, because the
# postgres (and www-data) users must be able to traverse it.  Kept short
# (unix socket paths are limited to 107 bytes).
idem_mktemp() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/${1:-idem}.XXXXXX") || return 1
	chmod 755 "$d"
	printf '%s\n' "$d"
}

# idem_rm_tree DIR: remove a temp tree unless IDEM_KEEP_TMP=1.
idem_rm_tree() {
	if [ "${IDEM_KEEP_TMP:-0}" = 1 ]; then
		idem_say "keeping $1"
	else
		rm -rf -- "$1"
	fi
}

# --- ports and waiting ---------------------------------------------------------
# idem_free_port: a TCP port on 127.0.0.1 that was free a moment ago.
idem_free_port() {
	python3 - <<'EOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
EOF
}

# idem_port_free PORT: true when nothing listens on 127.0.0.1:PORT.
idem_port_free() {
	python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}

# idem_wait_until TIMEOUT_S DESCRIPTION CMD...: run CMD every 0.1 s until it
# succeeds; fail (status 1) after TIMEOUT_S seconds.  If IDEM_WAIT_PID is set
# and that process dies meanwhile, fail at once.
idem_wait_until() {
	local timeout=$1 what=$2; shift 2
	local deadline=$((SECONDS + timeout))
	while :; do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		if [ -n "${IDEM_WAIT_PID:-}" ] && ! kill -0 "$IDEM_WAIT_PID" 2>/dev/null; then
			idem_say "$what: process $IDEM_WAIT_PID exited while waiting"
			return 1
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			idem_say "$what: not ready after ${timeout}s"
			return 1
		fi
		sleep 0.1
	done
}

# idem_http_ok URL: true when GET URL answers 200 (python, no curl needed).
idem_http_ok() {
	python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

# idem_tcp_open HOST PORT: true when something accepts connections there.
idem_tcp_open() {
	python3 - "$1" "$2" <<'EOF'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()
except OSError:
    sys.exit(1)
EOF
}

# idem_stop_pid PID [NAME]: SIGTERM, wait up to 10 s, then SIGKILL.  Only
# ever the process we started (by its id).
idem_stop_pid() {
	local pid=$1 name=${2:-process} i
	[ -n "$pid" ] || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		idem_pid_running "$pid" || { wait "$pid" 2>/dev/null; return 0; }
		sleep 0.1
	done
	idem_say "$name ($pid) did not stop after SIGTERM; sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# idem_pid_running PID: alive and not a zombie.
idem_pid_running() {
	local st
	[ -r "/proc/$1/stat" ] || return 1
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# idem_descendants PID NAME: PID and those of its descendants whose
# executable's file name contains NAME, one pid a line (the walk of
# tests/integration/harness.py's app_pids).
idem_descendants() {
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$IDEM_TESTS_DIR/integration" \
	    python3 -c 'import sys, harness
for p in sorted(harness.app_pids([int(sys.argv[1])], sys.argv[2])):
    print(p)' "$1" "$2"
}

# idem_wait_gone TIMEOUT_S PID...: wait until none of the pids runs; prints
# those still running after the timeout (status 1 then).
idem_wait_gone() {
	local timeout=$1 p left; shift
	local deadline=$((SECONDS + timeout))
	while :; do
		left=
		for p in "$@"; do idem_pid_running "$p" && left="$left $p"; done
		[ -z "$left" ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "${left# }"
			return 1
		fi
		sleep 0.1
	done
}

# idem_tail FILE [N]: show the end of a log file on stderr, indented.
idem_tail() {
	[ -s "$1" ] || return 0
	idem_say "--- last lines of ${1##*/} ---"
	tail -n "${2:-30}" "$1" | sed 's/^/    /' >&2
}

# idem_as_user USER CMD...: run CMD as USER when we are root, else as we are.
idem_as_user() {
	local u=$1; shift
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$u" -- "$@"
	else
		"$@"
	fi
}
