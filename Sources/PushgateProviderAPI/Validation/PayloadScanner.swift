/// What validation needs to know about a payload, learnt in one pass while the whole document is
/// checked against RFC 8259: only facts about the top-level `aps` member.
struct APSFacts: Sendable, Equatable {
    /// The kind of the top-level `aps` value; `nil` when the payload has no `aps` member.
    var aps: JSONValueKind?
    /// `aps` has an `alert` / `badge` / `sound` key (any value, even `null`).
    var hasAlert = false
    var hasBadge = false
    var hasSound = false
    /// The raw token of `aps.content-available`, as it appears in the payload.
    var contentAvailable: JSONToken?

    init(
        aps: JSONValueKind? = nil,
        hasAlert: Bool = false,
        hasBadge: Bool = false,
        hasSound: Bool = false,
        contentAvailable: JSONToken? = nil
    ) {
        self.aps = aps
        self.hasAlert = hasAlert
        self.hasBadge = hasBadge
        self.hasSound = hasSound
        self.contentAvailable = contentAvailable
    }

    /// `aps` has `alert`, `badge` or `sound`: it would interact with the user.
    var isUserVisible: Bool { hasAlert || hasBadge || hasSound }
}

enum JSONValueKind: Sendable, Equatable {
    case object, array, string, number, bool, null

    var article: String {
        switch self {
        case .object: return "an object"
        case .array: return "an array"
        case .string: return "a string"
        case .number: return "a number"
        case .bool: return "a boolean"
        case .null: return "null"
        }
    }
}

/// A value's position in the scanned bytes: `start..<end`, offsets from the first readable byte.
struct JSONToken: Sendable, Equatable {
    var kind: JSONValueKind
    var start: Int
    var end: Int
}

/// Where and why a payload is not a JSON object.
struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 0-based byte offset of the offending byte (the payload's length when the input ended early).
    var offset: Int
    /// What the grammar allowed at `offset`.
    var expected: String
    /// What was there: `'x'`, `byte 0xFF`, `end of input`.
    var found: String

    var description: String { "at byte offset \(offset): expected \(expected), found \(found)" }
}

/// A strict, allocation-free RFC 8259 scanner for provider payloads.
///
/// - The document must be exactly one JSON object (optionally surrounded by JSON whitespace:
///   space, tab, LF, CR). No byte-order mark, no trailing bytes, no trailing commas, no comments,
///   no `NaN`/`Infinity`, no leading zeros, no unescaped control characters (U+0000–U+001F) in
///   strings.
/// - The bytes must be UTF-8: every non-ASCII byte must be part of a well-formed UTF-8 sequence
///   (no overlong forms, no encoded surrogates, nothing above U+10FFFF).
/// - `\u` escapes must form valid code points: a high surrogate must be followed by a `\u` low
///   surrogate, and a low surrogate may not stand alone. RFC 8259 leaves lone surrogates to the
///   implementation; Apple's own JSON parser on the device rejects them, so we do too.
/// - Numbers must read as finite Doubles, as Foundation's reader (and the device's) requires:
///   `1e309` and `1000e306` are refused, any tiny number (`1e-400`) reads as 0 and passes.
/// - Nesting deeper than ``maxDepth`` containers (the top-level object counts as 1) is rejected
///   with an error, never a stack overflow (recursion depth is bounded by ``maxDepth``).
/// - Duplicate keys are allowed, as RFC 8259 permits, with "last one wins" semantics, which is
///   what Foundation's `JSONSerialization` and the device do: a later top-level `aps` replaces
///   every fact learnt from an earlier one; a later `content-available` replaces the earlier
///   token. `alert`/`badge`/`sound` are facts of presence, so any occurrence in the winning `aps`
///   counts.
/// - Keys are compared after unescaping, so `"\u0061ps"` is `aps`.
struct PayloadScanner {
    static let maxDepth = 64

    /// Scans `bytes` in full; returns the `aps` facts, or the first syntax error.
    static func scan(_ bytes: UnsafeRawBufferPointer) -> Result<APSFacts, JSONSyntaxError> {
        var scanner = PayloadScanner(bytes)
        do {
            try scanner.scanDocument()
            return .success(scanner.facts)
        } catch {
            return .failure(error)
        }
    }

    let p: UnsafeRawBufferPointer
    let n: Int
    var i = 0
    private(set) var facts = APSFacts()

    private init(_ bytes: UnsafeRawBufferPointer) {
        self.p = bytes
        self.n = bytes.count
    }

    enum Role { case top, aps, other }

    // Keys we look for, packed little-endian into up to three 64-bit words (see KeyAccumulator).
    enum Key { case none, aps, alert, badge, sound, contentAvailable }

    // MARK: document, object, array

    private mutating func scanDocument() throws(JSONSyntaxError) {
        skipWhitespace()
        guard i < n, p[i] == UInt8(ascii: "{") else {
            throw fail("'{' (the payload must be a JSON object)")
        }
        i += 1
        try scanObject(depth: 1, role: .top)
        skipWhitespace()
        guard i == n else { throw fail("end of input after the top-level object") }
    }

    /// `i` is just past `{`.
    private mutating func scanObject(depth: Int, role: Role) throws(JSONSyntaxError) {
        skipWhitespace()
        if i < n, p[i] == UInt8(ascii: "}") {
            i += 1
            return
        }
        var afterComma = false
        while true {
            guard i < n, p[i] == UInt8(ascii: "\"") else {
                if afterComma, i < n, p[i] == UInt8(ascii: "}") {
                    throw fail("a string key after ',' (trailing commas are not allowed)")
                }
                throw fail(afterComma ? "a string key after ','" : "a string key or '}'")
            }
            i += 1
            let key = try scanString(matching: role)
            skipWhitespace()
            guard i < n, p[i] == UInt8(ascii: ":") else { throw fail("':' after an object key") }
            i += 1
            skipWhitespace()

            switch (role, key) {
            case (.top, .aps):
                // Last `aps` wins: forget whatever an earlier one said.
                facts = APSFacts()
                if i < n, p[i] == UInt8(ascii: "{") {
                    try enterContainer(depth: depth)
                    facts.aps = .object
                    try scanObject(depth: depth + 1, role: .aps)
                } else {
                    facts.aps = try scanValue(depth: depth)
                }
            case (.aps, .alert):
                facts.hasAlert = true
                _ = try scanValue(depth: depth)
            case (.aps, .badge):
                facts.hasBadge = true
                _ = try scanValue(depth: depth)
            case (.aps, .sound):
                facts.hasSound = true
                _ = try scanValue(depth: depth)
            case (.aps, .contentAvailable):
                let start = i
                let kind = try scanValue(depth: depth)
                facts.contentAvailable = JSONToken(kind: kind, start: start, end: i)
            default:
                _ = try scanValue(depth: depth)
            }

            skipWhitespace()
            guard i < n else { throw fail("',' or '}' after an object member") }
            let b = p[i]
            if b == UInt8(ascii: ",") {
                i += 1
                skipWhitespace()
                afterComma = true
                continue
            }
            if b == UInt8(ascii: "}") {
                i += 1
                return
            }
            throw fail("',' or '}' after an object member")
        }
    }

    /// `i` is just past `[`.
    private mutating func scanArray(depth: Int) throws(JSONSyntaxError) {
        skipWhitespace()
        if i < n, p[i] == UInt8(ascii: "]") {
            i += 1
            return
        }
        while true {
            _ = try scanValue(depth: depth)
            skipWhitespace()
            guard i < n else { throw fail("',' or ']' after an array element") }
            let b = p[i]
            if b == UInt8(ascii: ",") {
                i += 1
                skipWhitespace()
                if i < n, p[i] == UInt8(ascii: "]") {
                    throw fail("a value after ',' (trailing commas are not allowed)")
                }
                continue
            }
            if b == UInt8(ascii: "]") {
                i += 1
                return
            }
            throw fail("',' or ']' after an array element")
        }
    }

    /// `depth` is the depth of the container the value sits in; `i` is at the value's first byte.
    private mutating func scanValue(depth: Int) throws(JSONSyntaxError) -> JSONValueKind {
        guard i < n else { throw fail("a value") }
        switch p[i] {
        case UInt8(ascii: "{"):
            try enterContainer(depth: depth)
            try scanObject(depth: depth + 1, role: .other)
            return .object
        case UInt8(ascii: "["):
            try enterContainer(depth: depth)
            try scanArray(depth: depth + 1)
            return .array
        case UInt8(ascii: "\""):
            i += 1
            _ = try scanString(matching: .other)
            return .string
        case UInt8(ascii: "t"):
            try scanLiteral("true")
            return .bool
        case UInt8(ascii: "f"):
            try scanLiteral("false")
            return .bool
        case UInt8(ascii: "n"):
            try scanLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try scanNumber()
            return .number
        default:
            throw fail("a value (object, array, string, number, true, false or null)")
        }
    }

    /// `i` is at `{` or `[`, opened inside a container at `depth`; consumes the bracket.
    @inline(__always)
    private mutating func enterContainer(depth: Int) throws(JSONSyntaxError) {
        guard depth < Self.maxDepth else {
            throw fail("at most \(Self.maxDepth) levels of nested objects and arrays")
        }
        i += 1
    }
}
