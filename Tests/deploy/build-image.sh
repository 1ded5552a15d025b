#!/usr/bin/env bash
# Builds Deploy/container/Containerfile as localhost/pushgate:test with CI's local base images
# (Tests/deploy/base-images.sh) in place of swift:6.x-bookworm and debian:bookworm-slim. It is
# the real multi-stage build a user runs, with two podman build mounts that make it work offline:
#   /opt/swift                      the host's toolchain (the local builder image has none)
#   ~/.cache/org.swift.swiftpm      SwiftPM's repository cache: the dependencies are fetched
#                                   from it, GitHub being unreachable
# --format docker keeps HEALTHCHECK (OCI images have no such field).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
deploy_require_podman
podman image exists localhost/pushgate-swift-builder:latest || deploy_skip "no localhost/pushgate-swift-builder image (run Tests/deploy/base-images.sh)"

toolchain=${SWIFT_TOOLCHAIN:-/opt/swift}
[[ -x $toolchain/usr/bin/swift ]] || deploy_fail "no Swift toolchain at $toolchain (set SWIFT_TOOLCHAIN)"
swiftpm_cache=${SWIFTPM_CACHE:-$HOME/.cache/org.swift.swiftpm}
mkdir -p "$swiftpm_cache"

log=${TMPDIR:-/tmp}/pushgate-image-build.log
build() {
    podman build --format docker \
        -v "$toolchain:/opt/swift:ro" \
        -v "$swiftpm_cache:/root/.cache/org.swift.swiftpm" \
        --build-arg BUILDER_IMAGE=localhost/pushgate-swift-builder:latest \
        --build-arg RUNTIME_IMAGE=localhost/bookworm-minbase:latest \
        -f "$deploy_repo/Deploy/container/Containerfile" \
        -t localhost/pushgate:test "$deploy_repo" >"$log" 2>&1
}
deploy_timed "podman build (Containerfile, both stages)" build \
    || { tail -40 "$log" >&2; deploy_fail "podman build failed (log: $log)"; }
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' localhost/pushgate:test
