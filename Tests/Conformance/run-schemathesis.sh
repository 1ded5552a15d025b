#!/usr/bin/env bash
# API conformance: schemathesis against openapi.yaml and the real gateway (docs/testing.md, "API conformance").
#
# Starts `pushgate serve` (debug build; as nobody when run as root, with a data directory that
# user owns) with one provider key, and nghttpx in front of it: schemathesis speaks HTTP/1.1 and
# the provider API and the device event stream are HTTP/2 only, so every request goes through the
# proxy, which speaks h2c to the gateway. Then schemathesis runs every phase (examples, coverage, fuzzing,
# stateful through the spec's links: create device -> register -> push / ack) with every check,
# a fixed seed and a fixed number of examples; hooks.py supplies the credentials. Prints
# schemathesis's summary and exits with its status (non-zero on any failure).
#
# Needs: swift, nghttpx (Debian nghttp2-proxy), openssl, curl, python3-venv; installs
# schemathesis (PyPI, pinned) in .build/schemathesis-VERSION when it is not there.
# Environment: SCHEMATHESIS_SEED (default 1), SCHEMATHESIS_MAX_EXAMPLES (default 50),
# SCHEMATHESIS_PHASES (default: every phase; e.g. examples,fuzzing,stateful),
# PUSHGATE_BINARY (default: build and use the debug build).
set -euo pipefail
cd "$(dirname "$0")/../.."

schemathesis_version=4.32.5
seed=${SCHEMATHESIS_SEED:-1}
max_examples=${SCHEMATHESIS_MAX_EXAMPLES:-50}
team=TEAM123456
kid=KEY1234567
topic=com.example.app

# A virtual environment of its own (reused across runs): schemathesis streams event streams with
# urllib3 2's read1, which Debian's urllib3 1.26 lacks, and replacing the system's urllib3 would
# change what selenium and the other Python clients run on. PyJWT (with cryptography) mints the
# provider token in hooks.py.
venv=.build/schemathesis-$schemathesis_version
if [[ ! -x $venv/bin/schemathesis ]]; then
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --no-cache-dir "schemathesis==$schemathesis_version" "urllib3>=2,<3" "pyjwt[crypto]"
fi
for tool in nghttpx openssl setpriv curl; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed (apt-get install nghttp2-proxy openssl util-linux curl)" >&2; exit 2; }
done

if [[ -z ${PUSHGATE_BINARY:-} ]]; then
    if ! command -v swift >/dev/null; then export PATH="$PATH:/opt/swift/usr/bin"; fi
    swift build --product pushgate >&2
    PUSHGATE_BINARY="$(swift build --show-bin-path)/pushgate"
fi

work=$(mktemp -d)
chmod 755 "$work"
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# As root, the gateway and the proxy run as nobody, as production runs them (a dedicated user):
# a gateway that works only as root would fail here. The binary is copied where nobody can run it
# (a clone under root's home is out of its reach).
unprivileged=()
if [[ $(id -u) -eq 0 ]]; then
    unprivileged=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    cp "$PUSHGATE_BINARY" "$work/pushgate"
    PUSHGATE_BINARY="$work/pushgate"
fi
give() { if [[ $(id -u) -eq 0 ]]; then chown -R nobody:nogroup "$@"; fi; }

key="$work/AuthKey_$kid.p8"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$key" 2>/dev/null
mkdir "$work/data"
touch "$work/nghttpx.log" "$work/gateway.out"
give "$key" "$work/data" "$work/nghttpx.log"

"${unprivileged[@]}" "$PUSHGATE_BINARY" serve --listen 127.0.0.1:0 --data-dir "$work/data" \
    --provider-key "$team:$kid:$key:$topic" --drain-grace-seconds 0 --log-level warning \
    >"$work/gateway.out" 2>"$work/gateway.log" &
pids+=($!)
gateway_port=
while [[ -z $gateway_port ]]; do
    kill -0 "${pids[0]}" 2>/dev/null || { echo "pushgate serve did not start:" >&2; cat "$work/gateway.log" >&2; exit 1; }
    gateway_port=$(sed -n 's/^listening http:\/\/127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/gateway.out")
    [[ -n $gateway_port ]] || sleep 0.1
done

# nghttpx cannot report a port it chose, so one is taken from the kernel and handed over; if
# another process takes it meanwhile, nghttpx fails to bind and this script says so.
proxy_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${unprivileged[@]}" nghttpx --conf=/dev/null --workers=1 --frontend="127.0.0.1,$proxy_port;no-tls" \
    --backend="127.0.0.1,$gateway_port;;proto=h2" --no-via --no-server-rewrite \
    --errorlog-file="$work/nghttpx.log" >/dev/null 2>&1 &
pids+=($!)
until curl -sf -o /dev/null "http://127.0.0.1:$proxy_port/healthz"; do
    kill -0 "${pids[1]}" 2>/dev/null || { echo "nghttpx did not start:" >&2; cat "$work/nghttpx.log" >&2; exit 1; }
    sleep 0.1
done

echo "gateway on 127.0.0.1:$gateway_port (h2c), nghttpx on 127.0.0.1:$proxy_port; schemathesis $schemathesis_version, seed $seed, $max_examples examples per operation"
status=0
# From the scratch directory: schemathesis keeps the failures it found in ./.schemathesis and
# replays them first on the next run, which would make a run depend on the ones before it.
repo=$PWD
(cd "$work" && PUSHGATE_CONFORMANCE_KEY=$key PUSHGATE_CONFORMANCE_TEAM=$team PUSHGATE_CONFORMANCE_KID=$kid \
    SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$repo/Tests/Conformance" \
    "$repo/$venv/bin/schemathesis" --no-color --config-file "$repo/Tests/Conformance/schemathesis.toml" \
    run "$repo/openapi.yaml" --url "http://127.0.0.1:$proxy_port" --seed "$seed" \
    --max-examples "$max_examples" --checks all --workers 1 ${SCHEMATHESIS_PHASES:+--phases "$SCHEMATHESIS_PHASES"}) || status=$?
if [[ $status -ne 0 ]]; then
    echo "--- gateway log" >&2; tail -n 50 "$work/gateway.log" >&2
fi
exit "$status"
