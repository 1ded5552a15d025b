#!/usr/bin/env bash
# Delivery benchmark (release build): `pushgate bench` against `pushgate serve` on this machine.
#
#   bash Benchmarks/delivery.sh
#
# 1. Flat out: 1,000 devices holding streams, 200,000 pushes over 8 provider connections.
#    Reports durable accepted pushes/s, lost/duplicated, and the server's CPU-seconds per 100k
#    delivered pushes (utime+stime from /proc, read by the bench from the first push to the last
#    receipt; also split into the event-loop threads and the others, nearly all the store's
#    writer). Devices ack at once (an ack
#    in flight takes along what arrives meanwhile); then again with acks coalesced for 100 ms,
#    with no acks during the run, and with acks at once under --durability interval.
# 2. Latency: the same devices at 5,000 pushes/s (50,000 pushes), with each durability:
#    delivery p50/p99, and the server's CPU per 100k at that rate.
# 3. Memory: 10,000 idle devices over h2c; RSS growth of the server divided by 10,000.
# 4. Reference, same run: the same h2load POSTs (100,000, 8 connections, 256 streams each, the
#    bench's alert payload, 122 bytes) against pushgate's provider endpoint for 1,000 offline devices
#    (validated and stored durably, no device side) and against nghttpd (a static file); requests/s
#    and server CPU-seconds per 100k for both, and their ratios.
# The load generator runs on the same 2 cores as the server. Exits 1 at the end if any run
# lost, duplicated or refused a push or lost an event stream.
source "$(dirname "$0")/common.sh"
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
# Set when a run was not clean; the benchmark goes on and exits 1 at the end. (`bench_clean` reads
# a here-string, not a pipe: in a pipeline it would run in a subshell and the flag be lost.)
failed=0
serve_flags=()  # flags for the gateway of the next bench_run

# One bench run against a fresh server. The bench reads the server's CPU from /proc over the
# pushes alone (--server-pid), not over the devices' creation before them.
bench_run() {
    start_server "${serve_flags[@]}"
    out=$("$BIN" bench --server "$url" --devices 1000 --server-pid "$server" "$@" 2>"$work/bench.err")
    echo "$out"
    bench_clean <<<"$out" || failed=1
    stop_server
}

flat_out() { bench_run --providers 8 --in-flight 256 --pushes 200000 "$@"; }

echo "== flat out: 1,000 devices, 200,000 pushes, devices ack at once"
flat_out
echo "== flat out, devices coalesce acks for 100 ms (--ack-delay 100)"
flat_out --ack-delay 100
echo "== flat out, devices send no ack during the run (--ack-delay 60000): what acks cost"
flat_out --ack-delay 60000
echo "== flat out, devices ack at once, --durability interval (a commit a second; the 200 before it)"
serve_flags=(--durability interval)
flat_out
serve_flags=()

# At this rate a device gets a push every 200 ms, so every push has an ack of its own, and
# little is batched: the CPU per push is several times the flat-out figure.
echo "== latency: 1,000 devices at 5,000 pushes/s"
bench_run --providers 4 --pushes 50000 --rate 5000
echo "== latency: 1,000 devices at 5,000 pushes/s, --durability interval"
serve_flags=(--durability interval)
bench_run --providers 4 --pushes 50000 --rate 5000
serve_flags=()

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

echo "== reference: h2load POSTs, pushgate's provider endpoint (1,000 offline devices) against nghttpd"
provider_h2load_setup
start_server
offline_device_urls
pg=$(h2load_cpu "$server" $(cat "$work/urls"))
read -r pg_rate pg_cpu <<<"$pg"
stop_server
start_nghttpd
ng_result=$(h2load_cpu "$ng" "http://127.0.0.1:$ng_port/static")
read -r ng_rate ng_cpu <<<"$ng_result"
kill "$ng"; wait "$ng" 2>/dev/null || true
python3 -c "
print(f'pushgate provider endpoint: {$pg_rate:.0f} req/s, {$pg_cpu:.2f} CPU-s per 100k (validated, stored durably)')
print(f'nghttpd static file:        {$ng_rate:.0f} req/s, {$ng_cpu:.2f} CPU-s per 100k')
print(f'ratio pushgate/nghttpd: requests/s {$pg_rate/$ng_rate:.2f}, CPU per request {$pg_cpu/$ng_cpu:.1f}')"
exit "$failed"
