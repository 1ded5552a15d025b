/// `authorization: bearer <credential>`, read one way for provider tokens, device secrets and
/// the registration secret. Byte-wise: every device request and every push passes here.
public enum BearerCredential: Equatable, Sendable {
    /// The credential, without surrounding blanks.
    case credential(Substring)
    /// A scheme other than bearer (case-insensitive); the header's first word.
    case otherScheme(Substring)
    /// `bearer` and nothing after it.
    case empty

    /// The scheme starts the value and a space follows it (RFC 9110's `credentials`); blanks
    /// around the credential are dropped.
    public init(header value: String) {
        let bytes = Substring(value).utf8[...]
        let schemeEnd = bytes.firstIndex(of: UInt8(ascii: " ")) ?? bytes.endIndex
        let scheme = bytes[..<schemeEnd]
        guard scheme.count == 6, zip(scheme, "bearer".utf8).allSatisfy({ $0 | 0x20 == $1 }) else {
            self = .otherScheme(Substring(scheme))
            return
        }
        var rest = bytes[schemeEnd...]
        while rest.first == UInt8(ascii: " ") || rest.first == UInt8(ascii: "\t") { rest = rest.dropFirst() }
        while rest.last == UInt8(ascii: " ") || rest.last == UInt8(ascii: "\t") { rest = rest.dropLast() }
        self = rest.isEmpty ? .empty : .credential(Substring(rest))
    }

    /// The credential of a bearer header; nil for a missing header, another scheme or none.
    public static func credential(in header: String?) -> Substring? {
        guard let header, case .credential(let credential) = BearerCredential(header: header) else { return nil }
        return credential
    }
}
