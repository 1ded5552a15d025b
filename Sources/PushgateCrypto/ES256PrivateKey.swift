import COpenSSL

/// An ECDSA P-256 private key that makes ES256 (JWS) signatures, e.g. an APNs `.p8` AuthKey.
///
/// Safe to share between threads: the `EVP_PKEY` is never modified after init and every signature
/// uses its own `EVP_MD_CTX`.
public final class ES256PrivateKey: @unchecked Sendable {
    /// Owned; freed in deinit.
    private let key: OpaquePointer
    /// The public half, as its own key object that holds no private material.
    public let publicKey: ES256PublicKey

    /// Takes ownership of `key`, which must already be checked to be P-256.
    private init(owning key: OpaquePointer) throws(ES256KeyError) {
        guard let spki = EVPKeySupport.subjectPublicKeyInfo(key),
            let publicKey = Self.publicKey(fromSubjectPublicKeyInfo: spki)
        else {
            EVP_PKEY_free(key)
            throw .openSSL(operation: "derive the public key", openSSLErrors: OpenSSLErrorQueue.drain())
        }
        self.key = key
        self.publicKey = ES256PublicKey(owning: publicKey)
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// From a PEM private key: PKCS#8 (`-----BEGIN PRIVATE KEY-----`, Apple's `.p8` AuthKey format
    /// and what `openssl genpkey` writes) or SEC 1 (`-----BEGIN EC PRIVATE KEY-----`).
    public convenience init(pem: String) throws(ES256KeyError) {
        var askedForPassword = false
        let key = withUnsafeMutablePointer(to: &askedForPassword) { flag in
            EVPKeySupport.reading(pem) { bio in
                // Without a callback OpenSSL would prompt on the terminal for an encrypted key.
                PEM_read_bio_PrivateKey(
                    bio,
                    nil,
                    { _, _, _, flag in
                        flag?.assumingMemoryBound(to: Bool.self).pointee = true
                        return -1
                    },
                    flag
                )
            }
        }
        guard let key else {
            let errors = OpenSSLErrorQueue.drain()
            if askedForPassword { throw .encrypted }
            throw .notPEM(expected: "-----BEGIN PRIVATE KEY-----", openSSLErrors: errors)
        }
        do {
            try EVPKeySupport.requireP256(key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        try self.init(owning: key)
    }

    /// A new random key from OpenSSL's CSPRNG.
    public static func generate() throws(ES256KeyError) -> ES256PrivateKey {
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
        return try ES256PrivateKey(owning: key)
    }

    /// Unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the `.p8` format.
    public var pemRepresentation: String {
        guard let pem = EVPKeySupport.written({ PEM_write_bio_PKCS8PrivateKey($0, key, nil, nil, 0, nil, nil) }) else {
            preconditionFailure("PEM_write_bio_PKCS8PrivateKey failed on a loaded P-256 key")
        }
        return String(decoding: pem, as: UTF8.self)
    }

    /// The ES256 signature of `message` in JWS form: raw `r || s`, 64 bytes.
    public func sign(_ message: some Collection<UInt8>) -> [UInt8] {
        // With a loaded P-256 key and SHA-256, OpenSSL fails here only when it cannot allocate
        // memory, which Swift treats as fatal too.
        guard let context = EVP_MD_CTX_new() else {
            preconditionFailure("EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(context) }
        let der: [UInt8]? = EVPKeySupport.withContiguousBytes(message) { input in
            guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else {
                return nil
            }
            var length = 0
            guard EVP_DigestSign(context, nil, &length, input.baseAddress, input.count) == 1 else {
                return nil
            }
            return [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
                initialized = 0
                if EVP_DigestSign(context, buffer.baseAddress, &length, input.baseAddress, input.count) == 1 {
                    initialized = length
                }
            }
        }
        guard let der, !der.isEmpty, let raw = ECDSASignatureEncoding.raw(fromDER: der) else {
            preconditionFailure("ES256 signing failed: \(OpenSSLErrorQueue.drain())")
        }
        return raw
    }

    private static func publicKey(fromSubjectPublicKeyInfo der: [UInt8]) -> OpaquePointer? {
        der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
    }
}
