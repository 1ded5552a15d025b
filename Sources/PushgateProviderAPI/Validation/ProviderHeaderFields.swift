/// The header fields a provider request is judged on, read in one pass over its header block:
/// the first occurrence of each, and the first name to occur twice.
///
/// Authentication and validation both read them, once at the request's head and once with its
/// body: one pass each time instead of a scan of the block per field (and a scan of the earlier
/// fields per field for duplicates), each of which copied every field it passed over.
public struct ProviderHeaderFields: Sendable, Equatable {
    public var apnsID: String?
    /// How many `apns-id` fields came: only a single one is echoed.
    public var apnsIDCount = 0
    public var topic: String?
    public var pushType: String?
    public var priority: String?
    public var expiration: String?
    public var collapseID: String?
    public var contentEncoding: String?
    public var authorization: String?
    /// The first header name, in arrival order, that had already occurred (`cookie` excepted:
    /// HTTP/2 splits it on purpose, RFC 9113 8.2.3).
    public var duplicate: String?

    public init() {}

    /// Names are compared exactly: HTTP/2 field names are lowercase (nghttp2 refuses others).
    public init<Headers: RandomAccessCollection<(name: String, value: String)>>(_ headers: Headers) {
        // A name's length and end bytes, hashed to one of 64 bits: a bit met twice may be a
        // duplicate, and only then are the names put in a set (two distinct names of a usual
        // request rarely share a bit, and a false alarm costs only that set).
        var seen: UInt64 = 0
        var maybeDuplicate = false
        for (name, value) in headers {
            switch name {
            case "apns-id":
                apnsIDCount += 1
                if apnsID == nil { apnsID = value }
            case "apns-topic": if topic == nil { topic = value }
            case "apns-push-type": if pushType == nil { pushType = value }
            case "apns-priority": if priority == nil { priority = value }
            case "apns-expiration": if expiration == nil { expiration = value }
            case "apns-collapse-id": if collapseID == nil { collapseID = value }
            case "content-encoding": if contentEncoding == nil { contentEncoding = value }
            case "authorization": if authorization == nil { authorization = value }
            default: break
            }
            let bit = UInt64(1) << (Self.signature(name) & 63)
            if seen & bit != 0 { maybeDuplicate = true }
            seen |= bit
        }
        if maybeDuplicate { duplicate = Self.firstRepeatedName(headers) }
    }

    private static func signature(_ name: String) -> Int {
        let utf8 = name.utf8
        guard let first = utf8.first, let last = utf8.last else { return 0 }
        return utf8.count &* 31 &+ Int(first) &* 7 &+ Int(last)
    }

    /// In one pass, so that a request of many fields costs in proportion to them.
    private static func firstRepeatedName<Headers: RandomAccessCollection<(name: String, value: String)>>(
        _ headers: Headers
    ) -> String? {
        var names = Set<String>(minimumCapacity: headers.count)
        for (name, _) in headers where name != "cookie" {
            if !names.insert(name).inserted { return name }
        }
        return nil
    }
}
