#!/usr/bin/env bash
# Delivery latency at a moderate rate beside what the disk alone allows (release build):
#
#   bash Benchmarks/latency.sh [ROUNDS [RATE [serve flags...]]]     (3 rounds, 2,000 pushes/s)
#
# Each round runs, one after the other on the same filesystem:
#   - Benchmarks/latency_floor.py in its sqlite mode: pushes arriving at RATE/s for 20 s, each
#     done once an fsync'd SQLite commit covering it returns, with perfect group commit and
#     nothing else (no HTTP, no event write): the latency this disk allows at that rate;
#   - the gateway as issue 25's latency cell runs it: `pushgate bench --devices 1000
#     --providers 2 --rate RATE --ack-delay 50`, 20 s of pushes, the gateway on CPU 1 and the bench
#     on CPU 0, durability fsync unless the flags say otherwise. After the run, its
#     pushgate_store_commit_duration_seconds histogram says how many of its commits took longer
#     than 10, 25 and 100 ms: a commit's fsync is where the disk's stalls reach the gateway.
# Prints p50/p99/p99.9/max in ms of each, per round. On these VMs an fsync now and then takes
# 50-800 ms (`python3 Benchmarks/latency_floor.py DIR 2000 20 file`), and every push that arrives
# meanwhile waits for it: a round with such a stall misses a 10 ms p99.9 whatever the gateway
# does, so read the gateway's figures beside the floor's and its own slow commits.
# With TMPDIR=/dev/shm both run on tmpfs, where an fsync returns at once: the gateway's own
# latency, the same code path without the disk.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
rate=${2:-2000}
shift 2 || shift $#
[[ $rounds =~ ^[1-9][0-9]*$ && $rate =~ ^[1-9][0-9]*$ ]] || { echo "latency.sh: ROUNDS and RATE are whole numbers" >&2; exit 1; }
as_gateway=(taskset -c 1 "${as_gateway[@]}")

# From the gateway's commit-duration histogram, read once after its run: "commits, over 10 ms,
# over 25 ms, over 100 ms" (a bucket counts the commits that took at most its edge).
slow_commits() {
    curl -s "$url/metrics" | awk '
        $1 ~ /^pushgate_store_commit_duration_seconds_count/ { all = $2 }
        $1 ~ /^pushgate_store_commit_duration_seconds_bucket/ {
            if (index($1, "le=\"0.01\"")) within10 = $2
            if (index($1, "le=\"0.025\"")) within25 = $2
            if (index($1, "le=\"0.1\"")) within100 = $2
        }
        END { printf "%d %d %d %d\n", all, all - within10, all - within25, all - within100 }'
}

for round in $(seq "$rounds"); do
    mkdir -p "$work/floor"
    floor=$(taskset -c 1 python3 Benchmarks/latency_floor.py "$work/floor" "$rate" 20 sqlite)
    start_server "$@"
    taskset -c 0 "$BIN" bench --server "$url" --devices 1000 --providers 2 --rate "$rate" --ack-delay 50 \
        --pushes $((rate * 20)) --server-pid "$server" > "$work/bench.out" 2> "$work/bench.err" \
        || { cat "$work/bench.err" >&2; exit 1; }
    slow=$(slow_commits)
    stop_server
    python3 - "$round" "$floor" "$(tail -1 "$work/bench.out")" $slow <<'PY'
import json, sys
round_, floor, bench = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
commits, over10, over25, over100 = map(int, sys.argv[4:8])
print(f"round {round_}: floor p50 {floor['p50Ms']:.2f} p99 {floor['p99Ms']:.2f} p99.9 {floor['p999Ms']:.2f} "
      f"max {floor['maxMs']:.1f} ms ({floor['pushesPerCommit']} pushes per commit) | gateway p50 "
      f"{bench['deliveryP50Ms']:.2f} p99 {bench['deliveryP99Ms']:.2f} p99.9 {bench['deliveryP999Ms']:.2f} "
      f"max {bench['deliveryMaxMs']:.1f} ms, lost {bench['lost']}, duplicated {bench['duplicated']}, "
      f"{commits} commits of which {over10} over 10 ms, {over25} over 25, {over100} over 100")
PY
done
