import COpenSSL

/// An ECDSA P-256 public key that verifies ES256 (JWS) signatures.
///
/// Safe to share between threads: the `EVP_PKEY` is never modified after init, and every
/// verification uses its own `EVP_MD_CTX`, which is what OpenSSL 3 requires for concurrent use.
public final class ES256PublicKey: @unchecked Sendable {
    /// Owned; freed in deinit.
    let key: OpaquePointer

    /// Takes ownership of `key`, which must already be checked to be P-256.
    init(owning key: OpaquePointer) {
        self.key = key
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// From a PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`), as `openssl pkey -pubout` writes.
    public convenience init(pem: String) throws(ES256KeyError) {
        guard let key = EVPKeySupport.reading(pem, { PEM_read_bio_PUBKEY($0, nil, nil, nil) }) else {
            throw .notPEM(expected: "-----BEGIN PUBLIC KEY-----", openSSLErrors: OpenSSLErrorQueue.drain())
        }
        do {
            try EVPKeySupport.requireP256(key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.init(owning: key)
    }

    /// PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`).
    public var pemRepresentation: String {
        guard let pem = EVPKeySupport.written({ PEM_write_bio_PUBKEY($0, key) }) else {
            preconditionFailure("PEM_write_bio_PUBKEY failed on a loaded P-256 key")
        }
        return String(decoding: pem, as: UTF8.self)
    }

    /// Whether `signature`, in JWS form (raw `r || s`, 64 bytes), is a valid ES256 signature of
    /// `message` by this key.
    ///
    /// Never throws and never traps on hostile input: a wrong length, r or s zero or not below the
    /// group order, or any OpenSSL error is just `false`.
    public func verify(signature: some Collection<UInt8>, message: some Collection<UInt8>) -> Bool {
        guard let der = ECDSASignatureEncoding.der(fromRaw: signature),
            let context = EVP_MD_CTX_new()
        else {
            return false
        }
        defer { EVP_MD_CTX_free(context) }
        let verified = EVPKeySupport.withContiguousBytes(message) { input in
            guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else {
                return false
            }
            // 1 is valid, 0 is a signature that does not verify, < 0 a malformed one.
            return EVP_DigestVerify(context, der, der.count, input.baseAddress, input.count) == 1
        }
        if !verified {
            _ = OpenSSLErrorQueue.drain()
        }
        return verified
    }
}

extension ES256PublicKey: Equatable {
    public static func == (lhs: ES256PublicKey, rhs: ES256PublicKey) -> Bool {
        EVP_PKEY_eq(lhs.key, rhs.key) == 1
    }
}
