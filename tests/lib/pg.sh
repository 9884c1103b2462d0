# tests/lib/pg.sh - a private, throwaway PostgreSQL cluster.
#
#   pg_start DIR [PORT]   initdb DIR/pg, start it on a unix socket in DIR/pgrun
#                         (no TCP: listen_addresses = ''), wait until it runs.
#                         Sets PG_BINDIR PG_DATA PG_SOCKDIR PG_PORT PG_LOG
#                         and PG_CONNINFO ("host=... port=... dbname=postgres
#                         user=postgres").
#   pg_stop               stop it (fast shutdown); safe to call twice.
#   pg_restart            restart it (fast: every session is cut), wait.
#   pg_psql SQL...        run SQL with psql -At against it.
#
# As root, the server runs as the postgres user (initdb refuses root); the
# socket directory is owned by postgres, which must be able to write it.
# Requires tests/lib/common.sh.

PG_STARTED=0

# pg_find_bindir: the directory with initdb/pg_ctl/postgres.
pg_find_bindir() {
	local d
	if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/pg_ctl" ]; then
		printf '%s\n' "$PG_BINDIR"; return 0
	fi
	for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k4,4 -rn); do
		[ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { printf '%s\n' "$d"; return 0; }
	done
	d=$(command -v pg_ctl 2>/dev/null) && { printf '%s\n' "${d%/*}"; return 0; }
	return 1
}

pg_start() {
	local dir=$1 port=${2:-} owner
	PG_BINDIR=$(pg_find_bindir) || {
		idem_say "PostgreSQL server binaries (initdb, pg_ctl) not found; set PG_BINDIR"
		return 1
	}
	[ -n "$port" ] || port=$(idem_free_port) || return 1
	PG_DATA=$dir/pg
	PG_SOCKDIR=$dir/pgrun
	PG_PORT=$port
	PG_LOG=$PG_SOCKDIR/postgres.log
	if [ "$(id -u)" = 0 ]; then
		owner=postgres
		id postgres >/dev/null 2>&1 || {
			idem_say "running as root but there is no postgres user to run the server"
			return 1
		}
		install -d -o postgres -g postgres -m 700 "$PG_DATA" || return 1
		install -d -o postgres -g postgres -m 755 "$PG_SOCKDIR" || return 1
	else
		owner=$(id -un)
		install -d -m 700 "$PG_DATA" || return 1
		install -d -m 755 "$PG_SOCKDIR" || return 1
	fi
	if ! idem_as_user "$owner" "$PG_BINDIR/initdb" -D "$PG_DATA" -U postgres \
	    -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$PG_SOCKDIR/initdb.log" 2>&1; then
		idem_say "initdb failed"
		idem_tail "$PG_SOCKDIR/initdb.log"
		return 1
	fi
	# Settings go into the config file rather than through pg_ctl -o, so
	# that no quoting of paths is involved.  Durability is not wanted here.
	cat >>"$PG_DATA/postgresql.conf" <<EOF

# --- private test cluster ---
listen_addresses = ''
port = $PG_PORT
unix_socket_directories = '$PG_SOCKDIR'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
log_line_prefix = '%m [%p] '
EOF
	if ! idem_as_user "$owner" "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" \
	    -w -t 60 start >"$PG_SOCKDIR/pg_ctl.log" 2>&1; then
		idem_say "PostgreSQL did not start"
		idem_tail "$PG_SOCKDIR/pg_ctl.log"
		idem_tail "$PG_LOG"
		return 1
	fi
	PG_STARTED=1
	PG_CONNINFO="host=$PG_SOCKDIR port=$PG_PORT dbname=postgres user=postgres"
	export PG_CONNINFO
	idem_wait_until 30 "PostgreSQL" pg_psql 'select 1' || return 1
}

pg_stop() {
	[ "$PG_STARTED" = 1 ] || return 0
	PG_STARTED=0
	local owner=postgres
	[ "$(id -u)" = 0 ] || owner=$(id -un)
	idem_as_user "$owner" "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 \
	    stop >/dev/null 2>&1 ||
	idem_as_user "$owner" "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -m immediate \
	    stop >/dev/null 2>&1 || true
}

pg_restart() {
	local owner=postgres
	[ "$(id -u)" = 0 ] || owner=$(id -un)
	idem_as_user "$owner" "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" \
	    -m fast -w -t 60 restart >/dev/null
}

pg_psql() {
	psql -X -q -At -v ON_ERROR_STOP=1 -d "$PG_CONNINFO" -c "$*"
}
