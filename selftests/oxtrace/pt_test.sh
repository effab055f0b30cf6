#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Intel PT through ToPA tables with the tool: the software backend fed by
# ptwrite() from a probed syscall (oxt_workload: one thread on CPU 0, every
# read counted), stop and ring modes, the slices' physical layout, and the
# real backend refusing cleanly where the CPU has no PT: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
P='fbt::ksys_read:entry /pid == $target/ { n = n + 1; ptwrite(n); }'
# record FILE CALLS OPTIONS...: oxtrace pt record; status in $rc, stderr in $err
record() {
	f=$1
	calls=$2
	shift 2
	guard oxtrace pt record -o "$f" "$@" -e "$P" -c "./oxt_workload read 1 $calls" \
		>/tmp/pt.out 2>/tmp/pt.err
	rc=$?
	err=$(cat /tmp/pt.err)
}
# PTW values in order: "FIRST LAST COUNT ok" if consecutive, else "broken at ..."
ptw_run() {
	oxtrace pt dump "$1" | awk '
		$2 == "PTW" { v = $3 + 0; if (c == 0) first = v; else if (v != last + 1 && !bad) bad = "broken at " last " -> " v; last = v; c++ }
		END { if (bad) print bad; else print first, last, c, "ok" }'
}
# cpu0 FILE FIELD: a field of cpu 0's summary line
cpu0() {
	oxtrace pt dump --summary "$1" | awk -v f="$2" '$1 == "cpu" && $2 == 0 && $3 == "flags" {
		for (i = 3; i < NF; i += 2) if ($i == f) print $(i + 1) }'
}
cpu0p() {
	oxtrace pt dump --summary "$1" | awk -v f="$2" '$1 == "cpu" && $2 == 0 && $3 == "packets" {
		for (i = 4; i < NF; i += 2) if ($i == f) print $(i + 1) }'
}

echo "TAP version 13"
echo "1..15"

# 6 slices of 4 KiB, 2 per table: 3 tables; 2000 PTWs (~20 KB) reach the third.
record /tmp/pt.stop 2000 --backend soft --mode stop --slices 6 --order 0 --per-table 2
if [ "$rc" = 0 ]; then ok "record (soft, stop, 3 tables) succeeds"; else nok "record (soft, stop, 3 tables)" "rc $rc" "$err"; fi
case "$err" in *"backend soft, stop mode, 6 x 4096 byte slices in 3 tables"*) ok "tool reports the layout" ;;
	*) nok "tool reports the layout" "$err" ;; esac
expect "2000 syscalls wrote PTW 1..2000 in order" "1 2000 2000 ok" "$(ptw_run /tmp/pt.stop)"
d=$(cpu0 /tmp/pt.stop data)
if [ -n "$d" ] && [ "$d" -gt 16384 ] && [ "$d" -le 24576 ]; then
	ok "the data ($d bytes) reaches the third table"
else
	nok "the data reaches the third table" "data: $d"
fi
expect "the kernel counted 2000 PTWs, nothing lost" "2000 0" "$(cpu0 /tmp/pt.stop ptws) $(cpu0 /tmp/pt.stop lost)"

# Stop at capacity: 4 slices (16 KiB), 3000 PTWs (~30 KB); STOP+INT on the last slice.
record /tmp/pt.full 3000 --backend soft --mode stop-int --slices 4 --order 0 --per-table 2
expect "record (stop-int, overfilled) succeeds" "0" "$rc"
expect "stops exactly at capacity: Stopped + PMI" "stopped,pmi 16384 16384" \
	"$(cpu0 /tmp/pt.full flags) $(cpu0 /tmp/pt.full position) $(cpu0 /tmp/pt.full data)"
l=$(cpu0 /tmp/pt.full lost)
w=$(cpu0 /tmp/pt.full written)
if [ "$w" = 16384 ] && [ -n "$l" ] && [ "$l" -gt 0 ]; then
	ok "written = capacity, the rest lost ($l bytes)"
else
	nok "written = capacity, the rest lost" "written $w lost $l"
fi
r=$(ptw_run /tmp/pt.full)
case "$r" in "1 "*" ok") ok "stopped stream decodes from PTW 1 on ($r)" ;; *) nok "stopped stream decodes" "$r" ;; esac

# Ring: 4 slices over 2 tables, 5000 PTWs (~50 KB) wrap three times.
record /tmp/pt.ring 5000 --backend soft --mode ring --slices 4 --order 0 --per-table 2 --psb-period 1024
expect "record (ring) succeeds" "0" "$rc"
expect "ring wrapped, keeps capacity bytes" "wrapped 16384 3" \
	"$(cpu0 /tmp/pt.ring flags) $(cpu0 /tmp/pt.ring data) $(cpu0 /tmp/pt.ring wraps)"
r=$(ptw_run /tmp/pt.ring)
e=$(cpu0p /tmp/pt.ring errors)
case "$r" in *" 5000 "*" ok") expect "wrapped ring decodes from its first PSB to PTW 5000 ($r)" "0" "$e" ;;
	*) nok "wrapped ring decodes to PTW 5000" "$r" ;; esac

# The slices are separate allocations: no slice follows the previous one in memory.
oxtrace pt dump --layout --summary /tmp/pt.stop >/tmp/pt.layout
adj=0
prev=
cnt=0
while read -r _ cpu what i _ phys _ size; do
	[ "$what" = slice ] || continue
	cnt=$((cnt + 1))
	if [ -n "$prev" ] && [ "$i" != 0 ]; then
		[ $((prev + size)) = $((phys)) ] && adj=$((adj + 1))
		[ $((phys + size)) = $((prev)) ] && adj=$((adj + 1))
	fi
	prev=$phys
done </tmp/pt.layout
if [ "$cnt" -ge 6 ] && [ "$adj" = 0 ]; then
	ok "$cnt slices, no two consecutive ones physically contiguous"
else
	nok "slices not contiguous" "slices $cnt adjacent pairs $adj" "$(cat /tmp/pt.layout)"
fi

# The real backend: without Intel PT, a clean ENODEV and no MSR fault.
if grep -q ' intel_pt' /proc/cpuinfo; then
	ok "# SKIP the CPU has Intel PT"
else
	guard oxtrace pt record --backend hw -o /tmp/pt.hw -c true >/dev/null 2>/tmp/pt.err
	rc=$?
	err=$(cat /tmp/pt.err)
	case "$rc:$err" in 1:*"no Intel PT"*ENODEV*) ok "real backend: no Intel PT (ENODEV)" ;;
		*) nok "real backend: no Intel PT (ENODEV)" "rc $rc" "$err" ;; esac
fi
if dmesg | grep -Eq 'unchecked MSR|general protection|WARNING:|BUG:|Oops'; then
	nok "no MSR fault, no splat" "$(dmesg | grep -E 'unchecked MSR|general protection|WARNING:|BUG:|Oops')"
else
	ok "no MSR fault, no splat"
fi
tap_exit
