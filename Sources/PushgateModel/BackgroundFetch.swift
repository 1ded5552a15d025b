/// What an app did with the wake a silent push gave it, as iOS's background fetch completion
/// handler reports it. `timeout` is no report: the gateway records it when the fetch window ends.
public enum FetchResult: String, Sendable, Hashable, CaseIterable {
    case newData
    case noData
    case failed
    case timeout

    /// The results an agent may report (a timeout is the absence of one).
    public static let reportable: [FetchResult] = [.newData, .noData, .failed]
}

/// The longest fetch window a gateway opens (iOS gives about 30 seconds; ten minutes covers any
/// fetch a device would run): the scheduler's setting is bounded by it, and an agent takes any
/// larger figure a server sends as it.
public enum FetchWindow {
    public static let maxSeconds = 600
}

/// How often an app wants budget releases of its silent pushes, as iOS's
/// `setMinimumBackgroundFetchInterval` says it: as often as the budget allows, at most once per
/// so many seconds, or never (its silent pushes then wait for a wake event).
public enum FetchInterval: Sendable, Hashable {
    case minimum
    case seconds(UInt32)
    case never

    /// The longest interval in seconds a device may ask for: a week.
    public static let maxSeconds: UInt32 = 7 * 24 * 3600

    /// The wire and configuration word: `minimum`, `never`, or the seconds.
    public var word: String {
        switch self {
        case .minimum: "minimum"
        case .never: "never"
        case .seconds(let seconds): String(seconds)
        }
    }
}
