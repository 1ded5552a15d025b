#!/usr/bin/env bash
# Cost of provider token authentication (release build): `pushgate bench` flat out against a
# gateway without provider authentication and one with a provider key (ES256 tokens), runs
# alternating A B A B ... so that drift on this shared machine hits both alike.
#
#   bash Benchmarks/auth.sh [ROUNDS] [PUSHES]
#
# Reports durable accepted pushes/s of each run, the medians, and the ratio with/without.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
pushes=${2:-100000}
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/AuthKey.p8" 2>/dev/null
topic=com.example.bench

run_one() {  # $1 = plain|token
    local auth=() bench_auth=()
    if [ "$1" = token ]; then
        auth=(--provider-key "TEAM123456:KEY1234567:$work/AuthKey.p8:$topic")
        bench_auth=(--key "$work/AuthKey.p8" --key-id KEY1234567 --team-id TEAM123456)
    fi
    start_server "${auth[@]}"
    "$BIN" bench --server "$url" --devices 1000 --providers 8 --in-flight 256 --pushes "$pushes" --topic "$topic" \
        "${bench_auth[@]}" 2>"$work/bench.err" | tail -1 > "$work/result.json"
    stop_server
    if [ ! -s "$work/result.json" ]; then echo "bench failed:" >&2; tail -5 "$work/bench.err" >&2; exit 1; fi
    python3 -c "import json; r=json.load(open('$work/result.json')); assert r['lost']==0 and r['refused']==0, r; print(r['acceptedPerSecond'])"
}

plain=(); token=()
for i in $(seq "$rounds"); do
    p=$(run_one plain); t=$(run_one token)
    echo "round $i: without auth $p pushes/s, with token auth $t pushes/s"
    plain+=("$p"); token+=("$t")
done
python3 - "${plain[*]}" "${token[*]}" <<'PY'
import statistics, sys
plain = [float(x) for x in sys.argv[1].split()]
token = [float(x) for x in sys.argv[2].split()]
p, t = statistics.median(plain), statistics.median(token)
print(f"median without auth {p:.0f}/s, with token auth {t:.0f}/s: ratio {t/p:.3f} (cost {100*(1-t/p):.1f}%)")
PY
