# tests/lib/build.sh - bootstrap, configure and copy a source tree; shared by
# scripts/demo, scripts/test, scripts/sanitize and tests/build/reconfigure.
#
#   build_bootstrap SRC        autoreconf -fi in SRC unless a completed one
#                              left its outputs (configure, Makefile.in,
#                              config.h.in, build-aux/ltmain.sh); an
#                              interrupted one leaves some out: redone
#   build_configured DIR       true when DIR holds a complete configuration
#                              (config.status, Makefile, config.h, libtool);
#                              an interrupted configure leaves some out
#   build_copy_tree SRC DEST   copy SRC's files (git ls-files: tracked, and
#                              untracked but not ignored) to DEST, so that
#                              a tree configured in place can still be
#                              built out of tree, from the copy
#
# Build-affecting switches (--enable-fault-injection, --enable-sanitizers)
# are defines in config.h, which every object depends on: re-running
# configure with other switches rebuilds what they change, in place or not.
#
# Requires tests/lib/common.sh.

build_bootstrap() {
	local src=$1 f
	for f in configure Makefile.in config.h.in build-aux/ltmain.sh; do
		[ -s "$src/$f" ] || { (cd "$src" && autoreconf -fi); return; }
	done
}

build_configured() {
	local f
	for f in config.status Makefile config.h libtool; do
		[ -s "$1/$f" ] || return 1
	done
}

build_copy_tree() {
	local src=$1 dest=$2
	command -v git >/dev/null && git -C "$src" rev-parse >/dev/null 2>&1 || {
		idem_say "$src is not a git checkout to copy from"; return 1; }
	mkdir -p "$dest" || return 1
	(cd "$src" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			[ -e "$f" ] && printf '%s\0' "$f"
		done | xargs -0 -r cp --parents -t "$dest")
}
