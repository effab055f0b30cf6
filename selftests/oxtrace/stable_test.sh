#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The stable providers proc, sched and io through the real module: oxt_stable's and dd's
# known workloads and the exact counts they imply (at least, where the kernel may add
# more: a direct write is one request or more). TAP; nothing waits for a time.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
KIDS='curpsinfo->pr_ppid == $target'

echo "TAP version 13"
plan 26

run "proc:::create /pid == \$target/ { @n = count();
       @p = sum(args[0]->pr_ppid == \$target && args[0]->pr_pid != \$target); }
     proc:::start /$KIDS/ { @s = count(); }
     proc:::exit /$KIDS/ { @e[args[0]] = count(); }
     proc:::lwp-exit /$KIDS/ { @l = count(); }
     END { printa(\"%@d \", @n); printa(\"%@d \", @p); printa(\"%@d \", @s);
       printa(\"%d:%@d \", @e); printa(\"%@d\", @l); }" -c "./oxt_stable fork 5"
expect "5 forks: 5 create (args[0]: the child), start, exit (CLD_EXITED) and lwp-exit" \
	"5 5 5 1:5 5" "$out"

run "proc:::exec-success /$KIDS/ { @[curpsinfo->pr_psargs] = count(); }
     END { printa(\"%s|%@d\n\", @); }" -c "./oxt_stable exec 3"
expect "3 execs: 3 exec-success, pr_psargs the new image's" "oxt_stable nop a b|3" "$out"

run "proc:::exec /$KIDS/ { @[args[0]] = count(); }
     END { printa(\"%s|%@d\n\", @); }" -c "./oxt_stable exec 3"
expect "exec: args[0] the path, before each of the 4 execs" \
	"/nonexistent/oxt_stable|1
./oxt_stable|3" "$out"

run "proc:::exec-failure /$KIDS/ { @[args[0]] = count(); }
     END { printa(\"%d|%@d\n\", @); }" -c "./oxt_stable exec 3"
expect "exec of a missing file: one exec-failure, args[0] ENOENT" "2|1" "$out"

run "proc:::exec-success /$KIDS/ {
       printf(\"%s:%s:%s:%s\n\", probeprov, probemod, probefunc, probename); }" \
	-c "./oxt_stable exec 1"
expect "probeprov, probemod, probefunc, probename read as the stable probe" \
	"proc:vmlinux::exec-success" "$out"

run "proc:::signal-send /pid == \$target && args[2] == 10/ {
       @[args[1]->pr_ppid == \$target, args[0]->pr_lwpid == args[1]->pr_pid] = count(); }
     proc:::signal-handle /$KIDS/ { @h[args[0], args[2] != 0, args[1]->si_signo] = count(); }
     END { printa(\"send %d %d %@d\n\", @); printa(\"handle %d %d %d %@d\n\", @h); }" \
	-c "./oxt_stable signal"
expect "kill -USR1 of a child: one signal-send to it, one signal-handle in it" \
	"send 1 1 1
handle 10 1 10 1" "$out"

run "proc:::signal-* /pid == \$target || $KIDS/ { @[probename] = count(); }
     END { printa(\"%s \", @); }" -c "./oxt_stable sigwait"
set -- $out
if echo " $out " | grep -q " signal-clear " && echo " $out " | grep -q " signal-send "; then
	ok "proc:::signal-* matches signal-send and signal-clear (sigwaitinfo)"
else
	nok "proc:::signal-* matches signal-send and signal-clear (sigwaitinfo)" "$out" "$err"
fi

run "proc:::signal-clear /$KIDS/ { @[args[0]] = count(); }
     END { printa(\"%d|%@d\n\", @); }" -c "./oxt_stable sigwait"
expect "sigwaitinfo for SIGUSR2: one signal-clear, args[0] 12" "12|1" "$out"

run "proc:::lwp-create /pid == \$target/ { @n = count();
       @ok = sum(args[1]->pr_pid == \$target && args[0]->pr_lwpid != \$target); }
     proc:::create /pid == \$target/ { @c = count(); }
     END { printa(\"%@d \", @n); printa(\"%@d\", @ok); printa(\" create %@d\", @c); }" \
	-c "./oxt_stable threads 4"
expect "4 threads: 4 lwp-create (args[0] the thread, args[1] the process), no create" \
	"4 4" "$out"

# The child blocks in read(2) at least 20 times. It starts on a CPU (on-cpu, no off-cpu
# before) and ends off one (off-cpu, no on-cpu after).
run "sched:::off-cpu /$KIDS/ { @off = count(); }
     sched:::on-cpu /$KIDS/ { @on = count(); }
     sched:::sleep /$KIDS/ { @sl = count(); }
     END { printa(\"%@d \", @on); printa(\"%@d \", @off); printa(\"%@d\", @sl); }" \
	-c "./oxt_stable pipe 20"
set -- $out
if [ -n "$3" ] && [ "$1" = "$2" ] && [ "$1" -ge 20 ] && [ "$3" -ge 20 ]; then
	ok "a child blocking 20 times on a pipe: on-cpu = off-cpu >= 20, sleep >= 20"
else
	nok "a child blocking 20 times on a pipe: on-cpu = off-cpu >= 20, sleep >= 20" \
		"$out" "$err"
fi

run "sched:::*-cpu /$KIDS/ { @[probeprov, probename] = count(); }
     END { printa(\"%s:%s \", @); }" -c "./oxt_stable pipe 3"
if echo "$out" | grep -q "sched:off-cpu" && echo "$out" | grep -q "sched:on-cpu"; then
	ok "sched:::*-cpu: on-cpu and off-cpu"
else
	nok "sched:::*-cpu: on-cpu and off-cpu" "$out" "$err"
fi

# off-cpu's args[0] is the thread switched to: the next on-cpu on that CPU is its (the idle
# task's too, tid 0: recorded plus one). Each of the child's 21 or more switches has one,
# but for the last, which may come after tracing ends; every psinfo_t is its thread's.
run "sched:::off-cpu /$KIDS/ { nxt[cpu] = args[0]->pr_lwpid + 1;
       @pid = sum(args[1]->pr_pid == args[0]->pr_lwpid || args[1]->pr_nlwp > 1); }
     sched:::on-cpu /nxt[cpu]/ { @[nxt[cpu] - 1 == tid] = count(); nxt[cpu] = 0; }
     END { printa(\"%d:%@d \", @); printa(\"%@d\", @pid); }" -c "./oxt_stable pipe 20"
set -- $out
if [ $# = 2 ] && [ "${1%%:*}" = 1 ] && [ "${1#1:}" -ge 20 ] && [ "$2" -ge "${1#1:}" ]; then
	ok "sched:::off-cpu's args[0] is the thread that runs next on the CPU"
else
	nok "sched:::off-cpu's args[0] is the thread that runs next on the CPU" "$out" "$err"
fi

run "sched:::wakeup /pid == \$target && args[1]->pr_ppid == \$target/ { @k = count();
       @ok = sum(args[0]->pr_lwpid == args[1]->pr_pid); }
     END { printa(\"%@d \", @k); printa(\"%@d\", @ok); }" -c "./oxt_stable pipe 10"
set -- $out
if [ -n "$2" ] && [ "$1" -ge 10 ] && [ "$1" = "$2" ]; then
	ok "sched:::wakeup: the parent wakes the child at least 10 times (args[] the child)"
else
	nok "sched:::wakeup: the parent wakes the child at least 10 times (args[] the child)" \
		"$out" "$err"
fi

run "sched:::enqueue /args[1]->pr_ppid == \$target/ {
       @[args[2]->cpu_id < 64, args[2]->cpu_pset, args[2]->cpu_chip,
         args[2]->cpu_info != 0] = count(); }
     sched:::tick { @t = count(); @ok = sum(args[0]->pr_lwpid == tid); }
     END { printa(\"%d %d %d %d %@d \", @); printa(\"%@d \", @t); printa(\"%@d\", @ok); }" \
	-c "./oxt_stable pipe 10"
set -- $out
if [ "$1 $2 $3 $4" = "1 -1 0 1" ] && [ "${5:-0}" -ge 10 ] && [ "$6" = "$7" ]; then
	ok "sched:::enqueue: the child enqueued at least 10 times, args[2] its CPU; tick's args[0]"
else
	nok "sched:::enqueue: the child enqueued at least 10 times, args[2] its CPU; tick's args[0]" \
		"$out" "$err"
fi

# dequeue: the child leaves its run queue each time it blocks on the pipe.
run "sched:::dequeue /args[1]->pr_ppid == \$target/ { @n = count();
       @ok = sum(args[0]->pr_lwpid == args[1]->pr_pid && args[2]->cpu_id < 64); }
     END { printa(\"%@d \", @n); printa(\"%@d\", @ok); }" -c "./oxt_stable pipe 10"
set -- $out
if [ -n "$2" ] && [ "$1" -ge 10 ] && [ "$1" = "$2" ]; then
	ok "sched:::dequeue: the child taken off its queue at least 10 times (args[] it, its CPU)"
else
	nok "sched:::dequeue: the child taken off its queue at least 10 times (args[] it, its CPU)" \
		"$out" "$err"
fi

# change-pri: nice 1 to 5, one setpriority(2) each: priorities 121..125.
run "sched:::change-pri /pid == \$target/ { @n = count(); @p = sum(args[2]);
       @ok = sum(args[0]->pr_lwpid == tid && args[1]->pr_pid == pid); }
     END { printa(\"%@d \", @n); printa(\"%@d \", @p); printa(\"%@d\", @ok); }" \
	-c "./oxt_stable nice 5"
expect "sched:::change-pri: 5 changes of the thread's own nice value, args[2] 121..125" \
	"5 615 5" "$out"

# lwp-start: in each of 4 new threads, not in the process's first one.
run "proc:::lwp-start /pid == \$target && tid != pid/ { @ = count(); }
     END { printa(\"%@d\", @); }" -c "./oxt_stable threads 4"
expect "proc:::lwp-start: once in each of 4 threads" "4" "$out"

# preempt: two children spin on CPU 0 until each was switched out runnable 5 times.
run "sched:::preempt /$KIDS/ { @ = count(); } END { printa(\"%@d\", @); }" \
	-c "./oxt_stable spin 5"
if [ -n "$out" ] && [ "$out" -ge 10 ]; then
	ok "sched:::preempt: two spinners on one CPU preempted at least 5 times each ($out)"
else
	nok "sched:::preempt: two spinners on one CPU preempted at least 5 times each" "$out" "$err"
fi

# remain-cpu: sched_yield(2) until 10 of them left the thread on its CPU.
run "sched:::remain-cpu /pid == \$target/ { @ = count(); } END { printa(\"%@d\", @); }" \
	-c "./oxt_stable yield 10"
if [ -n "$out" ] && [ "$out" -ge 10 ]; then
	ok "sched:::remain-cpu: at least the 10 yields that kept the CPU ($out)"
else
	nok "sched:::remain-cpu: at least the 10 yields that kept the CPU" "$out" "$err"
fi

# surrender: CPU 0 wakes a SCHED_FIFO reader on CPU 1, where another child spins, 10 times:
# each wakeup tells CPU 1 to reschedule, from CPU 0.
run "sched:::surrender /pid == \$target/ { @n = count(); @s = sum(args[1]->pr_ppid == \$target); }
     END { printa(\"%@d \", @n); printa(\"%@d\", @s); }" -c "./oxt_stable surrender 10"
set -- $out
if [ -n "$2" ] && [ "$1" -ge 10 ] && [ "$2" -ge 1 ]; then
	ok "sched:::surrender: at least 10, in the waker, args[] the spinner it displaces ($out)"
else
	nok "sched:::surrender: at least 10, in the waker, args[] the spinner it displaces" "$out" "$err"
fi

# io: 8 direct writes of 4 KiB to a loop device over a tmpfs file.
truncate -s 1M /tmp/stable.img
dev=$(losetup -f)
if losetup "$dev" /tmp/stable.img; then
	name=${dev##*/}
	IO="args[1]->dev_statname == \"$name\""
	run "io:::start /$IO/ { @s = count(); @w = sum(args[0]->b_flags & B_WRITE ? 1 : 0);
	       @b = sum(args[0]->b_flags & B_WRITE ? args[0]->b_bcount : 0); }
	     io:::done /$IO/ { @d = count(); }
	     io:::wait-start /pid == \$target/ { @ws = count(); }
	     io:::wait-done /pid == \$target/ { @wd = count(); }
	     END { printa(\"%@d \", @s); printa(\"%@d \", @d); printa(\"%@d \", @w);
	       printa(\"%@d\", @b); printa(\" %@d\", @ws); printa(\" %@d\", @wd); }" \
		-c "dd if=/dev/zero of=$dev bs=4k count=8 oflag=direct conv=notrunc"
	set -- $out
	# dd's waits for its writes (none if each completed before it waited) pair up.
	if [ -n "$4" ] && [ "$1" = "$2" ] && [ "$3" -ge 8 ] && [ "$4" -ge 32768 ] &&
		[ "$5" = "$6" ]; then
		ok "8 direct writes to $name: io:::start = io:::done, >= 8 writes of >= 32768 bytes"
	else
		nok "8 direct writes to $name: io:::start = io:::done, >= 8 writes of >= 32768 bytes" \
			"$out" "$err"
	fi
	run "io:::start /$IO/ { @[args[1]->dev_pathname, args[1]->dev_major, args[2]->fi_name,
	       args[0]->b_edev == ((dev_t)args[1]->dev_major << 20 | args[1]->dev_minor)] = count(); }
	     END { printa(\"%s %d %s %d\n\", @); }" \
		-c "dd if=/dev/zero of=$dev bs=4k count=2 oflag=direct conv=notrunc"
	expect "io:::start's devinfo_t and fileinfo_t" "/dev/$name 7 <none> 1" "$(echo "$out" | cut -d' ' -f1-4)"
	losetup -d "$dev"
else
	nok "losetup $dev /tmp/stable.img"
	nok "io:::start's devinfo_t and fileinfo_t"
fi
rm -f /tmp/stable.img

out=$(oxtrace -l -P proc 2>&1 | tail -n +2 | awk '{print $2 ":" $3 "::" $4}' | sort | tr '\n' ' ')
expect "-l -P proc: the 12 proc probes" "proc:vmlinux::create proc:vmlinux::exec proc:vmlinux::exec-failure proc:vmlinux::exec-success proc:vmlinux::exit proc:vmlinux::lwp-create proc:vmlinux::lwp-exit proc:vmlinux::lwp-start proc:vmlinux::signal-clear proc:vmlinux::signal-handle proc:vmlinux::signal-send proc:vmlinux::start " "$out"

out=$(oxtrace -l -v -n 'proc:::signal-send' 2>&1 | grep 'args\[' | tr -d '\t' | tr '\n' ';')
expect "-l -v: a stable probe's argument types" \
	"args[0]: lwpsinfo_t *;args[1]: psinfo_t *;args[2]: int;" "$out"

# The default output's FUNCTION:NAME of the one firing: the stable probe's.
# -c traces from the command's first instruction, after its own exec: a child's exec.
guard oxtrace -e "proc:::exec-success /$KIDS/ { }" -c "./oxt_stable exec 1" >/tmp/out 2>/tmp/err
got=$(awk '$3 ~ /:/ && $1 != "CPU" { print $3 }' /tmp/out)
if [ "$got" = ":exec-success" ]; then
	ok "the default output names a firing as the stable probe"
else
	nok "the default output names a firing as the stable probe" "$(cat /tmp/out /tmp/err)"
fi

run "proc:::exec-success, syscall::execve:entry /$KIDS/ { @[probeprov, probename] = count(); }
     END { printa(\"%s:%s %@d\n\", @); }" -c "./oxt_stable exec 2"
expect "a clause on a stable probe and a system call" "proc:exec-success 2
syscall:entry 3" "$out"

tap_exit
