/// The header fields a push to an endpoint is judged on, read in one pass: the first value of
/// each, and how many times each came. Names in any case: HTTP/1.1 senders (pywebpush, the npm
/// `web-push`) write `TTL` and `Content-Encoding`.
public struct WebPushHeaderFields: Sendable, Equatable {
    public var ttl: String?
    public var ttlCount = 0
    public var urgency: String?
    public var urgencyCount = 0
    public var topic: String?
    public var topicCount = 0
    public var contentEncoding: String?
    public var contentEncodingCount = 0
    public var authorization: String?

    public init() {}

    public init(_ headers: some Sequence<(name: String, value: String)>) {
        for (name, value) in headers {
            switch name.utf8.count {
            case 3 where Self.named(name, "ttl"):
                ttlCount += 1
                if ttl == nil { ttl = value }
            case 5 where Self.named(name, "topic"):
                topicCount += 1
                if topic == nil { topic = value }
            case 7 where Self.named(name, "urgency"):
                urgencyCount += 1
                if urgency == nil { urgency = value }
            case 13 where Self.named(name, "authorization"):
                if authorization == nil { authorization = value }
            case 16 where Self.named(name, "content-encoding"):
                contentEncodingCount += 1
                if contentEncoding == nil { contentEncoding = value }
            default: break
            }
        }
    }

    /// `name` is `lowercase` in any case.
    private static func named(_ name: String, _ lowercase: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        return name.utf8.count == expected.count && zip(name.utf8, expected).allSatisfy { $0 | 0x20 == $1 }
    }
}
