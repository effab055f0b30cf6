#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The pid provider against the real module: oxt_pid's functions (a.out, its linked
# library liboxtpid.so, liboxtdl.so loaded through the dynamic loader) called a known
# number of times with known arguments and return values: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 17

W="./oxt_pid run 10"
# One line of the scalar aggregations, printed at the end.
line() { echo "$out" | grep -v '^sum=' | awk 'NF' | tr '\n' '|' | sed 's/|$//'; }

run 'pid$target:a.out:oxt_work:entry { @a = sum(arg0); @b = sum(arg1); @n = count(); }
	END { printa("%@d %@d %@d\n", @a, @b, @n); }' -c "$W"
# Ten direct calls (i, 10) and ten reached by oxt_tail's jump (i + 1, 10).
expect "entry: arg0 and arg1 are the arguments, once per call" "120 200 20" "$(line)"
expect "the command ran to its end" "sum=815" "$(echo "$out" | grep '^sum=')"

run 'pid$target:a.out:oxt_work:return { @r = sum(arg1); @n = count(); }
	END { printa("%@d %@d\n", @r, @n); }' -c "$W"
# Ten direct calls and ten tail calls from oxt_tail: 155 + 165.
expect "return: arg1 is the return value" "320 20" "$(line)"

run 'pid$target:a.out:oxt_two_rets:return { @[arg0, (int)arg1] = count(); }
	END { printa("%x %d %@d\n", @); }' -c "$W"
expect "return: one probe per ret, arg0 its offset in the function" "9 1 5|f -1 5" "$(line)"

run 'pid$target:a.out:oxt_tail:return { @[arg0] = count(); }
	END { printa("%x %@d\n", @); }' -c "$W"
expect "return fires on a tail call (the jmp out of the function)" "8 10" "$(line)"

run 'pid$target:a.out:oxt_two_rets:4 { @n = count(); @a = sum(arg0); }
	END { printa("%@d %@d\n", @n, @a); }' -c "$W"
# Offset 4 is past the js: only the odd i (1 + 3 + 5 + 7 + 9).
expect "an offset probe on an instruction boundary" "5 25" "$(line)"

run 'pid$target:a.out:oxt_two_rets:1 { }' -c "$W"
expect_fail "an offset inside an instruction is refused with the boundaries" \
	"offset 0x1 of function oxt_two_rets of oxt_pid is not on an instruction boundary (nearest: 0x0 and 0x2)"

run 'pid$target:liboxtpid.so:oxt_lib_square:return { @s = sum(arg1); }
	pid$target:liboxtpid:oxt_lib_square:entry { @n = count(); }
	END { printa("%@d %@d\n", @s, @n); }' -c "$W"
expect "a linked shared library, by file name and by its start" "385 10" "$(line)"

run 'pid$target:a.out:oxt_work:entry /!done/ { done = 1;
	printf("%s %s %s %s\n", probeprov, probemod, probefunc, probename); }' -c "$W"
if echo "$out" | grep -Eq '^pid[0-9]+ oxt_pid oxt_work entry$'; then
	ok "probeprov, probemod, probefunc, probename"
else
	nok "probeprov, probemod, probefunc, probename" "$out" "$err"
fi

run 'pid$target:a.out:oxt_work:entry { @[execname, pid == $target] = count(); }
	END { printa("%s %d %@d\n", @); }' -c "$W"
expect "execname and pid are the target's" "oxt_pid 1 20" "$(line)"

run 'pid$target:a.out:oxt_*:entry { @[probefunc] = count(); }
	END { printa("%s %@d\n", @); }' -c "$W"
expect "a function glob" "oxt_tail 10|oxt_two_rets 10|oxt_work 20" "$(line | tr '|' '\n' | sort | tr '\n' '|' | sed 's/|$//')"

# A return probe is a uprobe on the ret itself (its PC 3 bytes into oxt_work, where entry
# saw it start), and the return address on the stack is the one entry saw: no trampoline
# replaced it, so ustack() walks the real stack.
run 'pid$target:a.out:oxt_work:entry { self->pc = uregs[R_PC];
	self->ra = *(uint64_t *)copyin(uregs[R_SP], 8); }
	pid$target:a.out:oxt_work:return {
	@[uregs[R_PC] - self->pc, *(uint64_t *)copyin(uregs[R_SP], 8) == self->ra] = count(); }
	END { printa("%d %d %@d\n", @); }' -c "./oxt_pid run 3"
expect "return: on the ret instruction, the return address intact" "3 1 6" "$(line)"

run 'pid$target:liboxtdl.so::entry { }' -c "$W"
expect_fail "-c: a library not loaded yet is named as missing" "has no load object 'liboxtdl.so'"

run 'pid$target:a.out:nosuch:entry { }' -c "$W"
expect_fail "an unknown function" "no function 'nosuch' in a.out"

run 'pid$pid::malloc:entry { }'
expect_fail "oxtrace's own process is refused" "is oxtrace itself"

# -p: the process has loaded liboxtdl.so through dlopen() and waits until the tool has
# printed that its probes are enabled.
rm -f /tmp/pid_go /tmp/pid_ready
./oxt_pid wait /tmp/pid_go 10 >/tmp/pid_ready &
w=$!
wait_for /tmp/pid_ready ready $w
: >/tmp/pid_err
guard oxtrace -v -q -p $w -e 'pid$target:liboxtdl.so:oxt_dl_twice:entry { @n = count(); }
	pid$target:liboxtdl:oxt_dl_twice:return { @s = sum(arg1); }
	pid$target:a.out:oxt_work:entry { @w = count(); }
	END { printa("%@d %@d %@d\n", @n, @s, @w); }' >/tmp/pid_out 2>/tmp/pid_err &
t=$!
if wait_for /tmp/pid_err 'probes enabled' $t; then
	touch /tmp/pid_go
	wait $t
	rc=$?
	wait $w
	expect "-p: a library loaded by dlopen(), until the process exits" "0 10 110 20" \
		"$rc $(awk 'NF' /tmp/pid_out)"
else
	nok "-p: a library loaded by dlopen(), until the process exits" "$(cat /tmp/pid_err)"
	kill $w $t 2>/dev/null
fi
rm -f /tmp/pid_go

out=$(guard oxtrace -l -n 'pid$target:a.out:oxt_two_rets:' -c "$W" 2>&1)
expect "-l -c lists the probes of a pid description" \
	"oxt_two_rets entry|oxt_two_rets return" \
	"$(echo "$out" | awk 'NR > 1 { print $4, $5 }' | tr '\n' '|' | sed 's/|$//')"

tap_exit
