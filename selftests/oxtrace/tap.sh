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

# tap_exit: the status of the whole script.
tap_exit() {
	exit $((fails > 0))
}
