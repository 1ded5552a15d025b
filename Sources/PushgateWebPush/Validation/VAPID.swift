import PushgateCrypto
import PushgateDelivery
import PushgateModel

/// VAPID (RFC 8292): `authorization: vapid t=<JWT>, k=<key>`, the application server's ES256
/// JWT and its public key. Checked in three steps, so that the costly one can be remembered: the
/// header taken apart (`VAPIDCredential`), the token's structure and signature
/// (`VAPIDCredential.verify`, pure and the same every time for one token and key), its claims
/// against the endpoint and the clock (`VAPIDClaims.check`). Every failure is
/// `403 BadJwtToken` (Apple's word for it) with a detail saying what is wrong.
public struct VAPIDCredential: Sendable, Hashable {
    /// The JWT, `header.claims.signature`.
    public var token: String
    /// The key, an uncompressed P-256 point (65 bytes).
    public var key: [UInt8]

    /// The `t` and `k` parameters of a `vapid` authorization. Parameters are separated by commas
    /// with optional blanks; unknown ones are ignored (RFC 8292 section 3); the scheme is matched
    /// in any case. `k` may come padded, and in the standard base64 alphabet, as some senders
    /// write it.
    public static func parse(_ header: String) -> Result<VAPIDCredential, Refusal> {
        let trimmed = header.drop { $0 == " " || $0 == "\t" }
        let schemeEnd = trimmed.firstIndex { $0 == " " || $0 == "\t" } ?? trimmed.endIndex
        let scheme = trimmed[..<schemeEnd]
        guard scheme.lowercased() == "vapid" else {
            return .failure(
                refusal(
                    "the authorization header has scheme \(quoted(scheme)); VAPID is authorization: vapid t=<JWT>, k=<public key> (RFC 8292)"
                )
            )
        }
        var token: Substring?
        var key: Substring?
        for parameter in trimmed[schemeEnd...].split(separator: ",") {
            let parameter = parameter.trimmingBlanks()
            guard let equals = parameter.firstIndex(of: "=") else { continue }
            let name = parameter[..<equals].trimmingBlanks().lowercased()
            let value = parameter[parameter.index(after: equals)...].trimmingBlanks()
            if name == "t", token == nil { token = value }
            if name == "k", key == nil { key = value }
        }
        guard let token, !token.isEmpty else { return .failure(refusal("the vapid authorization has no t=<JWT>")) }
        guard let key, !key.isEmpty else {
            return .failure(refusal("the vapid authorization has no k=<public key>"))
        }
        let canonical = String(key.filter { $0 != "=" }.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
        guard let point = Base64URL.decode(canonical), point.count == 65, point.first == 0x04 else {
            return .failure(
                refusal("k is not a P-256 public key: expected 65 bytes (0x04 || x || y) in base64url")
            )
        }
        return .success(VAPIDCredential(token: String(token), key: point))
    }

    /// The key and claims of an `authorization` header, once it is taken apart and its token's
    /// structure and ES256 signature by its key hold: what a connection may remember by the
    /// header's text (`VerifiedVAPIDTokens`), leaving the claims' checks against the endpoint
    /// and the clock for each push.
    public static func verified(_ authorization: String) -> Result<VerifiedVAPID, Refusal> {
        parse(authorization).flatMap { credential in
            credential.verify().map { VerifiedVAPID(key: credential.key, claims: $0) }
        }
    }

    /// The token's claims, once its structure and ES256 signature by `key` hold.
    public func verify() -> Result<VAPIDClaims, Refusal> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .failure(refusal("the JWT has \(parts.count) parts separated by '.'; a JWT has three"))
        }
        guard let headerJSON = Base64URL.decode(parts[0]), let claimsJSON = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else {
            return .failure(refusal("the JWT is not three parts of unpadded base64url (alphabet A-Z a-z 0-9 - _)"))
        }
        let header: [String: JSONNode]
        let claims: [String: JSONNode]
        switch (Self.object(headerJSON, "header"), Self.object(claimsJSON, "claims set")) {
        case (.failure(let refusal), _), (_, .failure(let refusal)): return .failure(refusal)
        case (.success(let h), .success(let c)): (header, claims) = (h, c)
        }
        guard case .string("ES256") = header["alg"]?.value else {
            return .failure(refusal("the JWT header's alg must be \"ES256\" (RFC 8292 section 2)"))
        }
        guard header["crit"] == nil else {
            return .failure(refusal("the JWT header has crit; no critical extensions are supported"))
        }
        guard case .string(let audience) = claims["aud"]?.value else {
            return .failure(refusal("the JWT claims set has no aud; set it to the endpoint's origin"))
        }
        guard case .number(let text) = claims["exp"]?.value, let expires = Int64(text) else {
            return .failure(
                refusal(
                    "the JWT claims set has no exp as whole seconds since the epoch; set it, at most 24 hours ahead"
                )
            )
        }
        if let subject = claims["sub"], case .string = subject.value {
        } else if claims["sub"] != nil {
            return .failure(refusal("sub in the JWT claims set must be a string (a mailto: or https: URI)"))
        }
        guard let publicKey = ES256PublicKey(uncompressedPoint: key) else {
            return .failure(refusal("k is not a point on P-256"))
        }
        let signingInput = token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)
        guard publicKey.verify(signature: signature, message: signingInput) else {
            return .failure(refusal("the JWT's signature does not verify with k"))
        }
        return .success(VAPIDClaims(audience: WebPushEndpoint.normalized(audience), expiresAt: expires))
    }

    /// A JSON object with each member once (one read twice could mean two things to two
    /// readers), by name.
    private static func object(_ json: [UInt8], _ part: String) -> Result<[String: JSONNode], Refusal> {
        guard let document = try? JSONDocument(json), case .object(let members) = document.root.value else {
            return .failure(refusal("the JWT \(part) is not a JSON object"))
        }
        var byName: [String: JSONNode] = [:]
        for member in members {
            guard byName.updateValue(member.value, forKey: member.key) == nil else {
                return .failure(refusal("the JWT \(part) has \(quoted(member.key)) twice; give each member once"))
            }
        }
        return .success(byName)
    }
}

/// A VAPID authorization whose token is signed by its key.
public struct VerifiedVAPID: Sendable, Hashable {
    /// The application server's key, an uncompressed P-256 point.
    public var key: [UInt8]
    public var claims: VAPIDClaims
}

/// What a verified VAPID token says.
public struct VAPIDClaims: Sendable, Hashable {
    /// `aud`: the push resource's origin, normalized (`WebPushEndpoint.normalized`).
    public var audience: String
    /// `exp`, seconds since the epoch.
    public var expiresAt: Int64

    /// The longest `exp` may lie ahead (RFC 8292 section 2), and what a clock ahead of the
    /// gateway's may add to it.
    public static let maxLifetimeSeconds: Int64 = 24 * 3600
    public static let clockLeewaySeconds: Int64 = 60

    /// Why the claims do not hold for an endpoint of `origin` (normalized) at `nowMillis`, if
    /// they do not.
    public func check(origin: String, nowMillis: Int64) -> Refusal? {
        guard audience == origin else {
            return refusal("aud is \(quoted(audience)); it must be the endpoint's origin, \(quoted(origin))")
        }
        let now = nowMillis / 1000
        guard expiresAt > now else {
            return refusal("the JWT expired (exp \(expiresAt) is not after now, \(now)); sign a new one")
        }
        guard expiresAt <= now + Self.maxLifetimeSeconds + Self.clockLeewaySeconds else {
            return refusal(
                "exp \(expiresAt) is \(expiresAt - now) s ahead; it may be at most 24 hours (86400 s) ahead (RFC 8292 section 2)"
            )
        }
        return nil
    }
}

private func refusal(_ detail: String) -> Refusal { Refusal(.badJwtToken, detail) }

/// `"value"`, cut to 64 characters, for a detail.
func quoted(_ value: some StringProtocol) -> String {
    let shown = value.count > 64 ? String(value.prefix(64)) + "..." : String(value)
    return JSONText.quote(shown)
}

extension Substring {
    func trimmingBlanks() -> Substring {
        var slice = self
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return slice
    }
}
