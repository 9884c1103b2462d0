# tests/lib/deps.sh - the Debian packages (and the one locale) idem's scripts
# need, installed only when missing.  For scripts/test, scripts/demo,
# tests/bench/run and .ci/run.
#
#   deps_missing PKG...   print the packages that are not installed
#   deps_ensure PKG...    as root: apt-get install -y what is missing
#                         (apt-get update once, only if something is);
#                         not root: name what is missing and go on.
#   deps_locale NAME      make sure the locale NAME (e.g. de_DE.UTF-8)
#                         exists; as root, enable it in /etc/locale.gen
#                         and run locale-gen (needs the locales package);
#                         not root: say so and go on.
#   deps_npm              node and npm (the nodejs and npm packages, when
#                         no npm is on PATH), then npm ci in tests/openapi
#                         from its package-lock.json, once (again only when
#                         the lock file changed): tests/openapi/run.py's
#                         redocly, openapi-typescript, typescript and
#                         openapi-fetch, and tests/direct/webhook_sig.py's
#                         standardwebhooks, in tests/openapi/node_modules
#   deps_for_suite        everything the whole suite needs: build, run,
#                         every server fixture, every unit test (the
#                         comma locale), the sanitizer/valgrind/fuzz
#                         stages, the npm tools of tests/openapi
#
# Requires tests/lib/common.sh.

# To build, and to run the suite's required parts (PostgreSQL, lighttpd).
# (autoconf: a git checkout has no configure script until autoreconf.)
# shellcheck disable=SC2034
IDEM_DEPS_BUILD="build-essential autoconf automake libtool pkg-config
	libfcgi-dev libyajl-dev libpq-dev libssl-dev libcurl4-openssl-dev"
# shellcheck disable=SC2034
IDEM_DEPS_RUN="postgresql postgresql-client lighttpd python3"
# The demo's curl example; git for scripts/sanitize's clean copy and the
# CI's own clones.
# shellcheck disable=SC2034
IDEM_DEPS_TOOLS="curl git"
# The other server fixtures of the suite (nginx, Apache proxy_fcgi and
# mod_fcgid, lighttpd behind spawn-fcgi), the direct FastCGI client
# (cgi-fcgi), pgbouncer, socket activation (systemd-socket-activate, in
# t_example.sh), the comma locale of unit/test_jcs (locales), the
# fuzz, sanitizer and valgrind stages, tests/ha (Patroni on etcd,
# through python3-etcd), tests/direct/prometheus.py (promtool and a
# real Prometheus, from the prometheus package), and the OpenAPI check of
# integration/s_openapi.py (python3-jsonschema).
# shellcheck disable=SC2034
IDEM_DEPS_FIXTURES="nginx-light apache2 libapache2-mod-fcgid libfcgi-bin
	spawn-fcgi pgbouncer systemd locales clang libclang-rt-14-dev valgrind
	patroni etcd-server python3-etcd prometheus python3-jsonschema"
# tests/bench/run: wrk (HTTP load), pgbench (in postgresql-15, which the
# postgresql package pulls in), psql, both web servers.
# shellcheck disable=SC2034
IDEM_DEPS_BENCH="wrk postgresql postgresql-client lighttpd nginx-light python3"
# A locale whose decimal point is a comma: the JSON canonicalisation
# must not depend on LC_NUMERIC (unit/test_jcs).
# shellcheck disable=SC2034
IDEM_COMMA_LOCALE=de_DE.UTF-8

deps_missing() {
	local p
	for p in "$@"; do
		dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' ||
			printf '%s\n' "$p"
	done
}

deps_ensure() {
	local missing
	command -v dpkg >/dev/null 2>&1 || {
		idem_say "not a Debian system (no dpkg): install the dependencies yourself"
		return 0
	}
	# shellcheck disable=SC2046
	missing=$(deps_missing "$@" | tr '\n' ' ')
	missing=${missing% }
	[ -n "$missing" ] || return 0
	if [ "$(id -u)" != 0 ]; then
		idem_say "missing Debian packages (run as root to install them): $missing"
		return 0
	fi
	idem_say "installing: $missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update || return 1
	# shellcheck disable=SC2086
	apt-get install -y --no-install-recommends $missing
}

# A filter: locale names compared so that de_DE.UTF-8 and de_DE.utf8
# (as locale -a prints it) are the same.
_deps_locale_keys() { tr 'A-Z' 'a-z' | tr -d -- '-'; }

deps_locale() {
	local want=$1 key line
	key=$(printf '%s\n' "$want" | _deps_locale_keys)
	locale -a 2>/dev/null | _deps_locale_keys | grep -qxF -- "$key" &&
		return 0
	if [ "$(id -u)" != 0 ] || ! command -v locale-gen >/dev/null 2>&1; then
		idem_say "locale $want is missing (run as root with the locales package to generate it)"
		return 0
	fi
	idem_say "generating the locale $want"
	line="$want ${want##*.}"		# "de_DE.UTF-8 UTF-8", as locale.gen spells it
	if grep -Eq "^[#[:space:]]*${line//./\\.}\$" /etc/locale.gen 2>/dev/null; then
		sed -Ei "s/^[#[:space:]]*(${line//./\\.})\$/\\1/" /etc/locale.gen
	else
		printf '%s\n' "$line" >>/etc/locale.gen
	fi
	locale-gen >/dev/null
}

# tests/openapi: its npm packages, pinned by its package-lock.json.
IDEM_NPM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../openapi" && pwd)

deps_npm() {
	local dir=$IDEM_NPM_DIR stamp
	# (a Node.js from elsewhere brings its own npm: then nothing here)
	if ! command -v npm >/dev/null 2>&1; then
		deps_ensure nodejs npm || return 1
		command -v npm >/dev/null 2>&1 || {
			idem_say "npm is missing: tests/openapi/run.py cannot run"
			return 0
		}
	fi
	# @redocly/cli wants Node.js 20.19 or later; Debian 12's is 18
	node -e 'const [a, b] = process.versions.node.split(".").map(Number);
		process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' 2>/dev/null ||
		idem_say "Node.js $(node --version 2>/dev/null) is older than 20.19: tests/openapi/run.py will not run (install Node.js 20 or later, e.g. from NodeSource)"
	stamp=$dir/node_modules/.package-lock.json
	# npm ci writes that file: newer than the lock file, nothing to do
	[ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ] && return 0
	idem_say "npm ci in tests/openapi"
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

deps_for_suite() {
	# shellcheck disable=SC2086
	deps_ensure $IDEM_DEPS_BUILD $IDEM_DEPS_RUN $IDEM_DEPS_TOOLS \
	    $IDEM_DEPS_FIXTURES || return 1
	deps_locale "$IDEM_COMMA_LOCALE"
	deps_npm
}
