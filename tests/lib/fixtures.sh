# shellcheck disable=SC2034  # the FX_* variables are for the scripts that source this
# tests/lib/fixtures.sh - server fixtures: a web server in front of the app,
# selected by name.  The same integration scenarios run behind each.
#
#   fixture_names                      all names, in the order they run
#   fixture_available NAME             0, or 1 with the reason on stdout
#   fixture_start NAME DIR APP CONF    start it; the app is the program APP
#                                      (payments.fcgi) with "-c CONF".  Sets
#       FX_BASE      127.0.0.1:PORT of the web server
#       FX_ROOT_PID  the pid the app processes are (descendants of)
#       FX_FCGI      the app's own FastCGI address, or "" when not known
#       FX_LOGS      log files worth showing on failure
#   fixture_stop NAME                  stop the server and the app
#
# FX_PORT, when set, is the web server's port (else a free one is picked).
#
# Fixtures:
#   lighttpd      lighttpd spawns the app (bin-path), unix socket
#   nginx         the suite starts the app (-l 127.0.0.1:PORT); nginx
#                 fastcgi_pass with fastcgi_keep_conn and a keepalive pool
#   apache-proxy  the suite starts the app; Apache mod_proxy_fcgi
#   apache-fcgid  Apache mod_fcgid spawns the app (one request at a time
#                 per process)
#
# Requires tests/lib/common.sh and tests/lib/lighttpd.sh.

FX_BASE='' FX_ROOT_PID='' FX_FCGI='' FX_LOGS=''
FX_SERVER_PID='' FX_APP_PID='' FX_STOP_PROBLEM=''

fixture_names() { echo lighttpd nginx apache-proxy apache-fcgid; }

fixture_available() {
	case $1 in
	lighttpd)
		command -v lighttpd >/dev/null || [ -x /usr/sbin/lighttpd ] ||
			{ echo "lighttpd is not installed"; return 1; } ;;
	nginx)
		command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] ||
			{ echo "nginx is not installed"; return 1; } ;;
	apache-proxy)
		_fx_apache_bin >/dev/null ||
			{ echo "apache2 is not installed"; return 1; }
		[ -f "$(_fx_apache_mods)/mod_proxy_fcgi.so" ] ||
			{ echo "mod_proxy_fcgi is not installed"; return 1; } ;;
	apache-fcgid)
		_fx_apache_bin >/dev/null ||
			{ echo "apache2 is not installed"; return 1; }
		[ -f "$(_fx_apache_mods)/mod_fcgid.so" ] ||
			{ echo "mod_fcgid is not installed (libapache2-mod-fcgid)"; return 1; }
		[ "$(id -u)" = 0 ] && ! id www-data >/dev/null 2>&1 &&
			{ echo "no www-data user for Apache's children"; return 1; } ;;
	*)
		echo "unknown fixture"; return 1 ;;
	esac
	return 0
}

fixture_start() {
	local name=$1 dir=$2 app=$3 conf=$4
	FX_BASE='' FX_ROOT_PID='' FX_FCGI='' FX_LOGS='' FX_SERVER_PID='' FX_APP_PID=''
	mkdir -p "$dir" && chmod 755 "$dir" || return 1
	case $name in
	lighttpd)     _fx_lighttpd_start "$dir" "$app" "$conf" ;;
	nginx)        _fx_nginx_start "$dir" "$app" "$conf" ;;
	apache-proxy) _fx_apache_start proxy "$dir" "$app" "$conf" ;;
	apache-fcgid) _fx_apache_start fcgid "$dir" "$app" "$conf" ;;
	*) idem_say "unknown fixture $name"; return 1 ;;
	esac || return 1
	# Ready when /healthz answers 200 through the server (a condition,
	# not a sleep); give up early if the server process dies.
	IDEM_WAIT_PID=$FX_SERVER_PID idem_wait_until 30 "$name" \
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
# still running and give it 10 s.  Sets FX_STOP_PROBLEM to a description
# when an app process had to be killed with SIGKILL ("" otherwise).
fixture_stop() {
	local pids='' p left
	FX_STOP_PROBLEM=''
	if [ -n "$FX_ROOT_PID" ]; then
		pids=$(idem_descendants "$FX_ROOT_PID" "${FX_APP_NAME:-payments.fcgi}")
	fi
	case " $pids " in *" $FX_APP_PID "*) ;; *) pids="$pids $FX_APP_PID" ;; esac
	[ -n "$FX_SERVER_PID" ] && idem_stop_pid "$FX_SERVER_PID" "$1"
	FX_SERVER_PID=
	for p in $pids; do
		idem_pid_running "$p" && kill -TERM "$p" 2>/dev/null
	done
	# shellcheck disable=SC2086
	if [ -n "${pids// /}" ] && ! left=$(idem_wait_gone 10 $pids); then
		FX_STOP_PROBLEM="app process(es) $left still running 10 s after SIGTERM; killed"
		for p in $left; do kill -KILL "$p" 2>/dev/null; done
	fi
	[ -n "$FX_APP_PID" ] && wait "$FX_APP_PID" 2>/dev/null
	FX_APP_PID='' FX_ROOT_PID=''
	return 0
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

# --- the app started by the suite (nginx, apache-proxy) --------------------

# _fx_app_start DIR APP CONF: APP -c CONF -l 127.0.0.1:PORT in the
# background; sets FX_APP_PID and FX_FCGI.
_fx_app_start() {
	local dir=$1 app=$2 conf=$3 port
	port=$(idem_free_port) || return 1
	"$app" -c "$conf" -l "127.0.0.1:$port" >"$dir/app.log" 2>&1 &
	FX_APP_PID=$!
	FX_FCGI=127.0.0.1:$port
	FX_LOGS="$FX_LOGS $dir/app.log"
	IDEM_WAIT_PID=$FX_APP_PID idem_wait_until 20 "payments.fcgi -l $FX_FCGI" \
	    idem_tcp_open 127.0.0.1 "$port" || { idem_tail "$dir/app.log"; return 1; }
}

# --- lighttpd ------------------------------------------------------------------

_fx_lighttpd_start() {
	local dir=$1 app=$2 conf=$3 port
	port=$(_fx_port) || return 1
	lighttpd_write_conf "$dir/lighttpd.conf" "$dir" "$port" "$app" -c "$conf"
	FX_LOGS="$dir/lighttpd.log $dir/lighttpd-error.log"
	lighttpd_start "$dir/lighttpd.conf" "$dir/lighttpd.log" || return 1
	FX_SERVER_PID=$LIGHTTPD_PID
	FX_ROOT_PID=$LIGHTTPD_PID
	FX_BASE=127.0.0.1:$port
	FX_FCGI=$LIGHTTPD_SOCKET
}

# --- nginx -----------------------------------------------------------------------

_fx_nginx_start() {
	local dir=$1 app=$2 conf=$3 port bin
	bin=$(command -v nginx || echo /usr/sbin/nginx)
	_fx_app_start "$dir" "$app" "$conf" || return 1
	FX_ROOT_PID=$FX_APP_PID
	port=$(_fx_port) || return 1
	mkdir -p "$dir/nginx/tmp" "$dir/www"
	cat >"$dir/nginx/nginx.conf" <<EOF
# generated for one run
daemon off;
master_process on;
worker_processes 1;
user root;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $dir/nginx/tmp/body;
	proxy_temp_path $dir/nginx/tmp/proxy;
	fastcgi_temp_path $dir/nginx/tmp/fastcgi;
	uwsgi_temp_path $dir/nginx/tmp/uwsgi;
	scgi_temp_path $dir/nginx/tmp/scgi;
	client_max_body_size 2m;
	upstream payments {
		server $FX_FCGI;
		keepalive 4;
	}
	server {
		listen 127.0.0.1:$port;
		server_name localhost;
		root $dir/www;
		location / {
			fastcgi_pass payments;
			fastcgi_keep_conn on;
			fastcgi_read_timeout 60s;
			fastcgi_param QUERY_STRING      \$query_string;
			fastcgi_param REQUEST_METHOD    \$request_method;
			fastcgi_param CONTENT_TYPE      \$content_type;
			fastcgi_param CONTENT_LENGTH    \$content_length;
			fastcgi_param SCRIPT_NAME       "";
			fastcgi_param PATH_INFO         \$uri;
			fastcgi_param REQUEST_URI       \$request_uri;
			fastcgi_param DOCUMENT_URI      \$document_uri;
			fastcgi_param SERVER_PROTOCOL   \$server_protocol;
			fastcgi_param REQUEST_SCHEME    \$scheme;
			fastcgi_param GATEWAY_INTERFACE CGI/1.1;
			fastcgi_param SERVER_SOFTWARE   nginx/\$nginx_version;
			fastcgi_param REMOTE_ADDR       \$remote_addr;
			fastcgi_param REMOTE_PORT       \$remote_port;
			fastcgi_param SERVER_ADDR       \$server_addr;
			fastcgi_param SERVER_PORT       \$server_port;
			fastcgi_param SERVER_NAME       \$server_name;
		}
	}
}
EOF
	FX_LOGS="$FX_LOGS $dir/nginx/error.log $dir/nginx/stderr.log"
	"$bin" -t -p "$dir/nginx" -e "$dir/nginx/error.log" \
	    -c "$dir/nginx/nginx.conf" >"$dir/nginx/stderr.log" 2>&1 || {
		idem_say "nginx rejects its config"; idem_tail "$dir/nginx/stderr.log"
		return 1; }
	"$bin" -p "$dir/nginx" -e "$dir/nginx/error.log" \
	    -c "$dir/nginx/nginx.conf" >>"$dir/nginx/stderr.log" 2>&1 &
	FX_SERVER_PID=$!
	FX_BASE=127.0.0.1:$port
}

# --- Apache ----------------------------------------------------------------------

_fx_apache_bin() {
	command -v apache2 2>/dev/null || { [ -x /usr/sbin/apache2 ] && echo /usr/sbin/apache2; }
}
_fx_apache_mods() { echo /usr/lib/apache2/modules; }

# _fx_apache_start proxy|fcgid DIR APP CONF
_fx_apache_start() {
	local mode=$1 dir=$2 app=$3 conf=$4 port bin mods user=www-data group=www-data
	bin=$(_fx_apache_bin) || return 1
	mods=$(_fx_apache_mods)
	[ "$(id -u)" = 0 ] || { user=$(id -un); group=$(id -gn); }
	if [ "$mode" = proxy ]; then
		_fx_app_start "$dir" "$app" "$conf" || return 1
		FX_ROOT_PID=$FX_APP_PID
	fi
	port=$(_fx_port) || return 1
	mkdir -p "$dir/apache/run" "$dir/apache/fcgid" "$dir/www"
	chown "$user:$group" "$dir/apache/fcgid" "$dir/apache/run"
	{
	cat <<EOF
# generated for one run
ServerRoot $dir/apache
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile $dir/apache/run/httpd.pid
DefaultRuntimeDir $dir/apache/run
Mutex file:$dir/apache/run default
ErrorLog $dir/apache/error.log
LogLevel warn
User $user
Group $group
LoadModule mpm_event_module $mods/mod_mpm_event.so
LoadModule authz_core_module $mods/mod_authz_core.so
DocumentRoot $dir/www
Timeout 60
LimitRequestBody 4194304
StartServers 1
ServerLimit 2
ThreadsPerChild 64
MaxRequestWorkers 128
EOF
	if [ "$mode" = proxy ]; then
		cat <<EOF
LoadModule proxy_module $mods/mod_proxy.so
LoadModule proxy_fcgi_module $mods/mod_proxy_fcgi.so
<Location "/">
	Require all granted
	CGIPassAuth On
	ProxyFCGIBackendType GENERIC
	ProxyFCGISetEnvIf "true" SCRIPT_NAME ""
	ProxyFCGISetEnvIf "true" PATH_INFO "%{REQUEST_URI}"
</Location>
ProxyPass "/" "fcgi://$FX_FCGI/" enablereuse=off
EOF
	else
		cat <<EOF
LoadModule fcgid_module $mods/mod_fcgid.so
FcgidIPCDir $dir/apache/fcgid
FcgidProcessTableFile $dir/apache/run/fcgid_shm
FcgidMaxRequestLen 4194304
FcgidMaxProcesses 8
FcgidMaxProcessesPerClass 8
FcgidMinProcessesPerClass 1
FcgidIdleTimeout 3600
FcgidProcessLifeTime 3600
FcgidMaxRequestsPerProcess 0
FcgidIOTimeout 60
FcgidConnectTimeout 10
FcgidSpawnScoreUpLimit 100
FcgidSpawnScore 1
FcgidTerminationScore 0
<Location "/">
	Require all granted
	CGIPassAuth On
	SetHandler fcgid-script
	Options +ExecCGI
	FcgidWrapper "$app -c $conf" virtual
</Location>
EOF
	fi
	} >"$dir/apache/httpd.conf"
	FX_LOGS="$FX_LOGS $dir/apache/error.log $dir/apache/stderr.log"
	"$bin" -t -f "$dir/apache/httpd.conf" >"$dir/apache/stderr.log" 2>&1 || {
		idem_say "apache2 rejects its config"; idem_tail "$dir/apache/stderr.log"
		return 1; }
	"$bin" -f "$dir/apache/httpd.conf" -DFOREGROUND >>"$dir/apache/stderr.log" 2>&1 &
	FX_SERVER_PID=$!
	[ "$mode" = fcgid ] && FX_ROOT_PID=$FX_SERVER_PID
	FX_BASE=127.0.0.1:$port
}
