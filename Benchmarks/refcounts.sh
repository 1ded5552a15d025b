#!/usr/bin/env bash
# Reference counting and allocations per push (release build):
#
#   bash Benchmarks/refcounts.sh [provider | delivery [RATE]]   (BASELINE_BIN=path counts another build too)
#
# Uprobes on the Swift runtime's swift_retain, swift_release (and their _n and bridgeObject
# forms), swift_allocObject and jemalloc's malloc, counted by `perf stat` on the gateway.
#   provider (the default): 20,000 h2load POSTs of the bench's alert (after 100,000 to warm up)
#     to 1,000 offline devices, under --durability interval, so that what is counted is the
#     request path: parsing, validation, routing, the shard's acceptance and the response, and
#     the store's commands on the writer. Per request.
#   delivery: the whole life of an acked push at a moderate rate, as counts.sh runs it
#     (`pushgate bench`, 1,000 devices acking 50 ms after each event, RATE pushes/s, 200 by
#     default: the probes slow the gateway too much for 2,000), durability fsync, counted over
#     20 s in the middle of the run. Per accepted push. Less exact than the provider's: what a
#     commit or a loop wake-up carries depends on timing (three quiet runs of one build: within
#     3%; with a test suite running beside them, 25% off), so run it on a quiet machine, repeat.
# Counts, not times: a noisy machine cannot blur them, where it blurs the few percent of CPU
# each of these changes is worth. In a CPU profile of the provider run the reference-counting
# functions take about a fifth of the gateway's samples.
#
# Uprobes trap on every call: the runs are slow (a minute or two each) and their CPU figures
# mean nothing. Needs root (perf probe); the probes are removed on exit.
source "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || { echo "refcounts.sh: perf probe needs root" >&2; exit 1; }
command -v perf >/dev/null || apt-get install -y --no-install-recommends linux-perf >/dev/null
provider_h2load_setup

swift_core=$(ldd "$BIN" | awk '$1 == "libswiftCore.so" {print $3}')
allocator=$(ldd "$BIN" | awk '$1 ~ /^libjemalloc/ {print $3}')
[ -n "$swift_core" ] && [ -n "$allocator" ] || { echo "refcounts.sh: $BIN does not link libswiftCore.so and jemalloc" >&2; exit 1; }
functions=(swift_retain swift_release swift_retain_n swift_release_n swift_bridgeObjectRetain swift_bridgeObjectRelease swift_allocObject)
perf probe -q -d 'pushgate_refcounts:*' 2>/dev/null || true
for function in "${functions[@]}"; do perf probe -q -x "$swift_core" --add "pushgate_refcounts:$function=$function"; done
# By address: by name, perf also probes jemalloc's own PLT entry for malloc.
perf probe -q -x "$allocator" --add "pushgate_refcounts:malloc=0x$(nm -D --defined-only "$allocator" | awk '$3 == "malloc" {print $1}')"
trap 'perf probe -q -d "pushgate_refcounts:*" 2>/dev/null || true; cleanup' EXIT

mode=${1:-provider}
rate=${2:-200}
case "$mode" in provider | delivery) ;; *) echo "usage: refcounts.sh [provider | delivery [RATE]]" >&2; exit 2 ;; esac

# provider_counts BINARY: one gateway run, its counts per request, one "name count" per line.
provider_counts() {
    local BIN=$1
    start_server --durability interval
    offline_device_urls
    h2load_rate "${H2LOAD[@]}" $(cat "$work/urls") >/dev/null
    local measured=20000
    local args=("${H2LOAD[@]}")
    args[1]=$measured
    perf stat -x, -e 'pushgate_refcounts:*' -p "$server" -o "$work/stat" -- h2load "${args[@]}" $(cat "$work/urls") > "$work/h2load.out"
    grep -q " 0 failed, 0 errored, 0 timeout" "$work/h2load.out" || { cat "$work/h2load.out" >&2; return 1; }
    stop_server
    awk -F, -v n=$measured 'NF > 2 && $1 ~ /^[0-9]+$/ { name = $3; sub(/^pushgate_refcounts:/, "", name); printf "%s %.1f\n", name, $1 / n }' "$work/stat"
}

# delivery_counts BINARY: one gateway run under `pushgate bench` at $rate, its counts per push.
delivery_counts() {
    local BIN=$1
    start_server
    "$BIN" bench --server "$url" --devices 1000 --providers 2 --rate "$rate" --pushes $((rate * 40)) --ack-delay 50 > "$work/bench.out" 2> "$work/bench.err" &
    local bench=$!
    for _ in $(seq 1200); do [ "$(received)" -gt $((rate * 5)) ] && break; sleep 0.1; done
    local before after
    before=$(received)
    perf stat -x, -e 'pushgate_refcounts:*' -p "$server" -o "$work/stat" -- sleep 20
    after=$(received)
    wait "$bench" || true
    bench_clean < <(tail -1 "$work/bench.out") || return 1
    stop_server
    echo "pushes $((after - before))"
    awk -F, -v n=$((after - before)) 'NF > 2 && $1 ~ /^[0-9]+$/ { name = $3; sub(/^pushgate_refcounts:/, "", name); printf "%s %.1f\n", name, $1 / n }' "$work/stat"
}

baseline=${BASELINE_BIN:-}
if [ -n "$baseline" ]; then install -m 755 "$baseline" "$work/baseline"; baseline=$work/baseline; fi
"${mode}_counts" "$BIN" > "$work/now"
[ -z "$baseline" ] || "${mode}_counts" "$baseline" > "$work/before"
python3 - "$mode" "$work/now" ${baseline:+"$work/before"} <<'PY'
import sys
def read(path):
    return dict((name, float(count)) for name, count in (line.split() for line in open(path)))
runs = [read(p) for p in sys.argv[2:]]
names = ["swift_retain", "swift_release", "swift_retain_n", "swift_release_n", "swift_bridgeObjectRetain",
         "swift_bridgeObjectRelease", "swift_allocObject", "malloc"]
print(("per request" if sys.argv[1] == "provider" else "per push") + ("" if len(runs) == 1 else "     this build   baseline"))
if "pushes" in runs[0]:
    print(f"{'pushes counted':28}" + "".join(f"{r['pushes']:11.0f}" for r in runs))
for name in names + ["reference counting, all"]:
    if name == "reference counting, all":
        values = [sum(r.get(n, 0) for n in names[:6]) for r in runs]
    else:
        values = [r.get(name, 0) for r in runs]
    print(f"{name:28}" + "".join(f"{v:11.1f}" for v in values))
PY
