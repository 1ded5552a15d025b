#!/usr/bin/env bash
# Makes the local images the deploy tests build on, since no registry is reachable in CI:
#   localhost/bookworm-minbase        debootstrap minbase bookworm (stands in for debian:bookworm-slim)
#   localhost/pushgate-swift-builder  + what the host's Swift toolchain needs (stands in for
#                                     swift:6.x-bookworm; the toolchain is mounted at build time)
#   localhost/bookworm-systemd        + systemd as PID 1 and the gateway's run-time libraries
# An image that exists already is kept (delete it to remake it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v podman >/dev/null || deploy_skip "podman is not installed (apt-get install podman buildah runc debootstrap)"
deploy_containers_conf

if ! podman image exists localhost/bookworm-minbase:latest; then
    command -v debootstrap >/dev/null || deploy_skip "debootstrap is not installed"
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    log=$root.log
    deploy_timed "debootstrap minbase bookworm from $mirror" \
        bash -c 'debootstrap --variant=minbase bookworm "$1" "$2" >"$3" 2>&1' _ "$root" "$mirror" "$log" \
        || { tail -20 "$log" >&2; deploy_fail "debootstrap failed"; }
    rm -f "$log"
    deploy_timed "podman import" \
        bash -c 'tar -C "$1" -c . | podman import -q - localhost/bookworm-minbase:latest >/dev/null' _ "$root"
    rm -rf "$root"
fi

if ! podman image exists localhost/pushgate-swift-builder:latest; then
    deploy_timed "builder image" podman build -q -f "$deploy_repo/Tests/deploy/builder.Containerfile" \
        -t localhost/pushgate-swift-builder:latest "$deploy_repo/Tests/deploy" >/dev/null
fi

if ! podman image exists localhost/bookworm-systemd:latest; then
    deploy_timed "systemd image" podman build -q -f "$deploy_repo/Tests/deploy/systemd.Containerfile" \
        -t localhost/bookworm-systemd:latest "$deploy_repo/Tests/deploy" >/dev/null
fi
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'bookworm-minbase|pushgate-swift-builder|bookworm-systemd'
