#!/usr/bin/env bash
# Idle cost: CPU of a gateway holding DEVICES idle devices (event streams open, nothing sent)
# for SECONDS, as a fraction of one core (heartbeats, timers, the scheduler's tick), and the
# RSS per device. Release build, the gateway unprivileged, the bench's devices on the same
# machine.
#
#   bash Benchmarks/idle.sh [DEVICES [SECONDS]]     (10,000 and 60 by default)
source "$(dirname "$0")/common.sh"
devices=${1:-10000}
seconds=${2:-60}
start_server
rss0=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
# The bench holds its streams open for longer than the window, then sends one push.
"$BIN" bench --server "$url" --devices "$devices" --pushes 1 --idle-seconds $((seconds + 30)) > "$work/bench.out" 2> "$work/bench.err" &
bench=$!
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {print int($2)}'; }
# Connected means every stream is open; allow a slow machine its minutes.
for _ in $(seq 1200); do
    [ "$(metric pushgate_connected_devices)" = "$devices" ] && break
    sleep 0.25
done
[ "$(metric pushgate_connected_devices)" = "$devices" ] || { echo "only $(metric pushgate_connected_devices) of $devices devices connected" >&2; exit 1; }
sleep 2  # let the connection burst's last work finish before the window opens
rss1=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
t0=$(cpu_ticks "$server")
sleep "$seconds"  # the measured window itself
t1=$(cpu_ticks "$server")
hz=$(getconf CLK_TCK)
awk -v d="$devices" -v s="$seconds" -v t=$((t1 - t0)) -v hz="$hz" -v r0="$rss0" -v r1="$rss1" 'BEGIN {
    printf "idle: %d devices for %d s: %.2f CPU-s, %.3f%% of a core; RSS %.1f KiB per device\n", d, s, t / hz, 100 * t / hz / s, (r1 - r0) / d
}'
kill "$bench" 2>/dev/null || true
wait "$bench" 2>/dev/null || true
stop_server
