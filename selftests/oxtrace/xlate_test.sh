#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Translators and DTrace's process views through the real module (issue 11): a user
# translator over curthread, curpsinfo and curlwpsinfo against the built-in variables
# and oxt_workload's known arguments, and the translator errors. TAP, exact output.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
# 4 threads x 2000 reads of /dev/zero (the reads of a file named "zero": 8000).
W="./oxt_workload read 4 2000"
ZERO='pid == $target && args[0]->f_path.dentry->d_name.len == 4'

echo "TAP version 13"
plan 11

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
	'[D_XLATE_NONE] cannot translate from "int" to "struct psinfo *": no translator'

run 'struct s { int a; int b; }; translator struct s < int x > { a = x; };
     BEGIN { trace(xlate <struct s> (1).b); }'
expect_fail "a member the translator does not define" \
	"[D_XLATE_NOCONV] translator does not define conversion for member: b"

tap_exit
