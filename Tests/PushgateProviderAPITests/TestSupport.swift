import NIOCore
import PushgateModel
import Synchronization
import Testing

@testable import PushgateProviderAPI

/// 64 lowercase hex digits.
let sampleToken = String(repeating: "0123456789abcdef", count: 4)
let fixedBits: (UInt64, UInt64) = (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)
/// `UUIDText.v4(fixedBits)`, written out by hand.
let fixedGeneratedID = "01234567-89ab-4def-bedc-ba9876543210"

/// Counts how often the validator asks for random bits.
final class BitsSource: Sendable {
    private let calls = Atomic<Int>(0)
    let bits: (UInt64, UInt64)
    init(_ bits: (UInt64, UInt64) = fixedBits) { self.bits = bits }
    var callCount: Int { calls.load(ordering: .relaxed) }
    func next() -> (UInt64, UInt64) {
        calls.add(1, ordering: .relaxed)
        return bits
    }
}

func makeValidator(
    _ source: BitsSource = BitsSource(),
    defaultPriority: PushPriority = .high
) -> ProviderRequestValidator {
    ProviderRequestValidator(defaultPriority: defaultPriority, uuidGenerator: { source.next() })
}

func buffer(_ s: String) -> ByteBuffer { ByteBuffer(string: s) }
func buffer(_ bytes: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: bytes) }
func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// A request that passes every rule: an alert push.
struct Request: Sendable, CustomTestStringConvertible {
    var label: String
    var method = "POST"
    var path = "/3/device/" + sampleToken
    var headers: [Header] = [Header("apns-topic", "com.example.app")]
    var body: [UInt8] = Array(#"{"aps":{"alert":"Hello"}}"#.utf8)

    struct Header: Sendable {
        var name: String
        var value: String
        init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    init(_ label: String) { self.label = label }

    var testDescription: String { label }

    func with(_ change: (inout Request) -> Void) -> Request {
        var copy = self
        change(&copy)
        return copy
    }

    /// Sets (replacing every occurrence) or, with `nil`, removes a header.
    func header(_ name: String, _ value: String?) -> Request {
        with { r in
            if let index = r.headers.firstIndex(where: { $0.name == name }) {
                r.headers.removeAll { $0.name == name }
                if let value { r.headers.insert(Header(name, value), at: index) }
            } else if let value {
                r.headers.append(Header(name, value))
            }
        }
    }

    func adding(_ name: String, _ value: String) -> Request { with { $0.headers.append(Header(name, value)) } }
    func body(_ s: String) -> Request { with { $0.body = Array(s.utf8) } }
    func body(bytes: [UInt8]) -> Request { with { $0.body = bytes } }
    func path(_ p: String) -> Request { with { $0.path = p } }
    func method(_ m: String) -> Request { with { $0.method = m } }

    func validate(with validator: ProviderRequestValidator = makeValidator()) -> ValidationOutcome {
        validator.validate(
            method: method,
            path: path,
            headers: headers.map { (name: $0.name, value: $0.value) },
            body: buffer(body)
        )
    }
}

let base = Request("base")

/// A payload of exactly `size` bytes: `{"aps":{"alert":"xxx…"}}`.
func alertPayload(size: Int) -> String {
    let frame = #"{"aps":{"alert":""}}"#
    return #"{"aps":{"alert":""# + String(repeating: "x", count: size - frame.utf8.count) + #""}}"#
}

/// A payload of exactly `size` bytes with no aps: `{"x":"xxx…"}`.
func plainPayload(size: Int) -> String {
    let frame = #"{"x":""}"#
    return #"{"x":""# + String(repeating: "x", count: size - frame.utf8.count) + #""}"#
}

/// Asserts a rejection with exactly this status and reason, a detail containing every fragment,
/// and returns the rejection.
@discardableResult
func expectRejected(
    _ outcome: ValidationOutcome,
    _ status: Int,
    _ reason: String,
    detailContains fragments: [String],
    sourceLocation: SourceLocation = #_sourceLocation
) -> Refusal? {
    guard case .rejected(let rejection, _) = outcome else {
        Issue.record("expected \(status) \(reason), got \(outcome)", sourceLocation: sourceLocation)
        return nil
    }
    #expect(rejection.status == status, "\(rejection)", sourceLocation: sourceLocation)
    #expect(rejection.reason.name == reason, "\(rejection)", sourceLocation: sourceLocation)
    for fragment in fragments {
        #expect(
            rejection.detail.contains(fragment),
            "detail \(rejection.detail.debugDescription) lacks \(fragment.debugDescription)",
            sourceLocation: sourceLocation
        )
    }
    #expect(
        rejection.detail.utf8.count < 400,
        "detail too long: \(rejection.detail.utf8.count) bytes",
        sourceLocation: sourceLocation
    )
    return rejection
}

@discardableResult
func expectAccepted(_ outcome: ValidationOutcome, sourceLocation: SourceLocation = #_sourceLocation) -> Push? {
    guard case .accepted(let push, _) = outcome else {
        Issue.record("expected acceptance, got \(outcome)", sourceLocation: sourceLocation)
        return nil
    }
    return push
}

/// The expiration of an accepted request.
func acceptedExpiration(_ outcome: ValidationOutcome, sourceLocation: SourceLocation = #_sourceLocation) -> Expiration?
{
    guard case .accepted(_, let expiration) = outcome else {
        Issue.record("expected acceptance, got \(outcome)", sourceLocation: sourceLocation)
        return nil
    }
    return expiration
}

/// SplitMix64: small, fast, seeded; good enough for test data.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Whether `s` is a lowercase canonical version-4 UUID.
func isCanonicalV4(_ s: String) -> Bool {
    let b = Array(s.utf8)
    guard b.count == 36 else { return false }
    for (k, c) in b.enumerated() {
        if [8, 13, 18, 23].contains(k) {
            if c != UInt8(ascii: "-") { return false }
        } else if !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) {
            return false
        }
    }
    return b[14] == UInt8(ascii: "4")
        && [UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(b[19])
}
