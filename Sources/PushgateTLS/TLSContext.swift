import COpenSSL

/// The shared, immutable half of TLS: certificates, keys, trust, ALPN and protocol settings, loaded
/// once and used by every connection of a listener (or to one upstream).
///
/// Build one with ``server(_:)`` or ``client(_:)`` at startup (loading reads files, so keep it off the
/// event loops) and hand it to each ``TLSHandler``. It owns an OpenSSL `SSL_CTX`, which is never
/// changed after these factories return; OpenSSL allows `SSL_new` on such a context from any thread,
/// which is what makes sharing it across event loops sound.
public final class TLSContext: @unchecked Sendable {
    enum Role {
        case server
        case client
    }

    let role: Role
    let sslContext: OpaquePointer
    /// Client only: the default for ``TLSHandler/init(context:serverName:)``.
    let serverName: String?
    /// Server only: the argument of the ALPN select callback. Connections keep their context alive,
    /// so this outlives every `SSL` that can call back with it.
    private let alpnPreference: ALPNPreference?

    private init(
        method: OpaquePointer?,
        role: Role,
        serverName: String?,
        alpnPreference: ALPNPreference?
    ) throws(TLSError) {
        ERR_clear_error()
        guard let sslContext = SSL_CTX_new(method) else {
            throw TLSError.draining("cannot create an OpenSSL SSL_CTX")
        }
        self.sslContext = sslContext
        self.role = role
        self.serverName = serverName
        self.alpnPreference = alpnPreference
    }

    /// What servers and clients share. Not in `init`, so that a failure here releases a fully
    /// initialised object and `deinit` frees the `SSL_CTX`.
    private func applyCommonSettings() throws(TLSError) {
        // HTTP/2 requires TLS 1.2 or later (RFC 9113 §9.2).
        guard pg_SSL_CTX_set_min_proto_version(self.sslContext, TLS1_2_VERSION) == 1 else {
            throw TLSError.draining("cannot set the minimum TLS version to 1.2")
        }
        // Gives the 34 KB of read/write buffers back while a connection is idle; a gateway holds many
        // mostly idle connections.
        _ = pg_SSL_CTX_set_mode(self.sslContext, Int(SSL_MODE_RELEASE_BUFFERS))
    }

    deinit {
        SSL_CTX_free(self.sslContext)
    }

    /// Loads a server's certificate, key and (optionally) client CAs.
    ///
    /// - Throws: ``TLSError`` naming the file that could not be loaded or the setting that is
    ///   inconsistent.
    public static func server(_ configuration: TLSServerConfiguration) throws(TLSError) -> TLSContext {
        if configuration.requireClientCertificate && configuration.clientCAPath == nil {
            throw TLSError("requireClientCertificate is set but clientCAPath is not: no CA to verify clients against")
        }
        let alpnProtocols = try ALPNPreference.encode(configuration.alpnProtocols)
        let context = try TLSContext(
            method: TLS_server_method(),
            role: .server,
            serverName: nil,
            alpnPreference: alpnProtocols.isEmpty ? nil : ALPNPreference(alpnProtocols)
        )
        try context.applyCommonSettings()
        let ctx = context.sslContext

        _ = SSL_CTX_set_options(
            ctx,
            pg_SSL_OP_NO_RENEGOTIATION() | pg_SSL_OP_NO_COMPRESSION() | pg_SSL_OP_CIPHER_SERVER_PREFERENCE()
        )
        // TLS 1.2 only (TLS 1.3 suites are all AEAD with ephemeral keys already): forward secrecy and
        // AEAD, as RFC 9113 §9.2.2 expects of HTTP/2; RSA variants kept for operators with RSA keys.
        let tls12Ciphers = [
            "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
            "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
            "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
        ].joined(separator: ":")
        guard SSL_CTX_set_cipher_list(ctx, tls12Ciphers) == 1 else {
            throw TLSError.draining("cannot set the TLS 1.2 cipher list")
        }
        // Without a session id context OpenSSL refuses to resume any session once client
        // certificates are verified.
        let sessionIDContext = Array("pushgate".utf8)
        guard SSL_CTX_set_session_id_context(ctx, sessionIDContext, UInt32(sessionIDContext.count)) == 1 else {
            throw TLSError.draining("cannot set the TLS session id context")
        }

        try context.useCertificate(
            chainPath: configuration.certificateChainPath,
            keyPath: configuration.privateKeyPath
        )

        if let alpnPreference = context.alpnPreference {
            SSL_CTX_set_alpn_select_cb(
                ctx,
                { _, selected, selectedLength, offered, offeredLength, argument in
                    TLSContext.selectALPN(selected, selectedLength, offered, offeredLength, argument)
                },
                Unmanaged.passUnretained(alpnPreference).toOpaque()
            )
        }

        if let clientCAPath = configuration.clientCAPath {
            guard SSL_CTX_load_verify_locations(ctx, clientCAPath, nil) == 1 else {
                throw TLSError.draining("cannot load client CA certificates from \(clientCAPath)")
            }
            // These names go into the CertificateRequest so a client holding several certificates
            // knows which one to present.
            guard let names = SSL_load_client_CA_file(clientCAPath) else {
                throw TLSError.draining("cannot read client CA names from \(clientCAPath)")
            }
            SSL_CTX_set_client_CA_list(ctx, names)
            let failIfNoCertificate = configuration.requireClientCertificate ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | failIfNoCertificate, nil)
        }
        return context
    }

    /// Loads a client's trust roots and (optionally) its certificate and key.
    ///
    /// - Throws: ``TLSError`` naming the file that could not be loaded or the setting that is
    ///   inconsistent.
    public static func client(_ configuration: TLSClientConfiguration) throws(TLSError) -> TLSContext {
        let context = try TLSContext(
            method: TLS_client_method(),
            role: .client,
            serverName: configuration.serverName,
            alpnPreference: nil
        )
        try context.applyCommonSettings()
        let ctx = context.sslContext

        if let trustRootsPath = configuration.trustRootsPath {
            guard SSL_CTX_load_verify_locations(ctx, trustRootsPath, nil) == 1 else {
                throw TLSError.draining("cannot load TLS trust roots from \(trustRootsPath)")
            }
        } else if SSL_CTX_set_default_verify_paths(ctx) != 1 {
            throw TLSError.draining("cannot load the system's default TLS trust roots")
        }
        SSL_CTX_set_verify(ctx, configuration.verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)

        switch (configuration.certificateChainPath, configuration.privateKeyPath) {
        case let (chainPath?, keyPath?):
            try context.useCertificate(chainPath: chainPath, keyPath: keyPath)
        case (nil, nil):
            break
        case (let chainPath?, nil):
            throw TLSError("client certificate \(chainPath) is configured without privateKeyPath")
        case (nil, let keyPath?):
            throw TLSError("client private key \(keyPath) is configured without certificateChainPath")
        }

        if !configuration.alpnProtocols.isEmpty {
            let wire = try ALPNPreference.encode(configuration.alpnProtocols).flatMap { [UInt8($0.count)] + $0 }
            // Unlike nearly every other OpenSSL call, this one returns 0 on success.
            guard SSL_CTX_set_alpn_protos(ctx, wire, UInt32(wire.count)) == 0 else {
                throw TLSError.draining("cannot set the ALPN protocols \(configuration.alpnProtocols)")
            }
        }
        return context
    }

    private func useCertificate(chainPath: String, keyPath: String) throws(TLSError) {
        guard SSL_CTX_use_certificate_chain_file(self.sslContext, chainPath) == 1 else {
            throw TLSError.draining("cannot load TLS certificate chain from \(chainPath)")
        }
        guard SSL_CTX_use_PrivateKey_file(self.sslContext, keyPath, SSL_FILETYPE_PEM) == 1 else {
            throw TLSError.draining("cannot load TLS private key from \(keyPath)")
        }
        // A key of another type than the certificate loads without complaint; only this catches it.
        guard SSL_CTX_check_private_key(self.sslContext) == 1 else {
            throw TLSError.draining("TLS private key \(keyPath) does not belong to the certificate in \(chainPath)")
        }
    }

    private static func selectALPN(
        _ selected: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
        _ selectedLength: UnsafeMutablePointer<UInt8>?,
        _ offered: UnsafePointer<UInt8>?,
        _ offeredLength: UInt32,
        _ argument: UnsafeMutableRawPointer?
    ) -> Int32 {
        guard let selected, let selectedLength, let offered, let argument else {
            return SSL_TLSEXT_ERR_NOACK
        }
        let preference = Unmanaged<ALPNPreference>.fromOpaque(argument).takeUnretainedValue()
        let offeredList = UnsafeBufferPointer(start: offered, count: Int(offeredLength))
        // NOACK rather than a fatal alert: a client that speaks none of our protocols may still be
        // served (the transport falls back to sniffing), so ALPN must not end the handshake.
        guard let choice = preference.select(from: offeredList) else {
            return SSL_TLSEXT_ERR_NOACK
        }
        // OpenSSL copies the choice out of the client's list, which lives as long as this call needs.
        selected.pointee = offered + choice.lowerBound
        selectedLength.pointee = UInt8(choice.count)
        return SSL_TLSEXT_ERR_OK
    }
}

/// ALPN protocol names in preference order, as bytes.
final class ALPNPreference: Sendable {
    let protocols: [[UInt8]]

    init(_ protocols: [[UInt8]]) {
        self.protocols = protocols
    }

    /// The names as the byte strings ALPN carries, each 1 to 255 bytes long.
    static func encode(_ names: [String]) throws(TLSError) -> [[UInt8]] {
        var encoded: [[UInt8]] = []
        for name in names {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSError("ALPN protocol name \"\(name)\" must be 1 to 255 bytes long")
            }
            encoded.append(bytes)
        }
        return encoded
    }

    /// The range, within a client's length-prefixed ALPN list, of the protocol we like best.
    func select(from offered: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var offeredRanges: [Range<Int>] = []
        var index = 0
        while index < offered.count {
            let length = Int(offered[index])
            let range = (index + 1)..<(index + 1 + length)
            guard length > 0, range.upperBound <= offered.count else {
                break
            }
            offeredRanges.append(range)
            index = range.upperBound
        }
        for wanted in self.protocols {
            if let match = offeredRanges.first(where: { offered[$0].elementsEqual(wanted) }) {
                return match
            }
        }
        return nil
    }
}
