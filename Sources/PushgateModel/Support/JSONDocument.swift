/// A JSON text parsed with the line and column of every value and key, so that a problem in the
/// configuration file can name the place to fix, and with every member of an object in the order
/// written, so that a JWT naming one twice can be refused. Foundation's parser reports no
/// positions and keeps one of two members of the same name.
package struct JSONDocument: Sendable {
    package let root: JSONNode

    /// Objects and arrays nest at most this deep (the outermost is level 1). The parser recurses
    /// once per level, and a provider token's header arrives before anything is trusted: 32 KiB
    /// of `[` overflowed the event loop's stack. Configuration files and JWTs need a handful.
    package static let maxDepth = 64

    /// Parses `bytes` (UTF-8); a syntax error names its line and column.
    package init(_ bytes: [UInt8]) throws(JSONSyntaxError) {
        var parser = Parser(bytes: bytes)
        parser.skipBlanks()
        root = try parser.value()
        parser.skipBlanks()
        if parser.index < bytes.count { throw parser.error("unexpected text after the JSON value") }
    }
}

/// A line and column, both counted from 1; columns count bytes, as editors on ASCII text show.
package struct TextPosition: Sendable, Equatable, CustomStringConvertible {
    package var line: Int
    package var column: Int
    package var description: String { "\(line):\(column)" }

    package init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
}

/// One JSON value and where it starts.
package struct JSONNode: Sendable {
    package enum Value: Sendable {
        case null
        case bool(Bool)
        /// The number as written, so that a whole number is read exactly (no Double on the way).
        case number(String)
        case string(String)
        case array([JSONNode])
        /// Members in the order written, with the position of each key.
        case object([Member])
    }

    package struct Member: Sendable {
        package var key: String
        package var keyPosition: TextPosition
        package var value: JSONNode

        package init(key: String, keyPosition: TextPosition, value: JSONNode) {
            self.key = key
            self.keyPosition = keyPosition
            self.value = value
        }
    }

    package var value: Value
    package var position: TextPosition

    package init(value: Value, position: TextPosition) {
        self.value = value
        self.position = position
    }

    /// What the value is, in the words a type error uses.
    package var kindName: String {
        switch value {
        case .null: "null"
        case .bool: "true or false"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The member named `key` of an object (the last one when written twice, as Foundation reads it).
    package func member(_ key: String) -> Member? {
        guard case .object(let members) = value else { return nil }
        return members.last { $0.key == key }
    }
}

package struct JSONSyntaxError: Error, Sendable {
    package var position: TextPosition
    package var problem: String
}

private struct Parser {
    let bytes: [UInt8]
    var index = 0
    var line = 1
    var lineStart = 0
    /// Objects and arrays open around the current value.
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    var position: TextPosition { TextPosition(line: line, column: index - lineStart + 1) }

    func error(_ problem: String) -> JSONSyntaxError { JSONSyntaxError(position: position, problem: problem) }

    mutating func skipBlanks() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\n"):
                index += 1
                line += 1
                lineStart = index
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"): index += 1
            default: return
            }
        }
    }

    mutating func value() throws(JSONSyntaxError) -> JSONNode {
        let start = position
        guard index < bytes.count else { throw error("the file ends where a value was expected") }
        switch bytes[index] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < JSONDocument.maxDepth else {
                throw error("more than \(JSONDocument.maxDepth) levels of nested objects and arrays")
            }
            depth += 1
            defer { depth -= 1 }
            if bytes[index] == UInt8(ascii: "{") { return JSONNode(value: .object(try members()), position: start) }
            return JSONNode(value: .array(try elements()), position: start)
        case UInt8(ascii: "\""): return JSONNode(value: .string(try string()), position: start)
        case UInt8(ascii: "t"):
            try literal("true")
            return JSONNode(value: .bool(true), position: start)
        case UInt8(ascii: "f"):
            try literal("false")
            return JSONNode(value: .bool(false), position: start)
        case UInt8(ascii: "n"):
            try literal("null")
            return JSONNode(value: .null, position: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return JSONNode(value: .number(try number()), position: start)
        default: throw error("expected a value (an object, array, string, number, true, false or null)")
        }
    }

    private mutating func members() throws(JSONSyntaxError) -> [JSONNode.Member] {
        index += 1
        skipBlanks()
        var members: [JSONNode.Member] = []
        if try take("}") { return members }
        while true {
            skipBlanks()
            let keyPosition = position
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("expected a key in double quotes")
            }
            let key = try string()
            skipBlanks()
            guard try take(":") else { throw error("expected ':' after the key \"\(key)\"") }
            skipBlanks()
            members.append(JSONNode.Member(key: key, keyPosition: keyPosition, value: try value()))
            skipBlanks()
            if try take("}") { return members }
            guard try take(",") else { throw error("expected ',' or '}' after the value of \"\(key)\"") }
        }
    }

    private mutating func elements() throws(JSONSyntaxError) -> [JSONNode] {
        index += 1
        skipBlanks()
        var elements: [JSONNode] = []
        if try take("]") { return elements }
        while true {
            skipBlanks()
            elements.append(try value())
            skipBlanks()
            if try take("]") { return elements }
            guard try take(",") else { throw error("expected ',' or ']' in the array") }
        }
    }

    private mutating func take(_ character: Unicode.Scalar) throws(JSONSyntaxError) -> Bool {
        guard index < bytes.count else { throw error("the file ends inside an object or array") }
        guard bytes[index] == UInt8(ascii: character) else { return false }
        index += 1
        return true
    }

    private mutating func literal(_ word: String) throws(JSONSyntaxError) {
        let expected = Array(word.utf8)
        guard bytes[index...].starts(with: expected) else { throw error("expected \(word)") }
        index += expected.count
    }

    private mutating func number() throws(JSONSyntaxError) -> String {
        let start = index
        func isNumberByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                UInt8(ascii: "e"), UInt8(ascii: "E"):
                true
            default: false
            }
        }
        var end = start
        while end < bytes.count, isNumberByte(bytes[end]) { end += 1 }
        let text = String(decoding: bytes[start..<end], as: UTF8.self)
        // RFC 8259's grammar over the whole run (Double alone also takes `01`, `1.` and `.5`),
        // and a value a Double can hold, as Foundation's reader requires.
        guard Self.isJSONNumber(bytes[start..<end]), JSONNumber.isFinite(bytes[start..<end]) else {
            throw error("\(text) is not a JSON number")
        }
        index = end
        return text
    }

    /// number = [ "-" ] ( "0" / 1-9 *DIGIT ) [ "." 1*DIGIT ] [ ( "e" / "E" ) [ "-" / "+" ] 1*DIGIT ]
    private static func isJSONNumber(_ text: ArraySlice<UInt8>) -> Bool {
        var i = text.startIndex
        func digits() -> Bool {
            let first = i
            while i < text.endIndex, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[i]) { i += 1 }
            return i > first
        }
        if i < text.endIndex, text[i] == UInt8(ascii: "-") { i += 1 }
        if i < text.endIndex, text[i] == UInt8(ascii: "0") {
            i += 1
        } else if !digits() {
            return false
        }
        if i < text.endIndex, text[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() else { return false }
        }
        if i < text.endIndex, text[i] == UInt8(ascii: "e") || text[i] == UInt8(ascii: "E") {
            i += 1
            if i < text.endIndex, text[i] == UInt8(ascii: "-") || text[i] == UInt8(ascii: "+") { i += 1 }
            guard digits() else { return false }
        }
        return i == text.endIndex
    }

    private mutating func string() throws(JSONSyntaxError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var run = index
        func flush(_ end: Int) {
            scalars.append(contentsOf: String(decoding: bytes[run..<end], as: UTF8.self).unicodeScalars)
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                flush(index)
                index += 1
                return String(scalars)
            }
            if byte < 0x20 {
                throw error(
                    byte == UInt8(ascii: "\n")
                        ? "the string is not closed on its line" : "a control character in a string"
                )
            }
            if byte >= 0x80 {
                guard let length = utf8SequenceLength() else {
                    throw error("not UTF-8 (byte 0x\(String(byte, radix: 16, uppercase: true)))")
                }
                index += length
                continue
            }
            if byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            flush(index)
            index += 1
            guard index < bytes.count else { break }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800..<0xDC00).contains(code), bytes[index...].starts(with: Array("\\u".utf8)) {
                    index += 2
                    let low = try hex4()
                    // Only a low surrogate completes the pair: below DC00 the sum ran past UInt32 (a
                    // trap, reachable with a provider token's header), above DFFF it made up
                    // another character.
                    guard (0xDC00..<0xE000).contains(low) else {
                        throw error(
                            "\\u escape of no character (a high surrogate must be followed by a low one, DC00-DFFF)"
                        )
                    }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { throw error("\\u escape of no character") }
                scalars.append(scalar)
            default:
                index -= 2
                throw error("unknown escape in a string")
            }
            run = index
        }
        throw error("the file ends inside a string")
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        // Hex digits only: UInt32(_:radix:) would also take a sign (`\u+41A`).
        guard index + 4 <= bytes.count, bytes[index..<index + 4].allSatisfy(\.isASCIIHexDigit),
            let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else {
            throw error("\\u needs four hex digits")
        }
        index += 4
        return code
    }

    /// The length of the well-formed UTF-8 sequence at `index` (`UTF8Sequence`), nil when there
    /// is none: a file or token in another encoding is an error, not text with U+FFFD in it.
    private func utf8SequenceLength() -> Int? {
        guard let sequence = UTF8Sequence(lead: bytes[index]), index + sequence.trailing < bytes.count else {
            return nil
        }
        for k in 0..<sequence.trailing where !sequence.accepts(bytes[index + 1 + k], at: k) { return nil }
        return sequence.trailing + 1
    }
}

extension UInt8 {
    fileprivate var isASCIIHexDigit: Bool {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }
}
