#!/usr/bin/env bash
# Context switches and system calls per message at 2,000 messages/s for Mosquitto, Nginx+Nchan and
# Pushgate in one harness (../shared/bench's latency phase: 1,000 subscribers, one message per
# subscriber in turn), the reference for counts.sh's per-push figures:
#
#   bash Benchmarks/peer-counts.sh [SYSTEM...]      (mosquitto nchan pushgate by default)
#
# For each system, ../shared/bench/run.py starts the server (pinned to CPU 1, the load generator
# on CPU 0) and runs its phases; once its saturation phase has ended, `perf stat` counts the
# server's processes for 8 s of the latency phase (10 s at 2,000/s), and the counts are divided by
# the 16,000 messages sent in that window. Pushgate runs this checkout's release build (or BIN),
# durability fsync, devices acking each event, as counts.sh runs it; Mosquitto runs QoS 1 with no
# persistence, Nchan keeps messages in memory: neither writes to a disk, so their counts are a
# floor for the wake-ups of the network side alone.
source "$(dirname "$0")/common.sh"
command -v perf >/dev/null || apt-get install -y --no-install-recommends linux-perf >/dev/null
systems=("$@")
[ ${#systems[@]} -gt 0 ] || systems=(mosquitto nchan pushgate)
rate=2000 window=8
events=context-switches
for call in write writev sendto sendmsg read readv recvfrom recvmsg epoll_wait futex fdatasync; do events+=",syscalls:sys_enter_$call"; done

for system in "${systems[@]}"; do
    args=(--system "$system" --subscribers 1000 --messages 50000 --rate "$rate")
    [ "$system" != pushgate ] || args+=(--server-cmd "$BIN serve --listen 127.0.0.1:{port} --data-dir {workdir}/data --log-level error")
    /usr/bin/python3 ../shared/bench/run.py "${args[@]}" > "$work/$system.json" 2> "$work/$system.log" &
    harness=$!
    # The server's processes, then the end of the saturation phase: the latency phase follows.
    for _ in $(seq 600); do grep -q '^\[.*\] sat: ' "$work/$system.log" && break; sleep 0.1; done
    pids=$(sed -n 's/.*pids=\[\([0-9, ]*\)\].*/\1/p' "$work/$system.log" | head -1 | tr -d ' ')
    [ -n "$pids" ] || { echo "peer-counts.sh: $system's server pids not found in its log:" >&2; cat "$work/$system.log" >&2; exit 1; }
    perf stat -x, -e "$events" -p "$pids" -o "$work/$system.stat" -- sleep "$window"
    wait "$harness" || { echo "peer-counts.sh: $system's run failed:" >&2; tail -5 "$work/$system.log" >&2; exit 1; }
    awk -F, -v n=$((rate * window)) -v label="$system" 'NF > 3 && $1 ~ /^[0-9]+$/ {
        name = $3; sub(/^syscalls:sys_enter_/, "", name)
        if (!(name in total)) order[++names] = name
        total[name] += $1
    } END {
        printf "%-10s", label
        for (i = 1; i <= names; i++) if (total[order[i]] > 0) printf " %s %.2f", order[i], total[order[i]] / n
        printf "  (per message)\n"
    }' "$work/$system.stat"
done
