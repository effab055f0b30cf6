#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The D language and dtrace's output through the real module (issue 11): the default
# (non-quiet) layout, setopt() and the aggregation sort options, llquantize's zero and
# negative buckets, scratch memory, epid/ipl and strtok across clauses. TAP, exact output.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
echo "1..3"

# expect_file NAME: /tmp/out is exactly /tmp/want (trailing blank lines included).
expect_file() {
	if cmp -s /tmp/want /tmp/out; then ok "$1"; else
		nok "$1" "want:" "$(od -c /tmp/want | head -20)" "got:" "$(od -c /tmp/out | head -20)"; fi
}

# Without -q: the header, one line per clause that recorded something (the CPU, -l's ID,
# FUNCTION:NAME in 32 columns), trace() in its columns, a newline after each clause's
# records, and a blank line at exit (42 is an int: 8 columns). BEGIN runs on the CPU of the GO ioctl: shown as C.
timeout 60 oxtrace -e 'BEGIN { trace(42); trace("hi"); } BEGIN { x = 1; }
     BEGIN { printf("x=%d\n", x); } BEGIN { exit(0); }' >/tmp/raw 2>/tmp/err
sed 's/^  [0-9] /  C /' /tmp/raw >/tmp/out
{
	printf '%3s %6s %32s\n' CPU ID FUNCTION:NAME
	printf '  C %6d %32s %9d  %-33s\n' 1 :BEGIN 42 hi
	printf '  C %6d %32s x=1\n\n' 1 :BEGIN
	printf '  C %6d %32s \n\n' 1 :BEGIN
} >/tmp/want
expect_file "default output: header, a line per recording clause, blank line at exit"

# An fbt probe: its ID as -l lists it; oxt_workload's one thread runs on the first CPU.
id=$(oxtrace -l 'fbt::ksys_read:entry' | awk '$5 == "entry" { print $1 }')
timeout 120 oxtrace -e 'fbt::ksys_read:entry /pid == $target/ { trace(arg2); }' \
	-c "./oxt_workload read 1 3" >/tmp/out 2>/tmp/err
{
	printf '%3s %6s %32s\n' CPU ID FUNCTION:NAME
	for i in 1 2 3; do printf '  0 %6d %32s %17d\n' "$id" ksys_read:entry "$i"; done
	echo
} >/tmp/want
expect_file "default output of an fbt probe: -l's ID, FUNCTION:NAME, integer columns"

# -q and the quiet pragma print the records alone, without the blank line at exit.
timeout 60 oxtrace -e '#pragma D option quiet
BEGIN { trace(42); trace("hi"); printf("|\n"); exit(0); }' >/tmp/out 2>/tmp/err
printf '42hi|\n' >/tmp/want
expect_file "quiet pragma: records alone"

tap_exit
