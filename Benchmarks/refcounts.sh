#!/usr/bin/env bash
# Reference counting and allocations per provider request (release build):
#
#   bash Benchmarks/refcounts.sh            (BASELINE_BIN=path counts another build too)
#
# Uprobes on the Swift runtime's swift_retain, swift_release (and their _n and bridgeObject
# forms), swift_allocObject and jemalloc's malloc, counted by `perf stat` on the gateway over
# 20,000 h2load POSTs of the bench's alert (after 100,000 to warm up) to 1,000 offline devices,
# under --durability interval, so that what is counted is the request path: parsing,
# validation, routing, the shard's acceptance and the response, and the store's commands on
# the writer. Counts, not times: a noisy machine cannot blur them, where it blurs the few
# percent of CPU each of these changes is worth. In a CPU profile of the same run the
# reference-counting functions take about a fifth of the gateway's samples.
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

# counts BINARY: one gateway run, its counts per request, one "name count" per line.
counts() {
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

baseline=${BASELINE_BIN:-}
if [ -n "$baseline" ]; then install -m 755 "$baseline" "$work/baseline"; baseline=$work/baseline; fi
counts "$BIN" > "$work/now"
[ -z "$baseline" ] || counts "$baseline" > "$work/before"
python3 - "$work/now" ${baseline:+"$work/before"} <<'PY'
import sys
def read(path):
    return dict((name, float(count)) for name, count in (line.split() for line in open(path)))
runs = [read(p) for p in sys.argv[1:]]
names = ["swift_retain", "swift_release", "swift_retain_n", "swift_release_n", "swift_bridgeObjectRetain",
         "swift_bridgeObjectRelease", "swift_allocObject", "malloc"]
print("per request" + ("" if len(runs) == 1 else "     this build   baseline"))
for name in names + ["reference counting, all"]:
    if name == "reference counting, all":
        values = [sum(r.get(n, 0) for n in names[:6]) for r in runs]
    else:
        values = [r.get(name, 0) for r in runs]
    print(f"{name:28}" + "".join(f"{v:11.1f}" for v in values))
PY
