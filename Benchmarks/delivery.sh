#!/usr/bin/env bash
# Delivery benchmark (release build): `pushgate bench` against `pushgate serve` on this machine.
#
#   bash Benchmarks/delivery.sh
#
# 1. Flat out: 1,000 devices holding streams, 200,000 pushes over 8 provider connections.
#    Reports durable accepted pushes/s, lost/duplicated, and the server's CPU-seconds per 100k
#    delivered pushes (utime+stime from /proc, before and after).
# 2. Latency: the same devices at 5,000 pushes/s (50,000 pushes): delivery p50/p99.
# 3. Memory: 10,000 idle devices over h2c; RSS growth of the server divided by 10,000.
# The load generator runs on the same 2 cores as the server.
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)"  # 10,000 connections need as many descriptors on each side

swift build -c release --product pushgate >/dev/null
BIN=$(swift build -c release --show-bin-path)/pushgate
work=$(mktemp -d)
cleanup() { pkill -P $$ 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

start_server() {
    rm -rf "$work/data"
    "$BIN" serve --listen 127.0.0.1:0 --data-dir "$work/data" --log-level error > "$work/serve.out" 2>&1 &
    server=$!
    for _ in $(seq 200); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
    url=$(sed -n 's/^listening //p' "$work/serve.out" | head -1)
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
json_field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])['$1'])"; }

echo "== flat out: 1,000 devices, 200,000 pushes"
start_server
before=$(cpu_ticks "$server")
out=$("$BIN" bench --server "$url" --devices 1000 --providers 8 --in-flight 256 --pushes 200000 2>"$work/bench.err")
after=$(cpu_ticks "$server")
echo "$out"
received=$(echo "$out" | json_field accepted)
python3 -c "print(f'server CPU-seconds per 100k delivered: {($after-$before)/$(getconf CLK_TCK)/($received/100000):.2f}')"
kill -TERM "$server"; wait "$server" || true

echo "== latency: 1,000 devices at 5,000 pushes/s"
start_server
"$BIN" bench --server "$url" --devices 1000 --providers 4 --pushes 50000 --rate 5000 2>"$work/bench.err"
kill -TERM "$server"; wait "$server" || true

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
kill -TERM "$server"; wait "$server" || true
