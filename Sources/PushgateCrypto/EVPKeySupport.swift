import COpenSSL

/// What the two ES256 key types share: reading PEM through memory BIOs, the P-256 check, and
/// writing keys out as PEM or DER.
enum EVPKeySupport {
    /// Runs `read` on a read-only memory BIO over `text`'s bytes.
    static func reading<T>(_ text: String, _ read: (OpaquePointer) -> T?) -> T? {
        Array(text.utf8).withUnsafeBytes { buffer -> T? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else {
                return nil
            }
            defer { BIO_free(bio) }
            return read(bio)
        }
    }

    /// Throws unless `key` is an EC key on P-256. Frees nothing: the caller owns `key`.
    static func requireP256(_ key: OpaquePointer) throws(ES256KeyError) {
        guard EVP_PKEY_is_a(key, "EC") == 1 else {
            let type = EVP_PKEY_get0_type_name(key).map { String(cString: $0) } ?? "of an unknown type"
            throw .notEC(type: type)
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        let named = name.withUnsafeMutableBufferPointer { buffer in
            EVP_PKEY_get_group_name(key, buffer.baseAddress, buffer.count, &length)
        }
        guard named == 1 else {
            _ = OpenSSLErrorQueue.drain()
            throw .notP256(curve: "unnamed (explicit parameters)")
        }
        let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard curve == "prime256v1" else { throw .notP256(curve: curve) }
    }

    /// The bytes `write` puts into a fresh memory BIO, or nil when it reports failure (returns ≤ 0).
    static func written(_ write: (OpaquePointer) -> Int32) -> [UInt8]? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard write(bio) > 0 else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        let length = BIO_ctrl_pending(bio)
        return [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            var read = 0
            _ = BIO_read_ex(bio, buffer.baseAddress, length, &read)
            initialized = read
        }
    }

    /// The DER SubjectPublicKeyInfo of `key` (its public half only).
    static func subjectPublicKeyInfo(_ key: OpaquePointer) -> [UInt8]? {
        let length = i2d_PUBKEY(key, nil)
        guard length > 0 else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return [UInt8](unsafeUninitializedCapacity: Int(length)) { buffer, initialized in
            // i2d_* advance the pointer they are given past what they wrote.
            var cursor = buffer.baseAddress
            initialized = max(0, Int(i2d_PUBKEY(key, &cursor)))
        }
    }

    /// Runs `body` on `bytes` as one contiguous buffer, copying only when the collection has none.
    static func withContiguousBytes<R>(
        _ bytes: some Collection<UInt8>,
        _ body: (UnsafeBufferPointer<UInt8>) -> R
    ) -> R {
        if let result = bytes.withContiguousStorageIfAvailable(body) {
            return result
        }
        return Array(bytes).withUnsafeBufferPointer(body)
    }
}
