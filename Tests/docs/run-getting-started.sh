#!/usr/bin/env bash
# Runs every command of the fenced ```sh blocks of a documentation page (docs/getting-started.md
# by default), in order, in one bash in a new temporary directory, with the pushgate binary CI
# has just built first on PATH; fails on the first command that fails, naming it and its line
# in the page, and prints the output so far.
#
#   bash Tests/docs/run-getting-started.sh [PAGE]
#   PUSHGATE_BIN=.build/release/pushgate DOCS_TIME_LIMIT=300 bash Tests/docs/run-getting-started.sh
#
# As root (CI), the commands run as `nobody`, as production runs the gateway, in a network
# namespace of their own: the page uses the gateway's default port, 2197, which another gateway
# on the machine may hold. Not root: as the caller, in a user and network namespace when the
# kernel allows one, else on the machine's loopback (then port 2197 must be free).
# The whole run has DOCS_TIME_LIMIT seconds (180 by default); whatever it started in the
# background is killed at its end.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
page=${1:-$repo/docs/getting-started.md}
binary=${PUSHGATE_BIN:-$repo/.build/debug/pushgate}
limit=${DOCS_TIME_LIMIT:-180}

[[ -f $page ]] || { echo "FAIL: no page $page" >&2; exit 1; }
[[ -x $binary ]] || { echo "FAIL: no pushgate binary at $binary (swift build first, or set PUSHGATE_BIN)" >&2; exit 1; }

work=$(mktemp -d /tmp/pushgate-docs-XXXXXX)
cleanup() {
    if [[ -n ${run_pid:-} ]]; then kill -KILL -- "-$run_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/bin" "$work/tour"
# A copy the unprivileged user can run (a clone under root's home is out of its reach).
cp "$binary" "$work/bin/pushgate"
chmod 0755 "$work" "$work/bin" "$work/bin/pushgate"

# The script: each block's commands as they stand, each block preceded by a note of its line in
# the page, so that a failure names the command and where the page has it.
script=$work/tour.sh
{
    echo 'set -eo pipefail'
    echo 'block_line=0'
    # shellcheck disable=SC2016  # expanded by the tour's shell, not this one
    echo 'trap '\''status=$?; echo "FAIL: exit status $status from: $BASH_COMMAND (the block at line $block_line of the page)" >&2; exit $status'\'' ERR'
    echo 'trap '\''exit 143'\'' TERM'
    awk '
        /^```sh[[:space:]]*$/ { inside = 1; print "block_line=" NR + 1; next }
        inside && /^```[[:space:]]*$/ { inside = 0; next }
        inside { print }
        END { if (inside) { print "echo \"FAIL: unterminated sh block\" >&2; exit 1" } }
    ' "$page"
} >"$script"
blocks=$(grep -c '^block_line=' "$script" || true)
if [[ $blocks -lt 2 ]]; then
    echo "FAIL: $page has $((blocks - 1)) sh blocks; expected the tour's" >&2
    exit 1
fi
echo "running $((blocks - 1)) sh blocks of $page with $binary"

environment=(env -i "PATH=$work/bin:/usr/local/bin:/usr/bin:/bin" "HOME=$work/tour" "LANG=C.UTF-8" "TERM=dumb")
tour=(bash "$script")
if [[ $(id -u) -eq 0 ]]; then
    chown -R nobody:nogroup "$work/tour"
    chmod 0644 "$script"
    unprivileged=(setpriv --reuid=nobody --regid=nogroup --clear-groups "${environment[@]}" "${tour[@]}")
    if unshare --net true 2>/dev/null; then
        runner=(unshare --net sh -c 'ip link set lo up && cd "$1" && shift && exec "$@"' sh "$work/tour"
            "${unprivileged[@]}")
    else
        echo "note: no network namespace here; the tour uses this machine's 127.0.0.1:2197"
        runner=(sh -c 'cd "$1" && shift && exec "$@"' sh "$work/tour" "${unprivileged[@]}")
    fi
elif unshare --user --map-root-user --net true 2>/dev/null; then
    runner=(unshare --user --map-root-user --net sh -c 'ip link set lo up && cd "$1" && shift && exec "$@"' sh
        "$work/tour" "${environment[@]}" "${tour[@]}")
else
    echo "note: no network namespace here; the tour uses this machine's 127.0.0.1:2197"
    runner=(sh -c 'cd "$1" && shift && exec "$@"' sh "$work/tour" "${environment[@]}" "${tour[@]}")
fi

# Its own session, so that whatever the tour left running is found and killed by its group.
status=0
setsid timeout --kill-after=10 "$limit" "${runner[@]}" >"$work/output" 2>&1 &
run_pid=$!
wait "$run_pid" || status=$?
cat "$work/output"
if [[ $status -eq 124 || $status -eq 137 ]]; then
    echo "FAIL: the tour took longer than $limit s (DOCS_TIME_LIMIT)" >&2
    exit 1
elif [[ $status -ne 0 ]]; then
    echo "FAIL: the tour of $page failed (exit status $status); its output is above" >&2
    exit 1
fi
echo "OK: every command of the $((blocks - 1)) sh blocks of $page ran"
