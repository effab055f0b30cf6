#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The syscall and profile providers, -n, -P, #! scripts and the tool's refusals, against the
# real module with oxt_workload's known calls: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
W="./oxt_workload read 4 2000"

echo "TAP version 13"
plan 24

run 'syscall::read:entry /pid == $target/ { @n = count(); @s = sum(arg2); }
     END { printa("%@d\n", @n); printa("%@d\n", @s); }' -c "$W"
expect "syscall::read:entry counts and arguments (4 x 2000 reads)" "8000 36000" "$(echo $out)"

run 'syscall::read:return /pid == $target/ { @s = sum(arg1); @z = sum(arg0 - arg1); }
     END { printa("%@d\n", @s); printa("%@d\n", @z); }' -c "$W"
expect "syscall::read:return: arg0 and arg1 the return value" "36000 0" "$(echo $out)"

run 'syscall::read:entry /pid == $target/ { self->n = arg2; }
     syscall::read:return /self->n/ { @ok = sum(arg1 == self->n); self->n = 0; }
     END { printa("%@d\n", @ok); }' -c "$W"
expect "entry and return pair on a thread" "8000" "$out"

run 'syscall::lseek:entry /pid == $target/ { @s = sum(arg1); @w = max(arg2); @n = count(); }
     END { printa("%@d\n", @n); printa("%@d\n", @s); printa("%@d\n", @w); }' \
	-c "./oxt_workload lseek 2 100"
expect "syscall::lseek:entry: offset and whence" "200 9900 0" "$(echo $out)"

run 'syscall:::entry /pid == $target/ { @[probefunc] = count(); }
     END { printa("%s %@d\n", @); }' -c "./oxt_workload lseek 4 1000"
expect "syscall:::entry by name" "lseek 4000" "$(echo "$out" | grep '^lseek ')"

run 'syscall::*seek:entry /pid == $target/ { @[probeprov, probemod, probefunc, probename] = count(); }
     END { printa("%s:%s:%s:%s %@d\n", @); }' -c "./oxt_workload lseek 1 10"
expect "probeprov, probemod, probefunc, probename" "syscall:vmlinux:lseek:entry 10" "$out"

run 'syscall::openat:entry /pid == $target/ { @[copyinstr(arg1)] = count(); }
     END { printa("%s %@d\n", @); }' -c "./oxt_workload open 4 1000"
expect "copyinstr of the path openat opens" "/dev/null 4000" "$(echo "$out" | grep '^/dev/null ')"

run 'syscall::lseek:entry /pid == $target/ { trace(copyinstr(arg1)); }' -c "./oxt_workload lseek 1 1"
if [ $rc = 0 ] && echo "$err" | grep -q "invalid address (0x0)"; then
	ok "copyinstr of a bad user address is a runtime error"
else
	nok "copyinstr of a bad user address is a runtime error" "rc=$rc" "$err"
fi

# Samples land on every CPU, idle or not: each CPU sets its own flag, so nothing races.
run 'profile-997 /cpu == 0/ { c0 = 1; } profile-997 /cpu == 1/ { c1 = 1; }
     profile-997 /cpu == 2/ { c2 = 1; } profile-997 /cpu == 3/ { c3 = 1; }
     profile-997 /c0 && c1 && c2 && c3/ { printf("all\n"); exit(0); }'
expect "profile-997 fires on all 4 CPUs" "all rc=0" "$(echo "$out" | head -1) rc=$rc"

./oxt_workload burn 1 0 &
wl=$!
run 'profile:hz:997 /pid == $target && arg0 == 0 && arg1 != 0/ { u = 1; }
     profile:hz:997 /arg0 != 0 && arg1 == 0/ { k = 1; }
     profile:hz:997 /u && k/ { printf("both\n"); exit(0); }' -p $wl
kill $wl 2>/dev/null
wait $wl 2>/dev/null
expect "profile arg0 = kernel PC, arg1 = user PC" "both rc=0" "$(echo "$out" | head -1) rc=$rc"

run 'tracepoint:sched:sched_process_fork /pid == $target/ {
       @n = count(); @self = sum(args->parent_pid == tid); @kid = sum(args->child_pid > 0);
       @[args->child_comm, probeprov, probemod, probename] = count(); }
     END { printa("%@d\n", @n); printa("%@d\n", @self); printa("%@d\n", @kid);
       printa("%s %s:%s:%s %@d\n", @); }' -c "./oxt_workload fork 2 50"
# 2 threads (clone makes them through the same path) and 2 x 50 children.
expect "tracepoint with arguments by name" "102 102 102 oxt_workload tracepoint:sched:sched_process_fork 102" "$(echo $out)"

# CPU hotplug: CPU 3 offline at LOAD comes online while tracing, and CPU 2 goes down and
# comes back. The module reopens a CPU's counter in a work item after hotplug, so the
# workload forks (on every CPU, pinned) until the program has seen forks on both.
C=/sys/devices/system/cpu
echo 0 >$C/cpu3/online
run 'tracepoint:sched:sched_process_fork /execname == "oxt_workload" && tid != pid && cpu == 2/ { c2 = 1; }
     tracepoint:sched:sched_process_fork /execname == "oxt_workload" && tid != pid && cpu == 3/ { c3 = 1; }
     tracepoint:sched:sched_process_fork /c2 && c3/ { printf("both\n"); exit(0); }' \
	-c "sh -c 'echo 1 >$C/cpu3/online; echo 0 >$C/cpu2/online; echo 1 >$C/cpu2/online; while :; do ./oxt_workload fork 4 1; done'"
echo 1 >$C/cpu2/online
echo 1 >$C/cpu3/online
expect "tracepoint events follow CPU hotplug" "both rc=0" "$(echo "$out" | head -1) rc=$rc"

# profile-997 on CPUs that come and go while the probes are enabled.
echo 0 >$C/cpu3/online
tail -f /dev/null &
anchor=$!
: >/tmp/err # wait_for must not find an earlier run's line
guard oxtrace -q -v -e 'profile-997 /cpu == 3/ { printf("cpu3\n"); exit(0); }' -p $anchor \
	>/tmp/out 2>/tmp/err &
p=$!
wait_for /tmp/err 'probes enabled' $p
# A CPU going down and up while the timers run, then the one that was offline at GO.
echo 0 >$C/cpu2/online
echo 1 >$C/cpu2/online
echo 1 >$C/cpu3/online
wait $p
rc=$?
kill $anchor
wait $anchor 2>/dev/null
expect "profile timers follow CPU hotplug" "cpu3 rc=0" "$(head -1 /tmp/out) rc=$rc"

got=$(oxtrace -l 'tracepoint:sched:sched_process_fo*' | awk 'NR > 1 { print $2, $3, $4 }')
expect "-l lists tracepoints" "tracepoint sched sched_process_fork" "$got"

run 'tracepoint:sched:sched_process_frok { }'
expect_fail "unknown tracepoint: names what exists" \
	"unknown tracepoint 'sched:sched_process_frok' (did you mean 'sched:sched_process_fork'"

guard oxtrace -q -n 'syscall::lseek:entry /pid == $target/ { @n = count(); }
     END { printa("%@d\n", @n); }' -c "./oxt_workload lseek 1 7" >/tmp/out 2>/tmp/err
expect "-n with a clause" "7" "$(cat /tmp/out)"

guard oxtrace -n 'syscall::lseek:entry' -c "./oxt_workload lseek 1 3" >/tmp/out 2>/tmp/err
rc=$?
expect "-n with a description alone: the default action" "3 rc=0" "$(grep -c 'lseek:entry' /tmp/out) rc=$rc"

cat >/tmp/script.d <<EOS
#!/usr/bin/oxtrace -qs
/* an interpreter line, then D */
BEGIN { printf("%d %d\n", \$1, 7); exit(0); }
EOS
chmod +x /tmp/script.d
got=$(guard /tmp/script.d 42 2>&1)
expect "#! script run by the kernel with -qs" "42 7" "$got"

got=$(oxtrace -l 'syscall::read:' | awk 'NR > 1 { print $2, $3, $4, $5 }')
expect "-l lists the system calls" "syscall vmlinux read entry
syscall vmlinux read return" "$got"

np=$(oxtrace -l -P syscall | grep -c ' syscall ')
nn=$(oxtrace -l -n 'syscall:::entry' | grep -c ' entry$')
if [ "$np" -gt 600 ] && [ "$np" = $((2 * nn)) ]; then ok "-l -P syscall and -l -n"; else
	nok "-l -P syscall and -l -n" "P: $np n: $nn"; fi

guard oxtrace -e 'syscall:::entry { } BEGIN { exit(0); }' >/dev/null 2>/tmp/err
got=$(grep -c "description 'syscall:::entry' matched" /tmp/err)
m=$(sed -n "s/.*'syscall:::entry' matched \([0-9]*\) probes/\1/p" /tmp/err)
expect "syscall:::entry: one hook, every call, one line" "1 $nn" "$got $m"

run 'syscall::opne:entry { }'
expect_fail "unknown system call: names what exists" "unknown system call 'opne' (did you mean 'open'"

guard oxtrace -q -e 'BEGIN { }' -c '/no/such/command arg' >/tmp/out 2>/tmp/err
rc=$?
if [ $rc != 0 ] && grep -q "cannot run '/no/such/command arg'" /tmp/err; then
	ok "-c with a command that cannot run"
else
	nok "-c with a command that cannot run" "rc=$rc" "$(cat /tmp/err)"
fi

# A pid that is not running: one that just exited and was reaped.
sh -c 'exit 0' &
dead=$!
wait $dead
guard oxtrace -q -e 'BEGIN { }' -p $dead >/tmp/out 2>/tmp/err
rc=$?
if [ $rc != 0 ] && grep -q -- "-p $dead: no such process" /tmp/err; then
	ok "-p with a pid that does not exist"
else
	nok "-p with a pid that does not exist" "rc=$rc" "$(cat /tmp/err)"
fi

tap_exit
