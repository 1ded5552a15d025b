import Foundation
import Testing

@testable import PushgateProviderAPI

// Property-style tests: seeded random JSON documents, written by the serializer below with random
// whitespace and random escaping, must be accepted with exactly the aps facts the model predicts;
// random mutations of them must never crash the scanner, and its verdict must agree with
// Foundation's JSONSerialization (top level an object, no .fragmentsAllowed).
//
// Where Foundation (swift-corelibs-foundation on Linux) is knowingly more lenient or stricter than
// RFC 8259, the case is excluded from the comparison and counted:
//  - it guesses UTF-16/UTF-32 from NUL bytes among the first four bytes and skips byte-order
//    marks, so "{\0}\0" is a valid object to it;
//  - it accepts trailing commas in objects and arrays ("[1,]", "{"a":1,}");
//  - it rejects numbers it cannot represent as a Double ("1e999"), which RFC 8259 allows.
// Everything else must agree exactly.

indirect enum JSONValue {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    case number(String)
    case bool(Bool)
    case null

    var kind: JSONValueKind {
        switch self {
        case .object: return .object
        case .array: return .array
        case .string: return .string
        case .number: return .number
        case .bool: return .bool
        case .null: return .null
        }
    }
}

struct JSONGenerator {
    var rng: SeededRandom

    init(seed: UInt64) { rng = SeededRandom(seed: seed) }

    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...items.count - 1)] }

    static let keyPalette = [
        "aps", "alert", "badge", "sound", "content-available", "x", "", "data", "é", "a\"b", "k\\", "😀", "aps ", "Aps",
        "line\nbreak",
    ]
    static let scalarPalette: [Unicode.Scalar] = [
        "a", "b", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "\u{7F}", "é", "€", "\u{2028}",
        "\u{FFFF}", "😀", "\u{10FFFF}", "{", "}", "[", "]", ",", ":",
    ]

    mutating func string() -> String {
        var s = String.UnicodeScalarView()
        for _ in 0..<int(0...8) { s.append(pick(Self.scalarPalette)) }
        return String(s)
    }

    mutating func number() -> String {
        var s = chance(0.3) ? "-" : ""
        if chance(0.2) {
            s += "0"
        } else {
            s += String(int(1...9))
            for _ in 0..<int(0...5) { s += String(int(0...9)) }
        }
        if chance(0.3) {
            s += "."
            for _ in 0..<int(1...4) { s += String(int(0...9)) }
        }
        if chance(0.2) {
            s += pick(["e", "E"]) + pick(["", "+", "-"])
            for _ in 0..<int(1...2) { s += String(int(0...9)) }
        }
        return s
    }

    mutating func value(depth: Int) -> JSONValue {
        let containers = depth < 6
        switch int(0...(containers ? 7 : 5)) {
        case 0, 1: return .string(string())
        case 2: return .number(number())
        case 3: return .bool(chance(0.5))
        case 4: return .null
        case 5: return .number(pick(["1", "0", "1.0", "-1", "10"]))
        case 6: return .array((0..<int(0...4)).map { _ in value(depth: depth + 1) })
        default: return object(depth: depth + 1)
        }
    }

    mutating func object(depth: Int) -> JSONValue {
        .object((0..<int(0...4)).map { _ in (chance(0.5) ? pick(Self.keyPalette) : string(), value(depth: depth)) })
    }

    /// A top-level object, usually with an `aps` member (sometimes two, sometimes not an object).
    mutating func document() -> JSONValue {
        var members: [(String, JSONValue)] = []
        for _ in 0..<int(0...3) { members.append((pick(Self.keyPalette), value(depth: 1))) }
        for _ in 0..<int(0...2) {
            let aps: JSONValue
            if chance(0.85) {
                var apsMembers: [(String, JSONValue)] = []
                for _ in 0..<int(0...5) {
                    let key = pick([
                        "alert", "badge", "sound", "content-available", "content-available", "thread-id", "x",
                    ])
                    let v: JSONValue = key == "content-available" && chance(0.5) ? .number("1") : value(depth: 2)
                    apsMembers.append((key, v))
                }
                aps = .object(apsMembers)
            } else {
                aps = value(depth: 1)
            }
            members.insert(("aps", aps), at: int(0...members.count))
        }
        for _ in 0..<int(0...2) { members.append((pick(Self.keyPalette), value(depth: 1))) }
        return .object(members)
    }
}

/// Writes JSON with random whitespace and random (but valid) escaping, and reports the byte range
/// of every member value together with its key path.
struct JSONWriter {
    var rng: SeededRandom
    var out: [UInt8] = []
    var members: [(path: [String], range: Range<Int>)] = []

    mutating func whitespace() {
        guard Double.random(in: 0..<1, using: &rng) < 0.3 else { return }
        for _ in 0..<Int.random(in: 1...2, using: &rng) {
            out.append([0x20, 0x09, 0x0A, 0x0D].randomElement(using: &rng)!)
        }
    }

    mutating func hex4(_ v: UInt32) {
        let digits = Array((Bool.random(using: &rng) ? "0123456789abcdef" : "0123456789ABCDEF").utf8)
        for shift in stride(from: 12, through: 0, by: -4) { out.append(digits[Int((v >> UInt32(shift)) & 0xF)]) }
    }

    mutating func string(_ s: String) {
        out.append(UInt8(ascii: "\""))
        for scalar in s.unicodeScalars {
            let v = scalar.value
            let escapeAnyway = Double.random(in: 0..<1, using: &rng) < 0.15
            switch v {
            case 0x22: out += Array(#"\""#.utf8)
            case 0x5C: out += Array(#"\\"#.utf8)
            case 0x0A where !escapeAnyway: out += Array(#"\n"#.utf8)
            case 0x09 where !escapeAnyway: out += Array(#"\t"#.utf8)
            case 0x2F where escapeAnyway: out += Array(#"\/"#.utf8)
            default:
                if v < 0x20 || escapeAnyway {
                    if v >= 0x10000 {
                        let u = v - 0x10000
                        out += Array(#"\u"#.utf8)
                        hex4(0xD800 + (u >> 10))
                        out += Array(#"\u"#.utf8)
                        hex4(0xDC00 + (u & 0x3FF))
                    } else {
                        out += Array(#"\u"#.utf8)
                        hex4(v)
                    }
                } else {
                    out += Array(String(scalar).utf8)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    mutating func value(_ v: JSONValue, path: [String]) {
        switch v {
        case .object(let ms):
            out.append(UInt8(ascii: "{"))
            whitespace()
            for (k, (key, member)) in ms.enumerated() {
                if k > 0 {
                    out.append(UInt8(ascii: ","))
                    whitespace()
                }
                string(key)
                whitespace()
                out.append(UInt8(ascii: ":"))
                whitespace()
                let start = out.count
                value(member, path: path + [key])
                members.append((path + [key], start..<out.count))
                whitespace()
            }
            out.append(UInt8(ascii: "}"))
        case .array(let items):
            out.append(UInt8(ascii: "["))
            whitespace()
            for (k, item) in items.enumerated() {
                if k > 0 {
                    out.append(UInt8(ascii: ","))
                    whitespace()
                }
                value(item, path: path + ["[]"])
                whitespace()
            }
            out.append(UInt8(ascii: "]"))
        case .string(let s): string(s)
        case .number(let n): out += Array(n.utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .null: out += Array("null".utf8)
        }
    }

    static func write(
        _ doc: JSONValue,
        seed: UInt64
    ) -> (bytes: [UInt8], members: [(path: [String], range: Range<Int>)]) {
        var writer = JSONWriter(rng: SeededRandom(seed: seed))
        writer.whitespace()
        writer.value(doc, path: [])
        writer.whitespace()
        return (writer.out, writer.members)
    }
}

/// What the scanner must report for `doc`, written as `bytes` with these member ranges.
func expectedFacts(_ doc: JSONValue, members: [(path: [String], range: Range<Int>)]) -> APSFacts {
    guard case .object(let top) = doc, let aps = top.last(where: { $0.0 == "aps" })?.1 else { return APSFacts() }
    var facts = APSFacts(aps: aps.kind)
    guard case .object(let apsMembers) = aps else { return facts }
    facts.hasAlert = apsMembers.contains { $0.0 == "alert" }
    facts.hasBadge = apsMembers.contains { $0.0 == "badge" }
    facts.hasSound = apsMembers.contains { $0.0 == "sound" }
    if let contentAvailable = apsMembers.last(where: { $0.0 == "content-available" })?.1 {
        let apsRange = members.last { $0.path == ["aps"] }!.range
        let range = members.last { $0.path == ["aps", "content-available"] && apsRange.contains($0.range.lowerBound) }!
            .range
        facts.contentAvailable = JSONToken(kind: contentAvailable.kind, start: range.lowerBound, end: range.upperBound)
    }
    return facts
}

/// Foundation's verdict: valid and an object at the top, plus the error text when not.
func foundationParse(_ bytes: [UInt8]) -> (object: [String: Any]?, error: String?) {
    do {
        let value = try JSONSerialization.jsonObject(with: Data(bytes), options: [])
        return (value as? [String: Any], nil)
    } catch {
        return (nil, ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "\(error)")
    }
}

/// The scanner's facts must agree with Foundation's reading of the same document.
func expectAgreement(
    _ facts: APSFacts,
    _ object: [String: Any],
    _ bytes: [UInt8],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let aps = object["aps"]
    #expect(
        (aps != nil) == (facts.aps != nil),
        "aps presence: \(String(decoding: bytes, as: UTF8.self).debugDescription)",
        sourceLocation: sourceLocation
    )
    if let dict = aps as? [String: Any] {
        #expect(facts.aps == .object, sourceLocation: sourceLocation)
        #expect(facts.hasAlert == (dict["alert"] != nil), sourceLocation: sourceLocation)
        #expect(facts.hasBadge == (dict["badge"] != nil), sourceLocation: sourceLocation)
        #expect(facts.hasSound == (dict["sound"] != nil), sourceLocation: sourceLocation)
        #expect((facts.contentAvailable != nil) == (dict["content-available"] != nil), sourceLocation: sourceLocation)
    } else if aps != nil {
        #expect(facts.aps != .object, sourceLocation: sourceLocation)
    }
}

@Test func randomValidDocumentsAreAcceptedWithTheRightFacts() {
    var generator = JSONGenerator(seed: 0x5EED_0001)
    var withAps = 0
    var withContentAvailable = 0
    for k in 0..<3_000 {
        let doc = generator.document()
        let (bytes, members) = JSONWriter.write(doc, seed: UInt64(k))
        let expected = expectedFacts(doc, members: members)
        if expected.aps != nil { withAps += 1 }
        if expected.contentAvailable != nil { withContentAvailable += 1 }
        switch scan(bytes) {
        case .success(let facts):
            #expect(facts == expected, "doc \(k): \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            let foundation = foundationParse(bytes)
            guard let object = foundation.object else {
                Issue.record("Foundation refuses doc \(k): \(foundation.error ?? "not an object")")
                continue
            }
            expectAgreement(facts, object, bytes)
        case .failure(let error):
            Issue.record("doc \(k) rejected \(error): \(String(decoding: bytes, as: UTF8.self).debugDescription)")
        }
    }
    // The generator really exercises what it is meant to.
    #expect(withAps > 2_000)
    #expect(withContentAvailable > 500)
}

struct Mutator {
    var rng: SeededRandom
    static let interesting: [UInt8] =
        Array("{}[],:\"\\01-.eE+tfnu a".utf8) + [0x00, 0x09, 0x0A, 0x1F, 0x7F, 0x80, 0xBF, 0xC3, 0xED, 0xF0, 0xFF]

    mutating func byte() -> UInt8 {
        Bool.random(using: &rng) ? Self.interesting.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
    }

    mutating func mutate(_ input: [UInt8]) -> [UInt8] {
        var b = input
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            guard !b.isEmpty else {
                b.append(byte())
                continue
            }
            let at = Int.random(in: 0..<b.count, using: &rng)
            switch Int.random(in: 0...6, using: &rng) {
            case 0: b[at] = byte()
            case 1: b.insert(byte(), at: at)
            case 2: b.remove(at: at)
            case 3: b.removeSubrange(at..<min(b.count, at + Int.random(in: 1...8, using: &rng)))
            case 4:
                b.insert(
                    contentsOf: b[at..<min(b.count, at + Int.random(in: 1...8, using: &rng))],
                    at: Int.random(in: 0...b.count, using: &rng)
                )
            case 5: b.removeSubrange(at...)
            default: b.swapAt(at, Int.random(in: 0..<b.count, using: &rng))
            }
        }
        return b
    }
}

/// The byte at `offset` closes a container right after a comma (JSON whitespace aside).
func isTrailingComma(_ bytes: [UInt8], at offset: Int) -> Bool {
    guard offset < bytes.count, bytes[offset] == UInt8(ascii: "]") || bytes[offset] == UInt8(ascii: "}") else {
        return false
    }
    var k = offset - 1
    while k >= 0, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[k]) { k -= 1 }
    return k >= 0 && bytes[k] == UInt8(ascii: ",")
}

@Test func randomMutationsAgreeWithFoundation() {
    var generator = JSONGenerator(seed: 0x5EED_0002)
    var mutator = Mutator(rng: SeededRandom(seed: 0x5EED_0003))
    var compared = 0
    var bothValid = 0
    var excluded: [String: Int] = [:]
    for k in 0..<20_000 {
        let (original, _) = JSONWriter.write(generator.document(), seed: UInt64(k))
        let bytes = mutator.mutate(original)
        let mine = scan(bytes)
        let foundation = foundationParse(bytes)
        let foundationValid = foundation.object != nil

        if bytes.prefix(4).contains(0) || bytes.starts(with: [0xEF, 0xBB, 0xBF]) || bytes.starts(with: [0xFE, 0xFF])
            || bytes.starts(with: [0xFF, 0xFE])
        {
            excluded["encoding detection", default: 0] += 1
            continue
        }
        switch mine {
        case .success(let facts):
            if !foundationValid, let error = foundation.error, error.contains("not representable") {
                excluded["number range", default: 0] += 1
                continue
            }
            #expect(
                foundationValid,
                "we accept, Foundation says \(foundation.error ?? "not an object"): \(String(decoding: bytes, as: UTF8.self).debugDescription) \(bytes)"
            )
            if let object = foundation.object {
                bothValid += 1
                expectAgreement(facts, object, bytes)
            }
        case .failure(let error):
            if foundationValid, isTrailingComma(bytes, at: error.offset) {
                excluded["trailing comma", default: 0] += 1
                continue
            }
            #expect(
                !foundationValid,
                "we reject (\(error)), Foundation accepts: \(String(decoding: bytes, as: UTF8.self).debugDescription) \(bytes)"
            )
        }
        compared += 1
    }
    // Exclusions stay rare, and both verdicts occur often.
    #expect(compared > 19_000, "excluded: \(excluded)")
    #expect(bothValid > 1_000, "valid mutants: \(bothValid)")
    #expect(compared - bothValid > 5_000)
}

@Test func arbitraryBytesNeverCrash() {
    var rng = SeededRandom(seed: 0x5EED_0004)
    var mutator = Mutator(rng: SeededRandom(seed: 0x5EED_0005))
    for _ in 0..<20_000 {
        let count = Int.random(in: 0...64, using: &rng)
        var bytes = (0..<count).map { _ in mutator.byte() }
        if Bool.random(using: &rng) { bytes.insert(UInt8(ascii: "{"), at: 0) }
        if case .failure(let error) = scan(bytes) {
            #expect(error.offset <= bytes.count)
        }
    }
}
