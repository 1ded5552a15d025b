import PushgateCrypto
import PushgateModel

/// Mints APNs provider tokens for one key, reusing each for
/// ``ProviderTokenRules/signerReuse`` (50 minutes) so that a connection never switches tokens
/// faster than APNs allows nor sends one that has expired.
public struct ProviderTokenSigner: Sendable {
    public let keyID: String
    public let teamID: String
    private let privateKey: ES256PrivateKey
    private var cached: (token: String, issuedAt: Int64)?

    /// `reusing`: a token minted earlier (kept across runs, e.g. in a file) with its `iat`. It is
    /// reused like one this signer made, but only if it is one this key id and team would mint
    /// for that `iat`; anything else is ignored.
    public init(
        privateKey: ES256PrivateKey,
        keyID: String,
        teamID: String,
        reusing previous: (token: String, issuedAt: Int64)? = nil
    ) {
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
        if let previous,
            previous.token.hasPrefix(Self.signingInput(keyID: keyID, teamID: teamID, issuedAt: previous.issuedAt) + ".")
        {
            cached = previous
        }
    }

    /// The token last returned by `token(nowMillis:)` (or reused), with its `iat`.
    public var issued: (token: String, issuedAt: Int64)? { cached }

    /// The token to send at `nowMillis`: the cached one while it is younger than 50 minutes, else
    /// a new one with `iat` = now in whole seconds. A clock that went backwards past the cached
    /// `iat` also gets a new token, since the old one would look issued in the future.
    public mutating func token(nowMillis: Int64) -> String {
        let now = nowMillis / 1000
        if let cached, now >= cached.issuedAt, now - cached.issuedAt < ProviderTokenRules.signerReuse {
            return cached.token
        }
        let signingInput = Self.signingInput(keyID: keyID, teamID: teamID, issuedAt: now)
        let token = signingInput + "." + Base64URL.encode(privateKey.sign(signingInput.utf8))
        cached = (token, now)
        return token
    }

    /// Header and claims, base64url-encoded and joined: what the signature covers.
    private static func signingInput(keyID: String, teamID: String, issuedAt: Int64) -> String {
        let header = #"{"alg":"ES256","kid":"# + JSONText.quote(keyID) + "}"
        let claims = #"{"iss":"# + JSONText.quote(teamID) + #","iat":"# + String(issuedAt) + "}"
        return Base64URL.encode(header.utf8) + "." + Base64URL.encode(claims.utf8)
    }
}
