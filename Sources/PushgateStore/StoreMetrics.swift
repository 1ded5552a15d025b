import CoreMetrics

/// Each fsync'd commit's duration and how many pushes it carried, through swift-metrics handles
/// that whoever exports them makes once; records nothing unless given.
public struct StoreMetrics: Sendable {
    /// The transaction, from its start to its durable commit.
    public var commitDuration: Timer
    /// Pushes enqueued by the commit (acks and other commands ride along uncounted).
    public var commitPushes: Recorder
    /// Batches (a push, an ack, a registration...) sharing the commit: how well fsyncs are shared.
    public var commitBatches: Recorder
    /// Interval durability: batches answered 200 that never reached the disk.
    public var lostBatches: Counter

    public init(commitDuration: Timer, commitPushes: Recorder, commitBatches: Recorder, lostBatches: Counter) {
        self.commitDuration = commitDuration
        self.commitPushes = commitPushes
        self.commitBatches = commitBatches
        self.lostBatches = lostBatches
    }

    public static let none = StoreMetrics(
        commitDuration: Timer(label: "commit_duration", dimensions: [], handler: NOOPMetricsHandler.instance),
        commitPushes: Recorder(
            label: "commit_pushes",
            dimensions: [],
            aggregate: true,
            handler: NOOPMetricsHandler.instance
        ),
        commitBatches: Recorder(
            label: "commit_batches",
            dimensions: [],
            aggregate: true,
            handler: NOOPMetricsHandler.instance
        ),
        lostBatches: Counter(label: "lost_batches", dimensions: [], handler: NOOPMetricsHandler.instance)
    )
}
