#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The D language and dtrace's output through the real module (issue 11): the default
# (non-quiet) layout, setopt() and the aggregation sort options, llquantize's zero and
# negative buckets, scratch memory, epid/ipl and strtok across clauses. TAP, exact output.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 12

# expect_file NAME: /tmp/out is exactly /tmp/want (trailing blank lines included).
expect_file() {
	if cmp -s /tmp/want /tmp/out; then ok "$1"; else
		nok "$1" "want:" "$(od -c /tmp/want | head -20)" "got:" "$(od -c /tmp/out | head -20)"; fi
}

# Without -q: the header, one line per clause that recorded something (the CPU, -l's ID,
# FUNCTION:NAME in 32 columns), trace() in its columns, a newline after each clause's
# records, and a blank line at exit (42 is an int: 8 columns). BEGIN runs on the CPU of the GO ioctl: shown as C.
guard oxtrace -e 'BEGIN { trace(42); trace("hi"); } BEGIN { x = 1; }
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
guard oxtrace -e 'fbt::ksys_read:entry /pid == $target/ { trace(arg2); }' \
	-c "./oxt_workload read 1 3" >/tmp/out 2>/tmp/err
{
	printf '%3s %6s %32s\n' CPU ID FUNCTION:NAME
	for i in 1 2 3; do printf '  0 %6d %32s %17d\n' "$id" ksys_read:entry "$i"; done
	echo
} >/tmp/want
expect_file "default output of an fbt probe: -l's ID, FUNCTION:NAME, integer columns"

# -q and the quiet pragma print the records alone, without the blank line at exit.
guard oxtrace -e '#pragma D option quiet
BEGIN { trace(42); trace("hi"); printf("|\n"); exit(0); }' >/tmp/out 2>/tmp/err
printf '42hi|\n' >/tmp/want
expect_file "quiet pragma: records alone"

# setopt(): quiet unset at run time turns the default layout on for the records after it.
guard oxtrace -e '#pragma D option quiet
BEGIN { printf("a\n"); setopt("quiet", "no"); } BEGIN { trace(7); exit(0); }' \
	>/tmp/raw 2>/tmp/err
sed 's/^  [0-9] /  C /' /tmp/raw >/tmp/out
{
	printf 'a\n%3s %6s %32s\n' CPU ID FUNCTION:NAME
	printf '  C %6d %32s %9d\n\n' 1 :BEGIN 7
} >/tmp/want
expect_file "setopt(\"quiet\", \"no\") while tracing"

# setopt() of the sort options, then printa: by key, reversed; the second key member first.
run 'BEGIN { @a["a", 1] = sum(30); @a["b", 0] = sum(20); @a["c", 2] = sum(10);
       setopt("aggsortkey"); setopt("aggsortrev"); printa("%s %d %@d\n", @a);
       setopt("aggsortrev", "off"); setopt("aggsortkeypos", "1"); printa("%s %d %@d\n", @a);
       exit(0); }'
expect "setopt() of aggsortkey, aggsortrev, aggsortkeypos" "c 2 10
b 0 20
a 1 30
b 0 20
a 1 30
c 2 10 rc=0" "$out rc=$rc"

# -x aggsortrev orders the print at exit; aggsortpos the lines of a printa of two.
guard oxtrace -q -x aggsortrev -e 'BEGIN { @["x"] = count(); @["y"] = count();
     @["y"] = count(); @s["x"] = sum(1); @s["y"] = sum(9); @t["x"] = sum(5); @t["y"] = sum(2);
     printa("%s %@d %@d\n", @s, @t); setopt("aggsortrev", ""); setopt("aggsortpos", "1");
     printa("%s %@d %@d\n", @s, @t); exit(0); }' >/tmp/out 2>/tmp/err
{
	printf 'y 9 2\nx 1 5\ny 9 2\nx 1 5\n\n'
	printf '  %-50s %16d\n' x 1 y 2
} >/tmp/want
expect_file "-x aggsortrev, setopt(\"aggsortpos\") with printa of two, the print at exit"

# llquantize as Oracle DTrace prints it: negative buckets mirror the positive ones, the zero
# bucket is 0 at magnitude 0 (abs() < factor^low above it).
run 'BEGIN { @l = llquantize(-20, 10, 0, 2, 10); @l = llquantize(0, 10, 0, 2, 10);
       @l = llquantize(3, 10, 0, 2, 10); @m = llquantize(-5, 10, 1, 2, 10); exit(0); }'
want=$(
	for l in -30 -20 -10 -9 -8 -7 -6 -5 -4 -3 -2 -1 0 1 2 3 4; do
		case $l in
		-20 | 0 | 3) printf '%16s |%-40s %-9d\n' "$l" @@@@@@@@@@@@@ 1 ;;
		*) printf '%16s |%40s %-9d\n' "$l" "" 0 ;;
		esac
	done
	printf '%16s |%40s %-9d\n' -10 "" 0
	printf '%16s |%-40s %-9d\n' "abs() < 10" @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 1
	printf '%16s |%40s %-9d\n' 10 "" 0
)
expect "llquantize: negative buckets, the zero bucket, abs() < factor^low" "$want" \
	"$(echo "$out" | grep '|')$err"

# strtok(NULL, ...) goes on in the next clause, as DTrace keeps its place per CPU (here
# three BEGIN descriptions, three firings on the CPU of the GO ioctl).
run 'BEGIN { printf("%s ", strtok(strjoin("x,", "yy,zzz"), ",")); }
     BEGIN { printf("%s ", strtok(0, ",")); this->x = strjoin("q", "r"); }
     BEGIN { printf("%s\n", strtok(0, ",")); exit(0); }'
expect "strtok(NULL) across the clauses of a firing" "x yy zzz rc=0" "$out rc=$rc"

# epid: dense over the probes and their clauses, from 1 (BEGIN's clause 1, ERROR's 2);
# ERROR's arg1 is the faulting clause's.
run 'BEGIN { x = 0; y = 1 / x; } ERROR { printf("%d %d\n", arg1, epid); exit(0); }'
expect "epid, and ERROR's arg1 is the faulting clause's" "1 2" "$out"

# EPIDs are 1, 2, 3, ... in program order, as dtrace enables its clauses: the fbt clause
# written after the first BEGIN one is 2, though the module makes its probe first; the
# tick (it need not fire) takes 4, END 5.
run 'BEGIN { a = epid; } fbt::ksys_read:entry /pid == $target/ { f = epid; }
     BEGIN { b = epid; } tick-10ms { t = epid; }
     END { printf("%d %d %d %d\n", a, f, b, epid); }' -c "./oxt_workload read 1 1"
expect "epids are 1, 2, 3, ... in program order" "1 2 3 5 rc=0" "$out rc=$rc"

# ipl: 0 in a task (read(2)), 2 in a hardirq (tick's hrtimer).
run 'fbt::ksys_read:entry /pid == $target/ { @r[ipl] = count(); } END { printa("%d %@d\n", @r); }' \
	-c "./oxt_workload read 1 5"
run2=$out
run 'tick-10ms { @t[ipl] = count(); exit(0); } END { printa("%d %@d\n", @t); }'
expect "ipl in a task and in a hardirq" "0 5 2 1" "$run2 $out"

# A description without a provider is right-filled and matches every provider: read:entry
# is ::read:entry (syscall::read:entry), ksys_read:entry is fbt::ksys_read:entry.
run 'read:entry, ksys_read:entry /pid == $target/ { printf("%s:%s %d\n", probeprov, probefunc, arg2); }' \
	-c "./oxt_workload read 1 2"
expect "descriptions that name no provider" \
	"fbt:ksys_read 1 fbt:ksys_read 2 syscall:read 1 syscall:read 2 rc=0" \
	"$(echo "$out" | sort | tr '\n' ' ')rc=$rc$err"

tap_exit
