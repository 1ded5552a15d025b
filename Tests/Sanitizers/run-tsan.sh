#!/usr/bin/env bash
# The in-process test suite under ThreadSanitizer: the package's modules and tests built with
# TSan (PUSHGATE_SANITIZE=thread, Package.swift: the dependencies are not instrumented, and the
# system malloc is linked), then every suite but the CLI ones (those run the gateway binary in
# processes of their own; Tests/Sanitizers/run-gateway.sh thread runs that under load), one test
# at a time: TSan slows the code several times, and run in parallel on two cores the tests'
# servers time out. Exits non-zero when TSan reports anything; test failures are listed too.
#
#   bash Tests/Sanitizers/run-tsan.sh [FILTER]
set -euo pipefail
cd "$(dirname "$0")/../.."
scratch=${PUSHGATE_SANITIZE_SCRATCH:-.build-thread}
export PUSHGATE_SANITIZE=thread
swift build --build-tests --scratch-path "$scratch" >/dev/null
log=$(mktemp)
export TSAN_OPTIONS="halt_on_error=0 suppressions=$PWD/Tests/Sanitizers/tsan.supp"
filter=()
if [ -n "${1:-}" ]; then filter=(--filter "$1"); fi
status=0
swift test --skip-build --scratch-path "$scratch" --skip PushgateCLITests --no-parallel "${filter[@]}" > "$log" 2>&1 || status=$?
grep -E "^(✔|✘) Test run with" "$log" || true
grep -E "^✘ Test .* failed after" "$log" || true
reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
echo "ThreadSanitizer reports: $reports (test run exit $status; full log: $log)"
if [ "$reports" != 0 ]; then
    grep -A12 "WARNING: ThreadSanitizer" "$log" | head -80
    exit 1
fi
