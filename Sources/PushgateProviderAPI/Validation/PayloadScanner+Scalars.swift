import PushgateModel

// Literals, numbers, strings with their escapes and UTF-8, and the error at the current byte.
extension PayloadScanner {

    mutating func scanLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let count = literal.utf8CodeUnitCount
        let bytes = literal.utf8Start
        for k in 0..<count {
            guard i < n, p[i] == bytes[k] else {
                throw fail("the literal \(literal)")
            }
            i += 1
        }
    }

    /// number = [ minus ] int [ frac ] [ exp ]  (RFC 8259 section 6), and finite as a Double.
    mutating func scanNumber() throws(JSONSyntaxError) {
        let start = i
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
        guard JSONNumber.isFinite(UnsafeRawBufferPointer(rebasing: p[start..<i])) else {
            i = start
            throw fail("a number a double can hold (magnitude at most about 1.8e308)")
        }
    }

    @inline(__always)
    func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }

    @inline(__always)
    mutating func skipDigits() {
        while i < n, isDigit(p[i]) { i += 1 }
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while i < n {
            switch p[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    /// `i` is just past the opening quote; on return just past the closing one. When `role` is
    /// `.top` or `.aps` the unescaped key is compared against the keys of interest.
    mutating func scanString(matching role: Role) throws(JSONSyntaxError) -> Key {
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
    mutating func scanEscape() throws(JSONSyntaxError) -> UInt32 {
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
                throw fail(
                    "a high surrogate before the low surrogate \\u\(hex4(unit)) (lone surrogates are not allowed)"
                )
            default:
                return UInt32(unit)
            }
        default:
            i -= 1
            throw fail("a valid escape after '\\' (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)")
        }
    }

    mutating func scanHex4() throws(JSONSyntaxError) -> UInt16 {
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
    /// (`UTF8Sequence`) and moves past it.
    mutating func scanUTF8Sequence() throws(JSONSyntaxError) {
        let lead = p[i]
        guard let sequence = UTF8Sequence(lead: lead) else {
            throw fail("UTF-8 text (byte 0x\(hex2(lead)) cannot start a UTF-8 sequence)")
        }
        i += 1
        for k in 0..<sequence.trailing {
            guard i < n, sequence.accepts(p[i], at: k) else { throw fail("a UTF-8 continuation byte") }
            i += 1
        }
    }

    // MARK: errors

    func fail(_ expected: String) -> JSONSyntaxError {
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

private let hexDigits: StaticString = "0123456789ABCDEF"

private func hex2(_ b: UInt8) -> String {
    let d = hexDigits.utf8Start
    return String(decoding: [d[Int(b >> 4)], d[Int(b & 0xF)]], as: UTF8.self)
}

private func hex4(_ v: UInt16) -> String { hex2(UInt8(v >> 8)) + hex2(UInt8(v & 0xFF)) }
