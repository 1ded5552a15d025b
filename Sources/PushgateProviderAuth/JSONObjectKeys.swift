/// The keys of a JSON object, read as a JSON parser reads them (escapes decoded), to find one
/// that appears twice. Foundation's decoder keeps one of the two values silently; a JWT header
/// or claims set with two `kid`s could then mean one key to this gateway and another to a tool
/// that reads the same token, so such a token is refused instead (the security review).
enum JSONObjectKeys {
    /// The first key of the top-level object that appears twice, decoded; nil when none does or
    /// when the text is not a JSON object (the decoder then says what is wrong with it).
    static func firstDuplicate(in json: [UInt8]) -> String? {
        var reader = Reader(bytes: json)
        reader.skipSpace()
        guard reader.take(UInt8(ascii: "{")) else { return nil }
        var seen: Set<String> = []
        reader.skipSpace()
        if reader.take(UInt8(ascii: "}")) { return nil }
        while true {
            reader.skipSpace()
            guard let key = reader.string() else { return nil }
            if !seen.insert(key).inserted { return key }
            reader.skipSpace()
            guard reader.take(UInt8(ascii: ":")), reader.skipValue() else { return nil }
            reader.skipSpace()
            if reader.take(UInt8(ascii: ",")) { continue }
            return nil
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        /// A string at `index`, its escapes decoded; nil if there is none or it is malformed.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flush() {
                scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
                raw.removeAll()
            }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    flush()
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    flush()
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(Unicode.Scalar(escape))
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        guard var unit = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(unit), take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(),
                           (0xDC00..<0xE000).contains(low) {
                            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                        }
                        scalars.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
                    default:
                        return nil
                    }
                default:
                    raw.append(byte)
                }
            }
            return nil
        }

        private mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) else { return nil }
            index += 4
            return value
        }

        /// Skips one value of any kind; false if it is malformed.
        mutating func skipValue() -> Bool {
            skipSpace()
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return string() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while index < bytes.count {
                    switch bytes[index] {
                    case UInt8(ascii: "\""):
                        guard string() != nil else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["):
                        depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 {
                            index += 1
                            return true
                        }
                    default:
                        break
                    }
                    index += 1
                }
                return false
            default:
                // A number or a literal: up to the next delimiter.
                let start = index
                while index < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) {
                    index += 1
                }
                return index > start
            }
        }
    }
}
