#!/usr/bin/env bash
# Two builds of the gateway side by side on the delivery figures, alternating, in one session:
# for a change that must not cost CPU (a refactoring) or must save it.
#
#   BASELINE_BIN=/path/to/old/pushgate bash Benchmarks/ab.sh [ROUNDS]
#
# Each round runs, for the baseline and then this checkout's release build (or BIN): flat out
# (1,000 devices acking at once, 100,000 pushes over 8 provider connections) and 2,000 pushes/s
# (1,000 devices acking 50 ms after each event, 40,000 pushes over 2 connections), each against
# a fresh gateway, and prints the server's CPU-seconds per 100k delivered pushes and the bench's
# delivery p99. At the end, each figure's range per build and the median ratio B/A. The same
# `pushgate bench` (this checkout's) drives both. Exits 1 if any run lost, duplicated or refused
# a push.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
[ -n "${BASELINE_BIN:-}" ] || { echo "BASELINE_BIN must name the baseline's pushgate" >&2; exit 2; }
bench_bin=$BIN
install -m 755 "$BASELINE_BIN" "$work/pushgate-baseline"
failed=0
declare -A cpu p99

one() {  # one(label, server binary, bench flags...)
    local label=$1 server_bin=$2; shift 2
    BIN=$server_bin start_server
    [ -n "$url" ] || { echo "$label: the gateway did not start: $(tail -3 "$work/serve.out")" >&2; exit 1; }
    local out
    if ! out=$("$bench_bin" bench --server "$url" --devices 1000 --server-pid "$server" "$@" 2>"$work/bench.err" | tail -1)
    then
        echo "$label: bench failed: $(tail -3 "$work/bench.err")" >&2
        exit 1
    fi
    stop_server
    bench_clean <<<"$out" || failed=1
    cpu[$label]+="$(bench_json serverCPUPer100k <<<"$out") "
    p99[$label]+="$(bench_json deliveryP99Ms <<<"$out") "
    echo "$label: $(bench_json serverCPUPer100k <<<"$out") CPU-s per 100k, p99 $(bench_json deliveryP99Ms <<<"$out") ms"
}

for round in $(seq "$rounds"); do
    echo "== round $round"
    for build in A B; do
        server_bin=$work/pushgate-baseline
        [ "$build" = B ] && server_bin=$bench_bin
        one "flat-$build" "$server_bin" --providers 8 --in-flight 256 --pushes 100000
        one "2000-$build" "$server_bin" --providers 2 --rate 2000 --ack-delay 50 --pushes 40000
    done
done

python3 - "${cpu[flat-A]}" "${cpu[flat-B]}" "${cpu[2000-A]}" "${cpu[2000-B]}" "${p99[2000-A]}" "${p99[2000-B]}" <<'PY'
import statistics, sys
names = ["flat out CPU-s/100k", "2,000/s CPU-s/100k", "2,000/s p99 ms"]
pairs = [(sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4]), (sys.argv[5], sys.argv[6])]
for name, (a, b) in zip(names, pairs):
    a, b = [float(x) for x in a.split()], [float(x) for x in b.split()]
    print(f"{name}: A {min(a):.2f}-{max(a):.2f}, B {min(b):.2f}-{max(b):.2f}, "
          f"median B/A {statistics.median(b) / statistics.median(a):.3f}")
PY
exit "$failed"
