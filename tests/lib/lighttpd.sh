# tests/lib/lighttpd.sh - lighttpd in the foreground, spawning a FastCGI app.
#
#   lighttpd_write_conf CONF DIR PORT APP ARGS...
#       write a lighttpd config: listen on 127.0.0.1:PORT, everything ("/")
#       to the FastCGI app APP (started by lighttpd through "bin-path", with
#       ARGS), its socket and all temporary files inside DIR.
#       Sets LIGHTTPD_SOCKET (the path the spawned process listens on).
#   lighttpd_start CONF LOG    start "lighttpd -D -f CONF" in the background;
#                              sets LIGHTTPD_PID.  stdout/stderr go to LOG.
#   lighttpd_stop              stop it (and with it the spawned app).
#
# (The lighttpd-spawnfcgi fixture's config, lighttpd to a socket that
# spawn-fcgi binds, is made by tests/lib/fixtures.sh from the sample
# conf/lighttpd-external.conf.)
#
# Requires tests/lib/common.sh.

LIGHTTPD_PID=
# The shipped sample, whose header rule every generated config copies.
LIGHTTPD_SAMPLE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/conf/lighttpd.conf

# The sample's rule against other spellings of Idempotency-Key (from
# "server.http-parseopts" to the closing ")" of its setenv list).
lighttpd_header_rule() {
	sed -n '/^server\.http-parseopts/,/^)$/p' "$LIGHTTPD_SAMPLE"
}

# The sample's error pages (server.errorfile-prefix, mimetype.assign),
# pointed at DIR/errors: links <status>.html to conf/errors/<status>.json,
# as "make install" makes them.
lighttpd_error_pages() {
	local dir=$1 f
	mkdir -p "$dir/errors"
	for f in "$(dirname "$LIGHTTPD_SAMPLE")"/errors/*.json; do
		ln -sf "$f" "$dir/errors/$(basename "$f" .json).html"
	done
	sed -n '/^server\.errorfile-prefix/p; /^mimetype\.assign/p' "$LIGHTTPD_SAMPLE" |
	    sed "s|\"/usr/local/share/idem/errors/\"|\"$dir/errors/\"|"
}

lighttpd_write_conf() {
	local conf=$1 dir=$2 port=$3; shift 3
	local binpath="$*"
	mkdir -p "$dir/www" "$dir/upload"
	# lighttpd names the socket of process N "<socket>-N".
	# shellcheck disable=SC2034  # read by fixtures.sh
	LIGHTTPD_SOCKET=$dir/app.sock-0
	cat >"$conf" <<EOF
# generated for one run; see conf/lighttpd.conf for a commented sample
server.modules       = ( "mod_setenv", "mod_fastcgi" )
# lighttpd would pass "Idempotency.Key" and the like as
# HTTP_IDEMPOTENCY_KEY: the sample's rule drops them.
$(lighttpd_header_rule)
server.bind          = "127.0.0.1"
server.port          = $port
server.document-root = "$dir/www"
server.errorlog      = "$dir/lighttpd-error.log"
server.upload-dirs   = ( "$dir/upload" )
# KiB; above the app's max_body so that the app answers 413 itself
server.max-request-size = 8192
server.max-connections  = 1024
$(lighttpd_error_pages "$dir")

# (tests only) a mount whose backend is down: the sample's 503 page
fastcgi.server = ( "/.idem-test-down/" => ((
	"socket"      => "$dir/down.sock",
	"check-local" => "disable",
)), "/" => ((
	"bin-path"    => "$binpath",
	"socket"      => "$dir/app.sock",
	"check-local" => "disable",
	"max-procs"   => 1,
	"fix-root-scriptname" => "enable",
)))
EOF
}

lighttpd_start() {
	local conf=$1 log=$2 bin
	bin=$(command -v lighttpd || echo /usr/sbin/lighttpd)
	[ -x "$bin" ] || { idem_say "lighttpd not found"; return 1; }
	"$bin" -tt -f "$conf" >"$log" 2>&1 || {
		idem_say "lighttpd rejects its config"; idem_tail "$log"; return 1; }
	"$bin" -D -f "$conf" >>"$log" 2>&1 &
	LIGHTTPD_PID=$!
}

lighttpd_stop() {
	[ -n "$LIGHTTPD_PID" ] || return 0
	idem_stop_pid "$LIGHTTPD_PID" lighttpd
	LIGHTTPD_PID=
}
