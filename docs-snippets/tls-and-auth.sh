#!/bin/sh
# TLS and provider authentication from nothing, on one machine: a certificate authority of your
# own, the gateway's server certificate, a provider's client certificate, a token signing key
# (.p8), a gateway that takes both kinds of provider, one device, and one push sent each way
# with `pushgate send`.
#
# Usage: sh tls-and-auth.sh [DIR]    (default DIR: ./pushgate-tls; needs OpenSSL 3 and pushgate)
#   PUSHGATE=/path/to/pushgate  the binary (default: pushgate, from PATH)
#   PORT=2443                   the gateway's TLS port (0: any free port, as the tests ask)
#
# Everything lands in DIR; run it again in an empty DIR. The CI runs this file as it is
# (Tests/PushgateCLITests/TLSAndAuthScriptTests.swift), so every command below is known to work.
set -eu

dir=${1:-./pushgate-tls}
pushgate=${PUSHGATE:-pushgate}
port=${PORT:-2443}
topic=com.example.app  # the app's bundle id: the topic devices register and providers push to
team=TEAM123456        # Apple's team id and key id, as a provider's token names them
keyid=KEY1234567

mkdir -p "$dir"
cd "$dir"

# 1. A certificate authority of your own (EC P-256). It signs the gateway's certificate, which
#    devices and providers check with --cacert ca.pem, and the providers' client certificates,
#    which the gateway checks with --tls-client-ca ca.pem. Two CAs work as well; one is enough.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca-key.pem
openssl req -new -x509 -key ca-key.pem -subj "/CN=Example Push CA" -days 3650 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out ca.pem

# 2. The gateway's certificate: the names clients connect to go in subjectAltName (a client
#    given https://127.0.0.1:PORT checks the IP address, https://localhost:PORT the DNS name).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server-key.pem
openssl req -new -key server-key.pem -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "extendedKeyUsage=serverAuth" \
    -out server.csr
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -days 825 -copy_extensions copyall \
    -out server.pem

# 3. A provider's client certificate, shaped as Apple issues them: the topic it may push to is
#    the subject's UID. The gateway reads the topic from there, so a push by certificate needs
#    no apns-topic of its own (given, it must be that topic).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out provider-key.pem
openssl req -new -key provider-key.pem \
    -subj "/UID=$topic/CN=Apple Push Services: $topic/OU=$team/O=Example Inc/C=US" \
    -addext "extendedKeyUsage=clientAuth" -out provider.csr
openssl x509 -req -in provider.csr -CA ca.pem -CAkey ca-key.pem -days 825 -copy_extensions copyall \
    -out provider.pem
# send and bench also take the certificate and its key in one file: --cert provider-both.pem
cat provider.pem provider-key.pem > provider-both.pem

# 4. A token signing key, the .p8 Apple hands out: a PKCS#8 EC P-256 private key. The gateway
#    verifies tokens with it (or with its public half alone: openssl pkey -in KEY.p8 -pubout).
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "AuthKey_$keyid.p8"

# 5. The gateway: TLS only (with a TLS listener and no --listen it serves no cleartext),
#    providers by token (--provider-key TEAM:KEYID:FILE:TOPIC) or by certificate
#    (--tls-client-ca). On loopback, devices need no registration secret. serve prints
#    "listening https://HOST:PORT" once it is bound, with the real port when 0 was asked for.
"$pushgate" serve --data-dir data --tls-listen "127.0.0.1:$port" \
    --tls-cert server.pem --tls-key server-key.pem --tls-client-ca ca.pem \
    --provider-key "$team:$keyid:AuthKey_$keyid.p8:$topic" >serve.out 2>serve.log &
gateway=$!
agent=
trap 'kill $gateway $agent 2>/dev/null' EXIT

# Waits until FILE has a line matching PATTERN (30 s at most) and prints its first such line.
wait_for() {
    tries=300
    until grep -q "$2" "$1" 2>/dev/null; do
        tries=$((tries - 1))
        if [ "$tries" = 0 ]; then
            echo "nothing matched $2 in $1:" >&2
            cat "$1" serve.log >&2
            exit 1
        fi
        sleep 0.1
    done
    grep -m 1 "$2" "$1"
}
server=$(wait_for serve.out '^listening https://' | sed 's/^listening //')
echo "gateway at $server"

# 6. A device: the agent creates it, registers the topic and prints its token (its
#    "registered" line), then holds its event stream and prints each push as a JSON line.
"$pushgate" agent --server "$server" --cacert ca.pem --identity device.json --topic "$topic" >agent.out &
agent=$!
token=$(wait_for agent.out '"type":"registered"' | sed 's/.*"token":"\([0-9a-f]*\)".*/\1/')
echo "device token $token"

# 7. One push signed with the .p8 (send signs the token and keeps it for 50 minutes in
#    ~/.cache/pushgate) and one by client certificate. Each prints "status: 200".
"$pushgate" send --server "$server" --cacert ca.pem \
    --key "AuthKey_$keyid.p8" --key-id "$keyid" --team-id "$team" \
    --token "$token" --topic "$topic" '{"aps":{"alert":"signed with the .p8"}}'
"$pushgate" send --server "$server" --cacert ca.pem --cert provider.pem --cert-key provider-key.pem \
    --token "$token" --topic "$topic" '{"aps":{"alert":"sent by certificate"}}'

# The device got both.
wait_for agent.out 'signed with the .p8' >/dev/null
wait_for agent.out 'sent by certificate' >/dev/null
echo "the device received both pushes"
