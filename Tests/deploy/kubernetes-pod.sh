#!/usr/bin/env bash
# Runs the Kubernetes StatefulSet's container as its manifest says, without a cluster: podman with
# the pod's args, env, user and groups, read-only root file system, ALL capabilities dropped, no
# new privileges, memory limit, the ConfigMap and Secret files mounted where the manifest mounts
# them (test values for the Secret's placeholders) and a fresh volume as the claim. Then what the
# cluster would do: the kubelet's probes (/healthz, /readyz over HTTPS, certificate unchecked),
# a push from a provider to a device agent through the Service port, the ServiceMonitor's scrape
# (bearer admin token), and a stop within terminationGracePeriodSeconds with exit status 0.
# Exits 77 with a SKIP line when podman cannot run here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
deploy_require_podman
image=${PUSHGATE_IMAGE:-localhost/pushgate:test}
podman image exists "$image" || deploy_skip "no image $image (run Tests/deploy/build-image.sh first)"
manifests=$deploy_repo/Deploy/kubernetes
fixtures=$deploy_repo/Tests/Fixtures/tls

work=$(mktemp -d)
chmod 0755 "$work"
name=pushgate-k8s-$$
podman_() { podman "$@" 2> >(grep -v 'unable to get systemd connection' >&2); }
cleanup() {
    podman rm -f -v -t 0 "$name" >/dev/null 2>&1 || true
    podman volume rm -f "$name-data" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# Test values for what secret.yaml holds as placeholders, and the user's pushgate-tls Secret.
mkdir -p "$work/secrets" "$work/tls" "$work/client"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/secrets/AuthKey_KEY1234567.p8" 2>/dev/null
printf 'k8s-registration-secret-0123456789' > "$work/secrets/registration-secret"
printf 'k8s-admin-token-0123456789\n' > "$work/secrets/admin-token"
cp "$fixtures/server.pem" "$work/tls/tls.crt"
cp "$fixtures/server-key.pem" "$work/tls/tls.key"
cp "$fixtures/ca.pem" "$work/tls/ca.crt"

mapfile -d '' run_args < <(python3 "$deploy_repo/Tests/deploy/kubernetes-pod.py" "$manifests" "$work" "$image" "$name")
deploy_log "podman ${run_args[*]}"
podman_ "${run_args[@]}" >/dev/null

podman create --name "$name-copy" "$image" >/dev/null 2>&1
podman cp "$name-copy:/usr/local/bin/pushgate" "$work/client/pushgate"
podman rm -v "$name-copy" >/dev/null 2>&1

port=$(podman port "$name" 2197/tcp | head -1 | sed 's/.*://')
base=https://127.0.0.1:$port
probe() { [[ $(curl -sS -k --max-time 3 -o /dev/null -w '%{http_code}' "$base$1") == 200 ]]; }
running() { [[ $(podman inspect -f '{{.State.Running}}' "$name") == true ]]; }
# Ready, or gone (then there is no point waiting out the timeout).
settled() { probe /readyz || ! running; }
if ! deploy_wait_for 60 "the readiness probe" settled || ! probe /readyz; then
    podman logs "$name" >&2 || true
    deploy_fail "not ready (container: $(podman inspect -f '{{.State.Status}} exit={{.State.ExitCode}}' "$name"))"
fi
probe /healthz || deploy_fail "the liveness probe (/healthz) failed"
deploy_log "probes pass: /readyz and /healthz over HTTPS"

[[ $(podman exec "$name" awk '/^Uid:/ { print $2 }' /proc/1/status) == 10001 ]] || deploy_fail "not running as uid 10001"
[[ $(podman exec "$name" awk '/^CapEff:/ { print $2 }' /proc/1/status) == 0000000000000000 ]] || deploy_fail "has capabilities"
if podman exec "$name" sh -c 'echo x > /usr/local/bin/probe' 2>/dev/null; then deploy_fail "the root file system is writable"; fi
podman exec "$name" test -s /var/lib/pushgate/pushgate.sqlite || deploy_fail "no store in the claim's volume"
deploy_log "uid 10001, no capabilities, read-only root, store on the claim"

deploy_push_end_to_end "$work/client/pushgate" "$base" "$fixtures/ca.pem" com.example.app \
    "$(cat "$work/secrets/registration-secret")" "$work/secrets/AuthKey_KEY1234567.p8" "$work/client" \
    || deploy_fail "no push from provider to agent through the pod's port"

token=$(tr -d '[:space:]' < "$work/secrets/admin-token")
metrics=$(curl -sS --max-time 5 --cacert "$fixtures/ca.pem" -H "authorization: bearer $token" "$base/metrics")
grep -q '^pushgate_build_info' <<<"$metrics" || deploy_fail "the ServiceMonitor's scrape got no metrics: $(head -3 <<<"$metrics")"
deploy_log "/metrics answers the ServiceMonitor's bearer token"

grace=$(python3 -c 'import sys, yaml; print(next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])' "$manifests/statefulset.yaml")
podman_ stop -t "$grace" "$name" >/dev/null
exit_code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
[[ $exit_code == 0 ]] || { podman logs "$name" 2>&1 | tail -20 >&2; deploy_fail "exit status $exit_code after SIGTERM"; }
deploy_log "stopped within terminationGracePeriodSeconds ($grace s): exit 0"
echo "kubernetes-pod: passed"
