"""Misbehaving clients for the sanitizer run: every connection ends abruptly.

Usage: python3 abuse.py HOST H2C_PORT TLS_PORT ROUNDS
Each round opens connections that stop mid-protocol in a different place, then drop (FIN or
RST). Prints a count per kind; exits non-zero if the gateway stops answering /healthz.
"""
import socket
import ssl
import struct
import sys

host, h2c_port, tls_port, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings():
    return frame(4, 0, 0)


def headers_get(stream, path=b"/healthz", end=True):
    # HPACK: :method GET (idx 2), :scheme http (idx 6), :path literal, :authority literal.
    block = bytes([0x82, 0x86]) + bytes([0x04, len(path)]) + path + bytes([0x01, 9]) + b"localhost"
    return frame(1, 0x05 if end else 0x04, stream, block)


def connect(port, rst):
    s = socket.create_connection((host, port), timeout=5)
    if rst:
        # Closing with SO_LINGER 0 sends RST instead of FIN.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return s


def send_and_drop(port, data, rst, read=False):
    s = connect(port, rst)
    try:
        s.sendall(data)
        if read:
            s.recv(65536)
    except OSError:
        pass
    s.close()


def tls_partial(rst):
    s = connect(tls_port, rst)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = outgoing.read()
    s.sendall(hello[: len(hello) // 2])  # half a ClientHello
    s.close()


def tls_streams(rst):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    raw = connect(tls_port, rst)
    s = context.wrap_socket(raw, server_hostname="localhost")
    s.sendall(PREFACE + settings() + b"".join(headers_get(i) for i in range(1, 200, 2)))
    try:
        s.recv(1024)
    except OSError:
        pass
    raw.close()


kinds = {
    "partial preface": lambda rst: send_and_drop(h2c_port, PREFACE[:10], rst),
    "preface then drop": lambda rst: send_and_drop(h2c_port, PREFACE + settings(), rst),
    "open streams then drop": lambda rst: send_and_drop(
        h2c_port, PREFACE + settings() + b"".join(headers_get(i) for i in range(1, 400, 2)), rst, read=True),
    "half a header block": lambda rst: send_and_drop(h2c_port, PREFACE + settings() + headers_get(1)[:14], rst),
    "body never finished": lambda rst: send_and_drop(
        h2c_port, PREFACE + settings() + headers_get(1, b"/nope", end=False) + frame(0, 0, 1, b"x" * 1000), rst),
    "rapid resets": lambda rst: send_and_drop(
        h2c_port, PREFACE + settings() + b"".join(headers_get(i) + frame(3, 0, i, struct.pack(">I", 8)) for i in range(1, 2001, 2)), rst, read=True),
    "garbage frames": lambda rst: send_and_drop(h2c_port, PREFACE + bytes(range(256)) * 4, rst),
    "http/1.1 half request": lambda rst: send_and_drop(h2c_port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", rst),
    "http/1.1 garbage": lambda rst: send_and_drop(h2c_port, b"\x00\xff" * 100 + b"\r\n\r\n", rst, read=True),
    "tls half hello": tls_partial,
    "tls streams then drop": tls_streams,
}

counts = {name: 0 for name in kinds}
for round_number in range(rounds):
    for name, run in kinds.items():
        run(round_number % 2 == 1)
        counts[name] += 1

check = socket.create_connection((host, h2c_port), timeout=5)
check.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
answer = check.recv(1024)
for name, count in counts.items():
    print(f"{count:6d}  {name}")
if not answer.startswith(b"HTTP/1.1 200"):
    print("gateway stopped answering /healthz:", answer)
    sys.exit(1)
print("gateway still answers /healthz")
