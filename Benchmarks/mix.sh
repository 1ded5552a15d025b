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
    local rate status=0
    rate=$(bench_rate --devices 1000 --providers 8 --in-flight 256 --pushes "$pushes" --silent-percent "$1") || status=$?
    stop_server
    [ "$status" = 0 ] || exit 1
    echo "$rate"
}

alert=(); mix=()
for i in $(seq "$rounds"); do
    a=$(run_one 0); m=$(run_one 80)
    echo "round $i: all alerts $a pushes/s, 80 % silent $m pushes/s"
    alert+=("$a"); mix+=("$m")
done
compare_medians "all alerts" "${alert[*]}" "80 % silent" "${mix[*]}"
