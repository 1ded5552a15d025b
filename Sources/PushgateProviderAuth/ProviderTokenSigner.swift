import PushgateCore
import PushgateCrypto

/// Mints APNs provider tokens for one key, reusing each for
/// ``ProviderTokenRules/signerReuse`` (50 minutes) so that a connection never switches tokens
/// faster than APNs allows nor sends one that has expired.
public struct ProviderTokenSigner: Sendable {
    public let keyID: String
    public let teamID: String
    private let privateKey: ES256PrivateKey
    private var cached: (token: String, issuedAt: Int64)?

    public init(privateKey: ES256PrivateKey, keyID: String, teamID: String) {
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
    }

    /// The token to send at `nowMillis`: the cached one while it is younger than 50 minutes, else
    /// a new one with `iat` = now in whole seconds. A clock that went backwards past the cached
    /// `iat` also gets a new token, since the old one would look issued in the future.
    public mutating func token(nowMillis: Int64) -> String {
        let now = nowMillis / 1000
        if let cached, now >= cached.issuedAt, now - cached.issuedAt < ProviderTokenRules.signerReuse {
            return cached.token
        }
        let header = #"{"alg":"ES256","kid":"# + JSONText.quote(keyID) + "}"
        let claims = #"{"iss":"# + JSONText.quote(teamID) + #","iat":"# + String(now) + "}"
        let signingInput = Base64URL.encode(header.utf8) + "." + Base64URL.encode(claims.utf8)
        let token = signingInput + "." + Base64URL.encode(privateKey.sign(signingInput.utf8))
        cached = (token, now)
        return token
    }
}
