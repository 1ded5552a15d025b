import Foundation
import PushgateCrypto
import PushgateDeviceClient
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

    /// The cached token while the signer may reuse it (younger than 50 minutes, minted by this
    /// key id and team), else a new one, written back (mode 0600).
    func token(
        keyFile: String,
        keyID: String,
        teamID: String,
        nowMillis: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
    ) throws -> String {
        var previous: (token: String, issuedAt: Int64)?
        if let cached = try? String(contentsOfFile: path, encoding: .utf8) {
            let parts = cached.split(separator: " ", maxSplits: 1).map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if parts.count == 2, let issuedAt = Int64(parts[0]) { previous = (parts[1], issuedAt) }
        }
        var signer = try Self.signer(keyFile: keyFile, keyID: keyID, teamID: teamID, reusing: previous)
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

    /// A new token signed with the `.p8` in `keyFile`.
    static func sign(keyFile: String, keyID: String, teamID: String, nowMillis: Int64) throws -> String {
        var signer = try signer(keyFile: keyFile, keyID: keyID, teamID: teamID, reusing: nil)
        return signer.token(nowMillis: nowMillis)
    }

    private static func signer(
        keyFile: String,
        keyID: String,
        teamID: String,
        reusing previous: (token: String, issuedAt: Int64)?
    ) throws -> ProviderTokenSigner {
        guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
            throw ClientFailure(
                description: "cannot read the signing key \(keyFile) (missing, or not readable by this user)"
            )
        }
        do {
            return ProviderTokenSigner(
                privateKey: try ES256PrivateKey(pem: pem),
                keyID: keyID,
                teamID: teamID,
                reusing: previous
            )
        } catch {
            throw ClientFailure(description: "\(keyFile): \(error)")
        }
    }
}
