#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Translators and DTrace's process views through the real module (issue 11): a user
# translator over curthread, curpsinfo and curlwpsinfo against the built-in variables
# and oxt_workload's known arguments, and the translator errors; translators over struct
# inputs, kernel variables and the D library's constants. TAP, exact output.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
# 4 threads x 2000 reads of /dev/zero (the reads of a file named "zero": 8000).
W="./oxt_workload read 4 2000"
ZERO='pid == $target && args[0]->f_path.dentry->d_name.len == 4'

echo "TAP version 13"
plan 20

run "struct ids { int p; int t; char name[16]; };
     translator struct ids < struct task_struct *T > { p = T->tgid; t = T->pid; name = T->comm; };
     fbt::vfs_read:entry /$ZERO/ {
       @ok = sum(xlate <struct ids *> (curthread)->p == pid && xlate <struct ids> (curthread).t == tid);
       @[xlate <struct ids *> (curthread)->name] = count(); }
     END { printa(\"%@d\n\", @ok); printa(\"%s %@d\n\", @); }" -c "$W"
expect "a user translator over curthread" "8000 oxt_workload 8000" "$(echo $out)"

run "fbt::vfs_read:entry /$ZERO/ {
       @pid = sum(curpsinfo->pr_pid == pid); @ppid = sum(curpsinfo->pr_ppid == ppid);
       @fname = sum(curpsinfo->pr_fname == execname); @lwp = sum(curlwpsinfo->pr_lwpid == tid);
       @ids = sum(curpsinfo->pr_uid == uid && curpsinfo->pr_gid == gid);
       @addr = sum(curpsinfo->pr_addr == (uintptr_t)curthread); @n = count(); }
     END { printa(\"%@d \", @pid); printa(\"%@d \", @ppid); printa(\"%@d \", @fname);
       printa(\"%@d \", @lwp); printa(\"%@d \", @ids); printa(\"%@d \", @addr); printa(\"%@d\", @n); }" -c "$W"
expect "curpsinfo and curlwpsinfo agree with pid, ppid, execname, tid, uid, gid, curthread" \
	"8000 8000 8000 8000 8000 8000 8000" "$out"

run "fbt::vfs_read:entry /$ZERO/ { @[curpsinfo->pr_psargs] = count(); }
     END { printa(\"%s|%@d\n\", @); }" -c "./oxt_workload read 1 3"
expect "pr_psargs: the workload's arguments from its user memory" "./oxt_workload read 1 3|3" "$out"

# exec's initial stack: argc, then argv[] (argv[1] is "read"), a NULL, then envp[].
run "fbt::vfs_read:entry /$ZERO/ {
       @[curpsinfo->pr_argc, copyinstr(*(uintptr_t *)copyin(curpsinfo->pr_argv + 8, 8)),
         curpsinfo->pr_envp == curpsinfo->pr_argv + (curpsinfo->pr_argc + 1) * 8,
         curpsinfo->pr_dmodel] = count(); }
     END { printa(\"%d %s %d %d %@d\n\", @); }" -c "./oxt_workload read 1 3"
expect "pr_argc, pr_argv, pr_envp and pr_dmodel (LP64) of the workload" "4 read 1 2 3" "$out"

# pr_ttydev against the kernel's own view (tty_nr in /proc/PID/stat, 0 without a tty).
tty=$(cut -d' ' -f7 /proc/$$/stat)
if [ "$tty" = 0 ]; then want="1"; else
	want="0 $(((tty >> 8) & 0xfff)) $(((tty & 0xff) | ((tty >> 12) & 0xfff00)))"; fi
run 'BEGIN { if (curpsinfo->pr_ttydev == (dev_t)-1) { printf("1\n"); } else {
       printf("0 %d %d\n", getmajor(curpsinfo->pr_ttydev), getminor(curpsinfo->pr_ttydev)); }
       exit(0); }'
expect "pr_ttydev: the controlling tty as /proc gives it (tty_nr $tty)" "$want" "$out"

# pr_start: the thread group leader's start, on timestamp's clock: the same in every
# thread, not after any thread's own start nor after the firing.
run "fbt::vfs_read:entry /$ZERO/ {
       @ok = sum(curpsinfo->pr_start > 0 && curpsinfo->pr_start <= timestamp &&
         curpsinfo->pr_start <= curthread->start_time);
       @lo = min(curpsinfo->pr_start); @hi = max(curpsinfo->pr_start); }
     END { printa(\"%@d \", @ok); printa(\"%@d \", @lo); printa(\"%@d\", @hi); }" -c "$W"
set -- $out
if [ "$1" = 8000 ] && [ -n "$3" ] && [ "$2" = "$3" ]; then
	ok "pr_start: the process's start, nonzero, before timestamp, one for all threads"
else
	nok "pr_start: the process's start, nonzero, before timestamp, one for all threads" \
		"$out" "$err"
fi

# Against the kernel's own view: /proc/PID/stat's starttime, in clock ticks (USER_HZ 100)
# since boot, of the tool's parent; boot time and CLOCK_MONOTONIC agree without a
# suspend, the two reads at fork may straddle a tick.
run 'BEGIN { printf("%d %d\n", $ppid,
       xlate <psinfo_t *> (curthread->real_parent)->pr_start / 10000000); exit(0); }'
set -- $out
st=$(cut -d' ' -f22 "/proc/${1:-0}/stat" 2>/dev/null)
if [ -n "$st" ] && [ -n "$2" ] && [ $(($2 - st)) -ge -1 ] && [ $(($2 - st)) -le 1 ]; then
	ok "pr_start agrees with /proc/PID/stat's starttime"
else
	nok "pr_start agrees with /proc/PID/stat's starttime" "$out" "starttime=$st" "$err"
fi

run "fbt::vfs_read:entry /$ZERO/ {
       @[curlwpsinfo->pr_sname, curlwpsinfo->pr_state, curlwpsinfo->pr_flag,
         curlwpsinfo->pr_clname] = count();
       @cpu = sum(curlwpsinfo->pr_onpro == cpu); }
     END { printa(\"%c %d %d %s %@d\n\", @); printa(\"%@d\n\", @cpu); }" -c "$W"
expect "curlwpsinfo of the running thread: on a CPU (O, SONPROC), not stopped, class TS" \
	"O 6 0 TS 8000 8000" "$(echo $out)"

run 'BEGIN { printf("%d %d %s\n", curpsinfo->pr_pid == $pid, curpsinfo->pr_ppid == $ppid,
       curpsinfo->pr_fname); exit(0); }'
expect "BEGIN runs in the tool's process" "1 1 oxtrace" "$out"

run 'BEGIN { trace(xlate <psinfo_t *> (1)->pr_pid); }'
expect_fail "no translator from int" \
	'[D_XLATE_NONE] cannot translate from "int" to "struct psinfo *"'

run 'struct s { int a; int b; }; translator struct s < int x > { a = x; };
     BEGIN { trace(xlate <struct s> (1).b); }'
expect_fail "a member the translator does not define" \
	"[D_XLATE_NOCONV] translator does not define conversion for member: b"

# Translators over struct inputs, read in place: kernel memory (*curthread), D struct
# variables, circular translators, translations of translations, in printf arguments,
# aggregation keys and values, and struct copies.
run 'struct pids { int pid; int tgid; char comm[16]; };
     translator struct pids < struct task_struct T > { pid = T.pid; tgid = T.tgid;
       comm = T.comm; };
     BEGIN { printf("%d %d %s\n", xlate <struct pids> (*curthread).pid == tid,
       xlate <struct pids *> (*curthread)->tgid == pid, xlate <struct pids> (*curthread).comm);
       exit(0); }'
expect "a translator over struct task_struct by value" "1 1 oxtrace" "$out"

run "struct pids { int pid; int tgid; };
     translator struct pids < struct task_struct T > { pid = T.pid; tgid = T.tgid; };
     fbt::vfs_read:entry /$ZERO/ {
       @[xlate <struct pids> (*curthread).tgid == pid] = sum(xlate <struct pids> (*curthread).pid == tid); }
     END { printa(\"%d %@d\n\", @); }" -c "$W"
expect "struct-input translations as aggregation keys and values in fbt" "1 8000" "$out"

run 'struct in { int i; char c; }; struct out { int oi; char oc; };
     translator struct out < struct in I > { oi = ((struct in)I).i * 2; oc = I.c; };
     translator struct in < struct out O > { i = O.oi + 1; c = O.oc; };
     struct in a; struct out b;
     BEGIN { a.i = 21; a.c = 0x78; b = xlate <struct out> (a);
       printf("%d %c %d %d\n", b.oi, b.oc, xlate <struct in> (b).i,
         xlate <struct in> (xlate <struct out> (a)).i); exit(0); }'
expect "circular translators over D structs, copies and nested translations" "42 x 43 43" "$out"

run 'struct out { int oi; };
     translator struct out < struct nowhere *P > { oi = P->x; };
     BEGIN { exit(0); }'
expect_fail "a member of a forward-declared input: D_OP_INCOMPLETE" \
	"[D_OP_INCOMPLETE] operator -> cannot be applied to a forward declaration: no struct nowhere definition is available"

# Kernel variables with their types (BTF VARs, else the kernel's declarations), against
# what /proc says of the same variables.
# jiffies is jiffies_64's low half: one address, and a later read is never smaller.
run 'BEGIN { printf("%d %s %d %d\n", (uintptr_t)&`jiffies == (uintptr_t)&`jiffies_64 &&
       `jiffies <= `jiffies_64, stringof(`init_task.comm),
       `pid_max, `nr_cpu_ids); exit(0); }'
expect "\`jiffies, \`init_task.comm, \`pid_max, \`nr_cpu_ids" \
	"1 swapper/0 $(cat /proc/sys/kernel/pid_max) $(($(cut -d- -f2 /sys/devices/system/cpu/possible) + 1))" \
	"$out"

# max_pfn pages cover at least MemTotal (kB).
run 'BEGIN { printf("%d\n", `max_pfn * 4); exit(0); }'
total=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
if [ -n "$out" ] && [ "$out" -ge "$total" ]; then ok "\`max_pfn covers MemTotal"
else nok "\`max_pfn covers MemTotal" "$out" "MemTotal=$total" "$err"; fi

# The D library's constants: a bad address's ERROR is DTRACEFLT_BADADDR, signals and errno
# values are the kernel's.
run 'BEGIN { trace(*(int *)8); }
     ERROR { printf("%d %d\n", arg4 == DTRACEFLT_BADADDR, arg5); exit(0); }'
expect "ERROR's arg4 is DTRACEFLT_BADADDR" "1 8" "$out"

run 'BEGIN { printf("%d %d %d %d\n", SIGKILL, SIGTERM, EPERM, ENOENT); exit(0); }'
expect "signals and errno values" "9 15 1 2" "$out"

# pr_wstat is what wait() will return (exit 3: 3 << 8, set before proc:::exit fires);
# Solaris's ids are 0; the exiting thread's name is its comm.
run 'proc:::exit /pid == $target/ { printf("%d %d %s\n", curpsinfo->pr_wstat,
       curpsinfo->pr_taskid + curpsinfo->pr_projid + curpsinfo->pr_poolid +
       curpsinfo->pr_zoneid + curpsinfo->pr_contract + curpsinfo->pr_nzomb,
       curlwpsinfo->pr_name); }' -c "sh -c 'exit 3'"
expect "pr_wstat of exit 3, Solaris's ids, lwpsinfo_t's pr_name" "768 0 sh" "$out$err"

tap_exit
