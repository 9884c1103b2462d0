# tests/lib/idem.sh - the app's config file and idemctl, for tests/run and
# scripts/demo.
#
#   idem_write_config FILE CONNINFO     the INI the app and idemctl read
#   idem_ctl BUILDDIR CONF ARGS...      run idemctl -c CONF ARGS...
#   idem_api_key BUILDDIR CONF NAME     create a key, print its secret
#                                       (idemctl prints it as its last line)
#
# Requires tests/lib/common.sh.

idem_write_config() {
	local file=$1 conninfo=$2
	cat >"$file" <<EOF
# generated; see conf/payments.ini for every key, commented
[server]
threads = 8
max_body = 1MiB

[database]
conninfo = $conninfo
pool_size = 8
acquire_timeout = 2s

[idempotency]
ttl = 24h
lease = 5m

[route "POST /v1/payments"]
ttl = 7d
# a member a client may change between retries (tests/integration/s_exclude.py)
fingerprint_exclude = /metadata/trace_id
# a retry after expiry is recognised (tests/integration/s_remember.py)
remember = 30d

[webhooks]
# the demo's and the tests' receivers listen on 127.0.0.1, which the
# default (off) refuses; retries within seconds (tests/integration/s_webhooks.py)
allow_private = on
interval = 100ms
backoff = 200ms
backoff_max = 1s
EOF
}

idem_ctl() {
	local builddir=$1 conf=$2; shift 2
	"$builddir/apps/idemctl/idemctl" -c "$conf" "$@"
}

idem_api_key() {
	local out secret
	out=$(idem_ctl "$1" "$2" api-key create "$3") || return 1
	secret=$(printf '%s\n' "$out" | sed '/^[[:space:]]*$/d' | tail -n 1)
	secret=${secret//[[:space:]]/}
	[ -n "$secret" ] || { idem_say "idemctl api-key create printed no secret"; return 1; }
	printf '%s\n' "$secret"
}
