import COpenSSL

/// A P-256 key pair for ECDH (RFC 8291: a Web Push subscription's key on the device, and an
/// application server's one-time key), on libcrypto.
///
/// Safe to share between threads: the `EVP_PKEY` is never modified after init, and each
/// derivation uses its own context.
public final class P256KeyAgreementKey: @unchecked Sendable {
    /// Owned; freed in deinit.
    private let key: OpaquePointer
    /// The public key as an uncompressed point (`0x04 || x || y`, 65 bytes): what a
    /// subscription's `p256dh` carries, base64url-encoded.
    public let publicKey: [UInt8]

    private init(owning key: OpaquePointer) throws(P256KeyError) {
        guard let spki = EVPKeySupport.subjectPublicKeyInfo(key), let point = P256Point.point(ofSPKI: spki) else {
            EVP_PKEY_free(key)
            throw .openSSL(operation: "export the public key", openSSLErrors: OpenSSLErrorQueue.drain())
        }
        self.key = key
        self.publicKey = point
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// A new random key pair from OpenSSL's CSPRNG.
    public static func generate() throws(P256KeyError) -> P256KeyAgreementKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw .openSSL(operation: "create a key generation context", openSSLErrors: OpenSSLErrorQueue.drain())
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
            EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
            EVP_PKEY_generate(context, &key) == 1,
            let key
        else {
            throw .openSSL(operation: "generate a P-256 key", openSSLErrors: OpenSSLErrorQueue.drain())
        }
        return try P256KeyAgreementKey(owning: key)
    }

    /// From `derRepresentation`.
    public convenience init(der: [UInt8]) throws(P256KeyError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let key = parsed else {
            throw .notAPrivateKey(openSSLErrors: OpenSSLErrorQueue.drain())
        }
        do {
            try EVPKeySupport.requireP256(key)
        } catch {
            EVP_PKEY_free(key)
            throw .notP256("\(error)")
        }
        try self.init(owning: key)
    }

    /// The private key as DER (SEC 1 `ECPrivateKey`, with its public key), to keep it.
    public var derRepresentation: [UInt8] {
        let length = i2d_PrivateKey(key, nil)
        guard length > 0 else { preconditionFailure("i2d_PrivateKey failed on a loaded P-256 key") }
        return [UInt8](unsafeUninitializedCapacity: Int(length)) { buffer, initialized in
            // i2d_* advance the pointer they are given past what they wrote.
            var cursor = buffer.baseAddress
            initialized = max(0, Int(i2d_PrivateKey(key, &cursor)))
        }
    }

    /// The ECDH shared secret with the peer's public key (an uncompressed P-256 point): the
    /// x coordinate of the shared point, 32 bytes.
    public func sharedSecret(with peer: [UInt8]) throws(P256KeyError) -> [UInt8] {
        guard let peerKey = P256Point.key(ofPoint: peer) else { throw .notAPoint }
        defer { EVP_PKEY_free(peerKey) }
        guard let context = EVP_PKEY_CTX_new(key, nil) else {
            throw .openSSL(operation: "create a key derivation context", openSSLErrors: OpenSSLErrorQueue.drain())
        }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peerKey) == 1,
            EVP_PKEY_derive(context, nil, &length) == 1
        else {
            throw .openSSL(operation: "derive an ECDH secret", openSSLErrors: OpenSSLErrorQueue.drain())
        }
        var failed = false
        let secret = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            failed = EVP_PKEY_derive(context, buffer.baseAddress, &length) != 1
            initialized = failed ? 0 : length
        }
        if failed { throw .openSSL(operation: "derive an ECDH secret", openSSLErrors: OpenSSLErrorQueue.drain()) }
        return secret
    }
}

/// Why a P-256 key or point could not be used.
public enum P256KeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not 65 bytes starting 0x04, or not a point on P-256.
    case notAPoint
    case notAPrivateKey(openSSLErrors: [String])
    case notP256(String)
    /// OpenSSL failed where only running out of memory should make it fail.
    case openSSL(operation: String, openSSLErrors: [String])

    public var description: String {
        switch self {
        case .notAPoint:
            "not a P-256 public key: expected an uncompressed point (65 bytes, 0x04 || x || y) on the curve"
        case .notAPrivateKey(let errors):
            "not a DER private key" + (errors.isEmpty ? "" : " (OpenSSL: \(errors.joined(separator: "; ")))")
        case .notP256(let why): why
        case .openSSL(let operation, let errors):
            "OpenSSL failed to \(operation): \(errors.isEmpty ? "no error recorded" : errors.joined(separator: "; "))"
        }
    }
}

/// Uncompressed P-256 points (`0x04 || x || y`), as Web Push and VAPID carry public keys, to and
/// from libcrypto's keys: through the DER SubjectPublicKeyInfo, whose 26-byte head is the same
/// for every such point.
enum P256Point {
    static let length = 65

    private static let spkiPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
        0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// A public key for the point, or nil when it is not an uncompressed point on P-256
    /// (OpenSSL checks that it lies on the curve). The caller frees it.
    static func key(ofPoint point: some Collection<UInt8>) -> OpaquePointer? {
        guard point.count == length, point.first == 0x04 else { return nil }
        let der = spkiPrefix + point
        let key: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return key
    }

    /// The uncompressed point of a P-256 key's DER SubjectPublicKeyInfo.
    static func point(ofSPKI spki: [UInt8]) -> [UInt8]? {
        guard spki.count == spkiPrefix.count + length, spki.starts(with: spkiPrefix) else { return nil }
        return Array(spki.suffix(length))
    }
}

extension ES256PublicKey {
    /// From an uncompressed point (`0x04 || x || y`), as VAPID's `k` carries it; nil when it is
    /// not a point on P-256.
    public convenience init?(uncompressedPoint point: some Collection<UInt8>) {
        guard let key = P256Point.key(ofPoint: point) else { return nil }
        self.init(owning: key)
    }
}
