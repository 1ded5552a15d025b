/// RFC 9112 section 3.2.2: a server must accept a request target in absolute form
/// (`http://host:port/path?query`, what clients send to a proxy, and some send to everyone). It
/// is served as its origin form, and its authority stands in for `Host`, which a server receiving
/// such a target must ignore.
enum AbsoluteFormTarget {
    /// The path (with its query; `/` when the target has none) and the authority of `target`
    /// when it is an `http` or `https` URI in absolute form; nil for any other target.
    static func split(_ target: String) -> (path: String, authority: String?)? {
        let schemeLength: Int
        if target.utf8.starts(with: "http://".utf8, by: Self.caseInsensitive) {
            schemeLength = 7
        } else if target.utf8.starts(with: "https://".utf8, by: Self.caseInsensitive) {
            schemeLength = 8
        } else {
            return nil
        }
        let rest = target.utf8.dropFirst(schemeLength)
        let end = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
        let authority = String(decoding: rest[..<end], as: UTF8.self)
        let path = String(decoding: rest[end...], as: UTF8.self)
        return (path.hasPrefix("/") ? path : "/" + path, authority.isEmpty ? nil : authority)
    }

    private static func caseInsensitive(_ byte: UInt8, _ lowercase: UInt8) -> Bool {
        byte | (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? 0x20 : 0) == lowercase
    }
}
