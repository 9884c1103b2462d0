# tests/lib/deps.sh - the Debian packages idem needs, installed only when
# missing.  For scripts/test and scripts/demo.
#
#   deps_missing PKG...   print the packages that are not installed
#   deps_ensure PKG...    as root: apt-get install -y what is missing
#                         (apt-get update once, only if something is);
#                         not root: name what is missing and go on.
#
# Requires tests/lib/common.sh.

# To build, and to run the suite's required parts (PostgreSQL, lighttpd).
# shellcheck disable=SC2034
IDEM_DEPS_BUILD="build-essential autoconf automake libtool pkg-config
	libfcgi-dev libyajl-dev libpq-dev libssl-dev"
# shellcheck disable=SC2034
IDEM_DEPS_RUN="postgresql postgresql-client lighttpd python3"
# The other server fixtures of the suite, the direct FastCGI client
# (cgi-fcgi), pgbouncer, and the fuzz, sanitizer and valgrind stages.
# shellcheck disable=SC2034
IDEM_DEPS_FIXTURES="nginx-light apache2 libapache2-mod-fcgid libfcgi-bin
	pgbouncer clang libclang-rt-14-dev valgrind"

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
