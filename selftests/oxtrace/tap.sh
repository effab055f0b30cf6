# SPDX-License-Identifier: GPL-2.0
# TAP helpers shared by the shell selftests (sourced, not run), and the tool runner.
# shellcheck shell=sh

n=0
fails=0

# ok NAME: a passed test.
ok() {
	n=$((n + 1))
	echo "ok $n $1"
}

# nok NAME [DIAGNOSTIC...]: a failed test, each diagnostic line as a TAP comment.
nok() {
	n=$((n + 1))
	fails=$((fails + 1))
	echo "not ok $n $1"
	shift
	printf '%s\n' "$@" | sed 's/^/# /'
}

# expect NAME WANT GOT
expect() {
	if [ "$2" = "$3" ]; then ok "$1"; else nok "$1" "want: $2" "got:  $3"; fi
}

# check NAME CMD...: passes if CMD succeeds; its output is the diagnostic otherwise.
check() {
	desc=$1
	shift
	if out=$("$@" 2>&1); then ok "$desc"; else nok "$desc" "$out"; fi
}

# run PROGRAM [ARGS...]: `oxtrace -q -e PROGRAM ARGS` with a time limit; stdout in $out,
# stderr in $err, exit status in $rc.
run() {
	prog=$1
	shift
	timeout 120 oxtrace -q -e "$prog" "$@" >/tmp/out 2>/tmp/err
	rc=$?
	out=$(cat /tmp/out)
	err=$(cat /tmp/err)
}

# expect_fail NAME TEXT: the last `run` exited 1 and its stderr has TEXT (a fixed string).
expect_fail() {
	if [ "$rc" = 1 ] && echo "$err" | grep -qF -- "$2"; then ok "$1"; else
		nok "$1" "rc=$rc" "$err"; fi
}

# expect_clause_error NAME ERROR OUT: the last `run` reported ERROR for dtrace:::BEGIN,
# went on with the next clause (its whole stdout is OUT) and exited 0.
expect_clause_error() {
	if echo "$err" | grep -qF "error on enabled probe ID 0 (dtrace:::BEGIN): $2" &&
		[ "$out" = "$3" ] && [ "$rc" = 0 ]; then
		ok "$1"
	else
		nok "$1" "$out" "$err" "rc=$rc"
	fi
}

# wait_for FILE REGEX [PID]: until FILE has a line matching REGEX.  Fails at once if
# PID has exited, and after 300 s: a guard against a hang, not a guess at how long
# anything takes (a saturated host may need much longer than an idle one).
wait_for() {
	_w=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			grep -q "$2" "$1" 2>/dev/null
			return
		fi
		_w=$((_w + 1))
		[ $_w -le 3000 ] || return 1
		sleep 0.1
	done
}

# wait_exit PID: until PID has exited (up to 300 s, the same hang guard); fails if it has not.
wait_exit() {
	_w=0
	while kill -0 "$1" 2>/dev/null; do
		_w=$((_w + 1))
		[ $_w -le 3000 ] || return 1
		sleep 0.1
	done
}

# tap_exit: the status of the whole script.
tap_exit() {
	exit $((fails > 0))
}
