import NIOCore
import PushgateModel

// The JSON of forwarded work and answers, written and read by hand: every forwarded push is
// read by its owner and answered, and Foundation's Codable coders cost the owner more per push
// than its HTTP/2. Members as Codable names them, a member that is nil left out, and a member
// null or missing read as nil, so that nodes of another version read it alike.

extension ForwardedWork {
    var json: ByteBuffer {
        var object = JSONObjectText()
        object.add("id", id)
        object.add("push", object: push?.json)
        object.add("expiration", expiration)
        object.add("webPush", object: webPush?.json)
        return ByteBuffer(string: object.text)
    }

    init?(json buffer: ByteBuffer) {
        guard let node = try? JSONDocument(Array(buffer.readableBytesView)).root else { return nil }
        self.init(json: node)
    }

    private init?(json node: JSONNode) {
        guard let id = node.string("id"), let push = node.optional("push", WirePush.init(json:)),
            let expiration = node.optionalString("expiration"),
            let webPush = node.optional("webPush", WireWebPush.init(json:))
        else { return nil }
        self.id = id
        self.push = push
        self.expiration = expiration
        self.webPush = webPush
    }
}

extension WirePush {
    var json: String {
        var object = JSONObjectText()
        object.add("token", token)
        object.add("apnsID", apnsID)
        object.add("topic", topic)
        object.add("pushType", pushType)
        object.add("priority", Int64(priority))
        object.add("collapseID", collapseID)
        object.add("payload", payload)
        object.add("urgency", urgency)
        return object.text
    }

    init?(json node: JSONNode) {
        guard let token = node.string("token"), let apnsID = node.string("apnsID"), let topic = node.string("topic"),
            let pushType = node.string("pushType"),
            let priority = node.integer("priority").flatMap(UInt8.init(exactly:)),
            let collapseID = node.optionalString("collapseID"), let payload = node.string("payload"),
            let urgency = node.optionalString("urgency")
        else { return nil }
        self.token = token
        self.apnsID = apnsID
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.payload = payload
        self.urgency = urgency
    }
}

extension WireWebPush {
    var json: String {
        var object = JSONObjectText()
        object.add("token", token)
        object.add("message", object: message?.json)
        object.add("ttlSeconds", ttlSeconds)
        object.add("refusal", object: refusal?.json)
        object.add("vapid", vapid)
        object.add("vapidKey", vapidKey)
        object.add("vapidRefusal", object: vapidRefusal?.json)
        return object.text
    }

    init?(json node: JSONNode) {
        guard let token = node.string("token"), let message = node.optional("message", WirePush.init(json:)),
            let ttlSeconds = node.optionalInteger("ttlSeconds"),
            let refusal = node.optional("refusal", WireRefusal.init(json:)), let vapid = node.string("vapid"),
            let vapidKey = node.optionalString("vapidKey"),
            let vapidRefusal = node.optional("vapidRefusal", WireRefusal.init(json:))
        else { return nil }
        self.token = token
        self.message = message
        self.ttlSeconds = ttlSeconds
        self.refusal = refusal
        self.vapid = vapid
        self.vapidKey = vapidKey
        self.vapidRefusal = vapidRefusal
    }
}

extension WireRefusal {
    var json: String {
        var object = JSONObjectText()
        object.add("reason", reason)
        object.add("detail", detail)
        object.add("timestamp", timestamp)
        object.add("retryAfterSeconds", retryAfterSeconds.map(Int64.init))
        return object.text
    }

    init?(json node: JSONNode) {
        guard let reason = node.string("reason"), let detail = node.string("detail"),
            let timestamp = node.optionalInteger("timestamp"),
            let retryAfterSeconds = node.optionalInteger("retryAfterSeconds")
        else { return nil }
        self.reason = reason
        self.detail = detail
        self.timestamp = timestamp
        self.retryAfterSeconds = retryAfterSeconds.flatMap { Int(exactly: $0) }
    }
}

extension ForwardedAnswer {
    var json: ByteBuffer {
        var object = JSONObjectText()
        object.add("disposition", disposition)
        object.add("messageID", messageID)
        object.add("ttlSeconds", ttlSeconds)
        object.add("refusal", object: refusal?.json)
        return ByteBuffer(string: object.text)
    }

    init?(json buffer: ByteBuffer) {
        guard let node = try? JSONDocument(Array(buffer.readableBytesView)).root,
            let disposition = node.optionalString("disposition"), let messageID = node.optionalString("messageID"),
            let ttlSeconds = node.optionalInteger("ttlSeconds"),
            let refusal = node.optional("refusal", WireRefusal.init(json:))
        else { return nil }
        self.init(disposition: disposition, messageID: messageID, ttlSeconds: ttlSeconds, refusal: refusal)
    }
}

/// A JSON object's text, member by member; a nil value leaves its member out.
private struct JSONObjectText {
    private var members = ""
    var text: String { "{" + members + "}" }

    mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        member(key, JSONText.quote(value))
    }

    mutating func add(_ key: String, _ value: Int64?) {
        guard let value else { return }
        member(key, String(value))
    }

    /// `object`: an object's JSON text, as it stands.
    mutating func add(_ key: String, object: String?) {
        guard let object else { return }
        member(key, object)
    }

    private mutating func member(_ key: String, _ value: String) {
        if !members.isEmpty { members += "," }
        members += JSONText.quote(key)
        members += ":"
        members += value
    }
}

extension JSONNode {
    /// The string member `key`; nil when missing, null or not a string.
    fileprivate func string(_ key: String) -> String? {
        guard case .string(let value)? = member(key)?.value.value else { return nil }
        return value
    }

    /// The whole-number member `key`; nil when missing, null or not one.
    fileprivate func integer(_ key: String) -> Int64? {
        guard case .number(let text)? = member(key)?.value.value else { return nil }
        return Int64(text)
    }

    /// A member that may be missing or null (`.some(nil)`); nil when it is of another kind.
    fileprivate func optionalString(_ key: String) -> String?? {
        guard let value = member(key)?.value.value else { return .some(nil) }
        switch value {
        case .null: return .some(nil)
        case .string(let text): return text
        default: return nil
        }
    }

    fileprivate func optionalInteger(_ key: String) -> Int64?? {
        guard let value = member(key)?.value.value else { return .some(nil) }
        switch value {
        case .null: return .some(nil)
        case .number(let text): return Int64(text).map { .some($0) } ?? nil
        default: return nil
        }
    }

    fileprivate func optional<T>(_ key: String, _ read: (JSONNode) -> T?) -> T?? {
        guard let node = member(key)?.value else { return .some(nil) }
        if case .null = node.value { return .some(nil) }
        return read(node).map { .some($0) } ?? nil
    }
}
