#!/bin/sh
# Regenerates the TLS test fixtures in this directory (used by Tests/PushgateTLSTests).
#
# Usage: sh Tests/Fixtures/tls/make-fixtures.sh   (from anywhere; needs the `openssl` CLI, 3.x)
#
# Everything is EC P-256, valid for 36500 days so the committed files never expire under CI:
#   ca.pem, ca-key.pem                       "Pushgate Test CA" (trusted by the tests)
#   server.pem, server-key.pem               CN=localhost, SAN DNS:localhost, IP:127.0.0.1, IP:::1, serverAuth
#   server-chain.pem                         server.pem followed by ca.pem
#   client.pem, client-key.pem               APNs-style subject (UID, CN, OU, O, C), clientAuth, signed by ca
#   other-ca.pem, other-ca-key.pem           "Pushgate Other CA" (trusted by nobody)
#   untrusted-client.pem, -key.pem           same kind of subject as client.pem, signed by other-ca
#
# Serial numbers are fixed (the tests assert the client's) rather than random: these are throwaway
# test certificates, never to be trusted outside the test suite. The keys are committed on purpose.
# Intermediate files (CSRs, extension config) live in a temporary directory that is always removed.
set -eu

cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

days=36500

# A config of our own keeps the system openssl.cnf (and its default extensions) out of the result.
cat > "$work/ext.cnf" <<'CNF'
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF

newkey() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
}

# ca NAME SUBJECT SERIAL
ca() {
    newkey "$1-key.pem"
    openssl req -config "$work/ext.cnf" -new -x509 -key "$1-key.pem" -subj "$2" \
        -days "$days" -set_serial "$3" -extensions ca -out "$1.pem"
}

# leaf NAME SUBJECT SERIAL EXTENSIONS ISSUER
leaf() {
    newkey "$1-key.pem"
    openssl req -config "$work/ext.cnf" -new -key "$1-key.pem" -subj "$2" -out "$work/$1.csr"
    openssl x509 -req -in "$work/$1.csr" -CA "$5.pem" -CAkey "$5-key.pem" -set_serial "$3" \
        -days "$days" -extfile "$work/ext.cnf" -extensions "$4" -out "$1.pem"
}

apns_subject='/C=US/O=Example Inc/OU=TEAM123456/CN=Apple Push Services: com.example.app/UID=com.example.app'

ca ca '/O=Pushgate/CN=Pushgate Test CA' 0x5EED0001
ca other-ca '/O=Pushgate/CN=Pushgate Other CA' 0x5EED0101
leaf server '/CN=localhost' 0x5EED0002 server ca
leaf client "$apns_subject" 0x5EED0003 client ca
leaf untrusted-client "$apns_subject" 0x5EED0102 client other-ca
cat server.pem ca.pem > server-chain.pem

chmod 644 ./*.pem
