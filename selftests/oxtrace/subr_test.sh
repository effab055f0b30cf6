#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# D's subroutine library and exit() through the real module: exact output (TAP).
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 29

run 'BEGIN {
	this->p = "/usr/lib/../share//doc/";
	printf("%s|%s|%s|%s\n", substr("hello, world", 7), substr("hello", 1, 3),
	    substr("hello", -3), substr("hello", 0, -2));
	printf("%s|%s|%s\n", basename(this->p), dirname(this->p), cleanpath(this->p));
	printf("%s|%s\n", toupper(execname), tolower("MiXed 1"));
	printf("%s|%s|%s\n", strstr("abcabc", "ca"), strchr("a.b.c", 46), strrchr("a.b.c", 46));
	printf("%d %d %d %d %d\n", index("hello hello", "llo"), index("hello hello", "llo", 3),
	    rindex("hello hello", "llo"), rindex("hello hello", "llo", 7), index("hello", "z"));
	printf("%s %s %s %s\n", lltostr(-42), lltostr(255, 16), lltostr(8, 8), lltostr(5, 2));
	printf("%d %d %d\n", strtoll("1234"), strtoll("0x1f", 16), strtoll(" -17"));
	exit(0);
}'
expect "string subroutines" "world|ell|llo|hel
doc|/usr/lib/../share|/usr/share/doc
OXTRACE|mixed 1
cabc|.b.c|.c
2 8 8 2 -1
-42 0xff 010 101
1234 31 -17 rc=0" "$out rc=$rc"

run 'BEGIN {
	printf("[%*d][%-*d][%*d][%0*d]\n", 5, 3, 5, 3, -5, 3, 5, -3);
	printf("[%.*s][%*.*s][%.*s]\n", 3, "hello", -6, 2, "hello", -1, "hey");
	exit(0);
}'
expect "printf * width and .* precision" "[    3][3    ][3    ][-0003]
[hel][he    ][hey]" "$out"

run 'BEGIN {
	printf("%d %d %d %d|%s|\n", strchr("abc", 122) == NULL, strchr("abc", 98) != NULL,
	    strstr("abc", "x") == NULL, strtok(NULL, ",") == NULL, strchr("abc", 0));
	printf("%s %s %s %s|\n", cleanpath("/a/./b//../c/"), cleanpath("a/../.."),
	    cleanpath("./"), cleanpath(""));
	printf("%s %s %s %s\n", basename("//"), basename("a/."), dirname("a/"), dirname("/./."));
	exit(0);
}'
expect "NULL strings compare as empty; cleanpath, basename, dirname edges" "1 1 1 1||
/a/c .. . |
/ . . /." "$out"

# A NULL string read by a subroutine is an invalid address, as in DTrace; only strtok's
# NULL written as such goes on with the last string.
run 'BEGIN { strtok(strstr("abc", "def"), ""); } BEGIN { trace(strchr(NULL, 97)); }
     BEGIN { printf("%s|\n", strtok("x", ",")); exit(0); }'
if [ "$out" = "x|" ] && [ "$(echo "$err" | grep -c "invalid address (0x0)")" = 2 ]; then
	ok "NULL strings are invalid addresses"
else
	nok "NULL strings are invalid addresses" "$out" "$err"
fi

run 'BEGIN {
	this->s = strjoin("a,b", ",,c");
	printf("%s ", strtok(this->s, ","));
	printf("%s ", strtok(0, ","));
	printf("%s\n", strtok(0, ","));
	printf("%x %x %x %d\n", htons(0x1234), ntohl(0x11223344), htonll(1), ntohs(htons(80)));
	printf("%d %d\n", getmajor(0x800003), getminor(0x800003));
	exit(0);
}'
expect "strtok, byte order, dev_t" "a b c
3412 44332211 100000000000000 80
8 3" "$out"

# inet_* read the address from kernel memory: linux_banner starts "Linux version 6.".
banner=$(grep ' linux_banner$' /proc/kallsyms | cut -d' ' -f1)
run "BEGIN { printf(\"%s %s %s\\n\", inet_ntoa((void *)0x$banner),
	inet_ntoa6((void *)0x$banner), inet_ntop(2, (void *)0x$banner)); exit(0); }"
expect "inet_ntoa, inet_ntoa6, inet_ntop of kernel memory" \
	"76.105.110.117 4c69:6e75:7820:7665:7273:696f:6e20:362e 76.105.110.117" "$out"

run 'BEGIN { trace(inet_ntoa((void *)8)); } BEGIN { trace(lltostr(1, 99)); } BEGIN { exit(0); }'
if echo "$err" | grep -q "invalid address (0x8)" && echo "$err" | grep -q "illegal operation"; then
	ok "bad address and bad base are errors, not faults"
else
	nok "bad address and bad base are errors, not faults" "$err"
fi

# The tool runs the script from this shell: it descends from init and from this shell.
run "BEGIN { printf(\"%d %d %d %d\\n\", progenyof(1), progenyof($$), progenyof(pid),
	progenyof(999999)); this->r = rand(); printf(\"%d\\n\", this->r >= 0); exit(0); }"
expect "progenyof and rand" "1 1 1 0
1" "$out"

# exit() stops everything: the exiting firing's later records print, then END, nothing
# else. (A return probe fires after its entry: with one thread the order is known.)
exit_prog='fbt::ksys_read:entry /pid == $target/ { printf("%d\n", arg2); }
     fbt::ksys_read:return /pid == $target && arg1 == 3/ { printf("exit\n"); exit(5);
         printf("same firing\n"); }
     END { printf("end\n"); }'
run "$exit_prog" -c "./oxt_workload read 1 20000"
expect "one thread: nothing after the exit record but its firing and END" \
	"1 2 3 exit same firing end  rc=5" "$(echo "$out" | tr '\n' ' ') rc=$rc"
run "$exit_prog" -c "./oxt_workload read 4 20000"
expect "4 CPUs: the first exit only, then END" "exit same firing end  1" \
	"$(echo "$out" | tail -3 | tr '\n' ' ') $(echo "$out" | grep -c '^exit$')"

run 'fbt::ksys_read:entry /pid == $target/ { @n = count(); }
     fbt::ksys_read:return /pid == $target && arg1 == 8/ { exit(2); }
     END { printa("%@d\n", @n); }' -c "./oxt_workload read 1 20000"
expect "no aggregation after exit: 8 reads up to the one of size 8" "8 rc=2" "$out rc=$rc"

# The lock subroutines on a real mutex, just taken: its owner is the thread that took it.
# (With lock debugging mutex_lock() is mutex_lock_nested().)
mlock=mutex_lock
grep -q ' mutex_lock_nested$' /proc/kallsyms && mlock=mutex_lock_nested
prog='fbt::MLOCK:entry { self->m = arg0; }
     fbt::MLOCK:return /self->m/ {
	printf("%d %d %d %d\n", mutex_owned((struct mutex *)self->m),
	    mutex_owner((struct mutex *)self->m) == curthread,
	    mutex_type_adaptive((struct mutex *)self->m), mutex_type_spin((struct mutex *)self->m));
	exit(0); }'
run "$(printf %s "$prog" | sed "s/MLOCK/$mlock/g")"
# (Another CPU may print before the exit: each line says the same.)
expect "mutex_owned() and mutex_owner() of a mutex just taken" "1 1 1 0 rc=0" \
	"$(echo "$out" | sort -u) rc=$rc"

run 'BEGIN { exit(3); } BEGIN { exit(4); } END { exit(5); }'
expect "the first exit status is kept" "rc=3" "rc=$rc"

# ERROR on the 4 CPUs: 250 reads of size 3 per thread fault, each observed once.
run 'fbt::ksys_read:entry /pid == $target && arg2 == 3/ { this->z = 0; this->x = 1 / this->z; }
     dtrace:::ERROR { @c[cpu] = count(); @k[arg2, arg4, arg5] = count(); }
     END { printa("%d %@d\n", @c); printa("action %d type %d addr %d: %@d\n", @k); }' \
	-c "./oxt_workload read 4 2000"
expect "ERROR fires in probe context on every CPU with DTrace's arguments" "0 250
1 250
2 250
3 250
action 2 type 4 addr 0: 1000" "$(echo "$out" | sort)"
nerr=$(echo "$err" | grep -c "division by zero")
expect "each fault is also reported" "1000" "$nerr"

run 'BEGIN { trace(*(int *)16); } ERROR { printf("%d %d\n", arg4, arg5); trace(*(int *)arg5); }
     BEGIN { exit(0); }'
expect "a fault in ERROR does not recurse" "1 16 errors=2" "$out errors=$(echo "$err" | grep -c 'invalid address (0x10)')"

# Speculations on the 4 CPUs: each thread's read speculates its size, committed for reads
# of 3 bytes and discarded otherwise. nspec=4: one each, never busy.
run 'fbt::ksys_read:entry /pid == $target/ { self->s = speculation(); speculate(self->s);
         printf("%d\n", arg2); }
     fbt::ksys_read:return /self->s && arg1 == 3/ { commit(self->s); self->s = 0; }
     fbt::ksys_read:return /self->s && arg1 != 3/ { discard(self->s); self->s = 0; }' \
	-x nspec=4 -c "./oxt_workload read 4 2000"
expect "commit keeps, discard drops, on 4 CPUs" "1000 x 3, 0 other, rc=0" \
	"$(echo "$out" | grep -c '^3$') x 3, $(echo "$out" | grep -vc '^3$') other, rc=$rc$(echo "$err" | grep spec)"

run 'BEGIN { a = speculation(); b = speculation(); c = speculation();
     printf("%d %d %d\n", a, b, c); exit(0); }' -x nspec=2
expect "nspec speculations, then unavailable" "1 2 0
oxtrace: 1 failed speculation (no speculative buffer available)" "$out
$(echo "$err" | grep speculation)"

# specsize=1k holds 12 records of 80 bytes: of 20, 8 are speculative drops. The commit
# runs on another timer, maybe another CPU: its records print before the exit.
run 'BEGIN { s = speculation(); }
     tick-1ms /i < 20/ { i = i + 1; speculate(s);
         printf("%s\n", "01234567890123456789012345678901234567890123456789"); }
     tick-1ms /i == 20/ { commit(s); } tick-1ms /i == 20/ { exit(0); }' -x specsize=1k
expect "specsize bounds the buffer: drops counted exactly" "12 oxtrace: 8 speculative drops" \
	"$(echo "$out" | grep -c 0123456789) $(echo "$err" | grep speculative)"

# DTrace's speculation errors: an id beyond nspec is an illegal operation at run time
# (0 is ignored); data after commit() in its clause is refused at compile time.
run 'BEGIN { commit(1024); } BEGIN { discard(0); } BEGIN { printf("next\n"); exit(0); }' -x nspec=8
out2=$out err2=$err
run 'BEGIN { commit(1); exit(0); }'
if [ "$out2" = "next" ] && echo "$err2" | grep -q "illegal operation" &&
	echo "$err" | grep -q "D_DREC_COMM.*data-recording actions may not follow commit"; then
	ok "commit of an invalid id is an illegal operation; data after commit refused"
else
	nok "commit of an invalid id is an illegal operation; data after commit refused" \
		"$out2 / $err2 / $err"
fi

# Busy: CPU 1 speculates, CPU 0 commits; CPU 1 settles its share only at its next buffer
# switch (switchrate=60s: at the end), so CPU 0's next speculation() finds it busy. CPU 1
# raises w only once its record is in its share: the vCPUs interleave anywhere in a clause
# on a busy host, and a commit before the record would leave nothing to settle.
run 'BEGIN { s = speculation(); }
     fbt::ksys_read:entry /pid == $target && cpu == 1 && !w/ { speculate(s);
         printf("x\n"); w = 1; }
     fbt::ksys_read:entry /pid == $target && cpu == 0 && w && !c/ { c = 1; commit(s); }
     fbt::ksys_read:entry /pid == $target && cpu == 0 && c && !t/ { t = 1;
         printf("%d\n", speculation()); }' -x switchrate=60s -c "./oxt_workload read 2 2000"
expect "a commit settling on another CPU is busy; its data prints at the switch" "x
0
oxtrace: 1 failed speculation (available buffer(s) still busy)" "$out
$(echo "$err" | grep speculation)"

vr=$(grep ' vfs_read$' /proc/kallsyms | cut -d' ' -f1)
run "BEGIN { printf(\"%a %*d|%Y\\n\", 0x$vr + 4, 3, 7, 1700000000000000000); exit(0); }"
expect "printf %a, * width and %Y" "vmlinux\`vfs_read+0x4   7|2023 Nov 14 22:13:20" "$out"

# Destructive actions: refused without -w, as dtrace refuses them.
run 'BEGIN { system("echo no"); exit(0); }'
if [ $rc = 1 ] && echo "$err" | grep -q "destructive actions not allowed" && [ -z "$out" ]; then
	ok "destructive actions need -w"
else
	nok "destructive actions need -w" "rc=$rc" "$out" "$err"
fi
run 'BEGIN { printf("before\n"); system("echo hello %d", 42); exit(0); }' -w
expect "system() runs in order with the output" "before
hello 42" "$out"
# raise() on the return of the 5th read: the signal lands before the 6th.
run 'fbt::ksys_read:entry /pid == $target/ { @n = count(); i = i + 1; }
     fbt::ksys_read:return /pid == $target && i == 5/ { raise(9); }
     END { printa("%@d\n", @n); }' -w -c "./oxt_workload read 1 2000000"
expect "raise(9) kills the process after its 5th read" "5" "$out"
run 'BEGIN { chill(1000000); printf("chilled\n"); chill(600000000); printf("no\n"); }
     BEGIN { exit(0); }' -w
expect "chill() within DTrace's budget, refused past it" "chilled illegal=1" \
	"$out illegal=$(echo "$err" | grep -c 'illegal operation')"

# copyout() and copyoutstr() rewrite the buffer write(2) is given before the kernel reads
# it; an unmapped destination is an invalid address and leaves the buffer alone.
run 'syscall::write:entry /pid == $target/ { copyout("XY", arg1, 2);
	copyoutstr("zz", arg1 + 2, 2); }' -w -c "echo hello"
expect "copyout() and copyoutstr() rewrite what write(2) writes" "XYzzo rc=0" "$out rc=$rc"
run 'syscall::write:entry /pid == $target/ { copyout("XY", 16, 2); }' -w -c "echo hello"
expect "copyout() to an unmapped address is an invalid address" "hello 1" \
	"$out $(echo "$err" | grep -c 'invalid address (0x10)')"

# A script says what it matched in one line, as dtrace -s does.
printf 'BEGIN { exit(0); }\nEND { }\n' >/tmp/m.d
got=$(guard oxtrace -s /tmp/m.d 2>&1 >/dev/null | grep matched)
expect "script 'x.d' matched N probes" "oxtrace: script '/tmp/m.d' matched 2 probes" "$got"

tap_exit
