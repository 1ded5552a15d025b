#!/usr/bin/env bash
# The gateway's SQLite store alone against the C floor, same shape, same session:
#
#   bash Benchmarks/store.sh [ROUNDS [GROUP [ACKS_PER_PUSH]]]     (3 rounds, 3 pushes per commit, every push acked)
#
# Each round runs, alternating, 100,000 pushes each:
#   - Benchmarks/StoreBenchmark: SQLiteBackend.apply on one thread (GRDB, the Swift commands,
#     one batch per push and per ack, the gateway's schema with its index and foreign key);
#   - the same with `writer`: the batches go through SQLiteStore as an event loop hands them
#     over (its writer thread commits, completions wake the caller once per group);
#   - Benchmarks/store-floor.c: the same rows and statements from C, no index.
# and prints each in CPU-seconds per 100k pushes with the ratios: the store's own layers over
# SQLite's work, and what the hand-off to the writer thread and back adds.
PUSHGATE_BUILD=0  # the gateway itself does not run here: StoreBenchmark is built below
source "$(dirname "$0")/common.sh"
rounds=${1:-3} group=${2:-3} acks=${3:-1}
if ! build_log=$(swift build -c release --product StoreBenchmark 2>&1); then echo "$build_log" >&2; exit 1; fi
swift_bench=$(swift build -c release --show-bin-path)/StoreBenchmark
cc -O2 -o "$work/store-floor" Benchmarks/store-floor.c -lsqlite3
if [ "$(id -u)" = 0 ]; then install -m 755 "$swift_bench" "$work/StoreBenchmark"; swift_bench=$work/StoreBenchmark; fi
run() {  # run BINARY [writer]: its CPU-seconds per 100k on a fresh directory
    rm -rf "$work/db"
    gateway_owns "$work/db"
    local out
    out=$("${as_gateway[@]}" "$1" "$work/db" 100000 "$group" "$acks" "${@:2}" 2>&1) || { echo "$1 ${*:2} failed: $out" >&2; return 1; }
    awk '/CPU-s per 100k/ {print $1}' <<<"$out"
}
for round in $(seq "$rounds"); do
    backend=$(run "$swift_bench")
    writer=$(run "$swift_bench" writer)
    c=$(run "$work/store-floor")
    python3 -c "print(f'round $round (CPU-s per 100k pushes, group $group, $acks acks per push): backend $backend, through the writer $writer, C floor $c: backend {$backend / $c:.2f}x the floor, writer {$writer / $backend:.2f}x the backend')"
done
