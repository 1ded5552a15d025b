import Foundation
import PushgateCrypto
import PushgateModel

/// An APNs provider token taken apart but not yet trusted: a JWS compact serialisation
/// `base64url(header) "." base64url(claims) "." base64url(signature)` with header
/// `{"alg": "ES256", "kid": <key id>}` and claims `{"iss": <team id>, "iat": <seconds>}`.
///
/// Fields beyond those are ignored (PyJWT adds `"typ": "JWT"`, some clients add `exp`), except
/// `crit`, which RFC 7515 §4.1.11 says must be refused when not understood.
struct ProviderToken {
    let keyID: String
    let issuer: String
    /// Seconds since the epoch, within 0 ... ``maximumIssuedAt``.
    let issuedAt: Int64
    /// Raw `r || s`, 64 bytes.
    let signature: [UInt8]
    /// `header "." claims`, exactly as sent: what the signature covers.
    let signingInput: Substring

    /// Year 2286 in seconds; anything larger is a clock in milliseconds or garbage, and keeping
    /// `iat` this small lets it be turned into milliseconds without overflow.
    static let maximumIssuedAt: Int64 = 9_999_999_999

    /// The token in an `authorization` header value, or why there is none
    /// (`403 MissingProviderToken`). The scheme is matched case-insensitively (RFC 9110 §11.1).
    static func bearerToken(in authorization: String) -> Result<Substring, Refusal> {
        switch BearerCredential(header: authorization) {
        case .credential(let token):
            return .success(token)
        case .otherScheme(let scheme):
            let shown = scheme.isEmpty ? "an empty value" : "scheme \"\(scheme.prefix(20))\""
            return .failure(
                Refusal(
                    .missingProviderToken,
                    "the authorization header has \(shown); send authorization: bearer <JWT>"
                )
            )
        case .empty:
            return .failure(
                Refusal(
                    .missingProviderToken,
                    "the authorization header says bearer but carries no token; send authorization: bearer <JWT>"
                )
            )
        }
    }

    /// Takes a compact JWS apart; every failure is `403 InvalidProviderToken` saying which part is wrong.
    static func parse(_ token: Substring) -> Result<ProviderToken, Refusal> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "the token has \(parts.count) part\(parts.count == 1 ? "" : "s") separated by '.'; a JWT has three: header.claims.signature"
                )
            )
        }
        guard let headerJSON = Base64URL.decode(parts[0]) else {
            return .failure(
                Refusal(.invalidProviderToken, "the JWT header is not unpadded base64url (alphabet A-Z a-z 0-9 - _)")
            )
        }
        guard let claimsJSON = Base64URL.decode(parts[1]) else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "the JWT claims set is not unpadded base64url (alphabet A-Z a-z 0-9 - _)"
                )
            )
        }
        guard let signature = Base64URL.decode(parts[2]) else {
            return .failure(
                Refusal(.invalidProviderToken, "the JWT signature is not unpadded base64url (alphabet A-Z a-z 0-9 - _)")
            )
        }

        // Each part is read whole before Foundation's decoder picks its fields out: the decoder
        // checks only the members it decodes (a bad escape, a raw control character or `01`
        // elsewhere passes) and keeps one of two members of the same name silently. Either way a
        // token could mean one thing here and another to a tool reading the same token. Keys
        // are compared decoded, so `k\u0069d` is `kid`.
        for (part, json) in [("header", headerJSON), ("claims set", claimsJSON)] {
            if let refusal = structureProblem(of: json, part: part) {
                return .failure(Refusal(.invalidProviderToken, refusal))
            }
        }
        let header: Header
        let claims: Claims
        do {
            header = try JSONDecoder().decode(Header.self, from: Data(headerJSON))
        } catch {
            return .failure(Refusal(.invalidProviderToken, describe(error, in: "header")))
        }
        do {
            claims = try JSONDecoder().decode(Claims.self, from: Data(claimsJSON))
        } catch {
            return .failure(Refusal(.invalidProviderToken, describe(error, in: "claims set")))
        }

        guard let algorithm = header.alg else {
            return .failure(
                Refusal(.invalidProviderToken, "the JWT header has no alg; APNs tokens need \"alg\": \"ES256\"")
            )
        }
        guard algorithm == "ES256" else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "the JWT header has alg \"\(algorithm.prefix(20))\"; APNs accepts only ES256 (ECDSA P-256, SHA-256)"
                )
            )
        }
        guard !header.hasCrit else {
            return .failure(
                Refusal(.invalidProviderToken, "the JWT header has crit; no critical extensions are supported")
            )
        }
        guard let keyID = header.kid, !keyID.isEmpty else {
            return .failure(
                Refusal(.invalidProviderToken, "the JWT header has no kid; set it to the provider key's key id")
            )
        }
        guard let issuer = claims.iss, !issuer.isEmpty else {
            return .failure(Refusal(.invalidProviderToken, "the JWT claims set has no iss; set it to the team id"))
        }
        guard let iat = claims.iat else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "the JWT claims set has no iat; set it to the time of signing in seconds since the epoch"
                )
            )
        }
        guard iat == iat.rounded(.towardZero) else {
            return .failure(Refusal(.invalidProviderToken, wholeSeconds))
        }
        guard iat >= 0 else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "iat \(Int64(exactly: iat).map(String.init) ?? String(iat)) is negative; it is the time of signing in seconds since the epoch"
                )
            )
        }
        guard iat <= Double(maximumIssuedAt) else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "iat \(Int64(exactly: iat).map(String.init) ?? String(iat)) is too large for seconds since the epoch (milliseconds?); iat is in seconds"
                )
            )
        }
        let issuedAt = Int64(iat)
        guard signature.count == 64 else {
            return .failure(
                Refusal(
                    .invalidProviderToken,
                    "the signature is \(signature.count) bytes; an ES256 JWS signature is 64 (r || s), not DER"
                )
            )
        }
        let signingInput = token[token.startIndex..<parts[1].endIndex]
        return .success(
            ProviderToken(
                keyID: keyID,
                issuer: issuer,
                issuedAt: issuedAt,
                signature: signature,
                signingInput: signingInput
            )
        )
    }

    /// Why `json` is not a JSON object with each member once, or nil when it is one.
    private static func structureProblem(of json: [UInt8], part: String) -> String? {
        let root: JSONNode
        do {
            root = try JSONDocument(json).root
        } catch {
            return "the JWT \(part) is not JSON"
        }
        guard case .object(let members) = root.value else { return "the JWT \(part) is not a JSON object" }
        var seen: Set<String> = []
        guard let key = members.first(where: { !seen.insert($0.key).inserted })?.key else { return nil }
        return "the JWT \(part) has \"\(key.prefix(20))\" twice; give each member once"
    }

    private struct Header: Decodable {
        let alg: String?
        let kid: String?
        let hasCrit: Bool

        private enum CodingKeys: String, CodingKey { case alg, kid, crit }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            alg = try container.decodeIfPresent(String.self, forKey: .alg)
            kid = try container.decodeIfPresent(String.self, forKey: .kid)
            hasCrit = container.contains(.crit)
        }
    }

    private struct Claims: Decodable {
        let iss: String?
        /// A Double because Foundation's decoder reports a fraction where an integer is expected as
        /// malformed JSON, with no field named; every integer up to ``maximumIssuedAt`` is exact.
        let iat: Double?
    }

    private static let wholeSeconds = "iat in the JWT claims set must be a whole number of seconds since the epoch"

    private static func describe(_ error: any Error, in part: String) -> String {
        switch error as? DecodingError {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return "the JWT \(part) is not JSON"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            guard let field = context.codingPath.last?.stringValue else {
                return "the JWT \(part) is not a JSON object"
            }
            return field == "iat" ? wholeSeconds : "\(field) in the JWT \(part) must be a string"
        default:
            return "the JWT \(part) is not JSON"
        }
    }
}
