import COpenSSL
import NIOCore

/// One TLS session as a byte transformer, with no I/O of its own: ciphertext from the network goes
/// in through ``receive(_:)``, plaintext comes out of ``readPlaintext(into:)``, plaintext goes in
/// through ``writePlaintext(_:)`` and ciphertext for the network comes out of
/// ``drainCiphertext(allocator:)``.
///
/// It owns an OpenSSL `SSL` wired to two memory BIOs: `networkIn` holds ciphertext received and not
/// yet decrypted, `networkOut` ciphertext produced and not yet sent. Any call may produce output
/// (handshake flights, TLS 1.3 session tickets, alerts), so callers drain after every call.
/// Not thread-safe: it belongs to one event loop, like its handler.
final class TLSConnection {
    enum HandshakeOutcome {
        case complete
        case needsMoreInput
        case failed(TLSError)
    }

    enum ReadOutcome {
        /// Everything decryptable was decrypted; the rest of the input is an incomplete record.
        case needsMoreInput
        /// The peer sent close_notify: it will send no more data.
        case peerClosed
        case failed(TLSError)
    }

    /// Memory BIOs never shrink: one 1 MiB response would pin 1.4 MB to the connection for the rest
    /// of its life. A BIO that grew past this is replaced once (nearly) drained
    /// (``releaseOversizedBuffers()``), as `SSL_MODE_RELEASE_BUFFERS` does for OpenSSL's own buffers.
    /// Below it (handshake flights, small frames) the buffer is kept and reused.
    static let retainedBufferLimit = 8 * 1024

    /// Keeps the `SSL_CTX` and the ALPN callback's argument alive as long as this `SSL`.
    private let context: TLSContext
    private let ssl: OpaquePointer
    private var networkIn: OpaquePointer
    private var networkOut: OpaquePointer

    init(context: TLSContext, serverName: String?) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.sslContext) else {
            throw TLSError.draining("cannot create an OpenSSL SSL")
        }
        let networkIn = BIO_new(BIO_s_mem())
        let networkOut = BIO_new(BIO_s_mem())
        guard let networkIn, let networkOut else {
            // BIO_free(NULL) does nothing, so whichever was created is freed.
            BIO_free(networkIn)
            BIO_free(networkOut)
            SSL_free(ssl)
            throw TLSError.draining("cannot create OpenSSL memory BIOs")
        }
        // From here SSL_free frees the BIOs too.
        SSL_set_bio(ssl, networkIn, networkOut)
        switch context.role {
        case .server:
            SSL_set_accept_state(ssl)
        case .client:
            SSL_set_connect_state(ssl)
            if let serverName {
                do {
                    try Self.setServerName(serverName, on: ssl)
                } catch {
                    SSL_free(ssl)
                    throw error
                }
            }
        }
        self.context = context
        self.ssl = ssl
        self.networkIn = networkIn
        self.networkOut = networkOut
    }

    deinit {
        SSL_free(self.ssl)
    }

    private static func setServerName(_ serverName: String, on ssl: OpaquePointer) throws(TLSError) {
        if let address = a2i_IPADDRESS(serverName) {
            ASN1_OCTET_STRING_free(address)
            // RFC 6066 §3: SNI carries host names only, so an IP literal is only checked, not sent.
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else {
                throw TLSError.draining("cannot verify the TLS server against IP address \(serverName)")
            }
            return
        }
        ERR_clear_error()
        guard SSL_set1_host(ssl, serverName) == 1 else {
            throw TLSError.draining("cannot verify the TLS server against host name \"\(serverName)\"")
        }
        guard pg_SSL_set_tlsext_host_name(ssl, serverName) == 1 else {
            throw TLSError.draining("cannot send \"\(serverName)\" as TLS server name (SNI)")
        }
    }

    /// Queues ciphertext from the peer for the next handshake step or read.
    func receive(_ ciphertext: ByteBuffer) throws(TLSError) {
        ERR_clear_error()
        let accepted = ciphertext.withUnsafeReadableBytes { bytes in
            var written = 0
            return bytes.isEmpty || BIO_write_ex(self.networkIn, bytes.baseAddress, bytes.count, &written) == 1
        }
        guard accepted else {
            throw TLSError.draining("cannot buffer \(ciphertext.readableBytes) bytes of TLS input")
        }
    }

    func doHandshake() -> HandshakeOutcome {
        ERR_clear_error()
        let result = SSL_do_handshake(self.ssl)
        if result == 1 {
            return .complete
        }
        switch SSL_get_error(self.ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .needsMoreInput
        default:
            return .failed(self.failure("TLS handshake failed"))
        }
    }

    /// Decrypts all complete records received so far, appending the plaintext to `buffer`.
    func readPlaintext(into buffer: inout ByteBuffer) -> ReadOutcome {
        while true {
            ERR_clear_error()
            var result: Int32 = 0
            // One TLS record carries at most 16 KiB of plaintext.
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 16 * 1024) { space in
                var read = 0
                result = SSL_read_ex(self.ssl, space.baseAddress, space.count, &read)
                return read
            }
            if result == 1 {
                continue
            }
            switch SSL_get_error(self.ssl, result) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return .needsMoreInput
            case SSL_ERROR_ZERO_RETURN:
                return .peerClosed
            default:
                return .failed(self.failure("TLS read failed"))
            }
        }
    }

    /// Encrypts `plaintext` in one call; OpenSSL cuts it into as many records as it needs.
    func writePlaintext(_ plaintext: ByteBuffer) throws(TLSError) {
        guard plaintext.readableBytes > 0 else {
            return
        }
        ERR_clear_error()
        let result = plaintext.withUnsafeReadableBytes { bytes in
            var written = 0
            return SSL_write_ex(self.ssl, bytes.baseAddress, bytes.count, &written)
        }
        guard result == 1 else {
            throw self.failure("TLS write of \(plaintext.readableBytes) bytes failed")
        }
    }

    /// Queues close_notify. The peer's own close_notify is not awaited: the channel closes next.
    func shutdown() {
        ERR_clear_error()
        // Fails only when the session is already broken (after a fatal alert), and then there is
        // nothing left to say to the peer; the queue is cleared so the next connection on this
        // thread is not blamed.
        _ = SSL_shutdown(self.ssl)
        ERR_clear_error()
    }

    /// Everything produced for the peer so far, or nil if nothing is waiting. Also the point where
    /// oversized BIO buffers are given back, since callers drain after every call.
    func drainCiphertext(allocator: ByteBufferAllocator) -> ByteBuffer? {
        defer { self.releaseOversizedBuffers() }
        let pending = BIO_ctrl_pending(self.networkOut)
        guard pending > 0 else {
            return nil
        }
        var buffer = allocator.buffer(capacity: pending)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { space in
            var read = 0
            _ = BIO_read_ex(self.networkOut, space.baseAddress, pending, &read)
            return read
        }
        return buffer
    }

    /// The ALPN protocol agreed in the handshake, if any.
    var negotiatedProtocol: String? {
        var name: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &name, &length)
        guard let name, length > 0 else {
            return nil
        }
        return String(decoding: UnsafeBufferPointer(start: name, count: Int(length)), as: UTF8.self)
    }

    /// The peer's certificate, if it sent one and it verified. With verification off on a client,
    /// an unverified server certificate is not returned.
    var verifiedPeerCertificate: PeerCertificate? {
        guard SSL_get_verify_result(self.ssl) == Int(X509_V_OK), let x509 = SSL_get0_peer_certificate(self.ssl) else {
            return nil
        }
        return PeerCertificate(x509: x509)
    }

    /// Bytes of buffer memory the two BIOs hold on to, used or not.
    var bufferCapacity: Int {
        Self.capacity(of: self.networkIn) + Self.capacity(of: self.networkOut)
    }

    private func failure(_ message: String) -> TLSError {
        let result = SSL_get_verify_result(self.ssl)
        guard result != Int(X509_V_OK), let reason = X509_verify_cert_error_string(result) else {
            // A fatal alert from the peer is queued as the SSL library's reason 1000 + its code.
            let code = ERR_peek_error()
            let alert =
                ERR_GET_LIB(code) == ERR_LIB_SSL
                && (SSL_AD_REASON_OFFSET..<SSL_AD_REASON_OFFSET + 256).contains(ERR_GET_REASON(code))
            return TLSError.draining(message, kind: alert ? .refusedByPeer : .other)
        }
        // The queue only says "certificate verify failed"; this says why.
        return TLSError.draining("\(message) (peer certificate: \(String(cString: reason)))", kind: .peerCertificate)
    }

    private func releaseOversizedBuffers() {
        if let fresh = Self.replacement(for: self.networkIn) {
            SSL_set0_rbio(self.ssl, fresh)
            self.networkIn = fresh
        }
        if let fresh = Self.replacement(for: self.networkOut) {
            SSL_set0_wbio(self.ssl, fresh)
            self.networkOut = fresh
        }
    }

    /// A fresh BIO holding what is left in `bio` (at most a partial record), if `bio` has grown past
    /// ``retainedBufferLimit`` and is mostly empty. The second condition stops a record arriving in
    /// many small reads from being copied to a new BIO on each of them.
    private static func replacement(for bio: OpaquePointer) -> OpaquePointer? {
        guard let memory = Self.memory(of: bio), memory.pointee.max > Self.retainedBufferLimit,
            memory.pointee.length <= memory.pointee.max / 4,
            let fresh = BIO_new(BIO_s_mem())
        else {
            return nil
        }
        var written = 0
        guard
            memory.pointee.length == 0
                || BIO_write_ex(fresh, memory.pointee.data, memory.pointee.length, &written) == 1
        else {
            BIO_free(fresh)
            return nil
        }
        return fresh
    }

    private static func capacity(of bio: OpaquePointer) -> Int {
        Self.memory(of: bio)?.pointee.max ?? 0
    }

    /// The BIO's buffer; its unread bytes start at `data` (OpenSSL moves them there for this call).
    private static func memory(of bio: OpaquePointer) -> UnsafeMutablePointer<BUF_MEM>? {
        var memory: UnsafeMutablePointer<BUF_MEM>?
        guard pg_BIO_get_mem_ptr(bio, &memory) == 1 else {
            return nil
        }
        return memory
    }
}
