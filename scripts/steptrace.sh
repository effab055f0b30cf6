#!/usr/bin/env bash
# make steptrace: every instruction of one read() under each tool's program.
#
#   scripts/steptrace.sh [ox|bt|none]...        (default: ox bt)
#
# OXPROG / BTPROG: the D and bpftrace programs (default: the bench's latency pair);
# SKIP: the ksys_read(fd, buf, 1) hits let go before the traced one (default 3000);
# N: the reads in each loop (default 400000; more if gdb attaches after a loop ended).
# WORKLOAD: oxt_bench's arguments instead of "read 1 $N 1" ('$N' stands for N), e.g.
# 'ucall 1 $N' for the upid pair; BREAK_OX / BREAK_BT: the function stepped under each
# tool instead of ksys_read (a module's too), e.g. oxt_uprobe_handler and
# uprobe_dispatcher: one uprobe hit's handler under each.
#
# Boots the bench kernel without KASLR and with QEMU's gdbstub, runs the bench's read
# loop under each tool in turn (scripts/guest/steptrace-run.sh), and for each: gdb on
# the host lets SKIP hits of ksys_read with count 1 go, then single-steps the next one to
# its return with the other vCPUs held (scripts/steptrace.py). Writes, per tool, in
# build/steptrace/: TOOL.txt (instructions per function, most first), TOOL.runs (the
# functions in the order they ran, with the instructions of each stretch) and TOOL.seq
# (every instruction's address and function). Symbols come from the bench kernel's
# System.map and the guest's /proc/kallsyms (the module, the BPF programs), which is
# kept as build/steptrace/ksyms.
# Documentation/bench.rst, "One firing, instruction by instruction", tells what the
# figures showed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(ox bt)
for t in "${tools[@]}"; do
	case $t in ox | bt | none) ;; *) die "steptrace: unknown tool '$t' (ox, bt or none)" ;; esac
done
command -v gdb >/dev/null || die "steptrace: gdb is missing (scripts/setup-bench.sh installs it)"

"$OXT_ROOT/scripts/setup-bench.sh"
KFLAVOR=bench
KDIR=$("$OXT_ROOT/scripts/kernel.sh" bench)
export KFLAVOR KDIR
[ -f "$KDIR/vmlinux" ] && [ -f "$KDIR/System.map" ] ||
	die "steptrace: no vmlinux or System.map in $KDIR"

out=$OXT_ROOT/build/steptrace
rm -rf "$out"
mkdir -p "$out/files"
"$OXT_ROOT/scripts/build.sh" all
say "building the bench workload"
${CC:-gcc} -O2 -Wall -Wextra -Werror -static -pthread -D_GNU_SOURCE \
	"$OXT_ROOT/tools/bench/oxt_bench.c" -o "$out/files/oxt_bench"
cp "$OXT_ROOT/scripts/guest/steptrace-run.sh" "$OXT_ROOT/scripts/guest/hostroot.sh" "$out/files/"
[ -z "${OXPROG:-}" ] || printf '%s\n' "$OXPROG" >"$out/files/oxprog"
[ -z "${BTPROG:-}" ] || printf '%s\n' "$BTPROG" >"$out/files/btprog"
[ -z "${WORKLOAD:-}" ] || printf '%s\n' "$WORKLOAD" >"$out/files/workload"

log=$OXT_ROOT/build/vm/out.log
rm -f "$log"
OXT_ICOUNT='' OXT_VM_APPEND=nokaslr OXT_QEMU_ARGS=-s \
	"$OXT_ROOT/scripts/vm.sh" --no-build --files "$out/files" --mem 2G --hostroot \
	--timeout "${STEPTRACE_TIMEOUT:-3600}" -- sh /extra/steptrace-run.sh ${N:+"N=$N"} "${tools[@]}" \
	>"$out/guest.log" 2>&1 &
vm=$!
# On an error, this guest's QEMU (which vm.sh runs under timeout, in a process group of
# its own) goes too; vm.sh then ends.
trap 'pkill -f -- "-initrd $OXT_ROOT/build/vm/initramfs.gz" 2>/dev/null || true' EXIT

# The guest's output (the serial log vm.sh writes), line by line as it comes, until the
# guest ends: one reader for the whole run, so that nothing polls.
exec {guest}< <(tail -n +1 -F --pid=$vm "$log" 2>/dev/null)

# Reads the guest's output up to a line starting with $1; false at the guest's end.
upto() {
	local line
	while IFS= read -r line <&"$guest"; do
		[[ $line != "$1"* ]] || return 0
	done
	return 1
}

upto KSYMEND || die "steptrace: the guest ended before its symbols (build/steptrace/guest.log)"
for t in "${tools[@]}"; do
	upto "READY $t" || die "steptrace: the guest ended before running $t (build/steptrace/guest.log)"
	# The module's symbols, and the BPF programs' once bpftrace has made them.
	tr -d '\r' <"$log" | sed -n 's/^KSYM //p; s/^BPFSYM //p' >"$out/ksyms"
	say "steptrace: stepping one read() under $t"
	case $t in ox) brk=${BREAK_OX:-} ;; bt) brk=${BREAK_BT:-} ;; *) brk= ;; esac
	BREAK=$brk OUT=$out/$t SKIP=${SKIP:-3000} MAP=$KDIR/System.map KSYMS=$out/ksyms \
		gdb -batch -nx -x "$OXT_ROOT/scripts/steptrace.py" "$KDIR/vmlinux" >"$out/gdb-$t.log" 2>&1 &
	gdb=$!
	# gdb holds the guest from the breakpoint until it has written the trace: a loop that
	# ends without a trace went by before gdb stopped it (or gdb failed).
	upto "DONE $t" || die "steptrace: the guest ended while running $t (build/steptrace/guest.log)"
	if [ ! -f "$out/$t.txt" ]; then
		kill $gdb 2>/dev/null
		die "steptrace: the loop under $t ended before gdb stopped it" \
			"(raise N; build/steptrace/gdb-$t.log)"
	fi
	wait $gdb || die "steptrace: gdb failed under $t (build/steptrace/gdb-$t.log)"
	head -1 "$out/$t.txt"
done
wait $vm || die "steptrace: the guest failed (build/steptrace/guest.log)"
trap - EXIT
say "steptrace: build/steptrace/{$(
	IFS=,
	echo "${tools[*]}"
)}.{txt,runs,seq}"
