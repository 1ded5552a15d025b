import NIOCore
import PushgateDeviceClient
import PushgateTLS
import PushgateTransport
import Testing

@Suite("ConnectionFailure: what retrying cannot fix")
struct ConnectionFailureTests {
    @Test("a certificate that does not verify, a refused handshake, the wrong protocol on the port: permanent")
    func permanent() {
        let failures: [any Error] = [
            TLSError(
                "TLS handshake failed (peer certificate: unable to get local issuer certificate)",
                kind: .peerCertificate
            ),
            TLSError("TLS read failed", kind: .refusedByPeer),
            TLSError("the server answered in cleartext", kind: .notTLS(answer: "HTTP/1.1 400 Bad Request")),
            HTTP2ClientError.tlsPort(host: "127.0.0.1", port: 443),
            HTTP2ClientError.cleartextPort(host: "127.0.0.1", port: 2197, answer: "HTTP/1.1 400 Bad Request"),
            HTTP2ClientError.http1Answer(host: "127.0.0.1", port: 80, statusLine: "HTTP/1.1 200 OK"),
        ]
        for failure in failures { #expect(ConnectionFailure.isPermanent(failure), "\(failure)") }
    }

    @Test("a gateway not there, gone, busy or silent: worth another try")
    func transient() {
        let failures: [any Error] = [
            HTTP2ClientError.cannotConnect(host: "127.0.0.1", port: 1, reason: "connection refused"),
            HTTP2ClientError.closedWithoutAnswer,
            HTTP2ClientError.closedBeforeSettings,
            HTTP2ClientError.connectionClosed,
            HTTP2ClientError.noSettings(within: .seconds(10)),
            HTTP2ClientError.refused,
            TLSError("TLS handshake failed: unexpected eof while reading"),
            RetryableRefusal.refusal(of: "the event stream", status: 503, body: "", failure: "refused"),
        ]
        for failure in failures { #expect(!ConnectionFailure.isPermanent(failure), "\(failure)") }
    }
}
