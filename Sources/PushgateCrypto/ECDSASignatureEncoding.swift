import COpenSSL

/// Converts ES256 signatures between JWS's raw `r || s` (RFC 7518 §3.4: two 32-byte big-endian
/// integers) and the DER `ECDSA-Sig-Value` SEQUENCE that OpenSSL signs and verifies.
enum ECDSASignatureEncoding {
    static let rawLength = 64

    /// DER for a raw signature, or nil unless it is exactly 64 bytes. Any r and s are encoded,
    /// including zero and values past the group order: rejecting those is the verifier's job, and
    /// OpenSSL's verifier does it.
    static func der(fromRaw raw: some Collection<UInt8>) -> [UInt8]? {
        guard raw.count == rawLength else { return nil }
        let bytes = Array(raw)
        let body = integer(bytes[0..<32]) + integer(bytes[32..<64])
        // At most 2 × (2 + 33) = 70 bytes, so the short length form always fits.
        return [0x30, UInt8(body.count)] + body
    }

    private static func integer(_ magnitude: ArraySlice<UInt8>) -> [UInt8] {
        var value = Array(magnitude.drop { $0 == 0 })
        if value.isEmpty { value = [0] }
        // DER INTEGERs are two's complement: a leading 1 bit would make the value negative.
        if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return [0x02, UInt8(value.count)] + value
    }

    /// Raw `r || s` for a DER signature from OpenSSL, or nil when it does not parse or r or s does
    /// not fit 32 bytes.
    static func raw(fromDER der: [UInt8]) -> [UInt8]? {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature = parsed else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        defer { ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: rawLength)
        let written = raw.withUnsafeMutableBufferPointer { out in
            (
                BN_bn2binpad(ECDSA_SIG_get0_r(signature), out.baseAddress, 32),
                BN_bn2binpad(ECDSA_SIG_get0_s(signature), out.baseAddress! + 32, 32)
            )
        }
        guard written == (32, 32) else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return raw
    }
}
