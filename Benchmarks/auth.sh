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
gateway_owns "$work/AuthKey.p8"  # written 0600; the bench (root) still reads it
topic=com.example.bench

run_one() {  # $1 = plain|token
    local auth=() bench_auth=()
    if [ "$1" = token ]; then
        auth=(--provider-key "TEAM123456:KEY1234567:$work/AuthKey.p8:$topic")
        bench_auth=(--key "$work/AuthKey.p8" --key-id KEY1234567 --team-id TEAM123456)
    fi
    start_server "${auth[@]}"
    local rate status=0
    rate=$(bench_rate --devices 1000 --providers 8 --in-flight 256 --pushes "$pushes" --topic "$topic" "${bench_auth[@]}") || status=$?
    stop_server
    [ "$status" = 0 ] || exit 1
    echo "$rate"
}

plain=(); token=()
for i in $(seq "$rounds"); do
    p=$(run_one plain); t=$(run_one token)
    echo "round $i: without auth $p pushes/s, with token auth $t pushes/s"
    plain+=("$p"); token+=("$t")
done
compare_medians "without auth" "${plain[*]}" "with token auth" "${token[*]}"
