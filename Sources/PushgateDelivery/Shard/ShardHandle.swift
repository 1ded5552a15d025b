import NIOCore

/// A shard as every other thread holds it: its loop, and the shard, reachable only on that loop
/// (SwiftNIO checks, so a call from elsewhere traps instead of racing).
struct ShardHandle: Sendable {
    let eventLoop: any EventLoop
    private let shard: NIOLoopBoundBox<DeviceShard>

    /// `shard` is sent to its loop: nothing else keeps a reference to it.
    init(_ shard: sending DeviceShard, on eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.shard = .makeBoxSendingValue(shard, eventLoop: eventLoop)
    }

    /// Runs `body` with the shard, on its loop.
    func execute(_ body: @escaping @Sendable (DeviceShard) -> Void) {
        let shard = self.shard
        eventLoop.execute { body(shard.value) }
    }

    func submit<T: Sendable>(_ body: @escaping @Sendable (DeviceShard) throws -> T) -> EventLoopFuture<T> {
        let shard = self.shard
        return eventLoop.submit { try body(shard.value) }
    }

    /// `body` with the shard every `interval`, on its loop, until cancelled.
    func repeatEvery(_ interval: TimeAmount, _ body: @escaping @Sendable (DeviceShard) -> Void) -> RepeatedTask {
        let shard = self.shard
        return eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in body(shard.value) }
    }
}
