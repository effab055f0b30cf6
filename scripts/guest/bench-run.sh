#!/bin/sh
# Guest side of `make bench` (busybox sh, run by scripts/bench.sh through vm.sh
# in the bench guest).  Prints one line per measurement, parsed on the host:
#
#   RES round=R pair=P tool=none|oxtrace|bpftrace wl=W ns=N
#   KEYS ...  ATTACH ...  DYN ...  CLEAN ...  NOTE ...
#
# bpftrace runs from the host's root filesystem (9p, read-only) in a chroot.
# Settings come as arguments NAME=VALUE: ROUNDS, N1 (calls, 1 thread), N4 (calls
# per thread, 4 threads), NL (calls of the latency workload), LSIZE (its read size),
# NS (blocks of the CPU-bound workload per thread), KEYS (distinct keys), ATTACH
# (probes of the attach timing; 0: none), PAIRS (which pairs), PROFILE (pairs to profile with the
# host's perf: cpu-clock samples on the workload's CPU, where the time goes), ONLY
# (the sections to run, of "pairs bulk keys attach scale mem dyn clean profile"; empty:
# all), SCALE_N (functions attached in the scale section), SCALE_ROUNDS (its rounds), WLS
# (which read loops the pairs run, of "1t 4t lat"), NU (calls per thread of the user-space
# pairs' loops).
ROUNDS=5 N1=200000 N4=100000 NL=20000 LSIZE=16384 NS=300 KEYS=100000 ATTACH=1000 NU=200000
SCALE_N="1 1000 10000" SCALE_ROUNDS=2
WLS="1t 4t lat"
PAIRS="empty count hist sum trace ten sysread profile upid usdt"
PROFILE="empty count hist"
# VARIANT: pairs also run with /extra/oxtrace-o2.ko (a second build with
# KRUSTFLAGS=-Copt-level=2, the same code as shipped), swapped in for the run.
VARIANT="empty count hist"
ONLY=
for a in "$@"; do
	name=${a%%=*}
	val=${a#*=}
	eval "$name=\$val"
done
B=/extra/oxt_bench
# mount_host and H.
. /extra/hostroot.sh
# want SECTION: whether ONLY selects it.
want() {
	[ -z "$ONLY" ] && return 0
	case " $ONLY " in *" $1 "*) return 0 ;; esac
	return 1
}

# wl_cmd W: oxt_bench's arguments for the user-space pairs' loop W (run alone as the
# oxtrace session's -c command, whose pid is $target).
wl_cmd() {
	case $1 in
	u1t) echo "ucall 1 $NU" ;;
	u4t) echo "ucall 4 $NU" ;;
	s1t) echo "usdt 1 $NU" ;;
	s4t) echo "usdt 4 $NU" ;;
	esac
}
# The workloads, run by `sh /tmp/wl.sh W...` (or W,W,...) in the order named: 1t, a tight
# read loop on one CPU; 4t, the same on all four; lat, a read of LSIZE bytes (controlled
# latency) on one CPU; cpu, a CPU-bound loop on all four CPUs (what sampling every CPU
# costs: the profile pair, and the no-probe runs it is compared with); u1t and u4t, calls
# of a function that does nearly nothing (the uprobe pair); s1t and s4t, passes over a USDT
# site behind its semaphore (the USDT pair).
cat >/tmp/wl.sh <<EOF
for w in \$(echo "\$*" | tr , ' '); do
	case \$w in
	1t) echo "W 1t \$($B read 1 $N1 1)" ;;
	4t) echo "W 4t \$($B read 4 $N4 1)" ;;
	lat) echo "W lat \$($B read 1 $NL $LSIZE)" ;;
	cpu) echo "W cpu \$($B spin 4 $NS)" ;;
	u1t) echo "W u1t \$($B $(wl_cmd u1t))" ;;
	u4t) echo "W u4t \$($B $(wl_cmd u4t))" ;;
	s1t) echo "W s1t \$($B $(wl_cmd s1t))" ;;
	s4t) echo "W s4t \$($B $(wl_cmd s4t))" ;;
	esac
done >>/tmp/wl.out
EOF
# wl_arg PAIR: the workloads of PAIR's sessions.
wl_arg() {
	case $1 in
	profile) echo "$WLS cpu" ;;
	upid) echo "u1t u4t" ;;
	usdt) echo "s1t s4t" ;;
	*) echo "$WLS" ;;
	esac
}
# sessions PAIR: how PAIR's workloads are split among the tools' sessions, one word per
# session (W,W,...). One session runs them back to back, except for trace: there the
# consumers format every record, and what one workload's records leave them to format
# would be charged to the next workload's time.
sessions() {
	if [ "$1" = trace ] || user_pair "$1"; then
		wl_arg "$1"
	else
		wl_arg "$1" | tr ' ' ,
	fi
}

# emit ROUND PAIR TOOL: the session's results, then reset.  The read loops' speed
# calibration (oxt_bench's cal_ns and per_cal, at the end of its line) goes along.
emit() {
	while read -r _ wl rest; do
		ns=${rest#ns_per_call=}
		ns=${ns%% *}
		cal=
		case "$rest" in *" cal_ns="*) cal=" cal_ns=${rest#* cal_ns=}" ;; esac
		echo "RES round=$1 pair=$2 tool=$3 wl=$wl ns=$ns$cal"
	done </tmp/wl.out
	rm -f /tmp/wl.out
}

# user_pair PAIR: whether PAIR traces the workload's process (pid and USDT providers),
# whose oxtrace session runs one workload as its -c command ($target).
user_pair() {
	case $1 in upid | usdt) return 0 ;; esac
	return 1
}

ox_prog() {
	case $1 in
	upid) echo 'pid$target:a.out:oxt_ucall:entry { @ = count(); }' ;;
	usdt) echo 'oxtbench$target:::tick { @ = count(); }' ;;
	# A D clause without actions records the firing (the default action); /0/
	# keeps it to the bare probe, like bpftrace's empty block.
	empty) echo 'fbt::ksys_read:entry /0/ { }' ;;
	count) echo 'fbt::ksys_read:entry { @[pid] = count(); }' ;;
	sum) echo 'fbt::ksys_read:entry { @s = sum(arg0); }' ;;
	trace) echo 'fbt::ksys_read:entry { trace(pid); }' ;;
	hist) echo 'fbt::ksys_read:entry { self->ts = timestamp; }
fbt::ksys_read:return /self->ts/ { @ = quantize(timestamp - self->ts); self->ts = 0; }' ;;
	# Ten clauses on one probe: what each further clause costs a firing.
	ten) for i in 0 1 2 3 4 5 6 7 8 9; do echo "fbt::ksys_read:entry { @c$i = count(); }"; done ;;
	sysread) echo 'syscall::read:entry { @[pid] = count(); }' ;;
	profile) echo 'profile-997 { @[cpu] = count(); }' ;;
	esac
}

bt_prog() {
	case $1 in
	# The workload's binary as the chroot sees it (mount_host binds /extra to /mnt there).
	upid) echo 'uprobe:/mnt/oxt_bench:oxt_ucall { @ = count(); }' ;;
	usdt) echo 'usdt:/mnt/oxt_bench:oxtbench:tick { @ = count(); }' ;;
	empty) echo 'kprobe:ksys_read { }' ;;
	count) echo 'kprobe:ksys_read { @[pid] = count(); }' ;;
	sum) echo 'kprobe:ksys_read { @s = sum(arg0); }' ;;
	trace) echo 'kprobe:ksys_read { printf("%d\n", pid); }' ;;
	hist) echo 'kprobe:ksys_read { @start[tid] = nsecs; }
kretprobe:ksys_read /@start[tid]/ { @ = hist(nsecs - @start[tid]); delete(@start[tid]); }' ;;
	ten) for i in 0 1 2 3 4 5 6 7 8 9; do echo "kprobe:ksys_read { @c$i = count(); }"; done ;;
	# Without CONFIG_FTRACE_SYSCALLS (the bench kernel has it) there is no
	# syscalls:sys_enter_read: the raw tracepoint with the number filtered is the same hook.
	sysread) if [ -d /sys/kernel/tracing/events/syscalls/sys_enter_read ]; then
		echo 'tracepoint:syscalls:sys_enter_read { @[pid] = count(); }'
	else
		echo 'tracepoint:raw_syscalls:sys_enter /args->id == 0/ { @[pid] = count(); }'
	fi ;;
	profile) echo 'profile:hz:997 { @[cpu] = count(); }' ;;
	esac
}

# btk_prog PAIR: the pair's bpftrace program on kfunc:/kretfunc: (BPF trampolines, its
# cheapest kernel attach; it needs the kernel's BTF), where one applies: empty if none.
# The kprobe program with kfunc: for kprobe: and kretfunc: for kretprobe:, but for the
# two whose arguments differ.
btk_prog() {
	case $1 in
	# arg0 of a kprobe is ksys_read's first parameter, fd.
	sum) echo 'kfunc:ksys_read { @s = sum(args->fd); }' ;;
	# The read system call's own function: the entry of read(2) alone, as the tracepoint.
	sysread) echo 'kfunc:__x64_sys_read { @[pid] = count(); }' ;;
	empty | count | trace | hist | ten)
		bt_prog "$1" | sed 's/^kprobe:/kfunc:/; s/^kretprobe:/kretfunc:/' ;;
	esac
}

# run_none ROUND W...
run_none() {
	round=$1
	shift
	sh /tmp/wl.sh "$@"
	emit "$round" none none
}

# run_ox2 ROUND PAIR: run_ox with the -Copt-level=2 module loaded instead.
run_ox2() {
	[ -f /extra/oxtrace-o2.ko ] || { echo "NOTE no oxtrace-o2.ko: the variant does not run"; return 0; }
	rmmod oxtrace && insmod /extra/oxtrace-o2.ko || { echo "NOTE cannot swap in oxtrace-o2.ko"; return; }
	run_ox "$1" "$2" oxtrace-o2
	rmmod oxtrace
	insmod /lib/modules/oxtrace.ko || echo "NOTE cannot reload oxtrace.ko"
}

run_ox() {
	opts=
	[ "$2" = trace ] && opts="-x bufsize=16m -x switchrate=20hz"
	for wls in $(sessions "$2"); do
		if user_pair "$2"; then
			# The loop is the traced process itself; its line is the last of its output.
			oxtrace -q -v -e "$(ox_prog "$2")" -c "$B $(wl_cmd "$wls")" \
				>/tmp/ox.out 2>/tmp/ox.err
			rc=$?
			echo "W $wls $(grep ns_per_call= /tmp/ox.out | tail -n 1)" >>/tmp/wl.out
		else
			# shellcheck disable=SC2086
			oxtrace -q -v $opts -e "$(ox_prog "$2")" -c "sh /tmp/wl.sh $wls" \
				>/tmp/ox.out 2>/tmp/ox.err
			rc=$?
		fi
		[ $rc = 0 ] ||
			echo "NOTE ${3:-oxtrace} $2 round $1 exit $rc: $(head -c 300 /tmp/ox.err)"
		d=$(grep -E 'records dropped in all|drops on CPU' /tmp/ox.err | head -n 3 |
			tr '\n' ' ')
		[ -z "$d" ] || echo "NOTE ${3:-oxtrace} $2 round $1: $d"
	done
	emit "$1" "$2" "${3:-oxtrace}"
}

# stop PID WHAT: SIGINT to a tracer, then wait until it has exited. A tracer prints its
# maps and exits within seconds; one still running after 120 s is killed and noted, so
# that a stuck run costs minutes, not the whole bench's timeout. oxt_bench blocks on the
# tracer's pidfd until its exit or that deadline.
stop() {
	kill -INT $1
	$B exited $1 120
	if [ $? = 1 ]; then
		echo "NOTE $2 did not exit 120 s after SIGINT: killed"
		kill -KILL $1
	fi
	wait $1
}

# bt_start ROUND PAIR [GEN]: bpftrace on PAIR's program (GEN PAIR, default bt_prog) in the
# background (pid in bt), returned from once its BEGIN probe ran (LLVM codegen under TCG
# takes ~20 s), which bpftrace runs after attaching every other probe. Fails if it did not
# start.
bt_start() {
	rm -f $H/tmp/bt.out
	# printf's events go through a perf buffer per CPU, 64 pages by default, which the
	# trace pair overruns: as many pages as oxtrace's bufsize (16 MiB), so that neither
	# tool loses events and both figures count every record.
	rb=64
	[ "$2" != trace ] || rb=4096
	BPFTRACE_PERF_RB_PAGES=$rb chroot $H /usr/bin/bpftrace \
		-e "BEGIN { printf(\"OXB-READY\\n\"); } $(${3:-bt_prog} "$2")" >$H/tmp/bt.out 2>&1 &
	bt=$!
	t=0
	while ! grep -q OXB-READY $H/tmp/bt.out 2>/dev/null; do
		if ! kill -0 $bt 2>/dev/null || [ $t -ge 300 ]; then
			echo "NOTE bpftrace $2 round $1 did not start: $(head -c 400 $H/tmp/bt.out)"
			kill -KILL $bt 2>/dev/null
			wait $bt 2>/dev/null
			return 1
		fi
		sleep 1
		t=$((t + 1))
	done
	echo "NOTE bpftrace $2 round $1 ready after ${t}s"
}

# bt_session ROUND PAIR W,... [GEN]: the workloads under bpftrace, then stopped with SIGINT.
bt_session() {
	bt_start "$1" "$2" "$4" || return 1
	sh /tmp/wl.sh "$3"
	stop $bt "bpftrace $2 round $1"
	lost=$(grep -i 'lost' $H/tmp/bt.out | head -n 2 | tr '\n' ' ')
	[ -z "$lost" ] || echo "NOTE bpftrace $2 round $1: $lost"
}

# run_bt ROUND PAIR [GEN TOOL]: bpftrace's kprobe/tracepoint program, or GEN's (btk_prog,
# reported as TOOL bpftrace-kfunc).
run_bt() {
	for wls in $(sessions "$2"); do
		bt_session "$1" "$2" "$wls" "$3" || {
			rm -f /tmp/wl.out
			return
		}
	done
	emit "$1" "$2" "${4:-bpftrace}"
}

echo "NOTE guest $(nproc) CPUs, $(free -m | awk '/Mem:/ { print $2 }') MiB, kernel $(uname -r)"
have_bt=1
if ! mount_host; then
	echo "NOTE no 9p host root: bpftrace skipped"
	have_bt=0
elif ! chroot $H /usr/bin/bpftrace --version >/tmp/btv 2>&1; then
	echo "NOTE bpftrace does not run in the chroot: $(head -c 300 /tmp/btv)"
	have_bt=0
else
	echo "NOTE $(cat /tmp/btv)"
	echo "NOTE bpftrace's sysread program: $(bt_prog sysread)"
	chroot $H /usr/bin/bpftrace --info >/tmp/btinfo 2>&1
	echo "NOTE bpftrace features: $(grep -Ei '^ *(btf|kfunc|fentry|kprobe_multi|kprobe multi)[a-z_ ]*:' /tmp/btinfo | sed 's/^ *//' | tr '\n' ' ')"
fi
# The kfunc variant of each pair: when bpftrace finds BTF and BPF trampolines.
have_btk=0
if [ $have_bt = 1 ] && grep -Eqi '^ *(kfunc|fentry): yes' /tmp/btinfo; then
	have_btk=1
elif [ $have_bt = 1 ]; then
	echo "NOTE bpftrace has no kfunc: on this kernel: the kfunc variants do not run"
fi

r=1
while want pairs && [ $r -le "$ROUNDS" ]; do
	run_none $r $WLS
	for p in $PAIRS; do
		run_ox $r "$p"
		[ $have_bt = 0 ] || run_bt $r "$p"
		[ $have_btk = 0 ] || [ -z "$(btk_prog "$p")" ] || run_bt $r "$p" btk_prog bpftrace-kfunc
		case " $VARIANT " in *" $p "*) run_ox2 $r "$p" ;; esac
		run_none $r $(wl_arg "$p")
	done
	r=$((r + 1))
done

# Bulk attach: about 1,000 safe entry probes (every one under the first four-letter
# prefixes) attached, enabled, fired until the first tick, disabled and detached.
# Target (issue 15): 1,000 functions attached and detached in <= 2 s under TCG.
want bulk && oxtrace -l 'fbt:::entry' | awk 'NR > 1 && NF == 5 { print $4 }' >/tmp/att.safe
want bulk && ATTD=$(awk '{ p = substr($1, 1, 4); n[p]++; if (!(p in s)) { s[p] = 1; o[++k] = p } }
	END { t = 0; for (i = 1; i <= k && t < 1000; i++) {
		printf "%sfbt::%s*:entry", (i > 1 ? ", " : ""), o[i]; t += n[o[i]] } }' /tmp/att.safe)
want bulk && for r in 1 2 3; do
	read -r t0 _ </proc/uptime
	oxtrace -v -e "$ATTD { @n = count(); } tick-1ms { exit(0); }" >/dev/null 2>/tmp/att.err
	read -r t1 _ </proc/uptime
	echo "NOTE bulk attach round=$r: $(sed -n 's/^oxtrace: \([0-9]*\) probes enabled$/\1 probes/p' /tmp/att.err)," \
		"LOAD $(sed -n 's/^oxtrace: attached [0-9]* probes in \([0-9]*\) ms$/\1/p' /tmp/att.err) ms," \
		"attach+fire+detach $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }') ms (target <= 2000 ms for 1,000)"
done

# Snapshot + merge of KEYS distinct keys at the end of the run (aggrate long
# enough that the final snapshot takes them all at once; aggsize 16m × 4 CPUs × 2
# halves stays within the default memory budget of a 2 GiB guest).
want keys && for r in 1 2 3; do
	oxtrace -q -v -x aggsize=16m -x aggrate=60s \
		-e 'fbt::ksys_read:entry /pid == $target/ { @[arg2] = count(); }' \
		-c "$B keys $KEYS" >/dev/null 2>/tmp/ox.err
	echo "KEYS round=$r $(sed -n 's/^oxtrace: final aggregation snapshot+merge \([0-9]*\) us (ioctls \([0-9]*\) us, merge \([0-9]*\) us), \([0-9]*\) keys, sort+format[+a-z]* \([0-9]*\) us/us=\1 ioctl_us=\2 merge_us=\3 keys=\4 print_us=\5/p' /tmp/ox.err)"
	grep -q 'snapshot+merge' /tmp/ox.err || echo "NOTE keys: $(head -c 300 /tmp/ox.err)"
	grep -E 'aggregation drops|records dropped|^oxtrace: [0-9]+ errors' /tmp/ox.err | head -n 2 | sed 's/^/NOTE keys: /'
done
# The tool's merge and output on synthetic snapshots, in this guest's CPU time: default
# printa, a printa format, JSON and quantize histograms (tools/oxtrace/src/bin/oxt-aggbench.rs).
if want keys && [ -x /extra/oxt-aggbench ]; then /extra/oxt-aggbench 3 || echo "NOTE oxt-aggbench failed"; fi

# Attaching: LOAD of one clause on ATTACH functions (every k-th probeable kernel
# function, so the set spreads over the kernel), timed by the tool around the ioctl.
if want attach && [ "$ATTACH" -gt 0 ]; then
	# the initramfs root has no tracefs mounted unless something did before
	# (tracefs and debugfs files have size 0: test for a first line, not with -s)
	has() { [ -n "$(head -n 1 "$1" 2>/dev/null)" ]; }
	has /sys/kernel/tracing/available_filter_functions ||
		mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
	has /sys/kernel/debug/kprobes/blacklist ||
		mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	for ff in /sys/kernel/tracing/available_filter_functions \
		/sys/kernel/debug/tracing/available_filter_functions \
		$H/sys/kernel/tracing/available_filter_functions; do
		has $ff && break
	done
	grep -v -e '\[' -e '^_' -e '\.' $ff | sort -u >/tmp/funcs
	for bl in /sys/kernel/debug/kprobes/blacklist $H/sys/kernel/debug/kprobes/blacklist; do
		has $bl || continue
		# (busybox grep -v -f with an empty file drops every line: only with a list)
		awk '{ print $2 }' $bl | sort -u >/tmp/bl
		grep -vxF -f /tmp/bl /tmp/funcs >/tmp/funcs2 && mv /tmp/funcs2 /tmp/funcs
		break
	done
	nf=$(wc -l </tmp/funcs)
	step=$((nf / (ATTACH + ATTACH / 10)))
	[ "$step" -ge 1 ] || step=1
	awk -v s="$step" 'NR % s == 0' /tmp/funcs >/tmp/picked
	# A function the kernel refuses (NOKPROBE_SYMBOL outside the blacklist file, the
	# module's own refusals) fails the whole LOAD, and one the tool refuses by name as unsafe
	# to probe fails the compile: drop it and try again.
	t=0
	while :; do
		awk -v n="$ATTACH" 'c < n { printf "%sfbt::%s:entry", (c ? ",\n" : ""), $1; c++ }
			END { print " /0/ { }" }' /tmp/picked >/tmp/attach.d
		oxtrace -q -v -s /tmp/attach.d -c true >/dev/null 2>/tmp/ox.err && break
		bad=$(sed -n -e 's/.*failed to enable probe fbt::\([^:]*\):entry.*/\1/p' \
			-e 's/.*function \([^ ]*\) is unsafe to probe.*/\1/p' /tmp/ox.err | head -n 1)
		t=$((t + 1))
		[ -n "$bad" ] && [ $t -lt 50 ] || break
		grep -vxF "$bad" /tmp/picked >/tmp/picked2
		mv /tmp/picked2 /tmp/picked
	done
	echo "NOTE attach: $(grep -c fbt /tmp/attach.d) of $nf functions of $ff, every ${step}th, $t refused"
	for r in 1 2 3; do
		oxtrace -q -v -s /tmp/attach.d -c true >/dev/null 2>/tmp/ox.err
		echo "ATTACH round=$r $(sed -n 's/^oxtrace: load attached \([0-9]*\) probes in \([0-9]*\) us/probes=\1 us=\2/p' /tmp/ox.err)"
		grep -q 'load attached' /tmp/ox.err || echo "NOTE attach: $(head -c 300 /tmp/ox.err)"
	done
fi

# The kernel's tracefs and debugfs in the initramfs root (as the host root has them).
mount_tracefs() {
	# tracefs and debugfs files have size 0: test for a first line, not with -s
	has() { [ -n "$(head -n 1 "$1" 2>/dev/null)" ]; }
	has /sys/kernel/tracing/available_filter_functions ||
		mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
	has /sys/kernel/debug/kprobes/blacklist ||
		mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
}
# up_ms: /proc/uptime in milliseconds (10 ms steps).
up_ms() {
	read -r u _ </proc/uptime
	echo "$u" | awk '{ printf "%d", $1 * 1000 }'
}
# wait_for FILE PATTERN PID: until FILE has a line matching PATTERN (grep -E), polled every
# 20 ms; fails if PID exits first or after 600 s.
wait_for() {
	t=0
	while ! grep -qE "$2" "$1" 2>/dev/null; do
		kill -0 "$3" 2>/dev/null && [ $t -lt 30000 ] || return 1
		sleep 0.02
		t=$((t + 1))
	done
}

# Scale: one firing of a count probe on ksys_read with 0, SCALE_N-1 cold functions
# attached beside it, and the time to attach and detach them, for both tools. The cold
# functions are whole groups of the kernel's traceable functions sharing a name prefix
# (one wildcard each, so that bpftrace attaches a group with one kprobe_multi link), none
# of whose functions ran while the function tracer watched the 1-thread read loop and the
# idle CPUs: cold, so that a firing of the hot probe is all the loop pays for.
if want scale && [ -n "$SCALE_N" ]; then
	mount_tracefs
	T=/sys/kernel/tracing
	grep -v -e '\[' $T/available_filter_functions | awk '{ print $1 }' | sort -u >/tmp/aff
	oxtrace -l 'fbt:::entry' | awk 'NR > 1 && NF == 5 { print $4 }' | sort -u >/tmp/oxf
	# Hot: what the function tracer saw run on any CPU during a short read loop.
	echo 0 >$T/tracing_on
	echo function >$T/current_tracer
	echo >$T/trace
	echo 1 >$T/tracing_on
	$B read 1 3000 1 >/dev/null
	echo 0 >$T/tracing_on
	awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^<-/) { print $(i - 1); print substr($i, 3) } }' \
		$T/trace | sed 's/[.+].*//' | sort -u >/tmp/hot
	echo nop >$T/current_tracer
	echo >$T/trace
	echo "NOTE scale: $(wc -l </tmp/hot) functions ran under the tracer, of $(wc -l </tmp/aff) traceable; oxtrace lists $(wc -l </tmp/oxf)"
	# cold_groups N: maximal name prefixes (1-6 characters) of the traceable functions with
	# no hot function among them, the largest first, taken while their oxtrace-probeable
	# functions stay within N + 5 %, until N: lines "PREFIX NOX NALL".
	cold_groups() {
		awk -v n="$1" '
		FILENAME == "/tmp/hot" { hot[$1] = 1; next }
		FILENAME == "/tmp/oxf" { ox[$1] = 1; next }
		{
			f = $1; h = (f in hot) || (substr(f, 1, index(f ".", ".") - 1) in hot)
			for (l = 1; l <= 6 && l <= length(f); l++) {
				p = substr(f, 1, l); all[p]++; if (f in ox) nox[p]++; if (h) hp[p] = 1
			}
		}
		END {
			for (p in all) {
				if ((p in hp) || !nox[p]) continue
				q = substr(p, 1, length(p) - 1)
				if (length(p) > 1 && !(q in hp)) continue
				print nox[p], all[p], p
			}
		}' /tmp/hot /tmp/oxf /tmp/aff | sort -k1,1nr -k3,3 |
			awk -v n="$1" '{ if (t < n && t + $1 <= n * 1.05) { print $3, $1, $2; t += $1 } }'
	}
	for n in $SCALE_N; do
		[ "$n" -gt 1 ] || continue
		cold_groups $((n - 1)) >/tmp/cold.$n
		nox=$(awk '{ t += $2 } END { print t + 0 }' /tmp/cold.$n)
		nall=$(awk '{ t += $3 } END { print t + 0 }' /tmp/cold.$n)
		echo "NOTE scale n=$n: $(wc -l </tmp/cold.$n) prefixes, $nox functions oxtrace probes, $nall traceable ($(head -n 3 /tmp/cold.$n | awk '{ printf "%s* %s, ", $1, $3 }')...)"
		awk '{ printf "%sfbt::%s*:entry", (NR > 1 ? ",\n" : ""), $1 }' /tmp/cold.$n >/tmp/coldox.$n
		awk '{ printf "%skprobe:%s*", (NR > 1 ? ",\n" : ""), $1 }' /tmp/cold.$n >/tmp/coldbt.$n
	done
	# Without kprobe_multi bpftrace attaches a kprobe per function, a perf event and a
	# file descriptor each, and refuses more than BPFTRACE_MAX_PROBES (512) of them unless
	# told; told, it met functions it could not probe (EINVAL) and then its descriptor limit
	# (EMFILE) on 1,000. Its sets beyond 512 functions run only with kprobe_multi.
	BTMAX=$((${SCALE_N##* } + 100))
	bt_multi=0
	[ $have_bt = 0 ] || ! grep -Eqi '^ *kprobe_multi: yes' /tmp/btinfo || bt_multi=1
	[ $have_bt = 0 ] || [ $bt_multi = 1 ] ||
		echo "NOTE scale: bpftrace has no kprobe_multi here: only its sets of at most 512 run"
	# bt_scale N: whether bpftrace runs the set of N functions.
	bt_scale() { [ $have_bt = 1 ] && { [ $bt_multi = 1 ] || [ "$1" -le 512 ]; }; }
	# One firing with n functions attached: the count pair plus a clause on the cold ones
	# (@cold counts any of them that fired after all).
	scale_prog_ox() {
		echo "$(ox_prog count)"
		[ ! -f /tmp/coldox.$1 ] || echo "$(cat /tmp/coldox.$1) { @cold = count(); }
END { printa(\"OXCOLD %@d\\n\", @cold); }"
	}
	scale_prog_bt() {
		echo "$(bt_prog count)"
		[ ! -f /tmp/coldbt.$1 ] || echo "$(cat /tmp/coldbt.$1) { @cold = count(); }"
	}
	r=1
	while [ $r -le "$SCALE_ROUNDS" ]; do
		run_none "s$r" 1t
		for n in $SCALE_N; do
			scale_prog_ox $n >/tmp/scale.d
			oxtrace -q -v -s /tmp/scale.d -c "sh /tmp/wl.sh 1t" >/tmp/ox.out 2>/tmp/ox.err ||
				echo "NOTE scale oxtrace n=$n round $r: $(head -c 300 /tmp/ox.err)"
			c=$(sed -n 's/^OXCOLD \([0-9]*\)/\1/p' /tmp/ox.out)
			echo "NOTE scale oxtrace n=$n round $r: $(sed -n 's/^oxtrace: \([0-9]*\) probes enabled$/\1 probes enabled/p' /tmp/ox.err), cold firings ${c:-0}"
			emit "s$r" "scale$n" oxtrace
			if bt_scale $n; then
				scale_prog_bt $n >$H/tmp/scale.bt
				: >$H/tmp/bt.out # what wait_for reads must be this run's
				BPFTRACE_MAX_PROBES=$BTMAX chroot $H /usr/bin/bpftrace \
					-e "BEGIN { printf(\"OXB-READY\\n\"); } $(cat $H/tmp/scale.bt)" \
					>$H/tmp/bt.out 2>&1 &
				bt=$!
				if wait_for $H/tmp/bt.out OXB-READY $bt; then
					sh /tmp/wl.sh 1t
					stop $bt "bpftrace scale n=$n"
					c=$(sed -n 's/^@cold: //p' $H/tmp/bt.out)
					echo "NOTE scale bpftrace n=$n round $r: $(grep -m1 Attaching $H/tmp/bt.out) cold firings ${c:-0}"
					emit "s$r" "scale$n" bpftrace
				else
					echo "NOTE bpftrace scale n=$n did not start: $(head -c 400 $H/tmp/bt.out)"
					kill -KILL $bt 2>/dev/null
					wait $bt 2>/dev/null
					rm -f /tmp/wl.out
				fi
			fi
		done
		r=$((r + 1))
	done
	# Attach and detach of the cold sets alone, a clause without action: oxtrace's LOAD
	# ioctl (every probe registered) as the tool times it, and SIGINT to the tool's exit
	# (every probe gone); bpftrace's "Attaching N probes" line to its BEGIN probe's output
	# (bpftrace runs BEGIN once all are attached), and SIGINT to its exit. Lines polled
	# every 20 ms, /proc/uptime's 10 ms steps.
	r=1
	while [ $r -le "$SCALE_ROUNDS" ]; do
		for n in $SCALE_N; do
			[ -f /tmp/coldox.$n ] || continue
			echo "$(cat /tmp/coldox.$n) /0/ { }" >/tmp/att.d
			: >/tmp/ox.err
			oxtrace -q -v -s /tmp/att.d >/dev/null 2>/tmp/ox.err &
			ox=$!
			if wait_for /tmp/ox.err 'probes enabled' $ox; then
				t0=$(up_ms)
				stop $ox "oxtrace attach n=$n"
				t1=$(up_ms)
				echo "SCALEATT round=$r n=$n tool=oxtrace $(sed -n 's/^oxtrace: load attached \([0-9]*\) probes in \([0-9]*\) us/probes=\1 attach_us=\2/p' /tmp/ox.err) detach_ms=$((t1 - t0))"
			else
				echo "NOTE scale attach oxtrace n=$n: $(head -c 300 /tmp/ox.err)"
				wait $ox
			fi
			bt_scale $n || continue
			: >$H/tmp/bt.out
			BPFTRACE_MAX_PROBES=$BTMAX chroot $H /usr/bin/bpftrace \
				-e "BEGIN { printf(\"OXB-READY\\n\"); } $(cat /tmp/coldbt.$n) { }" \
				>$H/tmp/bt.out 2>&1 &
			bt=$!
			if wait_for $H/tmp/bt.out Attaching $bt && ta=$(up_ms) &&
				wait_for $H/tmp/bt.out OXB-READY $bt; then
				tb=$(up_ms)
				stop $bt "bpftrace attach n=$n"
				t1=$(up_ms)
				echo "SCALEATT round=$r n=$n tool=bpftrace probes=$(sed -n 's/^Attaching \([0-9]*\) probe.*/\1/p' $H/tmp/bt.out) attach_us=$(((tb - ta) * 1000)) detach_ms=$((t1 - tb))"
			else
				echo "NOTE scale attach bpftrace n=$n did not start: $(head -c 400 $H/tmp/bt.out)"
				kill -KILL $bt 2>/dev/null
				wait $bt 2>/dev/null
			fi
		done
		r=$((r + 1))
	done
fi

# Memory: the kernel memory each tool's session holds for the count pair at default
# options, the loop run once so that its map has its keys: /proc/meminfo's used memory
# less the page cache, user pages, page tables, kernel stacks and reclaimable slab (the
# tools' processes and the files they read), after folding the per-CPU counters
# (vm/stat_refresh), with the tool ready and before it starts.
kmem_kb() {
	echo 1 >/proc/sys/vm/stat_refresh 2>/dev/null
	awk '{ v[$1] = $2 } END { print v["MemTotal:"] - v["MemFree:"] - v["Buffers:"] - v["Cached:"] -
		v["SwapCached:"] - v["AnonPages:"] - v["PageTables:"] - v["KernelStack:"] -
		v["SReclaimable:"] }' /proc/meminfo
}
# kmem_settled: kmem_kb once two readings 200 ms apart differ by less than 512 KiB (at most
# 20 s): a session that just ended may still be freeing its memory (RCU, deferred frees),
# which the next tool's figure must not count as its own.
kmem_settled() {
	a=$(kmem_kb)
	i=0
	while [ $i -lt 100 ]; do
		sleep 0.2
		b=$(kmem_kb)
		d=$((b - a))
		[ ${d#-} -lt 512 ] && break
		a=$b
		i=$((i + 1))
	done
	echo "$b"
}
want mem && for r in 1 2 3; do
	m0=$(kmem_settled)
	: >/tmp/ox.err
	oxtrace -q -v -e "$(ox_prog count)" >/tmp/ox.out 2>/tmp/ox.err &
	ox=$!
	if wait_for /tmp/ox.err 'probes enabled' $ox; then
		$B read 1 2000 1 >/dev/null
		m1=$(kmem_settled)
		stop $ox "oxtrace mem"
		echo "MEM round=$r tool=oxtrace kb=$((m1 - m0))"
	else
		echo "NOTE mem oxtrace: $(head -c 300 /tmp/ox.err)"
		wait $ox
	fi
	[ $have_bt = 1 ] || continue
	m0=$(kmem_settled)
	bt_start mem count || continue
	$B read 1 2000 1 >/dev/null
	m1=$(kmem_settled)
	stop $bt "bpftrace mem"
	echo "MEM round=$r tool=bpftrace kb=$((m1 - m0))"
done

# Dynamic variables: alloc/free throughput on 4 CPUs, and drops against cleanrate
# with a small dynamic memory; the program is the hist pair's (self->ts + quantize).
DYNP=$(ox_prog hist)
dyn() {
	# shellcheck disable=SC2086
	oxtrace -q -v $2 -e "$DYNP" -c "$B read 4 $N4 1" >/tmp/ox.out 2>/tmp/ox.err
	el=$(sed -n 's/.*elapsed_ns=\([0-9]*\).*/\1/p' /tmp/ox.out)
	st=$(sed -n 's/^oxtrace: dynvars allocs \([0-9]*\) frees \([0-9]*\) drops \([0-9]*\).*cleaner runs \([0-9]*\) passes \([0-9]*\) period \([0-9]*\) ns chunks \([0-9]*\).*/allocs=\1 frees=\2 drops=\3 runs=\4 passes=\5 period_ns=\6 chunks=\7/p' /tmp/ox.err)
	echo "$1 $3 elapsed_ns=$el $st"
	grep -E '^oxtrace: dynvars' /tmp/ox.err | sed 's/^oxtrace: /NOTE /'
}
want dyn && for r in 1 2 3; do
	dyn DYN "" "round=$r"
done
want clean && for rate in 10hz 101hz 1000hz; do
	dyn CLEAN "-x dynvarsize=256k -x cleanrate=$rate" "cleanrate=$rate"
done
# Where the time goes: perf (the host's, in the chroot) samples CPU 0 while the
# 1-thread read loop runs there under each tool's probe.
prof() {
	echo "PROF-BEGIN $1 $2"
	chroot $H /usr/bin/perf record -q -e cpu-clock -F 20000 -C 0 -o /tmp/perf.data -- \
		/tmp/oxt_bench read 1 $((N1 * 10)) 1 >/dev/null 2>&1
	chroot $H /usr/bin/perf report -q -i /tmp/perf.data --stdio --no-children --sort sym 2>/dev/null |
		grep -v '^$' | head -n 25
	echo "PROF-END"
}
if want profile && [ $have_bt = 1 ] && [ -n "$PROFILE" ] && chroot $H /usr/bin/perf --version >/dev/null 2>&1; then
	cp $B $H/tmp/oxt_bench
	# As many samples as the emulated timer gives: no rate cap, no throttling.
	echo 100000 >/proc/sys/kernel/perf_event_max_sample_rate
	echo 0 >/proc/sys/kernel/perf_cpu_time_max_percent
	prof none none
	for p in $PROFILE; do
		# Without dynamic variables, the irqs-on build shows inside the handler;
		# cross-calls (switch, aggregation snapshot) are kept out of the sampled run.
		label=oxtrace
		if [ "$p" != hist ] && [ -f /extra/oxtrace-prof.ko ] &&
			rmmod oxtrace && insmod /extra/oxtrace-prof.ko; then
			label=oxtrace-irqs-on
		fi
		: >/tmp/ox.err # the last round's "probes enabled" must not count for this one
		oxtrace -q -v -x aggrate=60s -x switchrate=60s -e "$(ox_prog "$p")" >/dev/null 2>/tmp/ox.err &
		ox=$!
		t=0
		while ! grep -q 'probes enabled' /tmp/ox.err && kill -0 $ox 2>/dev/null && [ $t -lt 3000 ]; do
			sleep 0.1
			t=$((t + 1))
		done
		prof $label "$p"
		stop $ox "$label $p profile"
		if [ $label = oxtrace-irqs-on ]; then
			rmmod oxtrace
			insmod /lib/modules/oxtrace.ko || echo "NOTE cannot reload oxtrace.ko"
		fi
		bt_start profile "$p" || continue
		prof bpftrace "$p"
		stop $bt "bpftrace $p profile"
	done
fi
echo "NOTE bench done"
