# tests/lib/tap.sh - count TAP results for tests/run.
#
#   tap_pass NAME                 one passed test (printed "ok - NAME")
#   tap_fail NAME [DIAG]          one failed test (printed "not ok - NAME")
#   tap_skip NAME REASON          one skipped test, with its reason
#   missing_tool NAME REASON      NAME cannot run for a missing tool: a
#                                 failure under CI (CI=true: everything
#                                 is installed there), else a skip
#   tap_consume LABEL RC [MODE]   read TAP on stdin (a program's output and
#                                 its exit status RC): each "ok"/"not ok"
#                                 line is one test; "# SKIP" is a skip and
#                                 "not ok ... # TODO" too.  A missing or
#                                 wrong plan, or RC != 0 without a failing
#                                 test, is one more failure.  Lines are
#                                 echoed prefixed by LABEL; MODE "brief":
#                                 only failures (with their diagnostics),
#                                 skips and a count; "quiet": nothing.
#   tap_summary                   list the failures and the skips
#   tap_closing_line              "N passed, N failed, N skipped"
#
# TAP_PASSED, TAP_FAILED, TAP_SKIPPED hold the counts.

TAP_PASSED=0 TAP_FAILED=0 TAP_SKIPPED=0
TAP_FAILS=() TAP_SKIPS=()

tap_pass() {
	TAP_PASSED=$((TAP_PASSED + 1))
	printf 'ok - %s\n' "$1"
}

tap_fail() {
	TAP_FAILED=$((TAP_FAILED + 1))
	TAP_FAILS+=("$1")
	printf 'not ok - %s\n' "$1"
	[ $# -ge 2 ] && [ -n "$2" ] && printf '%s\n' "$2" | sed 's/^/#   /'
	return 0
}

# tap_count_skip TEXT: one more skip, listed by tap_summary as TEXT.
tap_count_skip() {
	TAP_SKIPPED=$((TAP_SKIPPED + 1))
	TAP_SKIPS+=("$1")
}

tap_skip() {
	tap_count_skip "$1: $2"
	printf 'ok - %s # SKIP %s\n' "$1" "$2"
}

missing_tool() {
	case ${CI:-} in
	[Tt][Rr][Uu][Ee]) tap_fail "$1" "$2 (in CI every tool is installed)" ;;
	*) tap_skip "$1" "$2" ;;
	esac
}

tap_consume() {
	local label=$1 rc=$2 quiet=${3:-} line plan='' n=0 f=0 desc
	local re_ok='^ok([[:space:]]|$)' re_nok='^not ok([[:space:]]|$)'
	local re_skip='#[[:space:]]*[Ss][Kk][Ii][Pp]([[:space:]]|$)(.*)'
	local re_todo='#[[:space:]]*[Tt][Oo][Dd][Oo]([[:space:]]|$)(.*)'
	local show=0 s0=$TAP_SKIPPED
	while IFS= read -r line; do
		case $quiet in
		'') printf '%s: %s\n' "$label" "$line" ;;
		brief)	# failures with their diagnostics, and skips
			if [[ $line =~ $re_nok ]] || { [[ $line =~ $re_ok ]] && [[ $line =~ $re_skip ]]; }; then
				show=1
			elif [[ ! $line =~ ^# ]]; then
				show=0
			fi
			[ "$show" = 1 ] && printf '%s: %s\n' "$label" "$line"
			[[ $line =~ $re_skip ]] && show=0 ;;
		esac
		desc=${line#ok}; desc=${desc#not ok}
		desc=${desc#"${desc%%[![:space:]0-9]*}"}; desc=${desc#- }
		desc=${desc%%#*}; desc=${desc%"${desc##*[![:space:]]}"}
		if [[ $line =~ $re_nok || $line =~ $re_ok ]]; then
			n=$((n + 1))
			if [[ $line =~ $re_nok && $line =~ $re_todo ]]; then
				tap_count_skip "$label: $desc: TODO ${BASH_REMATCH[2]}"
			elif [[ $line =~ $re_nok ]]; then
				f=$((f + 1))
				TAP_FAILED=$((TAP_FAILED + 1))
				TAP_FAILS+=("$label: $desc")
			elif [[ $line =~ $re_skip ]]; then
				tap_count_skip "$label: $desc: ${BASH_REMATCH[2]:-no reason given}"
			else
				TAP_PASSED=$((TAP_PASSED + 1))
			fi
		elif [[ $line =~ ^1\.\.([0-9]+) ]]; then
			plan=${BASH_REMATCH[1]}
			if [ "$plan" = 0 ] && [[ $line =~ $re_skip ]]; then
				tap_count_skip "$label: all: ${BASH_REMATCH[2]:-no reason given}"
			fi
		fi
	done
	[ "$quiet" = brief ] && printf '%s: %d tests, %d failed, %d skipped\n' \
	    "$label" "$n" "$f" $((TAP_SKIPPED - s0))
	if [ -z "$plan" ]; then
		tap_fail "$label: no TAP plan (1..N): it died or was cut short (exit $rc)"
	elif [ "$plan" != "$n" ]; then
		tap_fail "$label: planned $plan tests, saw $n (exit $rc)"
	elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		tap_fail "$label: exit status $rc without a failing test"
	fi
	return 0
}

tap_summary() {
	local x
	if [ ${#TAP_SKIPS[@]} -gt 0 ]; then
		echo "# skipped (${#TAP_SKIPS[@]}):"
		for x in "${TAP_SKIPS[@]}"; do echo "#   SKIP $x"; done
	fi
	if [ ${#TAP_FAILS[@]} -gt 0 ]; then
		echo "# failed (${#TAP_FAILS[@]}):"
		for x in "${TAP_FAILS[@]}"; do echo "#   FAIL $x"; done
	fi
}

tap_closing_line() {
	echo "$TAP_PASSED passed, $TAP_FAILED failed, $TAP_SKIPPED skipped"
}
