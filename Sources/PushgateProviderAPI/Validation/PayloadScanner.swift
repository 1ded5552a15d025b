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

    init(aps: JSONValueKind? = nil, hasAlert: Bool = false, hasBadge: Bool = false, hasSound: Bool = false,
         contentAvailable: JSONToken? = nil) {
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
/// - Numbers are checked against the grammar only; their magnitude is not limited (`1e400` passes).
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

    private let p: UnsafeRawBufferPointer
    private let n: Int
    private var i = 0
    private(set) var facts = APSFacts()

    private init(_ bytes: UnsafeRawBufferPointer) {
        self.p = bytes
        self.n = bytes.count
    }

    private enum Role { case top, aps, other }

    // Keys we look for, packed little-endian into up to three 64-bit words (see KeyAccumulator).
    private enum Key { case none, aps, alert, badge, sound, contentAvailable }

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

    // MARK: scalars

    private mutating func scanLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let count = literal.utf8CodeUnitCount
        let bytes = literal.utf8Start
        for k in 0..<count {
            guard i < n, p[i] == bytes[k] else {
                throw fail("the literal \(literal)")
            }
            i += 1
        }
    }

    /// number = [ minus ] int [ frac ] [ exp ]  (RFC 8259 section 6)
    private mutating func scanNumber() throws(JSONSyntaxError) {
        if p[i] == UInt8(ascii: "-") { i += 1 }
        guard i < n else { throw fail("a digit") }
        if p[i] == UInt8(ascii: "0") {
            i += 1
            if i < n, isDigit(p[i]) {
                throw fail("'.', 'e' or the end of the number after a leading 0 (leading zeros are not allowed)")
            }
        } else if isDigit(p[i]) {
            i += 1
            skipDigits()
        } else {
            throw fail("a digit")
        }
        if i < n, p[i] == UInt8(ascii: ".") {
            i += 1
            guard i < n, isDigit(p[i]) else { throw fail("a digit after the decimal point") }
            skipDigits()
        }
        if i < n, p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E") {
            i += 1
            if i < n, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
            guard i < n, isDigit(p[i]) else { throw fail("a digit in the exponent") }
            skipDigits()
        }
    }

    @inline(__always)
    private func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }

    @inline(__always)
    private mutating func skipDigits() {
        while i < n, isDigit(p[i]) { i += 1 }
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while i < n {
            switch p[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    /// `i` is just past the opening quote; on return just past the closing one. When `role` is
    /// `.top` or `.aps` the unescaped key is compared against the keys of interest.
    private mutating func scanString(matching role: Role) throws(JSONSyntaxError) -> Key {
        var key = KeyAccumulator()
        let matching = role != .other
        while true {
            guard i < n else { throw fail("'\"' to close the string") }
            let b = p[i]
            if b == UInt8(ascii: "\"") {
                i += 1
                break
            }
            if b == UInt8(ascii: "\\") {
                let scalar = try scanEscape()
                if matching { key.append(scalar: scalar) }
            } else if b < 0x20 {
                throw fail("a string character (control characters must be escaped, e.g. \\n or \\u00\(hex2(b)))")
            } else if b < 0x80 {
                i += 1
                if matching { key.append(byte: b) }
            } else {
                try scanUTF8Sequence()
                if matching { key.poison() }
            }
        }
        guard matching else { return .none }
        switch role {
        case .top:
            return key.equals(KeyAccumulator.aps) ? .aps : .none
        case .aps:
            if key.equals(KeyAccumulator.alert) { return .alert }
            if key.equals(KeyAccumulator.badge) { return .badge }
            if key.equals(KeyAccumulator.sound) { return .sound }
            if key.equals(KeyAccumulator.contentAvailable) { return .contentAvailable }
            return .none
        case .other:
            return .none
        }
    }

    /// `i` is at the backslash; returns the escaped Unicode scalar value.
    private mutating func scanEscape() throws(JSONSyntaxError) -> UInt32 {
        let escapeStart = i
        i += 1
        guard i < n else { throw fail("an escape character after '\\'") }
        let c = p[i]
        i += 1
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return UInt32(c)
        case UInt8(ascii: "b"): return 0x08
        case UInt8(ascii: "f"): return 0x0C
        case UInt8(ascii: "n"): return 0x0A
        case UInt8(ascii: "r"): return 0x0D
        case UInt8(ascii: "t"): return 0x09
        case UInt8(ascii: "u"):
            let unit = try scanHex4()
            switch unit {
            case 0xD800...0xDBFF:
                guard i + 1 < n, p[i] == UInt8(ascii: "\\"), p[i + 1] == UInt8(ascii: "u") else {
                    throw fail("a \\u low surrogate (DC00-DFFF) after the high surrogate \\u\(hex4(unit))")
                }
                let lowStart = i
                i += 2
                let low = try scanHex4()
                guard (0xDC00...0xDFFF).contains(low) else {
                    i = lowStart
                    throw fail("a \\u low surrogate (DC00-DFFF) after the high surrogate \\u\(hex4(unit))")
                }
                return 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            case 0xDC00...0xDFFF:
                i = escapeStart
                throw fail("a high surrogate before the low surrogate \\u\(hex4(unit)) (lone surrogates are not allowed)")
            default:
                return UInt32(unit)
            }
        default:
            i -= 1
            throw fail("a valid escape after '\\' (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)")
        }
    }

    private mutating func scanHex4() throws(JSONSyntaxError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard i < n else { throw fail("a hex digit in a \\u escape") }
            let b = p[i]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw fail("a hex digit in a \\u escape")
            }
            value = value << 4 | UInt16(digit)
            i += 1
        }
        return value
    }

    /// `i` is at a byte >= 0x80 inside a string: checks one well-formed UTF-8 sequence
    /// (Unicode table 3-7) and moves past it.
    private mutating func scanUTF8Sequence() throws(JSONSyntaxError) {
        let lead = p[i]
        let trailing: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: trailing = 1
        case 0xE0: trailing = 2; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: trailing = 2
        case 0xED: trailing = 2; high = 0x9F
        case 0xF0: trailing = 3; low = 0x90
        case 0xF1...0xF3: trailing = 3
        case 0xF4: trailing = 3; high = 0x8F
        default: throw fail("UTF-8 text (byte 0x\(hex2(lead)) cannot start a UTF-8 sequence)")
        }
        i += 1
        for k in 0..<trailing {
            guard i < n else { throw fail("a UTF-8 continuation byte") }
            let b = p[i]
            let ok = k == 0 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF)
            guard ok else { throw fail("a UTF-8 continuation byte") }
            i += 1
        }
    }

    // MARK: errors

    private func fail(_ expected: String) -> JSONSyntaxError {
        let found: String
        if i >= n {
            found = "end of input"
        } else {
            let b = p[i]
            switch b {
            case 0x20: found = "' '"
            case 0x21...0x7E: found = "'\(Character(Unicode.Scalar(b)))'"
            default: found = "byte 0x\(hex2(b))"
            }
        }
        return JSONSyntaxError(offset: min(i, n), expected: expected, found: found)
    }
}

/// Collects the first 24 unescaped bytes of a key into three words, so that a key can be compared
/// with the few keys validation cares about without allocating.
private struct KeyAccumulator {
    var w0: UInt64 = 0
    var w1: UInt64 = 0
    var w2: UInt64 = 0
    /// Bytes appended; `Int.max / 2` once the key cannot match anything (non-ASCII, too long).
    var count = 0

    @inline(__always)
    mutating func append(byte: UInt8) {
        let k = count
        count = k &+ 1
        guard k < 24 else { return }
        let shifted = UInt64(byte) << UInt64((k & 7) * 8)
        switch k >> 3 {
        case 0: w0 |= shifted
        case 1: w1 |= shifted
        default: w2 |= shifted
        }
    }

    @inline(__always)
    mutating func append(scalar: UInt32) {
        if scalar < 0x80 { append(byte: UInt8(scalar)) } else { poison() }
    }

    @inline(__always)
    mutating func poison() { count = Int.max / 2 }

    @inline(__always)
    func equals(_ other: KeyAccumulator) -> Bool {
        count == other.count && w0 == other.w0 && w1 == other.w1 && w2 == other.w2
    }

    init() {}

    init(_ key: StaticString) {
        precondition(key.utf8CodeUnitCount <= 24)
        for k in 0..<key.utf8CodeUnitCount { append(byte: key.utf8Start[k]) }
    }

    static let aps = KeyAccumulator("aps")
    static let alert = KeyAccumulator("alert")
    static let badge = KeyAccumulator("badge")
    static let sound = KeyAccumulator("sound")
    static let contentAvailable = KeyAccumulator("content-available")
}

private let hexDigits: StaticString = "0123456789ABCDEF"

func hex2(_ b: UInt8) -> String {
    let d = hexDigits.utf8Start
    return String(decoding: [d[Int(b >> 4)], d[Int(b & 0xF)]], as: UTF8.self)
}

private func hex4(_ v: UInt16) -> String { hex2(UInt8(v >> 8)) + hex2(UInt8(v & 0xFF)) }
