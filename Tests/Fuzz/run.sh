#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 60); exits 1 if any crashed,
# hung, leaked or failed a check, keeping the input that did it.
#
#   bash Tests/Fuzz/run.sh [SECONDS] [TARGET...]
#
# Targets: provider-request, provider-token, device-bodies, configuration, event-stream,
# http2-server, webpush-request (all when none is named). Each is Tests/Fuzz/<Name>Fuzzer.swift (with
# FuzzSupport.swift, and FuzzGateway.swift for those that need a gateway) and its seeds are
# Tests/Fuzz/Corpus/<target>/ (Tests/Fuzz/make-seeds.py writes the binary ones). Under
# OUT=$SCRATCH/fuzz-release: what libFuzzer learns goes to OUT/corpus/<target>/ (kept between
# runs, so a later run starts from it), crash, timeout and leak inputs to OUT/artifacts/<target>/,
# logs to OUT/logs/. Replay one input: `OUT/bin/<target> FILE`. SCRATCH is PUSHGATE_FUZZ_SCRATCH,
# default .build-fuzz. Each target runs with -timeout=10 (an input taking longer is a hang) and
# LeakSanitizer on; PUSHGATE_FUZZ_FLAGS adds libFuzzer flags (e.g. -runs=1000000 to stop at a
# million inputs, or at SECONDS, whichever comes first).
#
# How it is built (what works with Swift 6.3 on Linux; see deploy-notes.md, "Fuzzing"):
# - SwiftPM builds `pushgate` with PUSHGATE_SANITIZE=fuzzer (Package.swift): the package's own
#   library modules get libFuzzer's coverage and ASan, the dependencies none (their objects are
#   shared with a plain build in the same scratch path). The harnesses are not SwiftPM targets:
#   an executable built with -sanitize=fuzzer does not link (SwiftPM renames its entry point,
#   deploy-notes.md). The build's `pushgate` (ASan) is what Tests/Sanitizers/run-asan.sh drives.
# - Each harness is linked by `swiftc -sanitize=fuzzer,address -parse-as-library` against the
#   objects `pushgate` was linked from (bar its own), with the `-Xcc` module-map flags and the
#   -package-name SwiftPM compiled the package's modules with (read from its build manifest),
#   and the system libraries (nghttp2, OpenSSL, SQLite for GRDB). libFuzzer brings main(); lld,
#   because gold warns about every ASan symbol it cannot export.
# - Release configuration (-O, whole-module) with -enable-testing, so that the harnesses reach
#   internal API with `@testable import` (the HTTP/2 server handler, the payload scanner, the SSE
#   encoder) with no change to the production code's access levels; `package` API (JSONDocument)
#   through the package name. Preconditions and overflow checks stay, as in the shipped binary.
#   It runs many times the inputs a second of a debug build (event-stream: 429/s against 24/s).
#   PUSHGATE_FUZZ_CONFIGURATION=debug builds the debug configuration instead (assertions on):
#   with PUSHGATE_FUZZ_SCRATCH=.build after `swift build` (as CI does) only the package's own
#   modules are compiled again.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${1:-60}
shift || true
ALL_TARGETS=(provider-request provider-token device-bodies configuration event-stream http2-server webpush-request)
if (($#)); then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi

SCRATCH=${PUSHGATE_FUZZ_SCRATCH:-.build-fuzz}
CONFIGURATION=${PUSHGATE_FUZZ_CONFIGURATION:-release}
OUT=$SCRATCH/fuzz-$CONFIGURATION
mkdir -p "$OUT/bin" "$OUT/logs"
if ! command -v swift >/dev/null; then export PATH="$PATH:/opt/swift/usr/bin"; fi

source_files() {
    case $1 in
        provider-request) echo ProviderRequestFuzzer.swift ;;
        provider-token) echo ProviderTokenFuzzer.swift ;;
        device-bodies) echo DeviceBodiesFuzzer.swift FuzzGateway.swift ;;
        configuration) echo ConfigurationFuzzer.swift ;;
        event-stream) echo EventStreamFuzzer.swift ;;
        http2-server) echo HTTP2ServerFuzzer.swift FuzzGateway.swift ;;
        webpush-request) echo WebPushFuzzer.swift ;;
        *) echo "unknown target $1 (targets: ${ALL_TARGETS[*]})" >&2; return 1 ;;
    esac
}
for target in "${TARGETS[@]}"; do source_files "$target" >/dev/null; done

echo "=== building the code under test (swift build, $SCRATCH)"
build_start=$SECONDS
case $CONFIGURATION in
    debug) optimization=-Onone; release_flags=() ;;
    release) optimization=-O; release_flags=(-Xswiftc -enable-testing -Xswiftc -g) ;;
    *) echo "PUSHGATE_FUZZ_CONFIGURATION is debug or release" >&2; exit 1 ;;
esac
PUSHGATE_SANITIZE=fuzzer swift build -c "$CONFIGURATION" --scratch-path "$SCRATCH" --product pushgate \
    "${release_flags[@]}" >"$OUT/logs/swift-build.log" 2>&1 \
    || { tail -40 "$OUT/logs/swift-build.log"; exit 1; }
BUILD=$SCRATCH/x86_64-unknown-linux-gnu/$CONFIGURATION
# The flags SwiftPM compiled PushgateGateway with that a module importing it needs: -Xcc (C
# module maps and include paths) and -package-name (the harnesses use `package` API; the name
# comes from the checkout's directory).
mapfile -t FLAGS < <(python3 - "$SCRATCH/$CONFIGURATION.yaml" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("args:") and '"-module-name","PushgateGateway"' in line.replace(" ", ""):
        args = json.loads(line[len("args:"):])
        for i, arg in enumerate(args):
            if arg in ("-Xcc", "-package-name"):
                print(arg)
                print(args[i + 1])
        break
PY
)
((${#FLAGS[@]})) || { echo "no compiler flags for PushgateGateway found in $SCRATCH/$CONFIGURATION.yaml" >&2; exit 1; }
# libpq's include directory (pkg-config's, as SwiftPM reads it for CLibPQ), which the flags above
# lack: SwiftPM passes it where CLibPQ is imported, and the harnesses reach it through the store.
for flag in $(pkg-config --cflags-only-I libpq); do FLAGS+=(-Xcc "$flag"); done
# One path a line, quoted when it has a space.
mapfile -t OBJECTS < <(grep -v '/pushgate\.build/' "$BUILD/pushgate.product/Objects.LinkFileList" | sed "s/^'\\(.*\\)'\$/\\1/")

for target in "${TARGETS[@]}"; do
    read -r -a files <<<"$(source_files "$target")"
    echo "=== linking $target"
    swiftc -sanitize=fuzzer,address -parse-as-library -g "$optimization" -enable-testing -use-ld=lld \
        -I "$BUILD/Modules" "${FLAGS[@]}" \
        "${files[@]/#/$PWD/Tests/Fuzz/}" "$PWD/Tests/Fuzz/FuzzSupport.swift" "${OBJECTS[@]}" \
        -lnghttp2 -lssl -lcrypto -lsqlite3 -lpq \
        -o "$OUT/bin/$target" >"$OUT/logs/link-$target.log" 2>&1 \
        || { cat "$OUT/logs/link-$target.log"; exit 1; }
done
echo "build: $((SECONDS - build_start)) s"

failed=()
summary=()
for target in "${TARGETS[@]}"; do
    corpus=$OUT/corpus/$target
    artifacts=$OUT/artifacts/$target/
    mkdir -p "$corpus" "$artifacts"
    log=$OUT/logs/$target.log
    echo "=== fuzzing $target for $DURATION s"
    status=0
    # New inputs go to the first directory; the committed seeds are only read.
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 "$OUT/bin/$target" \
        -max_total_time="$DURATION" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$artifacts" ${PUSHGATE_FUZZ_FLAGS:-} \
        "$corpus" "Tests/Fuzz/Corpus/$target" >"$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if ((status == 0)); then
        result=ok
    else
        result="FAILED (exit $status): $artifacts$(ls -t "$artifacts" | sed -n 1p)"
        failed+=("$target")
        grep -a -E -m1 -A20 "ERROR: |fuzz check failed|Fatal error|deadly signal" "$log" || tail -20 "$log"
    fi
    summary+=("$(printf '%-17s %10s runs %7s exec/s  %s' "$target" "${runs:-?}" "${rate:-?}" "$result")")
done

printf '\n%s\n' "fuzzing, $DURATION s per target:"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
    echo "FAILED: ${failed[*]} (inputs kept in $OUT/artifacts/, logs in $OUT/logs/)"
    exit 1
fi
