#!/usr/bin/env bash
# Smoke test of the container image (Deploy/container/Containerfile), end to end:
#   build it (Tests/deploy/build-image.sh; set PUSHGATE_IMAGE to test an image built already),
#   run it with its default command (TLS on 2197, loopback admin listener) and a mounted
#   configuration, as its own non-root user, and check that uid inside; push a notification
#   from a provider (`pushgate send`, token auth) to a device agent (`pushgate agent`) through
#   the published port; scrape /metrics with the admin token; run the HEALTHCHECK; then
#   `podman stop` (SIGTERM) and require exit status 0.
# The clients are the image's own binary, copied out, run on the host.
# Exits 77 with a SKIP line when podman cannot run here, so that is never silent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
deploy_require_podman

image=${PUSHGATE_IMAGE:-}
if [[ -z $image ]]; then
    "$deploy_repo/Tests/deploy/build-image.sh"
    image=localhost/pushgate:test
fi
command -v curl >/dev/null || deploy_fail "curl is not installed"
command -v openssl >/dev/null || deploy_fail "openssl is not installed"

work=$(mktemp -d)
name=pushgate-smoke-$$
volume=pushgate-smoke-data-$$
cleanup() {
    podman rm -f -v -t 0 "$name" >/dev/null 2>&1 || true
    podman volume rm -f "$volume" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# podman schedules HEALTHCHECKs with systemd timers and logs an error on each container start and
# removal when PID 1 is not systemd; the check is run by hand below instead, so only that one
# message is dropped.
podman_() { podman "$@" 2> >(grep -v 'unable to get systemd connection' >&2); }

# The clients: the binary the image holds.
podman_ create --name "$name-copy" "$image" >/dev/null
podman cp "$name-copy:/usr/local/bin/pushgate" "$work/pushgate"
podman_ rm -v "$name-copy" >/dev/null
pushgate=$work/pushgate

# What a user mounts at /etc/pushgate: TLS files (the test CA's localhost certificate, which
# names 127.0.0.1), a provider key and the configuration file naming it. Readable by the
# image's user (uid 10001), which owns none of them.
fixtures=$deploy_repo/Tests/Fixtures/tls
etc=$work/etc
mkdir -p "$etc/tls"
cp "$fixtures/server.pem" "$etc/tls/tls.crt"
cp "$fixtures/server-key.pem" "$etc/tls/tls.key"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$etc/AuthKey_KEY1234567.p8" 2>/dev/null
topic=com.example.smoke
registration_secret=smoke-registration-secret-0123456789
admin_token=smoke-admin-token-0123456789
cat > "$etc/pushgate.json" <<JSON
{"providerKeys": [{"teamId": "TEAM123456", "keyId": "KEY1234567", "privateKeyFile": "AuthKey_KEY1234567.p8",
                   "topics": ["$topic"], "environment": "production"}],
 "environment": "production",
 "registrationSecret": "$registration_secret"}
JSON
chmod -R a+rX "$etc"

deploy_log "starting $image (default command)"
podman volume create "$volume" >/dev/null
podman_ run -d --name "$name" -p 127.0.0.1::2197 \
    -v "$etc:/etc/pushgate:ro" -v "$volume:/var/lib/pushgate" \
    -e PUSHGATE_ADMIN_TOKEN="$admin_token" \
    "$image" >/dev/null
port=$(podman port "$name" 2197/tcp | head -1 | sed 's/.*://')
[[ -n $port ]] || deploy_fail "no published port for 2197"
base=https://127.0.0.1:$port
curl_tls=(curl -sS --max-time 5 --cacert "$fixtures/ca.pem")

ready() { [[ $("${curl_tls[@]}" -o /dev/null -w '%{http_code}' "$base/readyz") == 200 ]]; }
started=$SECONDS
running() { [[ $(podman inspect -f '{{.State.Running}}' "$name") == true ]]; }
# Ready, or gone (then there is no point waiting out the timeout).
settled() { ready || ! running; }
if ! deploy_wait_for 60 "/readyz on $base" settled || ! ready; then
    podman logs "$name" >&2 || true
    deploy_fail "the gateway did not become ready (container: $(podman inspect -f '{{.State.Status}} exit={{.State.ExitCode}}' "$name"))"
fi
deploy_log "ready after $((SECONDS - started)) s on $base"
# What probes send (Kubernetes' httpGet with scheme HTTPS): HTTP/1.1 over TLS, with ALPN or
# without it, besides curl's default (ALPN h2).
for variant in "--http1.1" "--http1.1 --no-alpn" "--http2"; do
    # shellcheck disable=SC2086
    code=$("${curl_tls[@]}" $variant -o /dev/null -w '%{http_code}' "$base/healthz")
    [[ $code == 200 ]] || deploy_fail "/healthz with curl $variant answered $code"
done

# Its own user: the image's USER, and the gateway process (PID 1) really runs as it.
uid=$(podman exec "$name" id -u)
process_uid=$(podman exec "$name" awk '/^Uid:/ { print $2 }' /proc/1/status)
[[ $uid != 0 && $process_uid != 0 ]] || deploy_fail "runs as root (exec uid $uid, PID 1 uid $process_uid)"
owner=$(podman exec "$name" stat -c %u /var/lib/pushgate)
[[ $owner == "$process_uid" ]] || deploy_fail "the data volume belongs to uid $owner, the gateway runs as $process_uid"
deploy_log "runs as uid $process_uid, owns its data volume"

# A device agent (registration secret) and a provider (ES256 token from the configured key).
deploy_push_end_to_end "$pushgate" "$base" "$fixtures/ca.pem" "$topic" "$registration_secret" \
    "$etc/AuthKey_KEY1234567.p8" "$work" || deploy_fail "no push from provider to agent through the container"

# /metrics off loopback needs the admin token (from PUSHGATE_ADMIN_TOKEN); without it, 401.
unauthorized=$("${curl_tls[@]}" -o /dev/null -w '%{http_code}' "$base/metrics")
[[ $unauthorized == 401 ]] || deploy_fail "/metrics without the token answered $unauthorized, not 401"
metrics=$("${curl_tls[@]}" -H "authorization: bearer $admin_token" "$base/metrics")
grep -Eq '^pushgate_notifications_received_total\{push_type="alert"\} 1$' <<<"$metrics" \
    || deploy_fail "/metrics does not count the push: $(grep received_total <<<"$metrics")"
grep -Eq '^pushgate_notifications_delivered_total\{delivery="immediate"\} 1$' <<<"$metrics" \
    || deploy_fail "/metrics does not count the delivery: $(grep delivered_total <<<"$metrics")"
deploy_log "/metrics: 401 without the token; received and delivered counted with it"

# A backup of the running gateway, taken in the container as its user (what `kubectl exec`
# does), restored on the host by the image's own binary.
backup=$(podman exec "$name" pushgate backup --data-dir /var/lib/pushgate /var/lib/pushgate/backup.sqlite) \
    || deploy_fail "pushgate backup in the running container failed"
grep -q ': 1 device, 1 registration, ' <<<"$backup" || deploy_fail "the backup does not hold the device: $backup"
podman cp "$name:/var/lib/pushgate/backup.sqlite" "$work/backup.sqlite"
restored=$("$pushgate" restore --data-dir "$work/restored" "$work/backup.sqlite") || deploy_fail "pushgate restore of the container's backup failed"
deploy_log "backup in the running container, restored on the host: ${restored#restored }"

# The image's HEALTHCHECK, run now rather than waiting for its interval.
[[ $(podman image inspect -f '{{.HealthCheck.Test}}' "$image") == *pushgate-healthcheck* ]] \
    || deploy_fail "the image has no HEALTHCHECK (built without --format docker?)"
podman healthcheck run "$name" >/dev/null 2>&1 || deploy_fail "HEALTHCHECK failed: $(podman exec "$name" /usr/local/bin/pushgate-healthcheck 2>&1)"
deploy_log "HEALTHCHECK passes"

stop_started=$SECONDS
# The default stop timeout (10 s), as a user gets it: SIGKILL after it would show as exit 137.
podman_ stop "$name" >/dev/null
exit_code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
[[ $exit_code == 0 ]] || { podman logs "$name" 2>&1 | tail -20 >&2; deploy_fail "exit status $exit_code after SIGTERM"; }
deploy_log "podman stop (SIGTERM): exit 0 after $((SECONDS - stop_started)) s"
echo "container-smoke: passed"
