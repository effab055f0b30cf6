# SPDX-License-Identifier: GPL-2.0
# TAP helpers shared by the shell selftests (sourced, not run), and the tool runner.
# shellcheck shell=sh

n=0
fails=0
planned=

# plan N: the TAP plan; tap_exit fails the script unless N tests reported.
plan() {
	planned=$1
	echo "1..$1"
}

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

# guard CMD...: CMD, killed if it has not finished after $OXT_GUARD seconds (default
# 1800). A guard against a hang, never a bound on how long anything may take: a saturated
# host runs the guest many times slower than an idle one. SIGKILL, never SIGTERM: the
# tool stops cleanly on SIGTERM and prints the partial results it has, and busybox's
# timeout execs CMD itself, so its exit status is CMD's own, 0: a guarded-off run looked
# exactly like lost firings (Documentation/testing.rst, "Hang guards"). Killed, CMD prints
# nothing more and exits 137.
guard() {
	timeout -s KILL "${OXT_GUARD:-1800}" "$@"
}

# run PROGRAM [ARGS...]: `oxtrace -q -e PROGRAM ARGS` under the hang guard; stdout in
# $out, stderr in $err, exit status in $rc. A run the guard ended says so in $out and $err,
# so that no comparison can pass on its partial output.
run() {
	prog=$1
	shift
	guard oxtrace -q -e "$prog" "$@" >/tmp/out 2>/tmp/err
	rc=$?
	out=$(cat /tmp/out)
	err=$(cat /tmp/err)
	if [ $rc = 137 ]; then
		out="$out
(hang guard: oxtrace killed after ${OXT_GUARD:-1800} s)"
		err="$err
(hang guard: oxtrace killed after ${OXT_GUARD:-1800} s)"
	fi
}

# expect_fail NAME TEXT: the last `run` exited 1 and its stderr has TEXT (a fixed string).
expect_fail() {
	if [ "$rc" = 1 ] && echo "$err" | grep -qF -- "$2"; then ok "$1"; else
		nok "$1" "rc=$rc" "$err"; fi
}

# expect_clause_error NAME ERROR OUT: the last `run` reported ERROR for its first clause,
# on dtrace:::BEGIN (enabled probe ID 1, probe ID 1, as dtrace numbers them), went on with
# the next clause (its whole stdout is OUT) and exited 0.
expect_clause_error() {
	if echo "$err" | grep -qF "error on enabled probe ID 1 (ID 1: dtrace:::BEGIN): $2" &&
		[ "$out" = "$3" ] && [ "$rc" = 0 ]; then
		ok "$1"
	else
		nok "$1" "$out" "$err" "rc=$rc"
	fi
}

# wait_for FILE REGEX [PID]: until FILE has a line matching REGEX.  Fails at once if
# PID has exited, and after the hang guard's $OXT_GUARD seconds (see guard): not a guess at
# how long anything takes. Empty FILE before starting PID: the `2>FILE` of a background
# job truncates it in the child, maybe after the first grep here.
wait_for() {
	_w=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			grep -q "$2" "$1" 2>/dev/null
			return
		fi
		_w=$((_w + 1))
		[ $_w -le $((${OXT_GUARD:-1800} * 10)) ] || return 1
		sleep 0.1
	done
}

# scrape_until URL REGEX PID: fetch URL into /tmp/metrics until it has a line matching
# REGEX, while PID runs (the same hang guard); fails if it never does.
scrape_until() {
	_w=0
	while kill -0 "$3" 2>/dev/null; do
		wget -q -O /tmp/metrics "$1"
		grep -q "$2" /tmp/metrics && return 0
		_w=$((_w + 1))
		[ $_w -le $((${OXT_GUARD:-1800} * 10)) ] || return 1
		sleep 0.1
	done
	return 1
}

# wait_exit PID: until PID has exited (the same hang guard); fails if it has not.
wait_exit() {
	_w=0
	while kill -0 "$1" 2>/dev/null; do
		_w=$((_w + 1))
		[ $_w -le $((${OXT_GUARD:-1800} * 10)) ] || return 1
		sleep 0.1
	done
}

# tap_exit: the status of the whole script, and the plan at the end for a script that gave
# none. A script that reported fewer or more tests than its plan fails too: a helper missing or a command not found ends a test without a
# line, which must not read as a pass.
tap_exit() {
	[ -n "$planned" ] || echo "1..$n"
	if [ -n "$planned" ] && [ "$n" != "$planned" ]; then
		echo "# planned $planned tests, $n reported"
		exit 1
	fi
	exit $((fails > 0))
}
