import COpenSSL

/// Web Push message encryption (RFC 8291) in the `aes128gcm` content coding (RFC 8188): the
/// application server encrypts for the subscription's public key and auth secret; the device
/// decrypts. The gateway in between never does either: it forwards the body as it came.
///
/// A body is one header, `salt (16) | rs (4, big-endian) | idlen (1) = 65 | keyid (65, the
/// application server's public key)`, then one record (RFC 8291 section 4 asks for a single
/// record): the AES-128-GCM ciphertext of the plaintext, the delimiter 0x02 and any zero padding,
/// with its 16-byte tag.
public enum WebPushEncryption {
    public static let saltLength = 16
    public static let authSecretLength = 16
    static let tagLength = 16
    /// Salt, record size, key id length and a P-256 key id.
    public static let headerLength = saltLength + 4 + 1 + P256Point.length
    /// What a body adds to its plaintext: the header, the delimiter and the tag (103 bytes): a
    /// 4,096-byte body holds 3,993 bytes of plaintext.
    public static let overhead = headerLength + 1 + tagLength

    /// The plaintext of `body`, for the subscription whose key pair is `userAgentKey` and whose
    /// auth secret is `authSecret`.
    public static func decrypt(
        _ body: [UInt8],
        userAgentKey: P256KeyAgreementKey,
        authSecret: [UInt8]
    ) throws(WebPushDecryptionError) -> [UInt8] {
        guard body.count >= headerLength else { throw .tooShort(body.count) }
        let salt = Array(body[0..<saltLength])
        let recordSize = body[saltLength..<saltLength + 4].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(body[saltLength + 4])
        guard idLength == P256Point.length else { throw .keyIDLength(idLength) }
        let serverKey = Array(body[saltLength + 5..<headerLength])
        let record = body[headerLength...]
        guard recordSize >= tagLength + 2 else { throw .recordSize(recordSize) }
        guard record.count <= recordSize else { throw .severalRecords(recordSize: recordSize, bytes: record.count) }
        guard record.count >= tagLength + 1 else { throw .tooShort(body.count) }
        let secret: [UInt8]
        do {
            secret = try userAgentKey.sharedSecret(with: serverKey)
        } catch {
            throw .serverKey
        }
        let (key, nonce) = keys(
            secret: secret,
            authSecret: authSecret,
            userAgentPublic: userAgentKey.publicKey,
            serverPublic: serverKey,
            salt: salt
        )
        guard var padded = AES128GCM.open(Array(record), key: key, nonce: nonce) else { throw .authentication }
        // The plaintext ends at the last non-zero byte, the delimiter: 0x02 for the last record.
        while let last = padded.last, last == 0 { padded.removeLast() }
        guard padded.last == 0x02 else { throw .delimiter }
        padded.removeLast()
        return padded
    }

    /// A body of `plaintext` for the subscription (`userAgentPublicKey`, an uncompressed point,
    /// and `authSecret`), as an application server makes it: for tests and the benchmark.
    public static func encrypt(
        _ plaintext: [UInt8],
        userAgentPublicKey: [UInt8],
        authSecret: [UInt8],
        serverKey: P256KeyAgreementKey? = nil,
        salt: [UInt8]? = nil,
        recordSize: Int = 4096
    ) throws -> [UInt8] {
        let serverKey = try serverKey ?? P256KeyAgreementKey.generate()
        let salt = try salt ?? SecureRandom.bytes(saltLength)
        precondition(salt.count == saltLength, "the salt is 16 bytes")
        precondition(plaintext.count + 1 + tagLength <= recordSize, "one record holds the plaintext")
        let secret = try serverKey.sharedSecret(with: userAgentPublicKey)
        let (key, nonce) = keys(
            secret: secret,
            authSecret: authSecret,
            userAgentPublic: userAgentPublicKey,
            serverPublic: serverKey.publicKey,
            salt: salt
        )
        var header = salt
        header += (0..<4).map { UInt8(truncatingIfNeeded: recordSize >> (8 * (3 - $0))) }
        header.append(UInt8(P256Point.length))
        header += serverKey.publicKey
        return header + AES128GCM.seal(plaintext + [0x02], key: key, nonce: nonce)
    }

    /// RFC 8291 section 3.4 and RFC 8188 section 2.2: the content-encryption key and nonce.
    private static func keys(
        secret: [UInt8],
        authSecret: [UInt8],
        userAgentPublic: [UInt8],
        serverPublic: [UInt8],
        salt: [UInt8]
    ) -> (key: [UInt8], nonce: [UInt8]) {
        let keyInfo = Array("WebPush: info".utf8) + [0] + userAgentPublic + serverPublic
        let ikm = HKDF.derive(salt: authSecret, inputKey: secret, info: keyInfo, length: 32)
        let prk = HKDF.extract(salt: salt, inputKey: ikm)
        let key = HKDF.expand(prk, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = HKDF.expand(prk, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        return (key, nonce)
    }
}

/// Why a Web Push body could not be decrypted.
public enum WebPushDecryptionError: Error, Sendable, Equatable, CustomStringConvertible {
    case tooShort(Int)
    case keyIDLength(Int)
    case recordSize(Int)
    case severalRecords(recordSize: Int, bytes: Int)
    /// The key id is not a P-256 point.
    case serverKey
    /// The tag does not verify: another subscription's keys, or a body changed on the way.
    case authentication
    /// The record does not end with the last record's delimiter (0x02).
    case delimiter

    public var description: String {
        switch self {
        case .tooShort(let count): "the body is \(count) bytes, too short for an aes128gcm header and record"
        case .keyIDLength(let length): "the key id is \(length) bytes; a P-256 public key is 65"
        case .recordSize(let size): "the record size \(size) is below 18"
        case .severalRecords(let size, let bytes):
            "the body holds \(bytes) bytes of records at \(size) bytes each; Web Push sends one record"
        case .serverKey: "the key id is not a P-256 public key"
        case .authentication: "the body does not decrypt with this subscription's keys (the tag does not verify)"
        case .delimiter: "the decrypted record does not end with the last record's delimiter 0x02"
        }
    }
}

/// HKDF with SHA-256 (RFC 5869), for outputs of at most one block (32 bytes), which is all Web
/// Push derives.
enum HKDF {
    static func extract(salt: [UInt8], inputKey: [UInt8]) -> [UInt8] {
        hmacSHA256(key: salt, inputKey)
    }

    static func expand(_ prk: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length <= 32, "one HMAC-SHA-256 block")
        return Array(hmacSHA256(key: prk, info + [1]).prefix(length))
    }

    static func derive(salt: [UInt8], inputKey: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        expand(extract(salt: salt, inputKey: inputKey), info: info, length: length)
    }

    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let done = key.withUnsafeBytes { keyBytes in
            data.withUnsafeBufferPointer { input in
                out.withUnsafeMutableBufferPointer { output in
                    EVP_Q_mac(
                        nil,
                        "HMAC",
                        nil,
                        "SHA256",
                        nil,
                        keyBytes.baseAddress,
                        keyBytes.count,
                        input.baseAddress,
                        input.count,
                        output.baseAddress,
                        output.count,
                        &length
                    )
                }
            }
        }
        guard done != nil, length == 32 else {
            preconditionFailure("HMAC-SHA-256 failed: \(OpenSSLErrorQueue.drain())")
        }
        return out
    }
}

/// AES-128-GCM with a 12-byte nonce and a 16-byte tag after the ciphertext.
enum AES128GCM {
    /// The plaintext, or nil when the tag does not verify.
    static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        guard sealed.count >= WebPushEncryption.tagLength, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let ciphertext = Array(sealed.dropLast(WebPushEncryption.tagLength))
        var tag = Array(sealed.suffix(WebPushEncryption.tagLength))
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var written: Int32 = 0
        var final: Int32 = 0
        let opened =
            EVP_DecryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1
            && EVP_DecryptUpdate(context, &out, &written, ciphertext, Int32(ciphertext.count)) == 1
            && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tag.count), &tag) == 1
            && out.withUnsafeMutableBufferPointer {
                EVP_DecryptFinal_ex(context, $0.baseAddress! + Int(written), &final)
            } == 1
        guard opened else {
            _ = OpenSSLErrorQueue.drain()
            return nil
        }
        return Array(out.prefix(Int(written + final)))
    }

    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        guard let context = EVP_CIPHER_CTX_new() else { preconditionFailure("EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var written: Int32 = 0
        var final: Int32 = 0
        var tag = [UInt8](repeating: 0, count: WebPushEncryption.tagLength)
        let sealed =
            EVP_EncryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1
            && EVP_EncryptUpdate(context, &out, &written, plaintext, Int32(plaintext.count)) == 1
            && out.withUnsafeMutableBufferPointer {
                EVP_EncryptFinal_ex(context, $0.baseAddress! + Int(written), &final)
            } == 1
            && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tag.count), &tag) == 1
        guard sealed else { preconditionFailure("AES-128-GCM failed: \(OpenSSLErrorQueue.drain())") }
        return Array(out.prefix(Int(written + final))) + tag
    }
}
