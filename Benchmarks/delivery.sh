#!/usr/bin/env bash
# Delivery benchmark (release build): `pushgate bench` against `pushgate serve` on this machine.
#
#   bash Benchmarks/delivery.sh
#
# 1. Flat out: 1,000 devices holding streams, 200,000 pushes over 8 provider connections.
#    Reports durable accepted pushes/s, lost/duplicated, and the server's CPU-seconds per 100k
#    delivered pushes (utime+stime from /proc, before and after). Devices ack at once (an ack
#    in flight takes along what arrives meanwhile); then again with acks coalesced for 100 ms.
# 2. Latency: the same devices at 5,000 pushes/s (50,000 pushes): delivery p50/p99.
# 3. Memory: 10,000 idle devices over h2c; RSS growth of the server divided by 10,000.
# The load generator runs on the same 2 cores as the server. Exits 1 at the end if any run
# lost, duplicated or refused a push or lost an event stream.
source "$(dirname "$0")/common.sh"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
json_field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }
failed=0
# Reads a bench's output on stdin; says so, and marks the benchmark failed, unless it is clean.
check_clean() {
    python3 -c "
import json, sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
bad = {k: r[k] for k in ('lost', 'duplicated', 'refused', 'streamsLost') if r[k]}
if bad: print('NOT CLEAN:', bad); sys.exit(1)" || failed=1
}

flat_out() {
    start_server
    before=$(cpu_ticks "$server")
    out=$("$BIN" bench --server "$url" --devices 1000 --providers 8 --in-flight 256 --pushes 200000 "$@" 2>"$work/bench.err")
    after=$(cpu_ticks "$server")
    echo "$out"
    echo "$out" | check_clean
    received=$(echo "$out" | json_field accepted)
    python3 -c "print(f'server CPU-seconds per 100k delivered: {($after-$before)/$(getconf CLK_TCK)/($received/100000):.2f}')"
    stop_server
}

echo "== flat out: 1,000 devices, 200,000 pushes, devices ack at once"
flat_out
echo "== flat out, devices coalesce acks for 100 ms (--ack-delay 100)"
flat_out --ack-delay 100

echo "== latency: 1,000 devices at 5,000 pushes/s"
start_server
out=$("$BIN" bench --server "$url" --devices 1000 --providers 4 --pushes 50000 --rate 5000 2>"$work/bench.err")
echo "$out"
echo "$out" | check_clean
stop_server

echo "== memory: 10,000 idle devices"
start_server
base=$(rss_kib "$server")
"$BIN" bench --server "$url" --devices 10000 --providers 1 --pushes 1 --idle-seconds 10 > "$work/idle.out" 2>"$work/idle.err" &
bench=$!
for _ in $(seq 1200); do grep -q "open and idle" "$work/idle.err" 2>/dev/null && break; sleep 0.1; done
sleep 3
idle=$(rss_kib "$server")
wait "$bench" || true
python3 -c "print(f'server RSS: {$base} KiB at start, {$idle} KiB with 10,000 idle devices: {($idle-$base)/10000:.1f} KiB per idle device')"
stop_server
exit "$failed"
