# shellcheck disable=SC2034  # the FX_* variables are for the scripts that source this
# tests/lib/fixtures.sh - server fixtures: a web server in front of the app,
# selected by name.  The same integration scenarios run behind each.
#
#   fixture_names                      all names, in the order they run
#   fixture_available NAME             0, or 1 with the reason on stdout
#   fixture_start NAME DIR APP CONF    start it; the app is the program APP
#                                      (payments.fcgi) with "-c CONF".  Sets
#       FX_BASE      127.0.0.1:PORT of the web server
#       FX_ROOT_PID  the pid the app processes are (descendants of); ""
#                    when they cannot be recognised (see FX_APP_NAME)
#       FX_FCGI      the app's own FastCGI address, or "" when not known
#       FX_LOGS      log files worth showing on failure
#   fixture_stop NAME                  stop the server and the app
#
# Environment:
#   FX_PORT           the web server's port (else a free one is picked)
#   IDEM_APP_WRAPPER  words put before APP wherever a fixture starts it,
#                     e.g. "BUILDDIR/libtool --mode=execute valgrind ..."
#                     (split on blanks, no quoting; the first word must be
#                     a command on PATH or an absolute path)
#   FX_APP_NAME       what the app processes' executable file name
#                     contains (default payments.fcgi; "memcheck" under
#                     valgrind): fixture_stop finds them by it.  When it
#                     is not payments.fcgi, FX_ROOT_PID is left empty (the
#                     scenarios recognise only payments.fcgi processes)
#   IDEM_APP_SLOWDOWN factor for the waits on the app (start, /healthz,
#                     exit after SIGTERM); default 1, 6 with a wrapper
#
# Fixtures:
#   lighttpd      lighttpd spawns the app (bin-path), unix socket
#   lighttpd-spawnfcgi
#                 spawn-fcgi -n binds a unix socket and execs the app (fd
#                 0); lighttpd connects to that socket ("socket" only)
#   nginx         the suite starts the app (-l 127.0.0.1:PORT); nginx
#                 fastcgi_pass with fastcgi_keep_conn and a keepalive pool
#   apache-proxy  the suite starts the app (-l SOCKET); Apache
#                 mod_proxy_fcgi to that unix socket
#   apache-fcgid  Apache mod_fcgid spawns the app (one request at a time
#                 per process)
#
# All but "lighttpd" generate their web server config from the shipped
# sample (conf/lighttpd-external.conf, conf/nginx.conf,
# conf/apache-proxy-fcgi.conf, conf/apache-fcgid.conf), replacing only its
# paths, ports and the program's command line: so the samples are what is
# tested.  Apache gets a minimal httpd.conf that Includes the sample.
#
# Requires tests/lib/common.sh and tests/lib/lighttpd.sh.

FX_BASE='' FX_ROOT_PID='' FX_FCGI='' FX_LOGS=''
FX_SERVER_PID='' FX_APP_PID='' FX_STOP_PROBLEM='' _FX_PIDS_ROOT=''

# The shipped samples: conf/ of the tree this file is in.
FX_SAMPLES=${FX_SAMPLES:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/conf}

fixture_names() { echo lighttpd lighttpd-spawnfcgi nginx apache-proxy apache-fcgid; }

fixture_available() {
	case $1 in
	lighttpd)
		_fx_have lighttpd || { echo "lighttpd is not installed"; return 1; } ;;
	lighttpd-spawnfcgi)
		_fx_have lighttpd || { echo "lighttpd is not installed"; return 1; }
		_fx_have spawn-fcgi || { echo "spawn-fcgi is not installed"; return 1; }
		_fx_have_sample lighttpd-external.conf || return 1 ;;
	nginx)
		_fx_have nginx || { echo "nginx is not installed"; return 1; }
		_fx_have_sample nginx.conf || return 1 ;;
	apache-proxy)
		_fx_apache_bin >/dev/null ||
			{ echo "apache2 is not installed"; return 1; }
		[ -f "$(_fx_apache_mods)/mod_proxy_fcgi.so" ] ||
			{ echo "mod_proxy_fcgi is not installed"; return 1; }
		_fx_have_sample apache-proxy-fcgi.conf || return 1 ;;
	apache-fcgid)
		_fx_apache_bin >/dev/null ||
			{ echo "apache2 is not installed"; return 1; }
		[ -f "$(_fx_apache_mods)/mod_fcgid.so" ] ||
			{ echo "mod_fcgid is not installed (libapache2-mod-fcgid)"; return 1; }
		_fx_have_sample apache-fcgid.conf || return 1 ;;
	*)
		echo "unknown fixture"; return 1 ;;
	esac
	case $1 in
	apache-*|lighttpd-spawnfcgi)
		[ "$(id -u)" = 0 ] && ! id www-data >/dev/null 2>&1 &&
			{ echo "running as root but there is no www-data user"; return 1; } ;;
	esac
	return 0
}

fixture_start() {
	local name=$1 dir=$2 app=$3 conf=$4 slow
	FX_BASE='' FX_ROOT_PID='' FX_FCGI='' FX_LOGS='' FX_SERVER_PID='' FX_APP_PID=''
	_FX_PIDS_ROOT=''
	mkdir -p "$dir" && chmod 755 "$dir" || return 1
	case $name in
	lighttpd)           _fx_lighttpd_start "$dir" "$app" "$conf" ;;
	lighttpd-spawnfcgi) _fx_spawnfcgi_start "$dir" "$app" "$conf" ;;
	nginx)              _fx_nginx_start "$dir" "$app" "$conf" ;;
	apache-proxy)       _fx_apache_start proxy "$dir" "$app" "$conf" ;;
	apache-fcgid)       _fx_apache_start fcgid "$dir" "$app" "$conf" ;;
	*) idem_say "unknown fixture $name"; return 1 ;;
	esac || return 1
	_FX_PIDS_ROOT=$FX_ROOT_PID
	case ${FX_APP_NAME:-payments.fcgi} in
	*payments.fcgi*) ;;
	*) FX_ROOT_PID= ;;	# the scenarios would not recognise the processes
	esac
	# Ready when /healthz answers 200 through the server (a condition,
	# not a sleep); give up early if the server process dies.
	_fx_slow; slow=$FX_SLOW
	IDEM_WAIT_PID=$FX_SERVER_PID idem_wait_until $((30 * slow)) "$name" \
	    idem_http_ok "http://$FX_BASE/healthz" || return 1
	if [ "$name" = apache-fcgid ]; then
		# mod_fcgid gives each process its own socket in FcgidIPCDir
		# ("PID.N"); the first one serves the direct FastCGI checks.
		local s
		for s in "$dir"/apache/fcgid/*; do
			[ -S "$s" ] && { FX_FCGI=$s; break; }
		done
	fi
	return 0
}

# fixture_stop NAME: stop the web server, then SIGTERM every app process
# still running and give it 10 s (times IDEM_APP_SLOWDOWN).  Sets
# FX_STOP_PROBLEM to a description when an app process had to be killed
# with SIGKILL ("" otherwise).
fixture_stop() {
	local pids='' p left wait_s
	FX_STOP_PROBLEM=''
	_fx_slow; wait_s=$((10 * FX_SLOW))
	if [ -n "$_FX_PIDS_ROOT" ]; then
		pids=$(idem_descendants "$_FX_PIDS_ROOT" "${FX_APP_NAME:-payments.fcgi}")
	fi
	case " $pids " in *" $FX_APP_PID "*) ;; *) pids="$pids $FX_APP_PID" ;; esac
	[ -n "$FX_SERVER_PID" ] && idem_stop_pid "$FX_SERVER_PID" "$1"
	FX_SERVER_PID=
	for p in $pids; do
		idem_pid_running "$p" && kill -TERM "$p" 2>/dev/null
	done
	# shellcheck disable=SC2086
	if [ -n "${pids// /}" ] && ! left=$(idem_wait_gone "$wait_s" $pids); then
		FX_STOP_PROBLEM="app process(es) $left still running $wait_s s after SIGTERM; killed"
		for p in $left; do kill -KILL "$p" 2>/dev/null; done
	fi
	[ -n "$FX_APP_PID" ] && wait "$FX_APP_PID" 2>/dev/null
	FX_APP_PID='' FX_ROOT_PID='' _FX_PIDS_ROOT=''
	return 0
}

# --- helpers ---------------------------------------------------------------------

_fx_have() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
_fx_bin() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || echo "/usr/bin/$1"; }

_fx_have_sample() {
	[ -f "$FX_SAMPLES/$1" ] && return 0
	echo "the sample conf/$1 it is generated from is not in this tree"
	return 1
}

# _fx_slow: sets FX_SLOW, the factor for the waits on the app.  No
# command substitution: it also runs in the cleanup after a Ctrl-C.
_fx_slow() {
	FX_SLOW=${IDEM_APP_SLOWDOWN:-}
	[ -n "$FX_SLOW" ] || { [ -n "${IDEM_APP_WRAPPER:-}" ] && FX_SLOW=6 || FX_SLOW=1; }
}

# _fx_app_argv APP: sets FX_ARGV to the command that runs APP, with
# $IDEM_APP_WRAPPER in front (its first word made an absolute path, for
# spawn-fcgi and the servers, which exec it without a PATH search).
_fx_app_argv() {
	local w=${IDEM_APP_WRAPPER:-}
	read -ra FX_ARGV <<<"${w//$'\n'/ }"
	if [ ${#FX_ARGV[@]} -gt 0 ]; then
		w=$(command -v "${FX_ARGV[0]}") || { idem_say "IDEM_APP_WRAPPER: ${FX_ARGV[0]} not found"; return 1; }
		FX_ARGV[0]=$w
	fi
	FX_ARGV+=("$1")
}

# _fx_sample SAMPLE OUT FROM TO [FROM TO]...: write conf/SAMPLE to OUT
# with each string FROM replaced by TO (literally, every occurrence).
# Each FROM must occur: a sample that changed under the fixture fails
# loudly rather than being tested half-adapted.
_fx_sample() {
	local sample=$1 out=$2 text from to; shift 2
	[ -f "$FX_SAMPLES/$sample" ] || { idem_say "conf/$sample not found"; return 1; }
	text=$(<"$FX_SAMPLES/$sample")
	while [ $# -ge 2 ]; do
		from=$1 to=$2; shift 2
		case $text in
		*"$from"*) text=${text//"$from"/"$to"} ;;
		*) idem_say "conf/$sample has no '$from' to replace: update tests/lib/fixtures.sh to the sample"
		   return 1 ;;
		esac
	done
	printf '# generated for one run from conf/%s\n%s\n' "$sample" "$text" >"$out"
}

# The web server's port: $FX_PORT when set (scripts/demo), else a free one.
_fx_port() {
	if [ -n "${FX_PORT:-}" ]; then
		idem_port_free "$FX_PORT" || {
			idem_say "port $FX_PORT on 127.0.0.1 is in use"; return 1; }
		echo "$FX_PORT"
	else
		idem_free_port
	fi
}

# _fx_unix_open PATH: true when something accepts connections on it.
_fx_unix_open() {
	python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(1)
try:
    s.connect(sys.argv[1])
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
}

# --- the app started by the suite (nginx, apache-proxy) --------------------

# _fx_conf_with CONF OUT SECTION KEY VALUE: CONF with KEY = VALUE in
# [SECTION] (added if CONF has no such section), written to OUT.
_fx_conf_with() {
	awk -v s="[$3]" -v kv="$4 = $5" '
	    $0 == s { print; print kv; done = 1; next } { print }
	    END { if (!done) { print s; print kv } }' "$1" >"$2" && chmod 644 "$2"
}

# _fx_app_start DIR APP CONF [SOCKET]: APP -c CONF -l 127.0.0.1:PORT (or
# -l SOCKET) in the background; sets FX_APP_PID and FX_FCGI.
_fx_app_start() {
	local dir=$1 app=$2 conf=$3 sock=${4:-} port
	_fx_app_argv "$app" || return 1
	if [ -n "$sock" ]; then
		rm -f "$sock"
		FX_FCGI=$sock
	else
		port=$(idem_free_port) || return 1
		FX_FCGI=127.0.0.1:$port
	fi
	"${FX_ARGV[@]}" -c "$conf" -l "$FX_FCGI" >"$dir/app.log" 2>&1 &
	FX_APP_PID=$!
	FX_LOGS="$FX_LOGS $dir/app.log"
	if [ -n "$sock" ]; then
		_fx_slow; IDEM_WAIT_PID=$FX_APP_PID idem_wait_until $((20 * FX_SLOW)) \
		    "payments.fcgi -l $FX_FCGI" _fx_unix_open "$sock"
	else
		_fx_slow; IDEM_WAIT_PID=$FX_APP_PID idem_wait_until $((20 * FX_SLOW)) \
		    "payments.fcgi -l $FX_FCGI" idem_tcp_open 127.0.0.1 "$port"
	fi || { idem_tail "$dir/app.log"; return 1; }
}

# --- lighttpd ------------------------------------------------------------------

_fx_lighttpd_start() {
	local dir=$1 app=$2 conf=$3 port
	port=$(_fx_port) || return 1
	_fx_app_argv "$app" || return 1
	lighttpd_write_conf "$dir/lighttpd.conf" "$dir" "$port" "${FX_ARGV[@]}" -c "$conf"
	FX_LOGS="$dir/lighttpd.log $dir/lighttpd-error.log"
	lighttpd_start "$dir/lighttpd.conf" "$dir/lighttpd.log" || return 1
	FX_SERVER_PID=$LIGHTTPD_PID
	FX_ROOT_PID=$LIGHTTPD_PID
	FX_BASE=127.0.0.1:$port
	FX_FCGI=$LIGHTTPD_SOCKET
}

# lighttpd-spawnfcgi: spawn-fcgi -n binds DIR/app.sock (0660; as root
# owned by www-data, which lighttpd drops to, as in the sample) and execs
# the app with it on fd 0; it stays in the foreground as the app itself,
# so its pid is the app's.  lighttpd runs conf/lighttpd-external.conf.
_fx_spawnfcgi_start() {
	local dir=$1 app=$2 conf=$3 port sock owner=()
	sock=$dir/app.sock
	# lighttpd opens its logs after dropping to www-data
	mkdir -p "$dir/www" "$dir/upload" "$dir/log"
	if [ "$(id -u)" = 0 ]; then
		owner=(-U www-data -G www-data)
		chown www-data:www-data "$dir/upload" "$dir/log"
	fi
	_fx_app_argv "$app" || return 1
	rm -f "$sock"
	"$(_fx_bin spawn-fcgi)" -n -s "$sock" -M 0660 "${owner[@]}" \
	    -- "${FX_ARGV[@]}" -c "$conf" >"$dir/app.log" 2>&1 &
	FX_APP_PID=$!
	FX_ROOT_PID=$FX_APP_PID
	FX_FCGI=$sock
	FX_LOGS="$dir/app.log"
	# The socket accepts as soon as spawn-fcgi has bound it (before the
	# app runs): /healthz through lighttpd is the readiness condition.
	_fx_slow; IDEM_WAIT_PID=$FX_APP_PID idem_wait_until $((20 * FX_SLOW)) \
	    "spawn-fcgi -s $sock" _fx_unix_open "$sock" || { idem_tail "$dir/app.log"; return 1; }
	port=$(_fx_port) || return 1
	lighttpd_error_pages "$dir" >/dev/null
	_fx_sample lighttpd-external.conf "$dir/lighttpd.conf" \
	    '"/usr/local/share/idem/errors/"' "\"$dir/errors/\"" \
	    'fastcgi.server = ( "/" => ((' \
	    "fastcgi.server = ( \"/.idem-test-down/\" => (( \"socket\" => \"$dir/down.sock\", \"check-local\" => \"disable\" )), \"/\" => ((" \
	    '"/run/payments/payments.sock"' "\"$sock\"" \
	    'server.port          = 8080' "server.port          = $port" \
	    '"/var/www/empty"' "\"$dir/www\"" \
	    '"/var/log/lighttpd/' "\"$dir/log/" \
	    '"/var/cache/lighttpd/uploads"' "\"$dir/upload\"" || return 1
	FX_LOGS="$FX_LOGS $dir/lighttpd.log $dir/log/error.log"
	lighttpd_start "$dir/lighttpd.conf" "$dir/lighttpd.log" || return 1
	FX_SERVER_PID=$LIGHTTPD_PID
	FX_BASE=127.0.0.1:$port
}

# --- nginx -----------------------------------------------------------------------

# nginx runs conf/nginx.conf, in the foreground (-g 'daemon off;'), its
# files inside DIR/nginx.
_fx_nginx_start() {
	local dir=$1 app=$2 conf=$3 port bin n
	n=$dir/nginx
	bin=$(_fx_bin nginx)
	_fx_app_start "$dir" "$app" "$conf" || return 1
	FX_ROOT_PID=$FX_APP_PID
	port=$(_fx_port) || return 1
	mkdir -p "$n/tmp"
	_fx_sample nginx.conf "$n/nginx.conf" \
	    '/run/nginx-payments.pid' "$n/nginx.pid" \
	    '/var/log/nginx/' "$n/" \
	    '/var/lib/nginx/' "$n/tmp/" \
	    'listen 127.0.0.1:8080;' "listen 127.0.0.1:$port;" \
	    '/usr/local/share/idem/errors/' "$FX_SAMPLES/errors/" \
	    '		location / {' "		location /.idem-test-down/ { fastcgi_pass unix:$n/down.sock; }
		location / {" \
	    'server 127.0.0.1:9000;' "server $FX_FCGI;" || return 1
	FX_LOGS="$FX_LOGS $n/payments-error.log $n/error.log $n/stderr.log"
	"$bin" -t -p "$n" -e "$n/error.log" -g 'daemon off;' \
	    -c "$n/nginx.conf" >"$n/stderr.log" 2>&1 || {
		idem_say "nginx rejects its config"; idem_tail "$n/stderr.log"
		return 1; }
	"$bin" -p "$n" -e "$n/error.log" -g 'daemon off;' \
	    -c "$n/nginx.conf" >>"$n/stderr.log" 2>&1 &
	FX_SERVER_PID=$!
	FX_BASE=127.0.0.1:$port
}

# --- Apache ----------------------------------------------------------------------

_fx_apache_bin() {
	command -v apache2 2>/dev/null || { [ -x /usr/sbin/apache2 ] && echo /usr/sbin/apache2; }
}
_fx_apache_mods() { echo /usr/lib/apache2/modules; }

# _fx_apache_start proxy|fcgid DIR APP CONF: a minimal httpd.conf (what
# Debian's apache2.conf and the a2enmod'ed modules would provide) that
# Includes the sample conf/apache-proxy-fcgi.conf or conf/apache-fcgid.conf.
_fx_apache_start() {
	local mode=$1 dir=$2 app=$3 conf=$4 port bin mods user=www-data group=www-data
	local a=$dir/apache
	bin=$(_fx_apache_bin) || return 1
	mods=$(_fx_apache_mods)
	[ "$(id -u)" = 0 ] || { user=$(id -un); group=$(id -gn); }
	if [ "$mode" = proxy ]; then
		# on a unix socket, as in the sample: mode 0660, group $group
		# ([server] socket_group), so that Apache's children connect
		_fx_conf_with "$conf" "$dir/app.ini" server socket_group "$group" ||
			return 1
		_fx_app_start "$dir" "$app" "$dir/app.ini" "$dir/app.sock" || return 1
		FX_ROOT_PID=$FX_APP_PID
	fi
	port=$(_fx_port) || return 1
	mkdir -p "$a/run" "$a/fcgid" "$dir/www"
	chown "$user:$group" "$a/fcgid" "$a/run"
	if [ "$mode" = proxy ]; then
		_fx_sample apache-proxy-fcgi.conf "$a/site.conf" \
		    '<VirtualHost *:80>' "<VirtualHost *:$port>" \
		    '/usr/local/share/idem/errors/' "$FX_SAMPLES/errors/" \
		    '	ProxyPass "/.idem-errors/" "!"' "	ProxyPass \"/.idem-errors/\" \"!\"
	ProxyPass \"/.idem-test-down/\" \"unix:$a/down.sock|fcgi://down.invalid/\"" \
		    '"unix:/run/payments/payments.sock|' "\"unix:$FX_FCGI|" || return 1
	else
		_fx_app_argv "$app" || return 1
		_fx_sample apache-fcgid.conf "$a/site.conf" \
		    '<VirtualHost *:80>' "<VirtualHost *:$port>" \
		    '/usr/local/share/idem/errors/' "$FX_SAMPLES/errors/" \
		    '"/usr/local/bin/payments.fcgi -c /etc/idem/payments.ini ' \
		    "\"${FX_ARGV[*]} -c $conf " || return 1
	fi
	{
	cat <<EOF
# generated for one run: the server around conf/$([ "$mode" = proxy ] &&
	echo apache-proxy-fcgi.conf || echo apache-fcgid.conf)
ServerRoot $a
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile $a/run/httpd.pid
DefaultRuntimeDir $a/run
Mutex file:$a/run default
ErrorLog $a/error.log
LogLevel warn
User $user
Group $group
LoadModule mpm_event_module $mods/mod_mpm_event.so
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule alias_module $mods/mod_alias.so
DocumentRoot $dir/www
Timeout 60
StartServers 1
ServerLimit 2
ThreadsPerChild 64
MaxRequestWorkers 128
EOF
	if [ "$mode" = proxy ]; then
		cat <<EOF
LoadModule proxy_module $mods/mod_proxy.so
LoadModule proxy_fcgi_module $mods/mod_proxy_fcgi.so
EOF
	else
		cat <<EOF
LoadModule fcgid_module $mods/mod_fcgid.so
FcgidIPCDir $a/fcgid
FcgidProcessTableFile $a/run/fcgid_shm
# spawn processes as fast as the scenarios ask for them
FcgidSpawnScoreUpLimit 100
FcgidSpawnScore 1
FcgidTerminationScore 0
EOF
	fi
	echo "Include $a/site.conf"
	} >"$a/httpd.conf"
	FX_LOGS="$FX_LOGS $a/error.log $a/stderr.log"
	"$bin" -t -f "$a/httpd.conf" >"$a/stderr.log" 2>&1 || {
		idem_say "apache2 rejects its config"; idem_tail "$a/stderr.log"
		return 1; }
	"$bin" -f "$a/httpd.conf" -DFOREGROUND >>"$a/stderr.log" 2>&1 &
	FX_SERVER_PID=$!
	[ "$mode" = fcgid ] && FX_ROOT_PID=$FX_SERVER_PID
	FX_BASE=127.0.0.1:$port
}
