import Foundation
import NIOConcurrencyHelpers
import PushgateCrypto
import PushgateDeviceClient
import PushgateModel
import PushgateTransport

/// The agent's Web Push subscriptions (`--webpush NAME [--webpush-vapid-key KEY]`): each one's
/// P-256 key pair and auth secret are made here and never leave the device (RFC 8291); they live
/// in the identity file beside the device's secret, so that a restarted agent keeps its
/// endpoints and keys. Each message is decrypted and printed as
/// `{"type":"webpush","name","seq","data"}` (`dataBase64` when its plaintext is not UTF-8).
final class AgentWebPush: Sendable {
    /// A subscription asked for on the command line.
    struct Wanted: Sendable, Equatable {
        var name: String
        /// base64url, as VAPID's `k`.
        var applicationServerKey: String?
    }

    private struct Live {
        var name: String
        var keys: WebPushSubscriptionKeys
        var key: P256KeyAgreementKey
        var auth: [UInt8]
    }

    private let wanted: [Wanted]
    private let identityFile: IdentityFile
    /// By endpoint token: events name their subscription by it.
    private let live = NIOLockedValueBox<[String: Live]>([:])

    init(wanted: [Wanted], identityFile: IdentityFile) {
        self.wanted = wanted
        self.identityFile = identityFile
    }

    var isEmpty: Bool { wanted.isEmpty }

    /// Subscribes each wanted name (the same name and key again get the same endpoint), with
    /// the keys the identity file has for it or new ones, keeps them in the file, and prints the
    /// subscription as the W3C `PushSubscription` JSON that application servers store.
    func subscribe(
        _ device: DeviceRequests,
        on connection: HTTP2ClientConnection,
        answer: (String, @escaping @Sendable () async throws -> (token: String, endpoint: String)) async throws -> (
            token: String, endpoint: String
        )
    ) async throws {
        for subscription in wanted {
            let (token, endpoint) = try await answer("subscribing \(subscription.name)") {
                try await DeviceSetup.subscribe(
                    subscription.name,
                    applicationServerKey: subscription.applicationServerKey,
                    device,
                    on: connection
                )
            }
            let kept = identityFile.identity.webpush?[subscription.name]
            let key: P256KeyAgreementKey
            let auth: [UInt8]
            if let kept, let der = Base64URL.decode(kept.privateKey), let restored = try? P256KeyAgreementKey(der: der),
                let secret = Base64URL.decode(kept.auth)
            {
                (key, auth) = (restored, secret)
            } else {
                (key, auth) = (
                    try P256KeyAgreementKey.generate(), try SecureRandom.bytes(WebPushEncryption.authSecretLength)
                )
            }
            let keys = WebPushSubscriptionKeys(
                endpoint: endpoint,
                token: token,
                privateKey: Base64URL.encode(key.derRepresentation),
                auth: Base64URL.encode(auth),
                applicationServerKey: subscription.applicationServerKey
            )
            if keys != kept {
                try identityFile.update { $0.webpush = ($0.webpush ?? [:]).merging([subscription.name: keys]) { $1 } }
            }
            live.withLockedValue { $0[token] = Live(name: subscription.name, keys: keys, key: key, auth: auth) }
            emit(
                "{\"type\":\"subscription\",\"name\":\(JSONText.quote(subscription.name)),\"subscription\":{\"endpoint\":\(JSONText.quote(endpoint)),\"expirationTime\":null,\"keys\":{\"p256dh\":\(JSONText.quote(Base64URL.encode(key.publicKey))),\"auth\":\(JSONText.quote(keys.auth))}}}"
            )
        }
    }

    /// Deletes the subscription named `name`: its endpoint answers 410 from then on.
    func unsubscribe(_ name: String, _ device: DeviceRequests, on connection: HTTP2ClientConnection) async throws {
        guard let token = live.withLockedValue({ $0.first { $0.value.name == name }?.key }) else {
            printError("no subscription named \(name)")
            return
        }
        let response = try await connection.send(device.unsubscribe(token: token))
        guard response.status == 204 else {
            printError("unsubscribing \(name) answered \(response.status) \(String(buffer: response.body))")
            return
        }
        live.withLockedValue { _ = $0.removeValue(forKey: token) }
        try identityFile.update { $0.webpush?[name] = nil }
        emit("{\"type\":\"unsubscribed\",\"name\":\(JSONText.quote(name))}")
    }

    /// A Web Push event's data (or a keep-alive's item of push type `webpush`): the line to
    /// print, with its plaintext, and what a fetch command runs with; nil when it is not one.
    func message(_ json: String) -> (line: String, fetch: SilentNotification)? {
        struct Fields: Decodable {
            var seq: UInt64
            var pushType: String
            var token: String
            var name: String
            var messageId: String
            var body: String
            var fetchWindowSeconds: Int?
        }
        guard let fields = try? JSONDecoder().decode(Fields.self, from: Data(json.utf8)),
            fields.pushType == PushType.webpush.rawValue
        else { return nil }
        var line = "{\"type\":\"webpush\",\"name\":\(JSONText.quote(fields.name)),\"seq\":\(fields.seq)"
        if let subscription = live.withLockedValue({ $0[fields.token] }), let body = Base64URL.decode(fields.body) {
            do {
                let plaintext =
                    body.isEmpty
                    ? []
                    : try WebPushEncryption.decrypt(body, userAgentKey: subscription.key, authSecret: subscription.auth)
                if let text = String(validating: plaintext, as: UTF8.self) {
                    line += ",\"data\":\(JSONText.quote(text))"
                } else {
                    line += ",\"dataBase64\":\(JSONText.quote(Data(plaintext).base64EncodedString()))"
                }
            } catch {
                line += ",\"error\":\(JSONText.quote("\(error)"))"
            }
        } else {
            line += ",\"error\":\"no keys for this subscription (its endpoint's token is not in the identity file)\""
        }
        line += "}"
        let fetch = SilentNotification(
            webPushSeq: fields.seq,
            name: fields.name,
            messageID: fields.messageId,
            fetchWindowSeconds: fields.fetchWindowSeconds,
            json: line
        )
        return (line, fetch)
    }
}

/// The identity file: the device's id and secret and its Web Push subscriptions' keys, owner-only
/// (mode 0600). Rewritten whole, through a file beside it renamed over it, so that a crash never
/// leaves half of one.
final class IdentityFile: Sendable {
    let path: String
    private let current: NIOLockedValueBox<DeviceIdentity>

    init(path: String, identity: DeviceIdentity) {
        self.path = path
        current = NIOLockedValueBox(identity)
    }

    var identity: DeviceIdentity { current.withLockedValue { $0 } }

    func update(_ change: (inout DeviceIdentity) -> Void) throws {
        let data = try current.withLockedValue { identity -> Data in
            change(&identity)
            return try JSONEncoder().encode(identity)
        }
        try Self.write(data, to: path)
    }

    static func write(_ data: Data, to path: String) throws {
        let temporary = path + ".new"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600])
        else {
            let directory = (path as NSString).deletingLastPathComponent
            let place = directory.isEmpty ? "." : directory
            let why =
                !FileManager.default.fileExists(atPath: place)
                ? "\(place) does not exist"
                : !FileManager.default.isWritableFile(atPath: place)
                    ? "\(place) is not writable by this user" : "the file system refused it"
            throw ClientFailure(description: "cannot write the identity file \(path): \(why)")
        }
        guard rename(temporary, path) == 0 else {
            throw ClientFailure(
                description: "cannot replace the identity file \(path): \(String(cString: strerror(errno)))"
            )
        }
    }
}
