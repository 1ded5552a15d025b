import Testing

@testable import PushgateProviderAPI

func scan(_ bytes: [UInt8]) -> Result<APSFacts, JSONSyntaxError> {
    bytes.withUnsafeBytes { PayloadScanner.scan($0) }
}

func scan(_ s: String) -> Result<APSFacts, JSONSyntaxError> { scan(Array(s.utf8)) }

func isValid(_ bytes: [UInt8]) -> Bool {
    if case .success = scan(bytes) { return true }
    return false
}

/// Documents that must be accepted (all are objects at the top).
let validDocuments: [String] = [
    "{}",
    " {} ",
    "\t\r\n{\t\r\n}\t\r\n",
    #"{"a":1}"#,
    #"{"a":-0}"#,
    #"{"a":0.5}"#,
    #"{"a":-12.5e+3}"#,
    #"{"a":1E-2}"#,
    #"{"a":1e308}"#,
    #"{"a":1.7976931348623157e308}"#,  // Double's largest
    #"{"a":1.7976931348623158e308}"#,  // rounds down to it
    #"{"a":0.01e310}"#,
    #"{"a":-100e306}"#,
    #"{"a":1e-400}"#,  // reads as 0
    #"{"a":1e-99999999999999999999}"#,
    #"{"a":0e99999}"#,
    #"{"a":-0.000e400}"#,
    #"{"a":123456789012345678901234567890}"#,
    #"{"a":[]}"#,
    #"{"a":[[]]}"#,
    #"{"a":[1,"x",true,false,null,{},[]]}"#,
    #"{"a":{"b":{"c":{}}}}"#,
    #"{"":""}"#,
    #"{"a":"\"\\\/\b\f\n\r\t"}"#,
    #"{"a":"\u0000\u001f\u00e9\uFFFF"}"#,
    #"{"a":"\ud83d\ude00"}"#,
    #"{"a":"\uDBFF\uDFFF"}"#,
    "{\"a\":\"é€😀\u{7F}\"}",
    #"{"a":1,"a":2}"#,
    #"{"aps":{"alert":{"title":"t","loc-args":["a","b"]},"badge":0,"sound":{"critical":1,"name":"n","volume":0.5}}}"#,
    "{\"a\":" + String(repeating: "[", count: 63) + String(repeating: "]", count: 63) + "}",  // 64 levels
    String(repeating: "{\"a\":", count: 64) + "1" + String(repeating: "}", count: 64),  // 64 levels
]

@Test(arguments: validDocuments)
func validDocument(_ doc: String) {
    #expect(isValid(Array(doc.utf8)), "\(doc)")
}

struct InvalidDocument: Sendable, CustomTestStringConvertible {
    var bytes: [UInt8]
    var offset: Int
    var expected: String
    var testDescription: String { String(decoding: bytes.prefix(60), as: UTF8.self).debugDescription }
    init(_ s: String, _ offset: Int, _ expected: String) {
        self.init(bytes: Array(s.utf8), offset, expected)
    }
    init(bytes: [UInt8], _ offset: Int, _ expected: String) {
        self.bytes = bytes
        self.offset = offset
        self.expected = expected
    }
}

/// Documents that must be refused, where, and with which expectation in the message.
let invalidDocuments: [InvalidDocument] = [
    .init("", 0, "'{'"),
    .init(" ", 1, "'{'"),
    .init("[]", 0, "'{'"),
    .init("1", 0, "'{'"),
    .init(#""a""#, 0, "'{'"),
    .init("null", 0, "'{'"),
    .init("{", 1, "a string key or '}'"),
    .init("{}}", 2, "end of input"),
    .init("{}{}", 2, "end of input"),
    .init("{} x", 3, "end of input"),
    .init(#"{"a"}"#, 4, "':'"),
    .init(#"{"a":}"#, 5, "a value"),
    .init(#"{"a":1,}"#, 7, "trailing commas"),
    .init(#"{"a":[1,]}"#, 8, "trailing commas"),
    .init(#"{"a":[1 2]}"#, 8, "',' or ']'"),
    .init(#"{"a":1 "b":2}"#, 7, "',' or '}'"),
    .init(#"{,}"#, 1, "a string key or '}'"),
    .init(#"{"a":1,,"b":2}"#, 7, "a string key after ','"),
    .init(#"{"a":[,1]}"#, 6, "a value"),
    .init(#"{a:1}"#, 1, "a string key"),
    .init(#"{'a':1}"#, 1, "a string key"),
    .init(#"{"a":01}"#, 6, "leading zeros"),
    .init(#"{"a":-01}"#, 7, "leading zeros"),
    .init(#"{"a":00}"#, 6, "leading zeros"),
    .init(#"{"a":-}"#, 6, "a digit"),
    .init(#"{"a":-a}"#, 6, "a digit"),
    .init(#"{"a":+1}"#, 5, "a value"),
    .init(#"{"a":.5}"#, 5, "a value"),
    .init(#"{"a":1.}"#, 7, "a digit after the decimal point"),
    .init(#"{"a":1.e5}"#, 7, "a digit after the decimal point"),
    .init(#"{"a":1e}"#, 7, "a digit in the exponent"),
    .init(#"{"a":1e+}"#, 8, "a digit in the exponent"),
    .init(#"{"a":0x10}"#, 6, "',' or '}'"),
    // Found by fuzzing (provider-request): Foundation refuses what overflows a Double.
    .init(#"{"aps":6E66660000000000000 }"#, 7, "a number a double can hold"),
    .init(#"{"a":1e400}"#, 5, "a number a double can hold"),
    .init(#"{"a":-1e309}"#, 5, "a number a double can hold"),
    .init(#"{"a":1.8e308}"#, 5, "a number a double can hold"),
    .init(#"{"a":1000e306}"#, 5, "a number a double can hold"),
    .init(#"{"a":0.0001e313}"#, 5, "a number a double can hold"),
    .init(#"{"a":1e2147483648}"#, 5, "a number a double can hold"),
    .init("{\"a\":1" + String(repeating: "0", count: 309) + "}", 5, "a number a double can hold"),
    .init(#"{"a":NaN}"#, 5, "a value"),
    .init(#"{"a":Infinity}"#, 5, "a value"),
    .init(#"{"a":tru}"#, 8, "the literal true"),
    .init(#"{"a":True}"#, 5, "a value"),
    .init(#"{"a":nul"#, 8, "the literal null"),
    .init(#"{"a":falsey}"#, 10, "',' or '}'"),
    .init(#"{"a":"x}"#, 8, "'\"' to close the string"),
    .init(#"{"a":"\x"}"#, 7, "escape"),
    .init(#"{"a":"\'"}"#, 7, "escape"),
    .init(#"{"a":"\u12"}"#, 10, "hex digit"),
    .init(#"{"a":"\u00zz"}"#, 10, "hex digit"),
    .init(#"{"a":"\"#, 7, "an escape character"),
    .init(#"{"a":"\ud800"}"#, 12, "low surrogate"),
    .init(#"{"a":"\ud800x"}"#, 12, "low surrogate"),
    .init(#"{"a":"\ud800\u0041"}"#, 12, "low surrogate"),
    .init(#"{"a":"\ud800\ud800"}"#, 12, "low surrogate"),
    .init(#"{"a":"\udc00"}"#, 6, "lone surrogates"),
    .init(#"{"a":"\uDFFF\uD800"}"#, 6, "lone surrogates"),
    .init("{\"a\":\"\t\"}", 6, "control characters must be escaped"),
    .init("{\"a\":\"\n\"}", 6, "control characters"),
    .init(bytes: Array(#"{"a":""#.utf8) + [0x00] + Array(#""}"#.utf8), 6, "\\u0000"),
    .init(bytes: Array(#"{"a":""#.utf8) + [0x1F] + Array(#""}"#.utf8), 6, "\\u001F"),
    .init(bytes: Array(#"{"a":""#.utf8) + [0xFF] + Array(#""}"#.utf8), 6, "0xFF cannot start"),
    .init(bytes: Array(#"{"a":""#.utf8) + [0x80] + Array(#""}"#.utf8), 6, "0x80 cannot start"),
    .init(bytes: Array(#"{"a":""#.utf8) + [0xC0, 0x80] + Array(#""}"#.utf8), 6, "0xC0 cannot start"),  // overlong NUL
    .init(bytes: Array(#"{"a":""#.utf8) + [0xE0, 0x80, 0x80] + Array(#""}"#.utf8), 7, "continuation"),  // overlong
    // UTF-8 surrogate
    .init(bytes: Array(#"{"a":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8), 7, "continuation"),
    // > U+10FFFF
    .init(bytes: Array(#"{"a":""#.utf8) + [0xF4, 0x90, 0x80, 0x80] + Array(#""}"#.utf8), 7, "continuation"),
    .init(bytes: Array(#"{"a":""#.utf8) + [0xF5, 0x80, 0x80, 0x80] + Array(#""}"#.utf8), 6, "cannot start"),
    .init(bytes: Array(#"{"a":""#.utf8) + [0xE2, 0x82] + Array(#""}"#.utf8), 8, "continuation"),  // truncated €
    .init(bytes: Array(#"{"a":""#.utf8) + [0xE2, 0x82], 8, "continuation"),
    .init(bytes: [0xEF, 0xBB, 0xBF] + Array("{}".utf8), 0, "'{'"),  // BOM
    .init(bytes: Array("{}".utf8) + [0x00], 2, "end of input"),
    .init(bytes: [0x7B, 0x00, 0x7D, 0x00], 1, "a string key"),  // UTF-16LE "{}"
    .init(bytes: Array("{\u{0C}}".utf8), 1, "a string key"),  // form feed is not JSON whitespace
    .init(bytes: Array("{\u{A0}}".utf8), 1, "a string key"),  // nor is NBSP
    .init("{\"a\":1}\u{2028}", 7, "end of input"),
    .init(#"{"a":1}//c"#, 7, "end of input"),
    .init(#"{"a":/*c*/1}"#, 5, "a value"),
    .init(
        "{\"a\":" + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + "}",
        68,
        "at most 64 levels"
    ),
    .init(String(repeating: "{\"a\":", count: 65) + "1" + String(repeating: "}", count: 65), 320, "at most 64 levels"),
]

@Test(arguments: invalidDocuments)
func invalidDocument(_ doc: InvalidDocument) {
    switch scan(doc.bytes) {
    case .success(let facts):
        Issue.record("accepted: \(facts)")
    case .failure(let error):
        #expect(error.offset == doc.offset, "\(error)")
        #expect(error.description.contains(doc.expected), "\(error)")
    }
}

@Test func deepNestingIsRefusedWithoutRecursingFurther() {
    for depth in [65, 1_000, 10_000, 100_000] {
        for open in ["[", "{\"a\":"] {
            let doc = "{\"a\":" + String(repeating: open, count: depth)
            guard case .failure(let error) = scan(doc) else {
                Issue.record("accepted depth \(depth)")
                continue
            }
            #expect(error.expected.contains("at most 64 levels"), "\(error)")
        }
    }
    // A valid document 10,000 levels deep is refused too.
    let deep = "{\"a\":" + String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000) + "}"
    guard case .failure(let error) = scan(deep) else {
        Issue.record("accepted")
        return
    }
    #expect(error.offset == 5 + 63)
}

@Test func errorMessageDescribesTheByteFound() {
    guard case .failure(let e1) = scan("{\"a\":1 x}") else {
        Issue.record("accepted")
        return
    }
    #expect(e1.description == "at byte offset 7: expected ',' or '}' after an object member, found 'x'")
    guard case .failure(let e2) = scan("{\"a\":1 ") else {
        Issue.record("accepted")
        return
    }
    #expect(e2.description == "at byte offset 7: expected ',' or '}' after an object member, found end of input")
    guard case .failure(let e3) = scan([0x7B, 0x80]) else {
        Issue.record("accepted")
        return
    }
    #expect(e3.description == "at byte offset 1: expected a string key or '}', found byte 0x80")
    guard case .failure(let e4) = scan("{\"a\":1 \"b\":2}") else {
        Issue.record("accepted")
        return
    }
    #expect(e4.found == "'\"'")
}

struct FactsCase: Sendable, CustomTestStringConvertible {
    var doc: String
    var facts: APSFacts
    /// The raw text of `content-available`, if any.
    var contentAvailable: String?
    var testDescription: String { doc }
}

let factsCases: [FactsCase] = [
    .init(doc: "{}", facts: APSFacts()),
    .init(doc: #"{"aps":1}"#, facts: APSFacts(aps: .number)),
    .init(doc: #"{"aps":"x"}"#, facts: APSFacts(aps: .string)),
    .init(doc: #"{"aps":[{"alert":1}]}"#, facts: APSFacts(aps: .array)),
    .init(doc: #"{"aps":null}"#, facts: APSFacts(aps: .null)),
    .init(doc: #"{"aps":false}"#, facts: APSFacts(aps: .bool)),
    .init(doc: #"{"aps":{}}"#, facts: APSFacts(aps: .object)),
    .init(
        doc: #"{"aps":{"alert":"x","badge":1,"sound":"s"}}"#,
        facts: APSFacts(aps: .object, hasAlert: true, hasBadge: true, hasSound: true)
    ),
    .init(doc: #"{"aps":{"badge":null}}"#, facts: APSFacts(aps: .object, hasBadge: true)),
    .init(
        doc: #"{"aps":{"content-available":1}}"#,
        facts: APSFacts(aps: .object, contentAvailable: JSONToken(kind: .number, start: 28, end: 29)),
        contentAvailable: "1"
    ),
    .init(
        doc: #"{"aps":{"content-available": 1.0 }}"#,
        facts: APSFacts(aps: .object, contentAvailable: JSONToken(kind: .number, start: 29, end: 32)),
        contentAvailable: "1.0"
    ),
    .init(
        doc: #"{"aps":{"content-available":"1"}}"#,
        facts: APSFacts(aps: .object, contentAvailable: JSONToken(kind: .string, start: 28, end: 31)),
        contentAvailable: "\"1\""
    ),
    .init(
        doc: #"{"aps":{"content-available":{"a":[1]}}}"#,
        facts: APSFacts(aps: .object, contentAvailable: JSONToken(kind: .object, start: 28, end: 37)),
        contentAvailable: #"{"a":[1]}"#
    ),
    // Last one wins.
    .init(doc: #"{"aps":{"alert":1},"aps":{"sound":1}}"#, facts: APSFacts(aps: .object, hasSound: true)),
    .init(doc: #"{"aps":{"alert":1},"aps":7}"#, facts: APSFacts(aps: .number)),
    .init(doc: #"{"aps":7,"aps":{"badge":1}}"#, facts: APSFacts(aps: .object, hasBadge: true)),
    .init(
        doc: #"{"aps":{"content-available":1,"content-available":true}}"#,
        facts: APSFacts(aps: .object, contentAvailable: JSONToken(kind: .bool, start: 50, end: 54)),
        contentAvailable: "true"
    ),
    // Escaped keys are unescaped before comparing.
    .init(
        doc: #"{"\u0061\u0070\u0073":{"\u0061lert":1,"content\u002davailable":1}}"#,
        facts: APSFacts(aps: .object, hasAlert: true, contentAvailable: JSONToken(kind: .number, start: 63, end: 64)),
        contentAvailable: "1"
    ),
    .init(doc: #"{"ap\/s":{}}"#, facts: APSFacts()),
    // Not the top-level aps, or not aps's own keys.
    .init(doc: #"{"x":{"aps":{"alert":1}}}"#, facts: APSFacts()),
    .init(
        doc: #"{"x":[{"aps":{}}],"aps":{"y":{"alert":1,"badge":1},"z":[{"sound":1}]}}"#,
        facts: APSFacts(aps: .object)
    ),
    .init(doc: #"{"aps":{"aps":{"alert":1}}}"#, facts: APSFacts(aps: .object)),
    .init(doc: #"{"alert":1,"badge":1,"content-available":1}"#, facts: APSFacts()),
    // Keys with non-ASCII or overlong spellings never match.
    .init(doc: #"{"aps\u00e9":{}}"#, facts: APSFacts()),
    .init(doc: #"{"apsapsapsapsapsapsapsapsaps":{}}"#, facts: APSFacts()),
    .init(doc: #"{"aps":{"content-availablecontent-available":1}}"#, facts: APSFacts(aps: .object)),
]

@Test(arguments: factsCases)
func factsAboutAps(_ c: FactsCase) {
    let bytes = Array(c.doc.utf8)
    guard case .success(let facts) = scan(bytes) else {
        Issue.record("rejected")
        return
    }
    #expect(facts == c.facts)
    if let token = facts.contentAvailable {
        #expect(String(decoding: bytes[token.start..<token.end], as: UTF8.self) == c.contentAvailable)
    } else {
        #expect(c.contentAvailable == nil)
    }
}
