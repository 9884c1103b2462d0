#!/bin/bash
# tests/integration/t_example.sh - the out-of-tree examples (hello, then
# ledger) against an installed libidem.
#
#   PREFIX=DIR tests/integration/t_example.sh
#
# PREFIX is an install prefix that "make install" populated.  The script
# copies examples/hello to a temp dir, builds it there with
#   PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig make -C COPY
# and checks that the program links against the installed libidem, that
# "./hello -h" exits with a usage message, that a bad config key is an
# error naming file:line, and (when systemd-socket-activate and cgi-fcgi
# are installed) that it serves requests on a socket passed as fd 3 and
# drains on SIGTERM.  No database is needed for that.
#
# The examples' own tests (hello_test.c, ledger_test.c, written with the
# installed libidem_test: idem_test(3)) need one: with PG_CONNINFO set (a
# cluster's conninfo; tests/run passes its own), each gets a fresh
# database migrated by PREFIX's idemctl (PREFIX/share/idem/sql, then the
# example's .sql), "make test" runs in a copy, and each of its TAP lines is
# one check here, then one for its exit status and whole plan.
#
# Output is TAP ("ok N - ...", "not ok N - ...", the plan last); the exit
# status is 0 only when nothing failed.  SRCDIR (default: two levels up
# from this script) is the source tree holding examples/hello.

set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRCDIR=${SRCDIR:-$(cd "$HERE/../.." && pwd)}
N=0 FAILED=0

ok()   { N=$((N + 1)); echo "ok $N - $1"; }
nok()  { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $1"
         [ $# -ge 2 ] && [ -n "$2" ] && printf '%s\n' "$2" | sed 's/^/#   /'
         return 0; }
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP $2"; }
check() {	# check NAME DIAG COMMAND...: ok when COMMAND succeeds
	local name=$1 diag=$2; shift 2
	if "$@"; then ok "$name"; else nok "$name" "$diag"; fi
}
finish() { echo "1..$N"; [ "$FAILED" = 0 ]; exit; }
build_copy() {	# build_copy NAME: examples/NAME copied into $TMP, built there
	cp -R "$SRCDIR/examples/$1" "$TMP/$1"
	rm -f "$TMP/$1/$1"
	if out=$(make -C "$TMP/$1" CFLAGS="-O2 -g -Wall -Wextra -Werror" 2>&1); then
		ok "make -C a copy of examples/$1 builds it without warnings"
	else
		nok "make -C a copy of examples/$1 builds it without warnings" "$out"
		finish
	fi
}

if [ -z "${PREFIX:-}" ]; then
	echo "1..0 # SKIP PREFIX (an installed prefix) is not set"
	exit 0
fi
if [ ! -f "$SRCDIR/examples/hello/hello.c" ]; then
	nok "examples/hello is in the source tree" "not found under $SRCDIR"
	finish
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/idem-example.XXXXXX") || {
	nok "temp dir"; finish; }
APP_PID=
# shellcheck disable=SC2317  # called by the trap
cleanup() {
	[ -n "$APP_PID" ] && kill -KILL "$APP_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
PC=$PKG_CONFIG_PATH/idem.pc

# --- the installation ----------------------------------------------------------
check "idem.pc is installed in PREFIX/lib/pkgconfig" "$PC missing" \
    test -f "$PC"
check "idem.h is installed in PREFIX/include" "$PREFIX/include/idem.h missing" \
    test -f "$PREFIX/include/idem.h"
check "idem_admin.h (the operator's calls) is installed in PREFIX/include" \
    "$PREFIX/include/idem_admin.h missing" test -f "$PREFIX/include/idem_admin.h"
check "idem_test_private.h (libidem_test's two entry points) is not installed" \
    "$PREFIX/include/idem_test_private.h installed" \
    test ! -e "$PREFIX/include/idem_test_private.h"
# every migration of the tree, the library's and the sample's, and every
# file of sql/functions (a file left out of Makefile.am's lists would leave
# the installed schema behind)
for d in sql sql/functions apps/payments/sql; do
	inst=$PREFIX/share/idem/${d#apps/}
	want=$(cd "$SRCDIR/$d" && ls -- *.sql)
	have=$(cd "$inst" 2>/dev/null && ls -- *.sql)
	if [ "$want" = "$have" ]; then
		ok "PREFIX/share/idem/${d#apps/} holds every .sql file of $d ($(wc -w <<<"$want"))"
	else
		nok "PREFIX/share/idem/${d#apps/} holds every .sql file of $d" \
		    "$(diff <(echo "$want") <(echo "$have"))"
	fi
done
if out=$(pkg-config --cflags --libs idem 2>&1); then
	ok "pkg-config idem resolves (its Requires are installed)"
else
	nok "pkg-config idem resolves (its Requires are installed)" "$out"
	finish
fi
# one header per audience: idem_admin.h alone gives the operator's calls
# (and idem.h's); idem.h alone gives a handler's and not the operator's
printf '#include <idem_admin.h>\nint main(void) { PGconn *db = idem_db_open(NULL, NULL, NULL, 0); idem_req_method(NULL); return db == NULL; }\n' \
    >"$TMP/admin.c"
check "idem_admin.h compiles alone and declares idem_db_open (and idem.h's calls)" \
    "see the compiler" cc $(pkg-config --cflags idem) -Wall -Werror \
    -c -o "$TMP/admin.o" "$TMP/admin.c"
printf '#include <idem.h>\nint main(void) { return idem_db_open(NULL, NULL, NULL, 0) == NULL; }\n' \
    >"$TMP/handler.c"
check "idem.h alone does not declare the operator's calls (idem_db_open)" \
    "idem_db_open declared by idem.h" \
    sh -c '! out=$(cc "$@" 2>&1) && echo "$out" | grep -q idem_db_open' \
    cc $(pkg-config --cflags idem) -Werror \
    -Werror=implicit-function-declaration -c -o "$TMP/handler.o" \
    "$TMP/handler.c"

# --- build the copy --------------------------------------------------------------
build_copy hello
BIN=$TMP/hello/hello
check "the build produced an executable" "$BIN missing" test -x "$BIN"

libdir=$(pkg-config --variable=libdir idem)
linked=$(ldd "$BIN" 2>&1 | awk '/libidem\.so/ { print $3 }')
if [ -n "$linked" ] && [ "$(readlink -f "$linked")" = "$(readlink -f "$libdir/$(basename "$linked")")" ]; then
	ok "hello is linked against PREFIX's libidem.so"
else
	nok "hello is linked against PREFIX's libidem.so" "$(ldd "$BIN" 2>&1)"
fi
if ldd "$BIN" 2>&1 | grep -q 'not found'; then
	nok "every shared library of hello is found" "$(ldd "$BIN" 2>&1 | grep 'not found')"
else
	ok "every shared library of hello is found"
fi

# The static library: libidem.a, then what idem.pc declares private
# (Libs.private -lfcgi -lpthread, Requires.private libcrypto libcurl:
# the runtime's dispatcher delivers with the HTTP client); libpq and
# yajl stay shared ("pkg-config --static" would ask for libpq's own
# private archives, which Debian does not ship).
if [ -f "$libdir/libidem.a" ]; then
	# shellcheck disable=SC2046
	if out=$(cc $(pkg-config --cflags idem) -o "$TMP/hello-static" \
	    "$TMP/hello/hello.c" "$libdir/libidem.a" \
	    $(pkg-config --libs idem | sed 's/-lidem//') -lfcgi -lpthread \
	    $(pkg-config --libs libcrypto libcurl) 2>&1) &&
	    ! ldd "$TMP/hello-static" | grep -q libidem; then
		ok "libidem.a links hello without libidem.so"
	else
		nok "libidem.a links hello without libidem.so" "$out"
	fi
else
	nok "libidem.a links hello without libidem.so" "$libdir/libidem.a missing"
fi

# --- the examples' own tests, with the installed libidem_test ------------------
check "idem-test.pc, idem_test.h and idem_test(3) are installed" \
    "missing under $PREFIX" test -f "$PKG_CONFIG_PATH/idem-test.pc" -a \
    -f "$PREFIX/include/idem_test.h" -a -f "$PREFIX/share/man/man3/idem_test.3"

# relay NAME FILE RC: FILE's TAP lines as our checks, then one for RC 0
# with every planned test run and passed (a bail out fails it)
relay() {
	local name=$1 file=$2 rc=$3 line plan='' seen=0
	while IFS= read -r line; do
		case $line in
		"ok "*) seen=$((seen + 1)); ok "$name: ${line#ok * - }" ;;
		"not ok "*) seen=$((seen + 1)); nok "$name: ${line#not ok * - }" ;;
		1..*) plan=${line#1..} ;;
		esac
	done <"$file"
	if [ "$rc" = 0 ] && [ -n "$plan" ] && [ "$plan" = "$seen" ] && [ "$seen" -gt 0 ]; then
		ok "$name: exits 0, $seen of $plan planned tests run"
	else
		nok "$name: exits 0, every planned test run" \
		    "exit $rc, plan '${plan:-none}', $seen run: $(grep -v '^ok' "$file" | head -20)"
	fi
}

for ex in hello ledger; do
	t="make test in a copy of examples/$ex (${ex}_test.c against PREFIX's libidem_test)"
	if [ -z "${PG_CONNINFO:-}" ]; then
		skip "$t" "PG_CONNINFO (a PostgreSQL to test against) is not set"
		continue
	fi
	db=idem_example_${ex}_$$
	conninfo=${PG_CONNINFO/dbname=postgres/dbname=$db}
	if [ "$conninfo" = "$PG_CONNINFO" ]; then
		conninfo="$PG_CONNINFO dbname=$db"
	fi
	cp -R "$SRCDIR/examples/$ex" "$TMP/$ex-test"
	rm -f "$TMP/$ex-test/$ex" "$TMP/$ex-test/${ex}_test"
	printf '[server]\nthreads = 2\nlog_level = error\n[database]\nconninfo = %s\npool_size = 2\n' \
	    "$conninfo" >"$TMP/$ex-test/test.ini"
	if ! out=$(psql "$PG_CONNINFO" -qc "create database $db" 2>&1) ||
	    ! out=$("$PREFIX/bin/idemctl" -c "$TMP/$ex-test/test.ini" migrate \
	    --dir "$PREFIX/share/idem/sql" --dir "$TMP/$ex-test" 2>&1); then
		nok "$t" "database $db: $out"
		continue
	fi
	make -s -C "$TMP/$ex-test" test CONFIG=test.ini \
	    CFLAGS="-O2 -g -Wall -Wextra -Werror" >"$TMP/$ex-test.tap" 2>"$TMP/$ex-test.err"
	rc=$?
	[ "$rc" = 0 ] || cat "$TMP/$ex-test.err" >>"$TMP/$ex-test.tap"
	relay "${ex}_test" "$TMP/$ex-test.tap" "$rc"
done

# --- the program ------------------------------------------------------------------
cd "$TMP/hello" || finish
err=$(timeout 10 ./hello -h 2>&1 </dev/null); rc=$?
if [ "$rc" = 2 ] && grep -q '^usage: .*-c config' <<<"$err"; then
	ok "./hello -h exits 2 with a usage line"
else
	nok "./hello -h exits 2 with a usage line" "exit $rc: $err"
fi

printf '[server]\nthreds = 4\n' >bad.ini
err=$(timeout 10 ./hello -c bad.ini 2>&1 </dev/null); rc=$?
if [ "$rc" = 1 ] && grep -q 'bad.ini:2: unknown key threds' <<<"$err"; then
	ok "an unknown config key is a startup error naming file:line"
else
	nok "an unknown config key is a startup error naming file:line" "exit $rc: $err"
fi

err=$(timeout 10 ./hello 2>&1 </dev/null); rc=$?
if [ "$rc" = 1 ] && grep -q 'no listening socket' <<<"$err"; then
	ok "without a socket (fd 0 not a socket, no -l) it exits 1"
else
	nok "without a socket (fd 0 not a socket, no -l) it exits 1" "exit $rc: $err"
fi

# --- socket activation (fd 3) and a few answers that need no database ----------
if ! command -v systemd-socket-activate >/dev/null || ! command -v cgi-fcgi >/dev/null; then
	why="systemd-socket-activate or cgi-fcgi (libfcgi-bin) not installed"
	for t in "GET /healthz on an fd 3 socket -> 200" \
	    "POST /v1/greetings without Authorization -> 401 problem" \
	    "GET of an unknown path -> 404 problem" \
	    "SIGTERM: drained and exited within 5 s"; do
		skip "$t" "$why"
	done
	finish
fi

SOCK=$TMP/hello.sock
systemd-socket-activate -l "$SOCK" ./hello >"$TMP/app.log" 2>&1 &
APP_PID=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done

# fcgi METHOD PATH [VAR=VALUE...]: one request, the raw CGI response
fcgi() {
	local m=$1 p=$2; shift 2
	env -i REQUEST_METHOD="$m" REQUEST_URI="$p" SCRIPT_NAME= PATH_INFO="$p" \
	    QUERY_STRING= CONTENT_LENGTH=0 REMOTE_ADDR=127.0.0.1 "$@" \
	    timeout 10 cgi-fcgi -bind -connect "$SOCK" 2>&1 </dev/null
}

r=$(fcgi GET /healthz)
# info lines are written by the log's own thread within 100 ms: awaited
for _ in $(seq 50); do
	grep -q '"runtime: .*workers' "$TMP/app.log" && break
	sleep 0.1
done
if grep -q '^Status: 200' <<<"$r" && grep -q '"status":"ok"' <<<"$r" &&
    grep -q '"runtime: .*workers' "$TMP/app.log"; then
	ok "GET /healthz on an fd 3 socket -> 200"
else
	nok "GET /healthz on an fd 3 socket -> 200" "$r
$(cat "$TMP/app.log")"
fi

r=$(fcgi POST /v1/greetings CONTENT_TYPE=application/json \
    HTTP_IDEMPOTENCY_KEY=k1)
if grep -q '^Status: 401' <<<"$r" &&
    grep -q '^Content-Type: application/problem+json' <<<"$r" &&
    grep -q '^WWW-Authenticate: Bearer' <<<"$r" &&
    grep -q '/problems/unauthorized"' <<<"$r"; then
	ok "POST /v1/greetings without Authorization -> 401 problem"
else
	nok "POST /v1/greetings without Authorization -> 401 problem" "$r"
fi

r=$(fcgi GET /nope)
if grep -q '^Status: 404' <<<"$r" && grep -q '/problems/not-found"' <<<"$r"; then
	ok "GET of an unknown path -> 404 problem"
else
	nok "GET of an unknown path -> 404 problem" "$r"
fi

kill -TERM "$APP_PID" 2>/dev/null
gone=0
for _ in $(seq 50); do
	kill -0 "$APP_PID" 2>/dev/null || { gone=1; break; }
	sleep 0.1
done
if [ "$gone" = 1 ] && wait "$APP_PID" && grep -q 'drained, exiting' "$TMP/app.log"; then
	ok "SIGTERM: drained and exited within 5 s"
else
	nok "SIGTERM: drained and exited within 5 s" "$(cat "$TMP/app.log")"
fi
APP_PID=

# --- the second example: examples/ledger (declared body, JSON writer, phases) --
build_copy ledger
SOCK=$TMP/ledger.sock
cd "$TMP/ledger" || finish
systemd-socket-activate -l "$SOCK" ./ledger >"$TMP/ledger.log" 2>&1 &
APP_PID=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done

r=$(fcgi GET /openapi.json)
doc=$(sed '1,/^\r\?$/d' <<<"$r")
if grep -q '^Status: 200' <<<"$r" && python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
op = d["paths"]["/v1/transfers"]["post"]
s = op["requestBody"]["content"]["application/json"]["schema"]
assert s["required"] == ["from", "to", "amount"], s["required"]
assert s["additionalProperties"] is False
assert s["properties"]["amount"]["maximum"] == 1000000000
x = op["x-idempotency"]
assert x == {"required": True, "retention_seconds": 86400,
             "lease_seconds": 10, "lock_timeout_seconds": 10}, x
assert any(p["name"] == "Idempotency-Key" and p["required"]
           for p in op["parameters"])
' <<<"$doc"; then
	ok "ledger: GET /openapi.json lists POST /v1/transfers with its declared body and x-idempotency"
else
	nok "ledger: GET /openapi.json lists POST /v1/transfers with its declared body and x-idempotency" "$r"
fi

r=$(fcgi GET /problems/payment-declined)
if grep -q '^Status: 200' <<<"$r" && grep -q '^Content-Type: text/html' <<<"$r" &&
    grep -q '<h1>Payment declined</h1>' <<<"$r"; then
	ok "ledger: GET /problems/payment-declined is its HTML page"
else
	nok "ledger: GET /problems/payment-declined is its HTML page" "$r"
fi

r=$(fcgi POST /v1/transfers CONTENT_TYPE=application/json HTTP_IDEMPOTENCY_KEY=k1)
if grep -q '^Status: 401' <<<"$r" && grep -q '"instance":"[0-9a-f]\{16\}"' <<<"$r" &&
    grep -q '"type":"/problems/unauthorized"' <<<"$r"; then
	ok "ledger: POST /v1/transfers without Authorization -> 401 with instance"
else
	nok "ledger: POST /v1/transfers without Authorization -> 401 with instance" "$r"
fi
kill -TERM "$APP_PID" 2>/dev/null
wait "$APP_PID" 2>/dev/null
APP_PID=
finish
