import PushgateModel

#if canImport(Glibc)
import Glibc
#endif

/// Syntax of the individual request fields. Pure functions over strings; no allocation unless a
/// value has to be normalized.
enum FieldSyntax {
    // MARK: hex, tokens, UUIDs

    /// Arithmetic rather than range patterns: the patterns went through `ClosedRange.contains`
    /// per byte, unspecialized, a call for each of a token's 64 digits on every push.
    @inline(__always)
    static func isHex(_ b: UInt8) -> Bool {
        b &- UInt8(ascii: "0") < 10 || (b | 0x20) &- UInt8(ascii: "a") < 6
    }

    @inline(__always)
    static func isUpperHex(_ b: UInt8) -> Bool { b >= UInt8(ascii: "A") && b <= UInt8(ascii: "F") }

    /// The string with `A`-`F` lowered.
    static func lowercasingHex(_ s: Substring) -> String {
        guard s.utf8.contains(where: isUpperHex) else { return String(s) }
        var s = s
        return s.withUTF8(lowercasingHex)
    }

    /// The bytes (ASCII) as a String with `A`-`F` lowered, in one pass.
    static func lowercasingHex(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count) { buffer in
            for (i, byte) in bytes.enumerated() { buffer[i] = isUpperHex(byte) ? byte | 0x20 : byte }
            return bytes.count
        }
    }

    /// Why `token` is not a device token, or `nil` when it is one: exactly 64 hex digits.
    static func deviceTokenProblem(_ token: Substring) -> String? {
        if token.utf8.count == 64, token.utf8.allSatisfy(isHex) { return nil }
        var count = 0
        var firstBad: (offset: Int, scalar: Unicode.Scalar)?
        var offset = 0
        for scalar in token.unicodeScalars {
            if firstBad == nil, !(scalar.isASCII && isHex(UInt8(scalar.value))) {
                firstBad = (offset, scalar)
            }
            offset += 1
            count += 1
        }
        if let bad = firstBad {
            return
                "device token must be 64 hex digits (0-9, a-f), found \(Detail.scalar(bad.scalar)) at position \(bad.offset + 1) of \(Detail.quote(token))"
        }
        if count != 64 {
            return "device token must be 64 hex digits, got \(count): \(Detail.quote(token))"
        }
        return nil
    }

    /// The canonical lowercase form of a UUID written 8-4-4-4-12 with hex digits of either case;
    /// `nil` when `s` is not one.
    static func canonicalUUID(_ s: String) -> String? {
        let utf8 = s.utf8
        guard utf8.count == 36 else { return nil }
        var k = 0
        var upper = false
        for b in utf8 {
            if k == 8 || k == 13 || k == 18 || k == 23 {
                guard b == UInt8(ascii: "-") else { return nil }
            } else {
                guard isHex(b) else { return nil }
                if isUpperHex(b) { upper = true }
            }
            k += 1
        }
        return upper ? lowercasingHex(s[...]) : s
    }

    // MARK: numbers

    /// `apns-expiration`: unsigned decimal digits that fit `Int64`; `nil` otherwise.
    static func expirationSeconds(_ s: String) -> Int64? {
        guard !s.isEmpty else { return nil }
        var value: Int64 = 0
        for b in s.utf8 {
            let digit = b &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int64(digit))
            guard !o1, !o2 else { return nil }
            value = sum
        }
        return value
    }

    static func priority(_ s: String) -> PushPriority? {
        switch s {
        case "10": return .high
        case "5": return .normal
        case "1": return .low
        default: return nil
        }
    }

    // MARK: topics

    /// Why `topic` is not a plausible bundle id (or MDM topic), or `nil` when it is. The verdict is
    /// PushgateModel's ``TopicRules`` (shared with device registration, so that every registrable
    /// topic can be pushed to): 1-255 bytes of ASCII letters, digits, `.`, `-`, `_`. This function
    /// only says precisely what is wrong.
    static func topicProblem(_ topic: String) -> String? {
        if TopicRules.isValid(topic) { return nil }
        let utf8 = topic.utf8
        if utf8.isEmpty { return "apns-topic is empty; send the app's bundle id, e.g. \"com.example.app\"" }
        if utf8.count > TopicRules.maxBytes {
            return
                "apns-topic is \(utf8.count) bytes, at most \(TopicRules.maxBytes) are allowed: \(Detail.quote(topic))"
        }
        var position = 0
        for scalar in topic.unicodeScalars {
            position += 1
            let v = scalar.value
            let allowed =
                (v >= 0x61 && v <= 0x7A) || (v >= 0x41 && v <= 0x5A) || (v >= 0x30 && v <= 0x39)
                || v == 0x2E || v == 0x2D || v == 0x5F
            if !allowed {
                return
                    "apns-topic may contain only letters, digits, '.', '-' and '_'; found \(Detail.scalar(scalar)) at position \(position) of \(Detail.quote(topic))"
            }
        }
        return "apns-topic \(Detail.quote(topic)): " + TopicRules.explain(topic)
    }

    /// Byte-wise (case-sensitive) suffix test that also requires something before the suffix.
    static func hasProperSuffix(_ s: String, _ suffix: String) -> Bool {
        let a = s.utf8
        let b = suffix.utf8
        guard a.count > b.count else { return false }
        // One memcmp over contiguous UTF-8 (native strings are); every topic is tested against
        // each suffix, and the generic comparison of the views' elements cost more than the rest
        // of the topic's checks.
        let compared = a.withContiguousStorageIfAvailable { whole in
            b.withContiguousStorageIfAvailable { tail in
                guard let start = whole.baseAddress, let suffixStart = tail.baseAddress else { return tail.isEmpty }
                return memcmp(start + (whole.count - tail.count), suffixStart, tail.count) == 0
            }
        }
        if case .some(.some(let equal)) = compared { return equal }
        return a.suffix(b.count).elementsEqual(b)
    }

    /// The push type whose topic suffix `topic` ends with, if any.
    static func pushTypeImplied(byTopic topic: String) -> PushType? {
        for (type, suffix) in suffixedTypes where hasProperSuffix(topic, suffix) { return type }
        return nil
    }

    /// The push types that have a topic suffix, with it (computed once: `allCases` allocates).
    private static let suffixedTypes: [(PushType, String)] = PushType.allCases.compactMap { type in
        type.topicSuffix.map { (type, $0) }
    }
}

/// Formatting for `Refusal.detail`: values are quoted, escaped and cut short.
enum Detail {
    /// Longest part of a client-supplied value quoted in a detail, in Unicode scalars.
    static let maxQuotedScalars = 64

    /// `"value"` with `"`, `\` and non-printable characters escaped; longer values are cut to
    /// ``maxQuotedScalars`` scalars and end in `…" (N bytes)`.
    static func quote<S: StringProtocol>(_ value: S) -> String {
        var out = "\""
        var count = 0
        var truncated = false
        for scalar in value.unicodeScalars {
            if count == maxQuotedScalars {
                truncated = true
                break
            }
            count += 1
            appendEscaped(scalar, to: &out)
        }
        if truncated {
            out += "…\" (\(value.utf8.count) bytes)"
        } else {
            out += "\""
        }
        return out
    }

    /// One character for a detail: `'g'`, `' '`, `U+00E9`.
    static func scalar(_ scalar: Unicode.Scalar) -> String {
        if scalar.value > 0x20, scalar.value < 0x7F { return "'\(Character(scalar))'" }
        if scalar.value == 0x20 { return "' '" }
        return "U+" + hex(scalar.value, minimumDigits: 4)
    }

    private static func appendEscaped(_ scalar: Unicode.Scalar, to out: inout String) {
        switch scalar.value {
        case 0x22: out += "\\\""
        case 0x5C: out += "\\\\"
        case 0x0A: out += "\\n"
        case 0x0D: out += "\\r"
        case 0x09: out += "\\t"
        case 0x00..<0x20, 0x7F..<0xA0, 0x2028, 0x2029:
            out += "\\u{" + hex(scalar.value, minimumDigits: 2) + "}"
        default: out.unicodeScalars.append(scalar)
        }
    }

    private static func hex(_ v: UInt32, minimumDigits: Int) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return s.count >= minimumDigits ? s : String(repeating: "0", count: minimumDigits - s.count) + s
    }

    /// The raw bytes of a JSON token, for a detail: quoted-free, cut to ``maxQuotedScalars`` bytes.
    static func token(_ bytes: UnsafeRawBufferPointer, _ token: JSONToken) -> String {
        let end = min(token.end, token.start + maxQuotedScalars)
        let text = String(decoding: bytes[token.start..<end], as: UTF8.self)
        return end < token.end ? text + "…" : text
    }
}
