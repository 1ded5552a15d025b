#!/usr/bin/env bash
# Scheduler cost end to end (release build): `pushgate bench` flat out with all alerts, then with
# 80 % silent pushes (background, priority 5) and 20 % alerts, alternating, default budgets
# (3 per app per hour, 10 per device): most silent pushes are held and ride along with the next
# alert (piggyback); what is still held at the end is collected with one keep-alive per device.
#
#   bash Benchmarks/mix.sh [ROUNDS] [PUSHES]
#
# Reports durable accepted pushes/s of each run, the medians and their ratio.
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
pushes=${2:-100000}

run_one() {  # $1 = silent percentage
    start_server
    "$BIN" bench --server "$url" --devices 1000 --providers 8 --in-flight 256 --pushes "$pushes" \
        --silent-percent "$1" 2>"$work/bench.err" | tail -1 > "$work/result.json"
    stop_server
    if [ ! -s "$work/result.json" ]; then echo "bench failed:" >&2; tail -5 "$work/bench.err" >&2; exit 1; fi
    python3 -c "import json; r=json.load(open('$work/result.json')); assert r['lost']==0 and r['refused']==0 and r['duplicated']==0, r; print(r['acceptedPerSecond'])"
}

alert=(); mix=()
for i in $(seq "$rounds"); do
    a=$(run_one 0); m=$(run_one 80)
    echo "round $i: all alerts $a pushes/s, 80 % silent $m pushes/s"
    alert+=("$a"); mix+=("$m")
done
python3 - "${alert[*]}" "${mix[*]}" <<'PY'
import statistics, sys
alert = [float(x) for x in sys.argv[1].split()]
mix = [float(x) for x in sys.argv[2].split()]
a, m = statistics.median(alert), statistics.median(mix)
print(f"median all alerts {a:.0f}/s, 80 % silent {m:.0f}/s: ratio {m/a:.3f}")
PY
