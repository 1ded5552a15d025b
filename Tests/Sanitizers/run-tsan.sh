#!/usr/bin/env bash
# The in-process test suite under ThreadSanitizer: a TSan build of the package and its tests
# (system malloc: TSan brings its own), then every suite but the CLI ones (those run the
# gateway binary in processes of their own), one test at a time: TSan slows the code five to
# fifteen times, and run in parallel on two cores the tests' servers time out. Exits non-zero
# when TSan reports anything; test failures are listed too (under TSan, a test that moves
# megabytes byte by byte can pass its time limit without a race).
#
#   bash Tests/Sanitizers/run-tsan.sh [FILTER]
set -euo pipefail
cd "$(dirname "$0")/../.."
scratch=.build-tsan
export PUSHGATE_SYSTEM_MALLOC=1
swift build --build-tests --sanitize=thread --scratch-path "$scratch" >/dev/null
log=$(mktemp)
export TSAN_OPTIONS="halt_on_error=0 suppressions=$PWD/Tests/Sanitizers/tsan.supp"
filter=()
if [ -n "${1:-}" ]; then filter=(--filter "$1"); fi
status=0
swift test --skip-build --sanitize=thread --scratch-path "$scratch" --skip PushgateCLITests --no-parallel "${filter[@]}" > "$log" 2>&1 || status=$?
grep -E "^(✔|✘) Test run with" "$log" || true
grep -E "^✘ Test .* failed after" "$log" || true
reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
echo "ThreadSanitizer reports: $reports (test run exit $status; full log: $log)"
if [ "$reports" != 0 ]; then
    grep -A12 "WARNING: ThreadSanitizer" "$log" | head -80
    exit 1
fi
