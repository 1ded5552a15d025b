#!/usr/bin/env bash
# Where a server's CPU goes at a moderate rate, beside its peers: user and system CPU per
# message, by thread, and syscalls and context switches per message, over 14 s of
# ../shared/bench's latency phase (1,000 subscribers, 2,000 messages/s, the server alone on
# CPU 1). utime and stime come from /proc, the counts from `perf stat` (counting only: a
# `perf record` attached to the server inflates both sides, Mosquitto's most).
#
#   bash Benchmarks/cpu-split.sh [SYSTEMS [ROUNDS]]     ("mosquitto pushgate", 3 by default)
#
# SYSTEMS are ../shared/bench's names (mosquitto, nchan, pushgate), run in turn each round;
# pushgate is this build (or $BIN with PUSHGATE_BUILD=0), started by the harness as it starts
# the others.
source "$(dirname "$0")/common.sh"
command -v perf >/dev/null || apt-get install -y --no-install-recommends linux-perf >/dev/null
systems=${1:-mosquitto pushgate}
rounds=${2:-3}
rate=2000
window=14

one_run() {
    local system=$1 log=$work/$1.log
    local args=(--system "$system" --subscribers 1000 --messages 20000 --lat-messages $((rate * 20)) --rate "$rate")
    [ "$system" = pushgate ] && args+=(--server-cmd "$BIN serve --listen 127.0.0.1:{port} --data-dir {workdir}/data")
    # Debian's Python: the harness's pushgate client needs its h2 (python3-h2).
    /usr/bin/python3 ../shared/bench/run.py "${args[@]}" > "$log.json" 2> "$log" &
    local bench=$!
    # The latency phase follows the saturation phase's line.
    for _ in $(seq 1200); do grep -q "sat:" "$log" && break; sleep 0.1; done
    local pid
    pid=$(sed -n 's/.*pids=\[\([0-9]*\).*/\1/p' "$log" | head -1)
    sleep 2
    threads() { for t in /proc/"$pid"/task/*; do echo "${t##*/} $(tr ' ' _ < "$t/comm") $(awk '{print $14, $15}' "$t/stat")"; done; }
    threads > "$log.t0"
    perf stat -x, -e context-switches,raw_syscalls:sys_enter -p "$pid" -o "$log.stat" -- sleep "$window"
    threads > "$log.t1"
    wait "$bench"
    # By thread id, summed by name (a dispatch worker's is cut: "-qos.overcommit"; a thread that
    # started or ended within the window is left out).
    join <(sort "$log.t0") <(sort "$log.t1") | awk -v n=$((rate * window)) -v sys="$system" -v stat="$log.stat" '
        { u = $6 - $3; s = $7 - $4; U[$2] += u; S[$2] += s; tu += u; ts += s }
        END {
            while ((getline line < stat) > 0) { split(line, f, ","); if (f[3] == "context-switches") cs = f[1]; if (f[3] == "raw_syscalls:sys_enter") sc = f[1] }
            printf "%-10s user %6.1f  system %6.1f  total %6.1f us per message; syscalls %.2f, context switches %.2f per message\n", sys, tu * 1e4 / n, ts * 1e4 / n, (tu + ts) * 1e4 / n, sc / n, cs / n
            for (k in U) if (U[k] + S[k] > 0) printf "           %-18s user %6.1f  system %6.1f\n", k, U[k] * 1e4 / n, S[k] * 1e4 / n
        }'
    sed -n 's/^\[[0-9:]*\] lat: /           latency phase: /p' "$log"
}

for round in $(seq "$rounds"); do
    echo "round $round"
    for system in $systems; do one_run "$system"; done
done
