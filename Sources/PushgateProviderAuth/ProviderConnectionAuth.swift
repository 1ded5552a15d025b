import PushgateModel

/// Token authentication for one provider connection: which token it uses, which key it is bound
/// to, when it last switched tokens, and the verdicts on tokens it sent recently.
///
/// A value owned by the connection and mutated only on its event loop; there is nothing to share
/// between connections (APNs' rules are per connection). No clock is read: every call gets `now`.
///
/// ## Rules (APNs' where it documents them, see `apns-reference.md` §4)
/// - No `authorization` header, or one that is not `bearer <token>` → `403 MissingProviderToken`.
/// - Malformed token, `alg` other than `ES256`, `crit` present, no `kid`, unknown `kid`, bad
///   signature, `iss` not the key's team → `403 InvalidProviderToken`.
/// - Key configured for the other environment than the keyring's → `403 BadEnvironmentKeyIdInToken`.
/// - `iat` more than 3600 s before now → `403 ExpiredProviderToken`; more than 60 s after now →
///   `403 InvalidProviderToken`: APNs documents no answer for a token from the future, and
///   "expired" would send clients that re-sign on that reason into a loop of new tokens from the
///   same fast clock (and on into `429`), where "invalid" points at the clock.
/// - The first token that passes binds the connection to its key (and so its team). A token of
///   another key → `403 UnrelatedKeyIdInToken`: open a new connection.
/// - Switching tokens: the first token is free; each later switch to a *new* token must come at
///   least 20 minutes after the previous switch, else `429 TooManyProviderTokenUpdates` (the
///   request is refused, the connection keeps its token). Two exceptions, so that honest clients
///   never see a 429: a switch away from a token that has expired is always allowed (the provider
///   had no choice), and the token used just before the current one may still be sent until it
///   expires (requests signed just before a refresh can arrive just after it). Tokens that are
///   refused for another reason do not count as switches.
/// - The topic must be one of the key's topics or their push-type forms → else `400 TopicDisallowed`;
///   no topic → `400 MissingTopic` (token connections must always send `apns-topic`). A token is
///   adopted even when the request's topic is then refused.
///
/// ## Cost
/// Each distinct token is parsed and verified once. A repeated token costs a string compare,
/// two integer compares and a set lookup, with no allocation.
public struct ProviderConnectionAuth {
    private let keyring: ProviderKeyring
    /// The token the connection uses; nil until the first token passes.
    private var current: VerifiedProviderToken?
    /// The token ``current`` replaced.
    private var previous: VerifiedProviderToken?
    private var lastSwitchMillis: Int64?
    private var recent = RecentTokenVerdicts()

    /// Whether a valid token has been posted on this connection. It stays true when that token
    /// later expires: APNs lifts its one-stream limit once, on the first valid token.
    public var hasValidToken: Bool { current != nil }
    /// How many tokens this connection has parsed and checked (JSON and ECDSA). Repeated tokens
    /// are answered from the cache and do not count.
    public private(set) var tokenVerifications = 0

    public init(keyring: ProviderKeyring) {
        self.keyring = keyring
    }

    /// The key the connection is bound to by its first valid token.
    public var boundKey: ProviderKey? { current?.key }

    /// How many refused or unused tokens are remembered (at most ``RecentTokenVerdicts/capacity``).
    var recentVerdictCount: Int { recent.count }

    /// Authorizes one request from its `authorization` and `apns-topic` header values.
    public mutating func authorize(
        authorization: String?,
        topic: String?,
        nowMillis: Int64
    ) -> Result<AuthorizedProvider, Refusal> {
        guard let authorization else {
            return .failure(
                Refusal(
                    .missingProviderToken,
                    "no authorization header; send authorization: bearer <JWT signed with your provider key>"
                )
            )
        }
        if let current, current.authorization == authorization {
            return admit(current, topic: topic, nowMillis: nowMillis)
        }
        if let previous, previous.authorization == authorization {
            return admit(previous, topic: topic, nowMillis: nowMillis)
        }
        let verdict: TokenVerdict
        if let remembered = recent.verdict(for: authorization) {
            verdict = remembered
        } else {
            tokenVerifications += 1
            switch keyring.verify(authorization: authorization) {
            case .success(let token): verdict = .verified(token)
            case .failure(let refusal): verdict = .refused(refusal)
            }
            recent.remember(verdict, for: authorization)
        }
        switch verdict {
        case .refused(let refusal):
            return .failure(refusal)
        case .verified(let token):
            if let refusal = switchTo(token, nowMillis: nowMillis) {
                return .failure(refusal)
            }
            return check(topic, for: token)
        }
    }

    private func admit(
        _ token: VerifiedProviderToken,
        topic: String?,
        nowMillis: Int64
    ) -> Result<AuthorizedProvider, Refusal> {
        if let refusal = token.refusal(atMillis: nowMillis) {
            return .failure(refusal)
        }
        return check(topic, for: token)
    }

    /// Makes `token` the connection's token, or says why it may not be.
    private mutating func switchTo(_ token: VerifiedProviderToken, nowMillis: Int64) -> Refusal? {
        if let refusal = token.refusal(atMillis: nowMillis) {
            return refusal
        }
        guard let current else {
            current = token
            return nil
        }
        guard token.key.keyID == current.key.keyID else {
            return Refusal(
                .unrelatedKeyIdInToken,
                "this connection is bound to key \"\(current.key.keyID)\" of team \"\(current.key.teamID)\" by its first token; tokens of key \"\(token.key.keyID)\" need a new connection"
            )
        }
        if let lastSwitchMillis, !current.isExpired(atMillis: nowMillis) {
            let elapsed = (nowMillis - lastSwitchMillis) / 1000
            if elapsed < ProviderTokenRules.minimumUpdateInterval {
                return Refusal(
                    .tooManyProviderTokenUpdates,
                    "this connection switched tokens \(elapsed) s ago; switch at most once every \(ProviderTokenRules.minimumUpdateInterval) s (next in \(ProviderTokenRules.minimumUpdateInterval - elapsed) s) and reuse one token for 20 to 60 minutes"
                )
            }
        }
        previous = current
        self.current = token
        lastSwitchMillis = nowMillis
        return nil
    }

    private func check(_ topic: String?, for token: VerifiedProviderToken) -> Result<AuthorizedProvider, Refusal> {
        guard let topic else {
            return .failure(
                Refusal(.missingTopic, "no apns-topic header; token-authenticated requests must name the app's topic")
            )
        }
        guard token.key.allows(topic: topic) else {
            return .failure(Refusal(.topicDisallowed, Self.disallowed(topic, for: token.key)))
        }
        return .success(
            AuthorizedProvider(identity: .token(teamID: token.key.teamID, keyID: token.key.keyID), topic: topic)
        )
    }

    private static func disallowed(_ topic: String, for key: ProviderKey) -> String {
        let shown = key.topics.prefix(5).joined(separator: ", ")
        let more = key.topics.count > 5 ? " and \(key.topics.count - 5) more" : ""
        return
            "key \"\(key.keyID)\" may not push to topic \"\(topic.prefix(255))\"; it allows \(shown)\(more) and their push-type forms (.voip, .complication, ...)"
    }
}
