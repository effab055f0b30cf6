#!/usr/bin/env bash
# End to end: a real Prometheus server on the host scrapes `oxtrace --listen` in the
# guest, and its HTTP API must answer the values the tool printed when the run ended.
#
#   scripts/test-prometheus.sh     (make check runs it; needs Debian's prometheus)
#
# The guest traces a fixed workload (4 threads x 500 reads of 7 bytes), serves the
# aggregations on guest port 9100 (forwarded to a free host port on 127.0.0.1), and then
# waits on guest port 9101 until this script has seen Prometheus store the final values;
# the connection to 9101 ends the workload command, and the tool prints the same
# aggregations as OpenMetrics text. Every wait is for a condition; the bound is a guard.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

command -v prometheus >/dev/null || die "prometheus is not installed (scripts/setup-toolchain.sh)"
work=$(mktemp -d)
prom_pid=
vm_pid=
cleanup() {
	[ -z "$prom_pid" ] || kill "$prom_pid" 2>/dev/null || true
	[ -z "$vm_pid" ] || kill "$vm_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
exp_port=$(free_port)
rel_port=$(free_port)
prom_port=$(free_port)

mkdir -p "$work/guest"
cat >"$work/guest/work.sh" <<'EOF'
/selftests/oxt_workload read 4 500
# Held until the host has seen Prometheus store the final values.
nc -l -p 9101 </dev/null >/dev/null
EOF
cat >"$work/guest/run.sh" <<'EOF'
oxtrace -q -o openmetrics --listen 0.0.0.0:9100 -x aggrate=100ms \
	-e 'fbt::ksys_read:entry /execname == "oxt_workload"/ { @reads = count(); @size = quantize(arg2); }' \
	-c 'sh /extra/work.sh'
EOF

say "guest: oxtrace --listen, forwarded to 127.0.0.1:$exp_port"
"$OXT_ROOT/scripts/vm.sh" --files "$work/guest" --timeout 900 \
	--forward "$exp_port:9100" --forward "$rel_port:9101" -- sh /extra/run.sh >"$work/vm.out" 2>&1 &
vm_pid=$!

cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: oxtrace
    static_configs:
      - targets: ['127.0.0.1:$exp_port']
EOF
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!

# query EXPR: the value of an instant vector with one sample, or nothing.
query() {
	curl -sf --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if len(r)==1 else "")' 2>/dev/null || true
}

# The guest boots, traces and serves; Prometheus scrapes every second. Wait until it has
# stored the workload's last read (the guard only ends a hung run).
deadline=$((SECONDS + 800))
while [ "$(query oxtrace_reads_total)" != 2000 ]; do
	if ! kill -0 "$vm_pid" 2>/dev/null; then
		cat "$work/vm.out" >&2
		die "the guest ended before Prometheus saw the final count"
	fi
	[ $SECONDS -lt $deadline ] || die "Prometheus never stored oxtrace_reads_total 2000 (last: '$(query oxtrace_reads_total)')"
	sleep 0.5
done
declare -A prom
for m in oxtrace_reads_total oxtrace_size_count oxtrace_size_sum \
	'oxtrace_size_bucket{le="7"}' 'oxtrace_size_bucket{le="+Inf"}'; do
	prom[$m]=$(query "$m")
done

# Release the guest's workload: the tool ends and prints its aggregations.
python3 -c "import socket; socket.create_connection(('127.0.0.1', $rel_port), 60).close()"
rc=0
wait "$vm_pid" || rc=$?
vm_pid=
[ $rc = 0 ] || { cat "$work/vm.out" >&2; die "guest run failed (exit $rc)"; }

fails=0
for m in "${!prom[@]}"; do
	printed=$(tr -d '\r' <"$work/vm.out" | awk -v m="$m" '$1 == m { print $2 }')
	if [ -n "$printed" ] && [ "${prom[$m]}" = "$printed" ]; then
		echo "ok: $m = $printed (Prometheus = tool)"
	else
		echo "FAIL: $m: Prometheus '${prom[$m]}', tool printed '$printed'" >&2
		fails=$((fails + 1))
	fi
done
if [ $fails != 0 ]; then
	cat "$work/vm.out" >&2
	exit 1
fi
echo "prometheus: 5 series scraped from the guest agree with the tool"
