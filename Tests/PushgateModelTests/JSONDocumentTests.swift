import Foundation
import PushgateModel
import Testing

/// The configuration file's position-tracking JSON parser: the values Foundation reads, and
/// the line and column of each.
@Suite("JSONDocument: values as Foundation reads them, with positions")
struct JSONDocumentTests {
    @Test(
        "the same values as JSONSerialization",
        arguments: [
            #"{"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "d", "e": {}}, "f": []}"#,
            #"{"escapes": "q\" b\\ s\/ \b\f\n\r\t \u00e9 \ud83d\ude00", "plain": "été 😀"}"#,
            "[\n  \"multi\",\n  {\"line\": 18446744073709552}\n]",
            #""just a string""#,
        ]
    )
    func sameAsFoundation(text: String) throws {
        let ours = try JSONDocument(Array(text.utf8)).root
        let foundation = try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)
        #expect(Self.plain(ours) == Self.plain(foundation))
    }

    @Test("positions: every value and key at its line and column, nested objects included")
    func positions() throws {
        let text = "{\n  \"a\": {\n    \"b\": [1,\n      {\"c\": \"x\\ny\"}]\n  },\n\t\"d\": null\n}"
        let root = try JSONDocument(Array(text.utf8)).root
        let a = try #require(root.member("a"))
        #expect(a.keyPosition == TextPosition(line: 2, column: 3))
        #expect(a.value.position == TextPosition(line: 2, column: 8))
        let b = try #require(a.value.member("b"))
        guard case .array(let elements) = b.value.value else {
            Issue.record("b is not an array")
            return
        }
        #expect(elements[1].position == TextPosition(line: 4, column: 7))
        #expect(elements[1].member("c")?.value.position == TextPosition(line: 4, column: 13))
        #expect(root.member("d")?.keyPosition == TextPosition(line: 6, column: 2))
    }

    @Test(
        "syntax errors name their place",
        arguments: [
            ("{\"a\": 1,}", "1:9", "expected a key in double quotes"),
            ("{\"a\": \"open\n}", "1:12", "the string is not closed on its line"),
            ("{\"a\": 1} x", "1:10", "unexpected text after the JSON value"),
            ("{\n  \"a\" 1\n}", "2:7", "expected ':' after the key \"a\""),
            ("{\"a\": +1}", "1:7", "expected a value (an object, array, string, number, true, false or null)"),
            ("[1, 2", "1:6", "the file ends inside an object or array"),
            (
                #"{"a": "\ud83d\uade0"}"#, "1:20",
                "\\u escape of no character (a high surrogate must be followed by a low one, DC00-DFFF)"
            ),
            (
                #"{"a": "\ud800\ue000"}"#, "1:20",
                "\\u escape of no character (a high surrogate must be followed by a low one, DC00-DFFF)"
            ),
            // Non-JSON the parser took, of the kind fuzzing found (notUTF8 below), found by
            // reading it then: text Double reads but JSON's grammar does not, numbers beyond a
            // Double, a signed \u escape.
            ("{\"a\": 01}", "1:7", "01 is not a JSON number"),
            ("{\"a\": -1.}", "1:7", "-1. is not a JSON number"),
            ("{\"a\": 1.e5}", "1:7", "1.e5 is not a JSON number"),
            ("{\"a\": 1e400}", "1:7", "1e400 is not a JSON number"),
            (#"{"a": "\u+41A"}"#, "1:10", "\\u needs four hex digits"),
        ]
    )
    func syntaxErrors(text: String, place: String, problem: String) {
        #expect {
            _ = try JSONDocument(Array(text.utf8))
        } throws: { error in
            guard let error = error as? JSONSyntaxError else { return false }
            return error.position.description == place && error.problem == problem
        }
    }

    // Found by fuzzing (Tests/Fuzz, configuration): bytes that are not UTF-8 inside a string
    // became U+FFFD, so a file or token in another encoding was taken as different text.
    @Test(
        "strings must be UTF-8: a stray continuation byte, an overlong form, an encoded surrogate, a sequence cut short",
        arguments: [[0xC3, 0x28], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x9F, 0x98]] as [[UInt8]]
    )
    func notUTF8(bad: [UInt8]) {
        #expect {
            _ = try JSONDocument(Array(#"{"a": ""#.utf8) + bad + Array(#""}"#.utf8))
        } throws: { error in
            guard let error = error as? JSONSyntaxError else { return false }
            return error.position.description == "1:8"
                && error.problem == "not UTF-8 (byte 0x\(String(bad[0], radix: 16, uppercase: true)))"
        }
        #expect(throws: Never.self) { try JSONDocument(Array("{\"a\": \"é 😀 \u{10FFFF}\"}".utf8)) }
    }

    // Found by fuzzing (Tests/Fuzz, provider-token): the parser recursed once per level with no
    // limit, and a token header of 23,000 `[` (32 KiB of base64, within HTTP/2's header list
    // limit) overflowed the stack and killed the gateway.
    @Test("nesting: 64 levels parse, the 65th is a syntax error at its bracket, however deep the text goes")
    func nesting() throws {
        let deepest = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        _ = try JSONDocument(Array(deepest.utf8))
        for text in [
            String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
            String(repeating: "{\"a\":[", count: 100_000),
        ] {
            #expect {
                _ = try JSONDocument(Array(text.utf8))
            } throws: { error in
                (error as? JSONSyntaxError)?.problem == "more than 64 levels of nested objects and arrays"
            }
        }
    }

    /// Either parser's result as comparable text: numbers as Doubles, and so booleans (Linux's
    /// Foundation gives both as NSNumber, with no portable way to tell them apart), objects
    /// sorted by key.
    private static func plain(_ value: Any) -> String {
        switch value {
        case let node as JSONNode:
            switch node.value {
            case .null: return "null"
            case .bool(let bool): return "\(bool ? 1.0 : 0.0)"
            case .number(let number): return "\(Double(number) ?? .nan)"
            case .string(let string): return "s:" + string
            case .array(let elements): return "[" + elements.map(plain).joined(separator: ",") + "]"
            case .object(let members):
                return "{"
                    + members.sorted { $0.key < $1.key }.map { $0.key + ":" + plain($0.value) }.joined(separator: ",")
                    + "}"
            }
        case is NSNull: return "null"
        case let number as NSNumber: return "\(number.doubleValue)"
        case let string as String: return "s:" + string
        case let array as [Any]: return "[" + array.map(plain).joined(separator: ",") + "]"
        case let object as [String: Any]:
            return "{" + object.sorted { $0.key < $1.key }.map { $0.key + ":" + plain($0.value) }.joined(separator: ",")
                + "}"
        default: return "?\(value)"
        }
    }
}
