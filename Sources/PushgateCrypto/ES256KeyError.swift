import COpenSSL

/// Why a PEM could not be used as an ES256 (ECDSA P-256 with SHA-256) key.
public enum ES256KeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No PEM block of the expected kind could be read; `expected` is its BEGIN line and
    /// `openSSLErrors` what OpenSSL said.
    case notPEM(expected: String, openSSLErrors: [String])
    /// The private key is encrypted; Pushgate does not prompt for pass phrases.
    case encrypted
    /// A key of another algorithm, e.g. "RSA" or "ED25519".
    case notEC(type: String)
    /// An EC key on another curve, e.g. "secp384r1"; "unnamed" for explicit curve parameters.
    case notP256(curve: String)
    /// OpenSSL failed where only running out of memory should make it fail.
    case openSSL(operation: String, openSSLErrors: [String])

    public var description: String {
        switch self {
        case .notPEM(let expected, let errors):
            let said = errors.isEmpty ? "" : " (OpenSSL: \(errors.joined(separator: "; ")))"
            return "not a PEM key: expected a \(expected) block\(said)"
        case .encrypted:
            return "the private key is encrypted; decrypt it first with `openssl pkey -in key.p8 -out plain.p8`"
        case .notEC(let type):
            return "the key is \(type), but ES256 needs an EC key on curve P-256 (an APNs .p8 AuthKey is one)"
        case .notP256(let curve):
            return "the EC key is on curve \(curve), but ES256 needs P-256 (prime256v1)"
        case .openSSL(let operation, let errors):
            return
                "OpenSSL failed to \(operation): \(errors.isEmpty ? "no error recorded" : errors.joined(separator: "; "))"
        }
    }
}

/// This thread's OpenSSL error queue, for the crypto and TLS errors alike.
public enum OpenSSLErrorQueue {
    /// The queue's entries as strings, oldest first, emptying it.
    ///
    /// The queue is per thread and an event loop serves many connections on one thread, so every
    /// failure must take its entries with it or they would be blamed on whatever runs next.
    public static func drain() -> [String] {
        var entries: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            // 256 bytes is what OpenSSL's own ERR_error_string uses; _n truncates to fit.
            var chars = [CChar](repeating: 0, count: 256)
            entries.append(
                chars.withUnsafeMutableBufferPointer { buffer in
                    ERR_error_string_n(code, buffer.baseAddress, buffer.count)
                    return String(cString: buffer.baseAddress!)
                }
            )
        }
        return entries
    }
}
