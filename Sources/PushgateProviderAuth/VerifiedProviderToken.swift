import PushgateModel

/// A token whose signature, key and team checked out. Whether it is valid *now* depends on the
/// clock, so that is asked each time (``refusal(atMillis:)``) rather than decided once.
struct VerifiedProviderToken: Sendable {
    /// The whole `authorization` header value it came in: the cache key.
    let authorization: String
    let key: ProviderKey
    let issuedAt: Int64
    /// Later than this, the token is expired.
    let expiresAtMillis: Int64
    /// Earlier than this, `iat` lies too far ahead of the gateway's clock.
    let usableFromMillis: Int64

    init(authorization: String, key: ProviderKey, issuedAt: Int64) {
        self.authorization = authorization
        self.key = key
        self.issuedAt = issuedAt
        // ProviderToken bounds iat, so these cannot overflow.
        self.expiresAtMillis = (issuedAt + ProviderTokenRules.lifetime) * 1000
        self.usableFromMillis = (issuedAt - ProviderTokenRules.allowedFutureSkew) * 1000
    }

    func isExpired(atMillis now: Int64) -> Bool {
        now > expiresAtMillis
    }

    /// Why the token cannot be used at `now`, or nil when it can. (Why a future `iat` is
    /// `InvalidProviderToken`: see ``ProviderConnectionAuth``.)
    func refusal(atMillis now: Int64) -> Refusal? {
        if now > expiresAtMillis {
            let age = now / 1000 - issuedAt
            return Refusal(
                .expiredProviderToken,
                "the token was issued \(age) s ago (iat \(issuedAt)); tokens are valid for \(ProviderTokenRules.lifetime) s: sign a new one"
            )
        }
        if now < usableFromMillis {
            let ahead = issuedAt - now / 1000
            return Refusal(
                .invalidProviderToken,
                "iat \(issuedAt) is \(ahead) s ahead of the gateway's clock (at most \(ProviderTokenRules.allowedFutureSkew) s is tolerated); check the provider's clock"
            )
        }
        return nil
    }
}

extension ProviderKeyring {
    /// Parses and verifies the token in an `authorization` header value against these keys: one
    /// JSON parse and at most one ECDSA verification. Clock checks are left to the caller.
    func verify(authorization: String) -> Result<VerifiedProviderToken, Refusal> {
        let token: ProviderToken
        switch ProviderToken.bearerToken(in: authorization).flatMap(ProviderToken.parse) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let parsed): token = parsed
        }
        // An unknown kid and a bad signature get one answer, after one signature check each: a
        // client without a key must not learn which key ids exist.
        let doesNotVerify = Refusal(
            .invalidProviderToken,
            "the token does not verify: no provider key with kid \"\(token.keyID.prefix(64))\" is configured on this gateway, or the signature was not made with that key's .p8"
        )
        guard let key = key(id: token.keyID) else {
            _ = anyKey?.publicKey.verify(signature: token.signature, message: token.signingInput.utf8)
            return .failure(doesNotVerify)
        }
        guard key.publicKey.verify(signature: token.signature, message: token.signingInput.utf8) else {
            return .failure(doesNotVerify)
        }
        guard token.issuer == key.teamID else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "iss \"\(token.issuer.prefix(64))\" is not the team of key \"\(key.keyID)\"; set iss to \"\(key.teamID)\""
                )
            )
        }
        if let environment, let keyEnvironment = key.environment, keyEnvironment != environment {
            return .failure(
                Refusal(
                    .badEnvironmentKeyIdInToken,
                    "key \"\(key.keyID)\" is for \(keyEnvironment.rawValue), but this gateway is \(environment.rawValue)"
                )
            )
        }
        return .success(VerifiedProviderToken(authorization: authorization, key: key, issuedAt: token.issuedAt))
    }
}
