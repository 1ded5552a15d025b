import NIOConcurrencyHelpers
import NIOCore
import PushgateDelivery
import PushgateTransport
import Synchronization

/// The admin event streams (`GET /v1/admin/events`): notable events from delivery as they
/// happen, and a tick of figures each second, to every open stream.
///
/// Bounded everywhere: at most `maxStreams` streams; each gets at most `notablesPerSecond`
/// notable events a second (the rest are counted and reported in its next tick's
/// `notableSkipped`); a stream whose client reads too slowly loses events (counted the same
/// way) rather than queueing them, since its writer refuses bytes past its high watermark.
public final class EventHub: DeliveryObserver {
    public let maxStreams: Int
    public let notablesPerSecond: Int

    private let streamCount = Atomic<Int>(0)
    private let state = NIOLockedValueBox(State())

    private struct State {
        var nextID: UInt64 = 1
        /// Reserved streams have no output until their head is sent.
        var streams: [UInt64: Stream] = [:]
    }

    private struct Stream {
        var output: StreamOutput?
        /// The second (since the epoch) `sentThisSecond` counts in.
        var second: Int64 = .min
        var sentThisSecond = 0
        var skipped = 0
    }

    public init(maxStreams: Int = 64, notablesPerSecond: Int = 100) {
        self.maxStreams = maxStreams
        self.notablesPerSecond = notablesPerSecond
    }

    // MARK: DeliveryObserver

    public var isListening: Bool { streamCount.load(ordering: .relaxed) > 0 }

    public func notable(_ event: NotableEvent) {
        let second = event.time >= 0 ? event.time / 1000 : (event.time - 999) / 1000
        let limit = notablesPerSecond
        let targets = state.withLockedValue { state -> [(UInt64, StreamOutput)] in
            var targets: [(UInt64, StreamOutput)] = []
            for (id, var stream) in state.streams {
                guard let output = stream.output else { continue }
                if stream.second != second {
                    stream.second = second
                    stream.sentThisSecond = 0
                }
                if stream.sentThisSecond < limit {
                    stream.sentThisSecond += 1
                    targets.append((id, output))
                } else {
                    stream.skipped += 1
                }
                state.streams[id] = stream
            }
            return targets
        }
        guard !targets.isEmpty else { return }
        let buffer = Self.event("notable", AdminJSON.encode(AdminNotableEvent(event)))
        for (id, output) in targets {
            output.send(buffer) { [weak self] in self?.countSkipped(id) }
        }
    }

    // MARK: Streams

    /// A place for one more stream; nil when `maxStreams` are open.
    func reserve() -> UInt64? {
        let id = state.withLockedValue { state -> UInt64? in
            guard state.streams.count < maxStreams else { return nil }
            defer { state.nextID += 1 }
            state.streams[state.nextID] = Stream()
            return state.nextID
        }
        return id
    }

    /// The reserved stream's head is out: events go to `writer` from now on. Call on its loop.
    func attach(_ id: UInt64, writer: ResponseBodyWriter) {
        let output = StreamOutput(writer)
        let attached = state.withLockedValue { state -> Bool in
            guard state.streams[id] != nil else { return false }
            state.streams[id]?.output = output
            return true
        }
        if attached { streamCount.add(1, ordering: .relaxed) }
    }

    /// The stream ended, or its head could not be sent.
    func remove(_ id: UInt64) {
        let removed = state.withLockedValue { $0.streams.removeValue(forKey: id) }
        if removed?.output != nil { streamCount.add(-1, ordering: .relaxed) }
    }

    /// Sends each stream a tick: `body` gets the events it skipped since its last tick.
    func tick(_ body: (_ skipped: Int) -> String) {
        let targets = state.withLockedValue { state -> [(UInt64, StreamOutput, Int)] in
            var targets: [(UInt64, StreamOutput, Int)] = []
            for (id, stream) in state.streams {
                guard let output = stream.output else { continue }
                targets.append((id, output, stream.skipped))
                state.streams[id]?.skipped = 0
            }
            return targets
        }
        for (id, output, skipped) in targets {
            output.send(Self.event("stats", body(skipped))) { [weak self] in self?.countSkipped(id) }
        }
    }

    /// One stream's tick (its first, as it opens).
    func tick(_ id: UInt64, _ body: (_ skipped: Int) -> String) {
        let target = state.withLockedValue { state -> (StreamOutput, Int)? in
            guard let stream = state.streams[id], let output = stream.output else { return nil }
            state.streams[id]?.skipped = 0
            return (output, stream.skipped)
        }
        guard let (output, skipped) = target else { return }
        output.send(Self.event("stats", body(skipped))) { [weak self] in self?.countSkipped(id) }
    }

    private func countSkipped(_ id: UInt64) {
        state.withLockedValue { $0.streams[id]?.skipped += 1 }
    }

    static func event(_ name: String, _ data: String) -> ByteBuffer {
        ByteBuffer(string: "event: \(name)\ndata: \(data)\n\n")
    }
}

/// One stream's writer, reached from any thread.
private final class StreamOutput: Sendable {
    private let writer: NIOLoopBound<ResponseBodyWriter>

    init(_ writer: ResponseBodyWriter) {
        self.writer = NIOLoopBound(writer, eventLoop: writer.eventLoop)
    }

    /// `full` runs when the stream's client is too slow to take more.
    func send(_ buffer: ByteBuffer, full: @escaping @Sendable () -> Void) {
        let writer = self.writer
        writer.eventLoop.execute {
            if writer.value.write(buffer) == .full { full() }
        }
    }
}
