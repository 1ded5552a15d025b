import COpenSSL

/// The certificate a peer presented and OpenSSL verified, copied out of OpenSSL into Swift values.
///
/// On a server with client certificates this identifies the client; for an APNs-style provider
/// certificate the topic it may push to is ``userID``.
public struct PeerCertificate: Sendable, Equatable {
    /// The subject on one line in RFC 2253 form (most specific attribute first), with non-ASCII text
    /// kept as UTF-8, e.g.
    /// `UID=com.example.app,CN=Apple Push Services: com.example.app,OU=TEAM123456,O=Example Inc,C=US`.
    public var subject: String
    /// The subject's first CN attribute.
    public var commonName: String?
    /// The subject's first UID attribute (OID 0.9.2342.19200300.100.1.1).
    public var userID: String?
    /// The serial number in upper-case hex without leading zeros, as `openssl x509 -serial` prints it.
    public var serialNumberHex: String
    /// When the certificate expires, in seconds since 1970-01-01T00:00:00Z; nil if OpenSSL cannot
    /// read the time.
    public var notAfter: Int64?
    /// The whole certificate, DER-encoded.
    public var der: [UInt8]

    public init(
        subject: String,
        commonName: String?,
        userID: String?,
        serialNumberHex: String,
        notAfter: Int64?,
        der: [UInt8]
    ) {
        self.subject = subject
        self.commonName = commonName
        self.userID = userID
        self.serialNumberHex = serialNumberHex
        self.notAfter = notAfter
        self.der = der
    }
}

extension PeerCertificate {
    /// Copies what Pushgate needs out of an `X509*`, which stays owned by the caller.
    init?(x509: OpaquePointer) {
        guard let name = X509_get_subject_name(x509),
            let subject = Self.rfc2253(name),
            let serialNumberHex = Self.hex(X509_get0_serialNumber(x509)),
            let der = Self.der(x509)
        else {
            return nil
        }
        self.init(
            subject: subject,
            commonName: Self.firstValue(of: NID_commonName, in: name),
            userID: Self.firstValue(of: NID_userId, in: name),
            serialNumberHex: serialNumberHex,
            notAfter: Self.epochSeconds(X509_get0_notAfter(x509)),
            der: der
        )
    }

    private static func rfc2253(_ name: OpaquePointer) -> String? {
        guard let bio = BIO_new(BIO_s_mem()) else {
            return nil
        }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, pg_XN_FLAG_RFC2253_UTF8()) >= 0 else {
            return nil
        }
        let length = BIO_ctrl_pending(bio)
        let bytes = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            var read = 0
            _ = BIO_read_ex(bio, buffer.baseAddress, length, &read)
            initialized = read
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func firstValue(of nid: Int32, in name: OpaquePointer) -> String? {
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index),
            let value = X509_NAME_ENTRY_get_data(entry)
        else {
            return nil
        }
        // Attribute values come in several ASN.1 string types; this converts any of them to UTF-8.
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, value)
        guard length >= 0, let utf8 else {
            return nil
        }
        defer { pg_OPENSSL_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }

    private static func hex(_ serial: UnsafePointer<ASN1_INTEGER>?) -> String? {
        guard let number = ASN1_INTEGER_to_BN(serial, nil) else {
            return nil
        }
        defer { BN_free(number) }
        guard let hex = BN_bn2hex(number) else {
            return nil
        }
        defer { pg_OPENSSL_free(hex) }
        return String(cString: hex)
    }

    private static func epochSeconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time, let epoch = ASN1_TIME_set(nil, 0) else {
            return nil
        }
        defer { ASN1_TIME_free(epoch) }
        var days: Int32 = 0
        var seconds: Int32 = 0
        guard ASN1_TIME_diff(&days, &seconds, epoch, time) == 1 else {
            return nil
        }
        return Int64(days) * 86_400 + Int64(seconds)
    }

    private static func der(_ x509: OpaquePointer) -> [UInt8]? {
        let length = i2d_X509(x509, nil)
        guard length > 0 else {
            return nil
        }
        return [UInt8](unsafeUninitializedCapacity: Int(length)) { buffer, initialized in
            // i2d_* advance the pointer they are given past what they wrote.
            var cursor = buffer.baseAddress
            initialized = max(0, Int(i2d_X509(x509, &cursor)))
        }
    }
}
