#!/usr/bin/env bash
# Wake-ups and syscalls per push at a moderate rate: context switches, write/read/epoll_wait,
# futex, fdatasync, pwrite64 and fcntl (SQLite's WAL locks) per accepted push, counted by `perf stat` on the gateway over a
# 10 s window in the middle of a `pushgate bench` run (1,000 devices acking 50 ms after each
# event, as ../shared/bench's devices do). The gateway runs on CPU 1 and the bench on CPU 0, as
# in ../shared/bench. Counts, not times: they hold up on a noisy machine better than CPU figures.
#
#   bash Benchmarks/counts.sh [RATE [serve flags...]]      (2,000 pushes/s by default)
source "$(dirname "$0")/common.sh"
command -v perf >/dev/null || apt-get install -y --no-install-recommends linux-perf >/dev/null
rate=${1:-2000}
shift || true
as_gateway=(taskset -c 1 "${as_gateway[@]}")
start_server "$@"
taskset -c 0 "$BIN" bench --server "$url" --devices 1000 --providers 2 --rate "$rate" --pushes $((rate * 30)) --ack-delay 50 > "$work/bench.out" 2> "$work/bench.err" &
bench=$!
# The window opens once the devices are connected and pushes flow.
for _ in $(seq 1200); do [ "$(received)" -gt $((rate * 2)) ] && break; sleep 0.1; done
before=$(received)
events=context-switches
for call in write read epoll_wait futex fdatasync pwrite64 fcntl; do events+=",syscalls:sys_enter_$call"; done
perf stat -x, -e "$events" -p "$server" -o "$work/stat" -- sleep 10
after=$(received)
awk -F, -v n=$((after - before)) 'NF > 2 && $1 ~ /^[0-9]+$/ {
    name = $3; sub(/^syscalls:sys_enter_/, "", name); printf "%s %.2f  ", name, $1 / n
} END { printf "(per push, %d pushes)\n", n }' "$work/stat"
wait "$bench" || true
stop_server
