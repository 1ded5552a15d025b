#!/usr/bin/env bash
# The gateway's SQLite store alone against the C floor, same shape, same session:
#
#   bash Benchmarks/store.sh [ROUNDS [GROUP [ACKS_PER_PUSH]]]     (3 rounds, 3 pushes per commit, every push acked)
#
# Each round runs Benchmarks/StoreBenchmark (SQLiteBackend.apply on one thread: GRDB, the Swift
# commands, one batch per push and per ack, the gateway's schema with its index and foreign
# key) and Benchmarks/store-floor.c (the same rows and statements from C, no index), 100,000
# pushes each, alternating, and prints both in CPU-seconds per 100k pushes and their ratio.
# No event loop and no writer thread: what the store's own layers cost over SQLite's work.
source "$(dirname "$0")/common.sh"
rounds=${1:-3} group=${2:-3} acks=${3:-1}
if ! build_log=$(swift build -c release --product StoreBenchmark 2>&1); then echo "$build_log" >&2; exit 1; fi
swift_bench=$(swift build -c release --show-bin-path)/StoreBenchmark
cc -O2 -o "$work/store-floor" Benchmarks/store-floor.c -lsqlite3
if [ "$(id -u)" = 0 ]; then install -m 755 "$swift_bench" "$work/StoreBenchmark"; swift_bench=$work/StoreBenchmark; fi
run() {  # run BINARY: its CPU-seconds per 100k on a fresh directory
    rm -rf "$work/db"
    gateway_owns "$work/db"
    "${as_gateway[@]}" "$1" "$work/db" 100000 "$group" "$acks" 2>/dev/null | awk '/CPU-s per 100k/ {print $1}'
}
for round in $(seq "$rounds"); do
    swift=$(run "$swift_bench")
    c=$(run "$work/store-floor")
    python3 -c "print(f'round $round: store $swift, C floor $c CPU-s per 100k pushes (group $group, $acks acks per push): {$swift / $c:.2f}x')"
done
