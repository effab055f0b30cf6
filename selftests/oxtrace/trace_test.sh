#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Probes, predicates, actions, aggregations and the tool's run loop against the
# real module, with a workload whose every call is known (oxt_workload): TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
W="./oxt_workload read 4 2000"

echo "TAP version 13"
plan 25

run 'fbt::ksys_read:entry /pid == $target/ { @n = count(); } END { printa("%@d\n", @n); }' -c "$W"
expect "count: 4 threads x 2000 reads on 4 CPUs" "8000" "$out"

run 'fbt::ksys_read:entry /pid == $target && arg2 == 3/ { @n = count(); } END { printa("%@d\n", @n); }' -c "$W"
expect "predicate filters exactly" "1000" "$out"

run 'fbt::ksys_read:return /pid == $target/ { @s = sum(arg1); } END { printa("%@d\n", @s); }' -c "$W"
expect "return probe sees the return value" "36000" "$out"

run 'fbt::ksys_read:entry /pid == $target/ { @c[cpu] = count(); } END { printa("%d %@d\n", @c); }' -c "$W"
expect "every CPU fires its thread's calls" "0 2000
1 2000
2 2000
3 2000" "$(echo "$out" | sort)"

run 'fbt::ksys_read:entry /pid == $target/ { @mn = min(arg2); @mx = max(arg2); @a = avg(arg2); }
     END { printa("%@d\n", @mn); printa("%@d\n", @mx); printa("%@d\n", @a); }' -c "$W"
expect "min, max, avg" "1
8
4" "$out"

run 'fbt::ksys_read:entry /pid == $target/ { @q = quantize(arg2); }' -c "$W"
got=$(echo "$out" | awk '$2 ~ /^\|/ && $3 != 0 { print $1, $3 } $2 ~ /^\|@/ { print $1, $3 }' | sort -u | tr '\n' ' ')
expect "quantize buckets exact" "1 1000 2 2000 4 4000 8 1000 " "$got"

run 'fbt::ksys_read:entry /pid == $target/ { @n = count(); } END { printa("%@d\n", @n); }' \
	-x aggrate=10ms -x switchrate=10ms -c "./oxt_workload read 4 25000"
expect "snapshots while firing lose and double nothing" "100000" "$out"

want=$(grep -c '^ksys_' /sys/kernel/tracing/available_filter_functions)
run 'fbt::ksys_*:entry { } BEGIN { exit(0); }'
got=$(guard oxtrace -e 'fbt::ksys_*:entry { } BEGIN { exit(0); }' 2>&1 >/dev/null | sed -n "s/.*'fbt::ksys_\*:entry' matched \([0-9]*\) probes/\1/p")
expect "glob attaches every matching function" "$want" "$got"

run 'BEGIN { printf("begin\n"); } tick-10ms /i < 5/ { i = i + 1; } tick-10ms /i == 5 && !done/ { done = 1; exit(7); }
     END { printf("end %d\n", i); }'
expect "BEGIN, tick, exit(7), END" "begin
end 5 rc=7" "$out rc=$rc"

run 'BEGIN { printf("%s|%5d|%-5d|%x|%c|%%|%u\n", "str", 42, 42, 255, 65, -1); exit(0); }'
expect "printf conversions (-1 is an int, as in D)" "str|   42|42   |ff|A|%|4294967295" "$out"

guard oxtrace -e 'BEGIN { trace(42); exit(0); }' >/tmp/out 2>/dev/null
got=$(sed -n '2p' /tmp/out | tr -s ' ')
expect "trace() in dtrace's default format" " 0 1 :BEGIN 42" "$(echo "$got" | sed 's/^ *[0-9]* /X/; s/^X/ 0 /')"

run 'BEGIN { trace("ab"); exit(0); }' -x rawbytes -x strsize=16
expect "trace() of a string with rawbytes: the recorded bytes in hex" "
             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef
         0: 61 62 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ab.............." "$out"

run 'BEGIN { x = 0; y = 1 / x; printf("after\n"); } BEGIN { printf("next clause\n"); exit(0); }'
expect_clause_error "division by zero aborts only its clause, reported like dtrace" \
	"division by zero" "next clause"

# The error names the clause by the enabled probe ID its epid built-in gives: the second
# of the BEGIN clauses, EPID 2.
run 'BEGIN { x = 1; } BEGIN { printf("%d\n", epid); x = 0; y = 1 / x; } BEGIN { exit(0); }'
if [ "$out" = 2 ] &&
	echo "$err" | grep -qF "error on enabled probe ID $out (ID 1: dtrace:::BEGIN): division by zero"; then
	ok "the error line's enabled probe ID is the clause's epid"
else
	nok "the error line's enabled probe ID is the clause's epid" "$out" "$err"
fi

run 'BEGIN { trace(*(int *)8); } BEGIN { exit(0); }'
if echo "$err" | grep -q "invalid address (0x8)"; then ok "bad kernel read is an error, not a fault"; else
	nok "bad kernel read is an error, not a fault" "$err"; fi

guard oxtrace -e 'BEGIN {
  x = ;
}' >/dev/null 2>/tmp/err
rc=$?
if [ $rc = 1 ] && grep -q -- '-e:2:7' /tmp/err && grep -q '\^' /tmp/err; then
	ok "compile error with line:column and caret"
else
	nok "compile error with line:column and caret" "rc=$rc" "$(cat /tmp/err)"
fi

run 'fbt::no_such_function_xyz:entry { }'
expect_fail "unknown function: clear error" "no_such_function_xyz"

guard oxtrace --oformat json -e 'BEGIN { printf("x%d\n", 1); exit(0); }' >/tmp/out 2>/dev/null
if grep -q '"type":"printf",.*"text":"x1\\n"}$' /tmp/out; then ok "--oformat json"; else nok "--oformat json" "$(cat /tmp/out)"; fi

# -o FILE appends the output to FILE, as dtrace -o does; stdout stays empty; -x oformat=
# is --oformat; -o with a format's name is refused, naming --oformat.
rm -f /tmp/o.txt
echo first >/tmp/o.txt
guard oxtrace -q -o /tmp/o.txt -e 'BEGIN { printf("x%d\n", 2); exit(0); }' >/tmp/out 2>/tmp/err
guard oxtrace -x oformat=json -o /tmp/o.txt -e 'BEGIN { printf("y\n"); exit(0); }' >>/tmp/out 2>>/tmp/err
rc=$?
if [ $rc = 0 ] && [ ! -s /tmp/out ] && [ "$(head -n 2 /tmp/o.txt)" = "first
x2" ] && sed -n 3p /tmp/o.txt | grep -q '"type":"printf",.*"text":"y\\n"}$'; then
	ok "-o FILE appends the output, -x oformat=json"
else
	nok "-o FILE appends the output, -x oformat=json" "rc=$rc" "$(cat /tmp/o.txt)" "$(cat /tmp/out /tmp/err)"
fi
run 'BEGIN { exit(0); }' -o json
expect_fail "-o json is refused, naming --oformat" "use --oformat json"

# DTrace runs the clauses of one probe in program order: kretprobes on one function too,
# with an entry clause between them running before all of them.
run 'fbt::ksys_read:return /pid == $target/ { printf("a"); }
fbt::ksys_read:return /pid == $target/ { printf("b"); }
fbt::ksys_read:entry /pid == $target/ { printf("E"); }
fbt::ksys_read:return /pid == $target/ { printf("c\n"); }' -c "./oxt_workload read 1 5"
expect "clauses on one function's return run in program order" "5 Eabc" \
	"$(echo "$out" | sort | uniq -c | tr -s ' ' | sed 's/^ //')"

# An entry probe alone on a function with a return probe runs as a kprobe beside the
# return probe's (shim oxt_fset_drop_paired); two entry probes of different descriptions
# on one function stay in the ftrace set, which keeps their program order.
run 'fbt::ksys_read:entry /pid == $target/ { printf("A"); }
fbt::ksys_rea?:entry /pid == $target/ { printf("B"); }
fbt::ksys_read:return /pid == $target/ { printf("r\n"); }' -c "./oxt_workload read 1 5"
expect "two entry probes and a return probe on one function: program order" "5 ABr" \
	"$(echo "$out" | sort | uniq -c | tr -s ' ' | sed 's/^ //')"
# Entry probes of three descriptions on one function run in one firing (the set's run of
# them): each keeps its own predicate, and after the second's exit() the third does not run.
run 'fbt::ksys_read:entry /pid == $target && arg2 == 9/ { printf("X"); }
fbt::ksys_rea?:entry /pid == $target/ { printf("b%d", arg2); exit(0); }
fbt::ksys_read:entry /pid == $target/ { printf("c"); }' -c "./oxt_workload read 1 5"
expect "entry probes on one function in one firing: exit() stops the next" "b1 rc=0" \
	"$out rc=$rc"
# The reads ask for 1, 2, ... 5 bytes of /dev/zero and get them: arg2 at entry is arg1 at
# return.
run 'fbt::ksys_read:entry /pid == $target/ { self->n = arg2; }
fbt::ksys_read:return /self->n/ { printf("%d %d\n", self->n, arg1); self->n = 0; }' \
	-c "./oxt_workload read 1 5"
expect "an entry probe paired with a return probe reads its arguments" "5 15" \
	"$(echo "$out" | awk '$1 == $2 { n++; s += $1 } END { print n + 0, s + 0 }')"

# Consumers killed or interrupted while their probes fire on every CPU.
./oxt_workload spin 4 3600 &   # until killed below
wl=$!
bad=""
for i in 1 2 3 4; do
	# Emptied here, not only by the redirection: that happens in the child, later, and
	# until then wait_for would find the last consumer's line and signal this one before
	# it catches SIGINT (a background job starts with SIGINT ignored).
	: >/tmp/kill.err
	oxtrace -q -v -e 'fbt::ksys_read:entry { @[cpu] = count(); self->t = timestamp; }
		fbt::ksys_read:return /self->t/ { @l = quantize(timestamp - self->t); self->t = 0; }' \
		>/dev/null 2>/tmp/kill.err &
	p=$!
	# Killed while its probes fire: the workload spins on every CPU once they are enabled.
	wait_for /tmp/kill.err 'probes enabled' $p || bad="$bad consumer $i did not start: $(cat /tmp/kill.err);"
	if [ $((i % 2)) = 0 ]; then kill -INT $p; else kill -KILL $p; fi
	if ! wait_exit $p; then
		bad="$bad consumer $i did not stop;"
		kill -KILL $p
	fi
	wait $p 2>/dev/null
done
kill $wl 2>/dev/null
wait $wl 2>/dev/null
live=$(oxtrace status | sed -n 's/^consumers live *//p')
[ "$live" = 1 ] || bad="$bad live consumers $live;"
rmmod oxtrace || bad="$bad rmmod failed;"
insmod /lib/modules/oxtrace.ko || bad="$bad insmod failed;"
if [ -z "$bad" ]; then ok "killing consumers while probes fire is safe; rmmod after"; else
	nok "killing consumers while probes fire is safe; rmmod after" "$bad"; fi

tap_exit
