#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# probesafe_test: the list of functions that are unsafe to probe (rust/core/probesafe.rs)
# against what the kernel really runs, and the recursion case it exists for.
#
# 1. The kernel's function-graph tracer, rooted at the shim's handlers, records every
#    kernel function oxtrace's probe path calls while a program using every built-in that
#    reaches the kernel fires (kprobe, kretprobe, tick, a faulting read). Each recorded
#    function must be one `oxtrace -l` marks unsafe: the list is checked against the code,
#    not guessed.
# 2. fbt::rcu_read_lock_held_common:return (rethook calls it after every return handler)
#    is refused by name, a glob leaves it out, and `-v` says why.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
echo "TAP version 13"

T=/sys/kernel/tracing
[ -w $T/current_tracer ] || mount -t tracefs tracefs $T 2>/dev/null
workload=$(pwd)/oxt_workload

# The shim's entry points of probe context (oxt_probe_run is inlined into the first two).
roots="oxt_kprobe_pre oxt_kretprobe_ret oxt_tick_fn"

graph_record() {
	echo 0 >$T/tracing_on
	echo nop >$T/current_tracer
	echo >$T/trace
	echo 4096 >$T/buffer_size_kb
	for r in $roots; do
		echo "$r" >>$T/set_graph_function || return 1
	done
	echo function_graph >$T/current_tracer || return 1
	# Each line then shows its context (irqs off, hard/soft interrupt): an interrupt taken
	# as the handler re-enables interrupts is nested in the graph but not the probe path.
	echo 1 >$T/options/latency-format
	echo 1 >$T/tracing_on
	# An unmapped kernel address (the hole below vmalloc): stringof() takes the nofault
	# path's page fault and exception fixup.
	# The graph sees below return probes and ticks (this entry probe, paired with a return
	# probe, runs as a kprobe, under kprobes' ftrace recursion lock, which hides it from the
	# graph tracer); their actions call everything an entry probe's would.
	guard oxtrace -q -e '
	fbt::ksys_read:entry /pid == $target/ { self->t = timestamp; }
	fbt::ksys_read:return /self->t/ {
		@c[execname, pid, tid, ppid, uid, gid, cpu, id] = count();
		@q = quantize(timestamp - self->t);
		trace(walltimestamp);
		trace(stringof(0xffffc88000000000));
		self->t = 0;
	}
	tick-1ms { @t[execname, pid, ppid, uid] = count(); trace(stringof(0xffffc88000000000)); }
	' -c "$workload read 2 200" >/tmp/psafe.out 2>&1
	rc=$?
	echo 0 >$T/tracing_on
	cp $T/trace /tmp/psafe.trace
	echo 0 >$T/options/latency-format
	echo nop >$T/current_tracer
	echo >$T/set_graph_function
	return $rc
}

# graph_functions: the functions called inside a root's braces, per CPU, one per line
# (roots and the shim's own functions left out). What the graph shows outside them (the
# rest of the interrupt a tick runs in, other CPUs) is not the probe path.
graph_functions() {
	# Lines read "CPU)  FLAGS | DURATION | FUNCTION"; FLAGS is irqs-off (d), need-resched,
	# context (h hard, s soft interrupt, . task), preempt depth. A function counts when it
	# runs with interrupts off in its root's context: an interrupt taken when the shim
	# turns interrupts back on nests in the graph but is not the probe path.
	awk -v roots=" $roots " '
	match($0, /^ *[0-9]+\)/) {
		cpu = substr($0, RSTART, RLENGTH) + 0
		split(substr($0, RSTART + RLENGTH), f, " ")
		flags = f[1]
		t = $0
		sub(/^.*\|/, "", t)
		if (t ~ /^ *}/) {
			if (depth[cpu] > 0)
				depth[cpu]--
			next
		}
		if (!match(t, /[A-Za-z_][A-Za-z0-9_.]*( \[[A-Za-z0-9_]+\])?\(\)/))
			next
		name = substr(t, RSTART, RLENGTH)
		sub(/ \[.*/, "", name)
		sub(/\(\)$/, "", name)
		opens = t ~ /\) \{ *$/
		if (depth[cpu] > 0) {
			if (substr(flags, 1, 1) == "d" && substr(flags, 3, 1) == ctx[cpu])
				print name
			depth[cpu] += opens
		} else if (opens && index(roots, " " name " ")) {
			depth[cpu] = 1
			ctx[cpu] = substr(flags, 3, 1)
		}
	}' /tmp/psafe.trace | sort -u | grep -v '^oxt_'
}

if graph_record; then
	ok "graph recorded while probes fired"
else
	nok "graph recorded while probes fired" "$(tail -5 /tmp/psafe.out)"
fi

graph_functions >/tmp/psafe.called
ncalled=$(wc -l </tmp/psafe.called)
if [ "$ncalled" -gt 0 ]; then
	ok "probe path calls $ncalled kernel functions"
else
	nok "probe path calls kernel functions" "$(head -20 /tmp/psafe.trace)"
fi

oxtrace -l 'fbt:::entry' >/tmp/psafe.list 2>&1
missing=""
for f in $(cat /tmp/psafe.called); do
	# A function the graph saw but ftrace lists no more is not probeable either.
	line=$(grep " $f entry" /tmp/psafe.list)
	[ -z "$line" ] && continue
	case $line in
	*unsafe:*) ;;
	*) missing="$missing $f" ;;
	esac
done
if [ -z "$missing" ]; then
	ok "every function the probe path calls is on the unsafe list"
else
	nok "every function the probe path calls is on the unsafe list" \
		"not on the list:$missing" "(add them to rust/core/probesafe.rs)"
fi
echo "# probe path calls: $(tr '\n' ' ' </tmp/psafe.called)"

# 2. The recursion case.
run 'fbt::rcu_read_lock_held_common:return { @n = count(); }'
expect "single unsafe function refused at compile time" \
	"1 error: function rcu_read_lock_held_common is unsafe to probe: an RCU read-side helper that probe handling calls itself" \
	"$rc $(echo "$err" | head -1)"

# A glob with safe and unsafe functions (rcu_sched_clock_irq, rcu_read_lock_held, ...).
guard oxtrace -v -q -e 'fbt::rcu_*ck*:return { @n = count(); } tick-10ms { exit(0); }' \
	>/tmp/out 2>/tmp/err
rc=$?
nleft=$(grep -c 'skipped rcu_read_lock_.* (rcu): an RCU read-side helper' /tmp/err)
if [ $rc = 0 ] && [ "$nleft" -ge 2 ] && grep -q 'skipped rcu_read_lock_held_common (rcu)' /tmp/err &&
	grep -q '^oxtrace: probe 0 fbt:kernel:.*:return: fired [0-9]* errors 0 recursion [0-9]*$' /tmp/err; then
	ok "glob leaves unsafe functions out, -v says why ($nleft)"
else
	nok "glob leaves unsafe functions out, -v says why" "rc $rc" "$(head -20 /tmp/err)"
fi

run 'fbt::rcu_read_lock_*:return { @n = count(); }'
expect "glob of only unsafe functions refused" "1" "$rc"

tap_exit
