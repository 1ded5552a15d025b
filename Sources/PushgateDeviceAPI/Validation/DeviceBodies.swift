import Foundation
import NIOCore
import PushgateCrypto
import PushgateModel

/// The device API's request bodies and headers, each to the value its operation takes or to the
/// refusal that says what is wrong with it. Pure: no device, no secret, no store.
enum DeviceBodies {
    /// `{"topic": "..."}` of a registration.
    static func topic(_ body: ByteBuffer) -> Result<String, Refusal> {
        decode(TopicBody.self, body).flatMap { body in
            TopicRules.isValid(body.topic)
                ? .success(body.topic) : .failure(Refusal(.badTopic, TopicRules.explain(body.topic)))
        }
    }

    /// A Web Push subscription asked for: its name, and the application server key it is
    /// restricted to (an uncompressed P-256 point), if any.
    struct Subscription: Equatable {
        var name: String
        var applicationServerKey: [UInt8]?
    }

    /// `{"name": "...", "applicationServerKey": "<base64url>"}` of a subscription; the key is
    /// optional (`null` or absent: unrestricted). The name follows the topics' rule: it shares
    /// their namespace on the device. The key as browsers take it (`PushManager.subscribe`'s
    /// `applicationServerKey`): base64url, padded or not.
    static func subscription(_ body: ByteBuffer) -> Result<Subscription, Refusal> {
        decode(SubscriptionBody.self, body).flatMap { body in
            guard TopicRules.isValid(body.name) else {
                return .failure(
                    Refusal(
                        .badRequest,
                        "name must be 1 to \(TopicRules.maxBytes) letters, digits, '.', '-' and '_', got \"\(body.name.prefix(80))\""
                    )
                )
            }
            guard let text = body.applicationServerKey else { return .success(Subscription(name: body.name)) }
            guard let key = Base64URL.decode(text.filter { $0 != "=" }), ES256PublicKey(uncompressedPoint: key) != nil
            else {
                return .failure(
                    Refusal(
                        .badRequest,
                        "applicationServerKey must be a P-256 public key as an uncompressed point (65 bytes, 0x04 || x || y) in base64url, as VAPID's k"
                    )
                )
            }
            return .success(Subscription(name: body.name, applicationServerKey: key))
        }
    }

    /// `{"upTo": N}` of an ack. Acks come with every delivery: the usual shape skips
    /// Foundation's decoder.
    static func ackUpTo(_ body: ByteBuffer) -> Result<UInt64, Refusal> {
        let upTo: UInt64
        if let fast = AckBody.fastUpTo(body) {
            upTo = fast
        } else {
            switch decode(AckBody.self, body) {
            case .success(let decoded): upTo = decoded.upTo
            case .failure(let refusal): return .failure(refusal)
            }
        }
        guard SequenceNumbers.checked(upTo) != nil else {
            return .failure(
                Refusal(.badRequest, "upTo must be \(SequenceNumbers.range) (a sequence number), got \(upTo)")
            )
        }
        return .success(upTo)
    }

    /// What a device reports of itself (`PUT .../state`).
    struct StateReport: Equatable {
        var power: DevicePower?
        /// By topic, in topic order.
        var apps: [(topic: String, state: AppState)]
        var fetchIntervals: [(topic: String, interval: FetchInterval)]

        static func == (lhs: StateReport, rhs: StateReport) -> Bool {
            lhs.power == rhs.power && lhs.apps.elementsEqual(rhs.apps) { $0 == $1 }
                && lhs.fetchIntervals.elementsEqual(rhs.fetchIntervals) { $0 == $1 }
        }
    }

    static func state(_ body: ByteBuffer) -> Result<StateReport, Refusal> {
        let decoded: StateBody
        switch decode(StateBody.self, body) {
        case .success(let value): decoded = value
        case .failure(let refusal): return .failure(refusal)
        }
        var report = StateReport(power: nil, apps: [], fetchIntervals: [])
        if let name = decoded.power {
            guard let power = DevicePower(rawValue: name) else {
                return .failure(Refusal(.badState, "power must be awake, idle or lowPower, got \"\(name.prefix(40))\""))
            }
            report.power = power
        }
        for (topic, name) in (decoded.apps ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let state = AppState(rawValue: name) else {
                return .failure(
                    Refusal(
                        .badState,
                        "apps.\(topic.prefix(100)) must be foreground, background or terminated, got \"\(name.prefix(40))\""
                    )
                )
            }
            report.apps.append((topic, state))
        }
        for (topic, value) in (decoded.fetchIntervals ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let interval = value.interval else {
                return .failure(
                    Refusal(
                        .badState,
                        "fetchIntervals.\(topic.prefix(100)) must be \"minimum\", \"never\" or whole seconds from 1 to \(FetchInterval.maxSeconds)"
                    )
                )
            }
            report.fetchIntervals.append((topic, interval))
        }
        return .success(report)
    }

    /// A device reports what it did with the wakes it got; more than this many at once is not
    /// an agent reporting, and the store commits them in one transaction.
    static let maxFetchResults = 256

    static func fetchResults(_ body: ByteBuffer) -> Result<[(seq: UInt64, result: FetchResult)], Refusal> {
        let decoded: FetchResultsBody
        switch decode(FetchResultsBody.self, body) {
        case .success(let value): decoded = value
        case .failure(let refusal): return .failure(refusal)
        }
        var results: [(seq: UInt64, result: FetchResult)] = []
        for item in decoded.results {
            guard SequenceNumbers.checked(item.seq) != nil else {
                return .failure(
                    Refusal(.badRequest, "seq must be \(SequenceNumbers.range) (a sequence number), got \(item.seq)")
                )
            }
            guard let result = FetchResult(rawValue: item.result), FetchResult.reportable.contains(result) else {
                return .failure(
                    Refusal(
                        .badRequest,
                        "result of seq \(item.seq) must be newData, noData or failed, got \"\(item.result.prefix(40))\""
                    )
                )
            }
            results.append((item.seq, result))
        }
        guard results.count <= maxFetchResults else {
            return .failure(
                Refusal(.badRequest, "at most \(maxFetchResults) results per request, got \(results.count)")
            )
        }
        return .success(results)
    }

    /// The event stream's `last-event-id` header: absent, or a sequence number to resume after.
    static func lastEventID(_ header: String?) -> Result<UInt64?, Refusal> {
        guard let header else { return .success(nil) }
        guard let value = UInt64(header.trimmingCharacters(in: .whitespaces)).flatMap(SequenceNumbers.checked) else {
            return .failure(
                Refusal(
                    .badLastEventId,
                    "last-event-id must be \(SequenceNumbers.range) (a sequence number), got \"\(header.prefix(40))\""
                )
            )
        }
        return .success(value)
    }

    // MARK: Decoding

    private struct TopicBody: Decodable { var topic: String }

    private struct SubscriptionBody: Decodable {
        var name: String
        var applicationServerKey: String?
    }

    struct AckBody: Decodable {
        var upTo: UInt64

        /// `{"upTo":N}` with optional spaces, and nothing else; nil sends the body to the full
        /// JSON decoder (other valid shapes, and the error message for invalid ones).
        static func fastUpTo(_ body: ByteBuffer) -> UInt64? {
            body.withUnsafeReadableBytes { raw -> UInt64? in
                var i = 0
                func skipSpaces() {
                    while i < raw.count, raw[i] == 0x20 || raw[i] == 0x0A || raw[i] == 0x0D || raw[i] == 0x09 { i += 1 }
                }
                func expect(_ text: StaticString) -> Bool {
                    let bytes = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
                    guard raw.count - i >= bytes.count else { return false }
                    for (offset, byte) in bytes.enumerated() where raw[i + offset] != byte { return false }
                    i += bytes.count
                    return true
                }
                skipSpaces()
                guard expect("{") else { return nil }
                skipSpaces()
                guard expect("\"upTo\"") else { return nil }
                skipSpaces()
                guard expect(":") else { return nil }
                skipSpaces()
                var value: UInt64 = 0
                let start = i
                while i < raw.count, raw[i] >= 0x30, raw[i] <= 0x39 {
                    let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                    let (sum, overflow2) = times.addingReportingOverflow(UInt64(raw[i] - 0x30))
                    guard !overflow1, !overflow2 else { return nil }
                    value = sum
                    i += 1
                }
                guard i > start, i - start == 1 || raw[start] != 0x30 else { return nil }
                skipSpaces()
                guard expect("}") else { return nil }
                skipSpaces()
                return i == raw.count ? value : nil
            }
        }
    }

    private struct StateBody: Decodable {
        var power: String?
        var apps: [String: String]?
        var fetchIntervals: [String: IntervalValue]?
    }

    /// `"minimum"`, `"never"` or whole seconds (a JSON number).
    private struct IntervalValue: Decodable {
        var interval: FetchInterval?

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let word = try? container.decode(String.self) {
                interval = word == "minimum" ? .minimum : word == "never" ? .never : nil
            } else if let seconds = try? container.decode(Int64.self), seconds >= 1,
                seconds <= Int64(FetchInterval.maxSeconds)
            {
                interval = .seconds(UInt32(seconds))
            } else {
                interval = nil
            }
        }
    }

    private struct FetchResultsBody: Decodable {
        struct Item: Decodable {
            var seq: UInt64
            var result: String
        }

        var results: [Item]
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ body: ByteBuffer) -> Result<T, Refusal> {
        do {
            return .success(try JSONDecoder().decode(T.self, from: Data(body.readableBytesView)))
        } catch {
            // Only a refused body is copied again, to say what is wrong with it.
            let bytes = Array(body.readableBytesView)
            return .failure(Refusal(.badRequest, "request body is not the expected JSON: \(describe(error, bytes))"))
        }
    }

    private static func describe(_ error: any Error, _ bytes: [UInt8]) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing field \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type for \"\(context.codingPath.map(\.stringValue).joined(separator: "."))\""
        case DecodingError.dataCorrupted:
            // Foundation says "not valid JSON" also for a number its integer type cannot hold
            // (-1, 1.5, 1e20); the only numbers these bodies carry are sequence numbers.
            do {
                _ = try JSONDocument(bytes)
            } catch {
                return "not valid JSON (\(error.problem) at \(error.position))"
            }
            return "a sequence number must be \(SequenceNumbers.range)"
        default: return "\(error)"
        }
    }
}
