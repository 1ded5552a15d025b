/// What a topic (an app's bundle id, possibly with an APNs suffix) may look like.
public enum TopicRules {
    public static let maxBytes = 255

    /// Non-empty, at most 255 bytes of ASCII letters, digits, `.`, `-` and `_`.
    public static func isValid(_ topic: String) -> Bool {
        let bytes = topic.utf8
        return !bytes.isEmpty && bytes.count <= maxBytes && bytes.allSatisfy(isAllowed)
    }

    /// Why `topic` is not valid, for an error's detail.
    public static func explain(_ topic: String) -> String {
        if topic.isEmpty { return "the topic is empty; send the app's bundle id, e.g. com.example.app" }
        if topic.utf8.count > maxBytes {
            return "the topic is \(topic.utf8.count) bytes; at most \(maxBytes) are allowed"
        }
        let shown = topic.count > 80 ? String(topic.prefix(80)) + "..." : topic
        return "the topic \"\(shown)\" may contain only letters, digits, '.', '-' and '_'"
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
