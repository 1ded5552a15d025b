# shellcheck shell=bash
# Shared by the Tests/deploy scripts (sourced). Podman on these machines needs two settings (see
# docs/testing.md, "What CI runs"): runc (crun refuses a host with hybrid cgroups) and default
# ulimits within the host's hard limits (root in CI has no CAP_SYS_RESOURCE to raise them).

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

# A push from a provider to a device agent, end to end, with the real `pushgate` clients:
#   deploy_push_end_to_end PUSHGATE BASE_URL CA_FILE TOPIC REGISTRATION_SECRET P8_KEY WORK_DIR
# The agent registers with the registration secret and opens its stream; `send` signs a token
# with the key (team TEAM123456, key id KEY1234567) and must be answered 200 `delivered`; the
# agent must then print the notification. The agent is stopped before returning.
deploy_push_end_to_end() {
    local pushgate=$1 base=$2 ca=$3 topic=$4 secret=$5 key=$6 work=$7
    local agent_out=$work/agent.out agent_err=$work/agent.err
    "$pushgate" agent --server "$base" --cacert "$ca" --registration-secret "$secret" \
        --identity "$work/device.json" --topic "$topic" >"$agent_out" 2>"$agent_err" &
    local agent=$! status=0
    _deploy_push "$pushgate" "$base" "$ca" "$topic" "$key" "$work" || status=$?
    kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null || true
    ((status == 0)) || { cat "$agent_out" "$agent_err" >&2; return "$status"; }
}

_deploy_push() {
    local pushgate=$1 base=$2 ca=$3 topic=$4 key=$5 work=$6
    deploy_wait_for 30 "the agent's connected line" grep -q '"type":"connected"' "$work/agent.out" \
        || { echo "the agent did not connect" >&2; return 1; }
    local token apns_id sent
    token=$(sed -n 's/.*"type":"registered".*"token":"\([0-9a-f]*\)".*/\1/p' "$work/agent.out" | head -1)
    [[ -n $token ]] || { echo "no device token in the agent's output" >&2; return 1; }
    apns_id=$(cat /proc/sys/kernel/random/uuid)
    sent=$("$pushgate" send --server "$base" --cacert "$ca" \
        --key "$key" --key-id KEY1234567 --team-id TEAM123456 --token-cache "$work/token-cache" \
        --token "$token" --topic "$topic" --apns-id "$apns_id" '{"aps":{"alert":"deploy test"}}' 2>&1) \
        || { echo "send failed: $sent" >&2; return 1; }
    grep -q '^status: 200' <<<"$sent" && grep -q '^disposition: delivered' <<<"$sent" \
        || { echo "send was answered: $sent" >&2; return 1; }
    deploy_wait_for 30 "the notification at the agent" grep -q "\"apnsId\":\"$apns_id\"" "$work/agent.out" \
        || { echo "the notification $apns_id did not reach the agent" >&2; return 1; }
    deploy_log "push $apns_id: send answered 200 delivered, the agent printed it"
}
