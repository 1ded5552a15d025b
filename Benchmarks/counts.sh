#!/usr/bin/env bash
# Wake-ups and syscalls per push at a moderate rate: context switches, write/read/epoll_wait,
# futex, fdatasync, pwrite64 and fcntl (SQLite's WAL locks) per accepted push, and per commit
# (pwrite64 per commit is twice the WAL frames a commit writes); context switches per push by
# thread (threads under 0.01 left out); then CPU per push of the event
# loop and of the other threads (the store's writer), by `perf stat` on the gateway over a
# 10 s window in the middle of a `pushgate bench` run (1,000 devices acking 50 ms after each
# event, as ../shared/bench's devices do). The gateway runs on CPU 1 and the bench on CPU 0, as
# in ../shared/bench. Counts, not times: they hold up on a noisy machine better than CPU figures
# (the CPU split by thread is a time: on these VMs one build's writer gave 47 and 73 us per push).
#
#   bash Benchmarks/counts.sh [RATE [serve flags...]]      (2,000 pushes/s by default)
source "$(dirname "$0")/common.sh"
command -v perf >/dev/null || apt-get install -y --no-install-recommends linux-perf >/dev/null
rate=${1:-2000}
shift || true
as_gateway=(taskset -c 1 "${as_gateway[@]}")
start_server "$@"
taskset -c 0 "$BIN" bench --server "$url" --devices 1000 --providers 2 --rate "$rate" --pushes $((rate * 30)) --ack-delay 50 > "$work/bench.out" 2> "$work/bench.err" &
bench=$!
# The window opens once the devices are connected and pushes flow.
for _ in $(seq 1200); do [ "$(received)" -gt $((rate * 2)) ] && break; sleep 0.1; done
commits() { curl -s "$url/metrics" | awk '$1 ~ /^pushgate_store_commit_batches_count/ {s += $2} END {print int(s)}'; }
before=$(received)
commits_before=$(commits)
events=task-clock,context-switches
for call in write read epoll_wait futex fdatasync pwrite64 fcntl; do events+=",syscalls:sys_enter_$call"; done
# One line per thread and event: "name-tid,count,unit,event,...": the event loops are NIO-ELT-*.
perf stat --per-thread -x, -e "$events" -p "$server" -o "$work/stat" -- sleep 10
after=$(received)
n=$((after - before)) commits=$(($(commits) - commits_before))
awk -F, -v n=$n -v c=$commits 'NF > 3 && $2 ~ /^[0-9.]+$/ {
    name = $4; sub(/^syscalls:sys_enter_/, "", name)
    if (name == "task-clock") { if ($1 ~ /^NIO-ELT/) loop += $2; else other += $2; next }
    if (name == "context-switches") {
        # By thread, without its id: the event loops, the store writer, the others.
        thread = $1; sub(/-[0-9]+$/, "", thread)
        if (!(thread in switches)) threads[++nthreads] = thread
        switches[thread] += $2
    }
    if (!(name in total)) order[++names] = name
    total[name] += $2
} END {
    for (i = 1; i <= names; i++) printf "%s %.2f  ", order[i], total[order[i]] / n
    printf "(per push, %d pushes)\n", n
    printf "context switches per push by thread:"
    for (i = 1; i <= nthreads; i++) if (switches[threads[i]] >= n / 100) printf " %s %.2f", threads[i], switches[threads[i]] / n
    printf "\n"
    printf "per commit: context-switches %.2f  pwrite64 %.2f  fdatasync %.2f  (%d commits, %.2f pushes each)\n", total["context-switches"] / c, total["pwrite64"] / c, total["fdatasync"] / c, c, n / c
    printf "CPU: event loop %.1f us per push; other threads (the store writer) %.1f us per push, %.1f us per commit\n", loop * 1000 / n, other * 1000 / n, other * 1000 / c
}' "$work/stat"
wait "$bench" || true
bench_clean < "$work/bench.out"
printf "delivery p99 %s ms, p99.9 %s ms (the whole run)\n" "$(bench_json deliveryP99Ms < "$work/bench.out")" "$(bench_json deliveryP999Ms < "$work/bench.out")"
stop_server
