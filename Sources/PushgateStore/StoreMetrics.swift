import CoreMetrics

/// Each fsync'd commit's duration and how many pushes it carried, through swift-metrics handles
/// that whoever exports them makes once; records nothing unless given.
public struct StoreMetrics: Sendable {
    /// The transaction, from its start to its durable commit.
    public var commitDuration: Timer
    /// Pushes enqueued by the commit (acks and other commands ride along uncounted).
    public var commitPushes: Recorder

    public init(commitDuration: Timer, commitPushes: Recorder) {
        self.commitDuration = commitDuration
        self.commitPushes = commitPushes
    }

    public static let none = StoreMetrics(
        commitDuration: Timer(label: "commit_duration", dimensions: [], handler: NOOPMetricsHandler.instance),
        commitPushes: Recorder(label: "commit_pushes", dimensions: [], aggregate: true, handler: NOOPMetricsHandler.instance)
    )
}
