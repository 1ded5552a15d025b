/// The provider keys a gateway trusts, by key id (a token's `kid`), and the APNs environment the
/// gateway stands for.
public struct ProviderKeyring: Sendable {
    private let keysByID: [String: ProviderKey]
    /// When set, a token signed with a key configured for the other environment is refused with
    /// `403 BadEnvironmentKeyIdInToken`. Keys without an environment serve both.
    public let environment: ProviderEnvironment?

    /// No keys: token authentication is off.
    public static let empty = ProviderKeyring(keysByID: [:], environment: nil)

    private init(keysByID: [String: ProviderKey], environment: ProviderEnvironment?) {
        self.keysByID = keysByID
        self.environment = environment
    }

    /// Throws when two keys share a key id, or when keys of different teams may push to one
    /// topic (suffixed forms included: `com.acme` covers `com.acme.voip`), which would let one
    /// team push to another's app. Keys of one team may overlap: that is how a key is rotated.
    public init(keys: [ProviderKey], environment: ProviderEnvironment? = nil) throws(ProviderKeyConfigurationError) {
        var keysByID: [String: ProviderKey] = [:]
        for key in keys {
            guard keysByID.updateValue(key, forKey: key.keyID) == nil else {
                throw ProviderKeyConfigurationError(
                    keyID: key.keyID,
                    field: "keyId",
                    problem: "configured twice; every provider key needs its own key id"
                )
            }
        }
        let ordered = keysByID.values.sorted { $0.keyID < $1.keyID }
        for (index, key) in ordered.enumerated() {
            for other in ordered[(index + 1)...] where other.teamID != key.teamID {
                if let topic = key.sharedTopic(with: other) {
                    throw ProviderKeyConfigurationError(
                        keyID: other.keyID,
                        field: "topics",
                        problem:
                            "may push to \"\(topic)\", as key \"\(key.keyID)\" of team \(key.teamID) may: keys of different teams must not share a topic (nor its .voip, .complication, ... forms)"
                    )
                }
            }
        }
        self.init(keysByID: keysByID, environment: environment)
    }

    /// Loads every configured key (see ``ProviderKeyConfiguration/load(relativeTo:)``), stopping at
    /// the first one that is wrong.
    public init(
        configurations: [ProviderKeyConfiguration],
        relativeTo directory: String? = nil,
        environment: ProviderEnvironment? = nil
    ) throws(ProviderKeyConfigurationError) {
        var keys: [ProviderKey] = []
        for configuration in configurations {
            keys.append(try configuration.load(relativeTo: directory))
        }
        try self.init(keys: keys, environment: environment)
    }

    public var isEmpty: Bool { keysByID.isEmpty }

    /// Some configured key: what a token with an unknown kid is checked against, so that it
    /// costs what a bad signature costs.
    var anyKey: ProviderKey? { keysByID.values.first }

    /// The keys, ordered by key id.
    public var keys: [ProviderKey] { keysByID.values.sorted { $0.keyID < $1.keyID } }

    public func key(id: String) -> ProviderKey? {
        keysByID[id]
    }
}
