import NIOCore
import PushgateTransport

/// One provider connection's share of the pushes, on its event loop: keeps --in-flight
/// requests going, each answer starting the next, paced to --rate when given. The connections
/// take push indices from one shared counter.
final class ProviderPump {
    struct Plan: Sendable {
        var pushes: Int
        var inFlight: Int
        var rate: Int?
        var started: UInt64
        var request: @Sendable (Int) -> HTTPClientRequest
    }

    private let connection: HTTP2ClientConnection
    private let plan: Plan
    private let ledger: BenchLedger
    private let done: EventLoopPromise<Void>
    private var running = 0
    /// A push is scheduled for its due time (--rate): the next waits for it.
    private var pacing = false
    private var exhausted = false
    private var finished = false

    init(connection: HTTP2ClientConnection, plan: Plan, ledger: BenchLedger) {
        self.connection = connection
        self.plan = plan
        self.ledger = ledger
        self.done = connection.channel.eventLoop.makePromise()
    }

    /// Completes when every push this connection took has its answer; fails with the first
    /// request that got none.
    func start() -> EventLoopFuture<Void> {
        fill()
        return done.futureResult
    }

    private func fill() {
        while !finished, !exhausted, !pacing, running < plan.inFlight {
            let index = ledger.nextIndex.add(1, ordering: .relaxed).oldValue
            guard index < plan.pushes else {
                exhausted = true
                break
            }
            if let rate = plan.rate {
                let due = plan.started + UInt64(index) * 1_000_000_000 / UInt64(rate)
                let now = BenchLedger.now()
                if due > now + 1_000_000 {
                    pacing = true
                    connection.channel.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(due - now))) {
                        self.pacing = false
                        guard !self.finished else { return }
                        self.push(index)
                        self.fill()
                    }
                    return
                }
            }
            push(index)
        }
        if exhausted, running == 0, !finished {
            finished = true
            done.succeed()
        }
    }

    private func push(_ index: Int) {
        running += 1
        let request = plan.request(index)
        let sentAt = BenchLedger.now()
        ledger.state.withLockedValue { $0.sentAt[index] = sentAt }
        connection.submit(request).assumeIsolated().whenComplete { result in
            self.running -= 1
            switch result {
            case .success(let response):
                let latency = (BenchLedger.now() - sentAt) / 1000
                self.ledger.state.withLockedValue { state in
                    if response.status == 200 {
                        state.accepted += 1
                        _ = state.acceptLatency.record(latency)
                    } else {
                        state.refused += 1
                        if state.firstRefusal == nil {
                            state.firstRefusal = "\(response.status) \(String(buffer: response.body))"
                        }
                    }
                }
            case .failure(let error):
                if !self.finished {
                    self.finished = true
                    self.done.fail(error)
                }
            }
            self.fill()
        }
    }
}
