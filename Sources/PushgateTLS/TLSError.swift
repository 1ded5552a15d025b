import PushgateCrypto

/// A TLS failure: a configuration file OpenSSL would not load, or a handshake or record-layer error.
///
/// The description is meant to be read by an operator: it says what Pushgate was doing (naming the
/// file for configuration errors), followed by OpenSSL's own error strings, oldest first, e.g.
/// `cannot load TLS private key from /etc/pushgate/key.pem: error:80000002:system library::No such
/// file or directory; ...`.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure, for a caller that decides what to do next (retry or give up).
    public enum Kind: Sendable, Equatable {
        /// A configuration file or setting, or a handshake or record failure of no kind below.
        case other
        /// A client's peer answered with bytes that are not TLS (a cleartext port): `answer` is
        /// the start of what it said, as text.
        case notTLS(answer: String)
        /// The peer's certificate did not verify: an untrusted issuer, a name or address it does
        /// not carry, dates it is not valid for.
        case peerCertificate
        /// The peer refused the connection with a fatal alert (a client certificate it requires,
        /// a protocol version or cipher it will not speak).
        case refusedByPeer
    }

    /// What failed, in words.
    public var message: String
    /// OpenSSL's error queue at the time of the failure, as `ERR_error_string_n` renders each entry.
    public var openSSLErrors: [String]
    public var kind: Kind

    public init(_ message: String, openSSLErrors: [String] = [], kind: Kind = .other) {
        self.message = message
        self.openSSLErrors = openSSLErrors
        self.kind = kind
    }

    public var description: String {
        if self.openSSLErrors.isEmpty {
            return self.message
        }
        return "\(self.message): \(self.openSSLErrors.joined(separator: "; "))"
    }
}

extension TLSError {
    /// Builds an error from this thread's OpenSSL error queue, emptying it.
    static func draining(_ message: String, kind: Kind = .other) -> TLSError {
        TLSError(message, openSSLErrors: OpenSSLErrorQueue.drain(), kind: kind)
    }
}
