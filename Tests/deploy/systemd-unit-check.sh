#!/usr/bin/env bash
# Offline checks of Deploy/systemd/pushgate.service (PID 1 here need not be systemd):
#   - `systemd-analyze verify` must print nothing: it exits 0 even on unknown keys and bad
#     values, so any output at all is a failure;
#   - `systemd-analyze security --offline=true` must score at most 2.5. Its --threshold takes
#     tenths in systemd 252 (`--threshold=2.5` is refused: "Failed to parse threshold"), so 25;
#     the printed score is checked as well, in case a later systemd reads the number otherwise.
# Both read the unit from a scratch root holding the distribution's units, the unit and an
# executable at ExecStart's path (verify checks that the binary exists).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
unit=$repo/Deploy/systemd/pushgate.service
threshold_tenths=25

command -v systemd-analyze >/dev/null || { echo "systemd-unit-check: FAIL: systemd-analyze not installed (apt-get install systemd)" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system" "$root/usr/local/bin"
cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp "$unit" "$root/etc/systemd/system/pushgate.service"
# The real binary when one is given, else any executable: verify only needs the path to exist.
if [[ -n ${PUSHGATE_BINARY:-} ]]; then cp "$PUSHGATE_BINARY" "$root/usr/local/bin/pushgate"
else printf '#!/bin/sh\n' > "$root/usr/local/bin/pushgate"; fi
chmod 0755 "$root/usr/local/bin/pushgate"

status=0
verify_out=$(systemd-analyze verify --root="$root" pushgate.service 2>&1) || status=$?
if [[ -n $verify_out || $status -ne 0 ]]; then
    echo "systemd-unit-check: FAIL: systemd-analyze verify (exit $status) said:" >&2
    echo "$verify_out" >&2
    exit 1
fi
echo "systemd-unit-check: verify: no output, exit 0"

status=0
security_out=$(systemd-analyze security --offline=true --root="$root" --threshold="$threshold_tenths" pushgate.service 2>&1) || status=$?
score=$(sed -n 's/.*Overall exposure level for pushgate.service: \([0-9.]*\).*/\1/p' <<<"$security_out")
if [[ $status -ne 0 || -z $score ]] || ! awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }'; then
    echo "$security_out" >&2
    echo "systemd-unit-check: FAIL: security exposure ${score:-unknown}, more than 2.5 (exit $status)" >&2
    exit 1
fi
echo "systemd-unit-check: security: exposure $score (at most 2.5), exit 0"
