import ArgumentParser
import Foundation
import PushgateCrypto
import PushgateProviderAuth

/// A provider token kept in a file between `send` runs: APNs wants one token reused for its
/// hour (refreshed no more than every 20 minutes), not a new one per push.
struct ProviderTokenCache {
    var path: String

    static func defaultPath(teamID: String, keyID: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_CACHE_HOME"] ?? ((environment["HOME"] ?? ".") + "/.cache")
        return "\(base)/pushgate/\(teamID).\(keyID).jwt"
    }

    /// The cached token while it is younger than 50 minutes and was signed by this key, else a
    /// new one (written back, mode 0600).
    func token(keyFile: String, keyID: String, teamID: String, nowMillis: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> String {
        let now = nowMillis / 1000
        if let cached = try? String(contentsOfFile: path, encoding: .utf8) {
            let parts = cached.split(separator: " ", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            if parts.count == 2, let issuedAt = Int64(parts[0]), now >= issuedAt,
               now - issuedAt < ProviderTokenRules.signerReuse,
               parts[1].hasPrefix(Self.headerPrefix(keyID: keyID))
            {
                return parts[1]
            }
        }
        let token = try Self.sign(keyFile: keyFile, keyID: keyID, teamID: teamID, nowMillis: nowMillis)
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // A cache that cannot be written only costs a new token next time.
        _ = FileManager.default.createFile(atPath: path, contents: Data("\(now) \(token)\n".utf8), attributes: [.posixPermissions: 0o600])
        return token
    }

    /// A new token signed with the `.p8` in `keyFile`.
    static func sign(keyFile: String, keyID: String, teamID: String, nowMillis: Int64) throws -> String {
        guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
            throw ValidationError("cannot read the signing key \(keyFile)")
        }
        let key: ES256PrivateKey
        do {
            key = try ES256PrivateKey(pem: pem)
        } catch {
            throw ValidationError("\(keyFile): \(error)")
        }
        var signer = ProviderTokenSigner(privateKey: key, keyID: keyID, teamID: teamID)
        return signer.token(nowMillis: nowMillis)
    }

    /// Tokens of another key are not reused even if the cache file is shared by mistake.
    private static func headerPrefix(keyID: String) -> String {
        let header = #"{"alg":"ES256","kid":""# + keyID + #""}"#
        return Base64URL.encode(header.utf8)
    }
}
