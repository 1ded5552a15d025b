# Shared by the Tests/deploy scripts (sourced). Podman on these machines needs two settings (see
# the README, "Deploy"): runc (crun refuses a host with hybrid cgroups) and default ulimits
# within the host's hard limits (root in CI has no CAP_SYS_RESOURCE to raise them).

deploy_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Exit status of a script that could not run its test here: distinct from pass (0) and fail
# (1), so .ci/run can name it in its summary instead of passing it silently.
DEPLOY_SKIP=77

deploy_log() { echo "[$(date +%H:%M:%S)] $(basename "$0"): $*" >&2; }
deploy_fail() { echo "$(basename "$0"): FAIL: $*" >&2; exit 1; }
deploy_skip() { echo "$(basename "$0"): SKIP: $*" >&2; exit "$DEPLOY_SKIP"; }

# Uses the caller's CONTAINERS_CONF if set, else one of our own for this host's quirks.
deploy_containers_conf() {
    if [[ -z ${CONTAINERS_CONF:-} ]]; then
        CONTAINERS_CONF=${TMPDIR:-/tmp}/pushgate-containers.conf
        cat > "$CONTAINERS_CONF" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
[network]
network_backend = "netavark"
CONF
        export CONTAINERS_CONF
    fi
}

# Skips (loudly) unless podman is installed and can run a container from the local base image.
deploy_require_podman() {
    command -v podman >/dev/null || deploy_skip "podman is not installed (apt-get install podman buildah runc); nothing was tested"
    deploy_containers_conf
    local out
    out=$(podman info 2>&1 >/dev/null) || deploy_skip "podman does not work here (CONTAINERS_CONF=$CONTAINERS_CONF): $out"
    podman image exists localhost/bookworm-minbase:latest \
        || deploy_skip "no localhost/bookworm-minbase image (run Tests/deploy/base-images.sh); nothing was tested"
    out=$(podman run --rm localhost/bookworm-minbase:latest true 2>&1) \
        || deploy_skip "podman cannot run a container here: $out"
}

# Polls COMMAND until it succeeds, at most SECONDS; no fixed sleep stands in for readiness.
deploy_wait_for() {
    local seconds=$1 what=$2; shift 2
    local deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || { echo "timed out after ${seconds}s waiting for $what" >&2; return 1; }
        sleep 0.2
    done
}

# Runs a command and prints how long it took (CI keeps these figures).
deploy_timed() {
    local what=$1; shift
    local start=$SECONDS
    "$@"
    local status=$?
    deploy_log "$what took $((SECONDS - start)) s (exit $status)"
    return "$status"
}
