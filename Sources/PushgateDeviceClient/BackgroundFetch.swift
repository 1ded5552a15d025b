import Foundation
import PushgateModel

// Background fetch from the device's side (PRODUCT.md section 4.1): each silent push delivered
// gives its app a fetch window, within which the device reports what the app did.

/// A delivered silent push, as a device needs it to run its app's fetch: the notification's
/// JSON object (an event's `data`, or an item of a keep-alive's `notifications`) and the fields
/// the fetch is run and reported with.
public struct SilentNotification: Sendable, Hashable {
    /// The window when a notification does not say: iOS gives a woken app about 30 seconds.
    public static let defaultFetchWindowSeconds = 30
    public var seq: UInt64
    public var topic: String
    public var apnsID: String
    /// The time the app has to report, counted from the notification's arrival.
    public var fetchWindowSeconds: Int
    /// The notification's JSON object, as received (a Web Push message's as the agent printed
    /// it, decrypted).
    public var json: String
    /// The gateway opened a fetch window for it (a silent push, a Web Push message at `low` or
    /// `very-low`), which the result is reported to; other Web Push messages run the command
    /// and report nothing.
    public var opensWindow = true

    /// Nil unless `json` is a notification of push type `background` with a seq, topic and
    /// apns-id: other pushes open no fetch window.
    public init?(json: String) {
        struct Fields: Decodable {
            var seq: UInt64
            var topic: String
            var apnsId: String
            var pushType: String
            var fetchWindowSeconds: Int?
        }
        guard let fields = try? JSONDecoder().decode(Fields.self, from: Data(json.utf8)),
            fields.pushType == PushType.background.rawValue
        else { return nil }
        seq = fields.seq
        topic = fields.topic
        apnsID = fields.apnsId
        fetchWindowSeconds = fields.fetchWindowSeconds ?? Self.defaultFetchWindowSeconds
        self.json = json
    }

    /// A Web Push message: its fetch window when the gateway opened one (`fetchWindowSeconds` in
    /// its event), else the default time for its command, reported to nobody.
    public init(webPushSeq seq: UInt64, name: String, messageID: String, fetchWindowSeconds: Int?, json: String) {
        self.seq = seq
        topic = name
        apnsID = messageID
        self.fetchWindowSeconds = fetchWindowSeconds ?? Self.defaultFetchWindowSeconds
        self.json = json
        opensWindow = fetchWindowSeconds != nil
    }

    /// When the command must have finished, for a notification that arrived at `receivedAt`:
    /// the window less a margin (a second, at most half the window). The gateway opened the
    /// window when it sent the notification, a little earlier, and the report still has to
    /// reach it: a command that ran to the window's very end would be counted as a timeout.
    public func deadline(receivedAt: ContinuousClock.Instant) -> ContinuousClock.Instant {
        // A larger figure, which only a broken or hostile server sends, is taken as the longest
        // window a gateway opens: unbounded, the agent trapped once its deadline passed what a
        // clock instant can hold.
        let window = Duration.seconds(min(max(0, fetchWindowSeconds), FetchWindow.maxSeconds))
        return receivedAt + window - min(.seconds(1), window / 2)
    }

    /// What the fetch command is told beside the notification on its stdin.
    public var commandEnvironment: [String: String] {
        ["PUSHGATE_TOPIC": topic, "PUSHGATE_SEQ": String(seq), "PUSHGATE_APNS_ID": apnsID]
    }
}

/// A fetch command's end, and the result it stands for.
public enum FetchCommandOutcome: Sendable, Hashable {
    case exited(status: Int32)
    case signalled(Int32)
    /// Still running at its deadline: its process group was killed.
    case killedAtDeadline
    /// Its deadline passed while it waited for a turn: it never ran.
    case expiredBeforeItsTurn
    /// It could not be started, or its end could not be learnt (the message says why).
    case failedToRun(String)

    /// The app's answer: exit 0 is `newData`, exit 1 `noData`, any other end `failed`. Nil when
    /// the window ended first: a timeout is not reported, the gateway records it.
    public var result: FetchResult? {
        switch self {
        case .exited(status: 0): .newData
        case .exited(status: 1): .noData
        case .exited, .signalled, .failedToRun: .failed
        case .killedAtDeadline, .expiredBeforeItsTurn: nil
        }
    }
}

/// `TOPIC=minimum|never|SECONDS`, an app's fetch interval as the agent's `--fetch-interval`
/// takes it.
public enum FetchIntervalSetting {
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    public static func parse(_ argument: String) throws(Invalid) -> (topic: String, interval: FetchInterval) {
        guard let equals = argument.lastIndex(of: "="), equals != argument.startIndex else {
            throw Invalid(description: "expected TOPIC=minimum|never|SECONDS, got \"\(argument)\"")
        }
        let topic = String(argument[..<equals])
        let value = String(argument[argument.index(after: equals)...])
        switch value {
        case FetchInterval.minimum.word: return (topic, .minimum)
        case FetchInterval.never.word: return (topic, .never)
        default:
            // Digits only: UInt32 would also take "+5".
            guard !value.isEmpty, value.allSatisfy(\.isASCII), value.allSatisfy(\.isNumber),
                let seconds = UInt32(value), (1...FetchInterval.maxSeconds).contains(seconds)
            else {
                throw Invalid(
                    description:
                        "the interval of \(topic) must be minimum, never or 1 to \(FetchInterval.maxSeconds) seconds, got \"\(value)\""
                )
            }
            return (topic, .seconds(seconds))
        }
    }
}
