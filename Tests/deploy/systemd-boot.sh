#!/usr/bin/env bash
# Boots Deploy/systemd/pushgate.service under a real systemd (PID 1 of a container: the host's
# PID 1 need not be systemd), with its whole sandbox, and pushes a notification through it:
#   the unit as shipped (loopback 2197, User=pushgate, StateDirectory): systemctl start, wait
#   for /readyz, a device agent and a provider push, the notification arrives; the gateway runs
#   as pushgate with only CAP_NET_BIND_SERVICE; then a drop-in adds a listener on port 443 (the
#   capability the unit grants) and `systemctl restart` shows it bound; `systemctl stop` must end
#   with exit status 0 and Result=success (SIGTERM drains, no SIGKILL).
# The gateway binary comes from the image Tests/deploy/build-image.sh built (PUSHGATE_IMAGE), or
# from PUSHGATE_BINARY (a host build, e.g. .build/release/pushgate, to try the unit without
# building the image). Exits 77 with a SKIP line when podman cannot run here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
deploy_require_podman
image=${PUSHGATE_IMAGE:-localhost/pushgate:test}
binary=${PUSHGATE_BINARY:-}
if [[ -z $binary ]]; then
    podman image exists "$image" || deploy_skip "no image $image (run Tests/deploy/build-image.sh first, or set PUSHGATE_BINARY)"
fi
podman image exists localhost/bookworm-systemd:latest || deploy_skip "no localhost/bookworm-systemd image (run Tests/deploy/base-images.sh)"

work=$(mktemp -d)
name=pushgate-systemd-$$
cleanup() {
    [[ -n ${KEEP:-} ]] || podman rm -f -v -t 0 "$name" >/dev/null 2>&1 || true
    podman rmi -f "localhost/pushgate-systemd-test:$$" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# Installed as the unit's header says: binary, system user, unit file.
cp "$deploy_repo/Deploy/systemd/pushgate.service" "$work/"
run_options=()
if [[ -n $binary ]]; then
    cp "$binary" "$work/pushgate"
    copy_binary="COPY pushgate /usr/local/bin/pushgate"
    # A build without --static-swift-stdlib loads the Swift runtime from the toolchain (its
    # RUNPATH): lend the container that directory, read-only.
    runtime=$(ldd "$binary" | sed -n 's|.*=> \(.*\)/libswiftCore.so.*|\1|p')
    [[ -n $runtime ]] && run_options+=(-v "$runtime:$runtime:ro")
else
    copy_binary="COPY --from=$image /usr/local/bin/pushgate /usr/local/bin/pushgate"
fi
cat > "$work/Containerfile" <<CONTAINERFILE
FROM localhost/bookworm-systemd:latest
$copy_binary
RUN useradd --system --home-dir /var/lib/pushgate --shell /usr/sbin/nologin pushgate
COPY pushgate.service /etc/systemd/system/pushgate.service
CONTAINERFILE
deploy_timed "systemd test image" podman build -q -t "localhost/pushgate-systemd-test:$$" "$work" >/dev/null

# --privileged, so that systemd can build the whole sandbox as on a host: with podman's default
# capabilities it skips PrivateIPC= and ProtectHostname= ("... is configured, but ... ignoring"),
# and the unit would be tested with less than it asks for. The journal check below fails on
# any such line.
podman run -d --name "$name" --systemd=always --privileged "${run_options[@]}" "localhost/pushgate-systemd-test:$$" >/dev/null
inside() { podman exec "$name" "$@"; }
booted() { [[ $(inside systemctl is-system-running 2>/dev/null) =~ ^(running|degraded)$ ]]; }
deploy_wait_for 60 "systemd to boot" booted || deploy_fail "systemd did not boot: $(inside systemctl is-system-running 2>&1)"

started=$SECONDS
inside systemctl start pushgate || { inside journalctl -u pushgate --no-pager >&2; deploy_fail "systemctl start pushgate failed"; }
ready() { [[ $(inside curl -sS --max-time 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:2197/readyz) == 200 ]]; }
if ! deploy_wait_for 30 "/readyz" ready; then
    inside systemctl status pushgate --no-pager >&2 || true
    inside journalctl -u pushgate --no-pager >&2 || true
    deploy_fail "the unit did not become ready"
fi
deploy_log "unit active and ready after $((SECONDS - started)) s"

pid=$(inside systemctl show -P MainPID pushgate)
user=$(inside stat -c %U "/proc/$pid")
[[ $user == pushgate ]] || deploy_fail "the gateway runs as $user, not pushgate"
capabilities=$(inside awk '/^CapEff:/ { print $2 }' "/proc/$pid/status")
[[ $capabilities == 0000000000000400 ]] || deploy_fail "effective capabilities $capabilities, expected CAP_NET_BIND_SERVICE (0x400) only"
[[ $(inside stat -c %U /var/lib/pushgate/.) == pushgate ]] || deploy_fail "StateDirectory is not owned by pushgate"
deploy_log "runs as pushgate, capabilities 0x$capabilities, state directory its own"

# A device and a push, both through the unit's loopback listener, from inside the container.
# The agent runs as nobody: the test has no need of root either.
inside setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c \
    'cd /tmp && echo $$ >/tmp/agent.pid && exec /usr/local/bin/pushgate agent --server http://127.0.0.1:2197 --identity /tmp/device.json --topic com.example.systemd >/tmp/agent.out 2>/tmp/agent.err' &
agent_exec=$!
connected() { inside grep -q '"type":"connected"' /tmp/agent.out; }
deploy_wait_for 30 "the agent to connect" connected || deploy_fail "agent: $(inside cat /tmp/agent.out /tmp/agent.err 2>&1)"
token=$(inside sed -n 's/.*"type":"registered".*"token":"\([0-9a-f]*\)".*/\1/p' /tmp/agent.out | head -1)
apns_id=$(cat /proc/sys/kernel/random/uuid)
sent=$(inside setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/tmp \
    /usr/local/bin/pushgate send --server http://127.0.0.1:2197 --token "$token" --topic com.example.systemd \
    --apns-id "$apns_id" '{"aps":{"alert":"through systemd"}}') || deploy_fail "send: $sent"
grep -q '^disposition: delivered' <<<"$sent" || deploy_fail "send was answered: $sent"
arrived() { inside grep -q "\"apnsId\":\"$apns_id\"" /tmp/agent.out; }
deploy_wait_for 30 "the notification at the agent" arrived || deploy_fail "not delivered: $(inside cat /tmp/agent.out 2>&1)"
deploy_log "push $apns_id delivered through the unit"
inside sh -c 'kill "$(cat /tmp/agent.pid)"' || true
wait "$agent_exec" 2>/dev/null || true

# The one capability at work: a port below 1024 as the unprivileged user.
inside mkdir -p /etc/systemd/system/pushgate.service.d
inside sh -c 'printf "[Service]\nExecStart=\nExecStart=/usr/local/bin/pushgate serve --listen 127.0.0.1:2197 --listen 127.0.0.1:443 --data-dir /var/lib/pushgate\n" > /etc/systemd/system/pushgate.service.d/port443.conf'
inside systemctl daemon-reload
inside systemctl restart pushgate
ready443() { [[ $(inside curl -sS --max-time 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:443/healthz) == 200 ]]; }
deploy_wait_for 30 "/healthz on port 443" ready443 || { inside journalctl -u pushgate --no-pager -n 20 >&2; deploy_fail "no listener on 443"; }
deploy_log "binds port 443 as pushgate (AmbientCapabilities=CAP_NET_BIND_SERVICE)"

inside systemctl stop pushgate
result=$(inside systemctl show -P Result pushgate)
status=$(inside systemctl show -P ExecMainStatus pushgate)
[[ $result == success && $status == 0 ]] || { inside journalctl -u pushgate --no-pager -n 30 >&2; deploy_fail "stop: Result=$result ExecMainStatus=$status"; }
# A sandbox setting systemd could not apply ("is configured, but"), or one that refused the
# gateway something (a failed syscall, a file it could not open), shows in the journal.
if inside journalctl -u pushgate --no-pager | grep -Ei 'is configured, but|operation not permitted|permission denied|read-only file system|seccomp|SIGSYS|status=(31|226)' >&2; then
    deploy_fail "the journal shows the sandbox refusing something (above)"
fi
deploy_log "systemctl stop: Result=success, exit status 0"

# Settings that cannot run (a listener off loopback with no authentication) exit 64, and the
# unit leaves it failed instead of restarting into the same refusal.
inside sh -c 'printf "[Service]\nExecStart=\nExecStart=/usr/local/bin/pushgate serve --listen 0.0.0.0:2197 --data-dir /var/lib/pushgate\n" > /etc/systemd/system/pushgate.service.d/port443.conf'
inside systemctl daemon-reload
inside systemctl start pushgate || true
failed() { [[ $(inside systemctl show -P ActiveState pushgate) == failed ]]; }
deploy_wait_for 30 "the refused unit to fail" failed || deploy_fail "the unit is $(inside systemctl show -P ActiveState pushgate), not failed"
status=$(inside systemctl show -P ExecMainStatus pushgate)
restarts=$(inside systemctl show -P NRestarts pushgate)
[[ $status == 64 && $restarts == 0 ]] || { inside journalctl -u pushgate --no-pager -n 20 >&2; deploy_fail "refused settings: ExecMainStatus=$status NRestarts=$restarts, expected 64 and 0"; }
inside journalctl -u pushgate --no-pager -n 20 | grep -q 'refusing to listen on 0.0.0.0' || deploy_fail "the journal does not say why the unit failed"
deploy_log "refused settings: exit 64, not restarted, the reason in the journal"
echo "systemd-boot: passed"
