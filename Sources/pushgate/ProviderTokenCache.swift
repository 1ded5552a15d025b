import Foundation
import PushgateCrypto
import PushgateDeviceClient
import PushgateProviderAuth

/// A provider's `.p8`, read once, with the key id and team its tokens name.
struct ProviderSigningKey {
    var file: String
    var keyID: String
    var teamID: String
    var privateKey: ES256PrivateKey

    init(file: String, keyID: String, teamID: String) throws {
        guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw ClientFailure(
                description: "cannot read the signing key \(file) (missing, or not readable by this user)"
            )
        }
        do {
            privateKey = try ES256PrivateKey(pem: pem)
        } catch {
            throw ClientFailure(description: "\(file): \(error)")
        }
        self.file = file
        self.keyID = keyID
        self.teamID = teamID
    }

    /// The first 16 hex digits of the SHA-256 of the public key (its DER SubjectPublicKeyInfo,
    /// what `openssl pkey -pubout -outform DER | sha256sum` hashes): which key this is, whatever
    /// its file or key id.
    var fingerprint: String {
        let base64 = privateKey.publicKey.pemRepresentation.split(separator: "\n").filter { !$0.hasPrefix("-----") }
            .joined()
        let der = Data(base64Encoded: base64).map(Array.init) ?? []
        return SHA256.hash(der).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// A new token signed now.
    func sign(nowMillis: Int64) -> String {
        var signer = ProviderTokenSigner(privateKey: privateKey, keyID: keyID, teamID: teamID)
        return signer.token(nowMillis: nowMillis)
    }

    /// Whether `token`'s signature was made with this key.
    func signed(_ token: String) -> Bool {
        guard let dot = token.lastIndex(of: "."), let signature = Base64URL.decode(token[token.index(after: dot)...])
        else { return false }
        return privateKey.publicKey.verify(signature: signature, message: Array(token[..<dot].utf8))
    }
}

/// A provider token kept in a file between `send` runs: APNs wants one token reused for its
/// hour (refreshed no more than every 20 minutes), not a new one per push. A cached token is
/// used only by the key that signed it: a `.p8` replaced behind the same key id, or another key
/// given the same cache file, signs a token of its own.
struct ProviderTokenCache {
    var path: String

    /// `~/.cache/pushgate/TEAM.KEYID.FINGERPRINT.jwt` (`$XDG_CACHE_HOME/pushgate/...` when set):
    /// one file per key, so that two keys used in turn under one key id do not replace each
    /// other's token.
    static func defaultPath(for key: ProviderSigningKey) -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_CACHE_HOME"] ?? ((environment["HOME"] ?? ".") + "/.cache")
        return "\(base)/pushgate/\(key.teamID).\(key.keyID).\(key.fingerprint).jwt"
    }

    /// The cached token while the signer may reuse it (younger than 50 minutes, minted by this
    /// key, key id and team), else a new one, written back (mode 0600).
    func token(
        for key: ProviderSigningKey,
        nowMillis: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
    ) -> String {
        var previous: (token: String, issuedAt: Int64)?
        if let cached = try? String(contentsOfFile: path, encoding: .utf8) {
            let parts = cached.split(separator: " ", maxSplits: 1).map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if parts.count == 2, let issuedAt = Int64(parts[0]), key.signed(parts[1]) {
                previous = (parts[1], issuedAt)
            }
        }
        var signer = ProviderTokenSigner(
            privateKey: key.privateKey,
            keyID: key.keyID,
            teamID: key.teamID,
            reusing: previous
        )
        let token = signer.token(nowMillis: nowMillis)
        guard token != previous?.token, let issuedAt = signer.issued?.issuedAt else { return token }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        // A cache that cannot be written only costs a new token next time.
        _ = FileManager.default.createFile(
            atPath: path,
            contents: Data("\(issuedAt) \(token)\n".utf8),
            attributes: [.posixPermissions: 0o600]
        )
        return token
    }

    /// Forgets the cached token (the gateway refused it); true when there was one to forget.
    func drop() -> Bool {
        (try? FileManager.default.removeItem(atPath: path)) != nil
    }
}
