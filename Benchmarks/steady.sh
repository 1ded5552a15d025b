#!/usr/bin/env bash
# A long run at a moderate rate: does anything grow that should not? The gateway's RSS, its WAL
# and its database file every 30 s while `pushgate bench` sends PUSHES pushes at RATE per second
# to 1,000 devices acking 20 ms after each event (durability fsync, one event loop). Release
# build, the gateway unprivileged. A leak shows as an RSS that keeps climbing after the first
# minute; acked pushes are deleted, so the database should stop growing once its pages are
# reused, and the WAL stays under its bound (docs/decisions.md: the WAL bound).
#
#   bash Benchmarks/steady.sh [RATE [PUSHES]]     (1,500/s and 1,350,000: 15 minutes)
#
# Prints one line per sample ("seconds rss_kib wal_bytes db_bytes") and the bench's result,
# whose lost and duplicated counts must be 0 (the script exits 1 otherwise).
source "$(dirname "$0")/common.sh"
rate=${1:-1500}
pushes=${2:-1350000}
start_server --threads 1
start=$(date +%s)
sample() {
    printf '%6d %8d %10d %10d\n' $(($(date +%s) - start)) "$(awk '/VmRSS/ {print $2}' "/proc/$server/status")" \
        "$(stat -c %s "$work/data/pushgate.sqlite-wal" 2>/dev/null || echo 0)" "$(stat -c %s "$work/data/pushgate.sqlite" 2>/dev/null || echo 0)"
}
echo "seconds rss_kib wal_bytes db_bytes"
( while kill -0 "$server" 2>/dev/null; do sample; sleep 30; done ) &
sampler=$!
"$BIN" bench --server "$url" --devices 1000 --providers 2 --rate "$rate" --pushes "$pushes" --ack-delay 20 --server-pid "$server" \
    > "$work/bench.out" 2> "$work/bench.err"
sample
kill "$sampler" 2>/dev/null || true
tail -1 "$work/bench.out"
stop_server
bench_clean < <(tail -1 "$work/bench.out")
