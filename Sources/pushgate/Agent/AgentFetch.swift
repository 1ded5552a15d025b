import Foundation
import NIOConcurrencyHelpers
import PushgateDeviceClient
import PushgateModel
import PushgateTransport

/// Background fetch on the agent's side: each silent push printed gets its app's fetch (the
/// command, or `newData` at once without one) beside the stream, then its result reported; one
/// JSON line says how it went.
final class AgentFetch: Sendable {
    private struct Job {
        var notification: SilentNotification
        var receivedAt: ContinuousClock.Instant
        var deadline: ContinuousClock.Instant
    }

    private let runner: FetchCommandRunner?
    private let link: AgentLink
    private let jobs: AsyncStream<Job>
    private let queue: AsyncStream<Job>.Continuation
    /// Seqs taken, until their windows end: a notification the gateway sends again (it was not
    /// acked before a reconnect) keeps the window it opened the first time, and its app is not
    /// woken twice.
    private let taken = NIOLockedValueBox<[UInt64: ContinuousClock.Instant]>([:])

    init(command: String?, link: AgentLink) {
        runner = command.map { FetchCommandRunner(command: $0) }
        self.link = link
        (jobs, queue) = AsyncStream.makeStream()
    }

    /// Takes a notification just printed; returns at once. Nothing for pushes that are not silent.
    func received(_ json: String, at receivedAt: ContinuousClock.Instant) {
        guard let notification = SilentNotification(json: json) else { return }
        received(notification, at: receivedAt)
    }

    /// Takes a notification (a silent push, or a Web Push message) just printed. A Web Push
    /// message without a fetch window runs the command alone, and reports nothing.
    func received(_ notification: SilentNotification, at receivedAt: ContinuousClock.Instant) {
        guard notification.opensWindow || runner != nil else { return }
        let deadline = notification.deadline(receivedAt: receivedAt)
        let fresh = taken.withLockedValue { taken in
            taken = taken.filter { $0.value > receivedAt }
            return taken.updateValue(deadline, forKey: notification.seq) == nil
        }
        if fresh { queue.yield(Job(notification: notification, receivedAt: receivedAt, deadline: deadline)) }
    }

    /// Fetches and reports for as long as the agent runs.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs {
                group.addTask { await self.fetch(job) }
            }
        }
    }

    private func fetch(_ job: Job) async {
        let notification = job.notification
        var line = "{\"type\":\"fetch\",\"seq\":\(notification.seq),\"topic\":\(JSONText.quote(notification.topic))"
        let result: FetchResult
        if let runner {
            let outcome = await runner.run(
                input: notification.json,
                environment: notification.commandEnvironment,
                deadline: job.deadline
            )
            let elapsed = Self.milliseconds(job.receivedAt.duration(to: .now))
            line += ",\"result\":\(JSONText.quote((outcome.result ?? .timeout).rawValue))"
            switch outcome {
            case .exited(let status): line += ",\"exitStatus\":\(status),\"durationMs\":\(elapsed)"
            case .signalled(let signal): line += ",\"signal\":\(signal),\"durationMs\":\(elapsed)"
            case .failedToRun(let error): line += ",\"error\":\(JSONText.quote(error))"
            case .killedAtDeadline: line += ",\"killedAfterMs\":\(elapsed)"
            case .expiredBeforeItsTurn: line += ",\"waitedMs\":\(elapsed)"
            }
            guard let reportable = outcome.result, notification.opensWindow else {
                emit(line + "}")
                return
            }
            result = reportable
        } else {
            result = .newData
            line += ",\"result\":\(JSONText.quote(result.rawValue))"
        }
        if let answer = await report(FetchReport(seq: notification.seq, result: result), before: job.deadline) {
            line += "," + answer
        }
        emit(line + "}")
    }

    /// Sends the report on the live connection, or on the next one if that one fails, until
    /// the window ends (the gateway would refuse it after). Nil once accepted; otherwise the
    /// field the line gets: `refused` with the gateway's answer, or `unreported` with why.
    private func report(_ report: FetchReport, before deadline: ContinuousClock.Instant) async -> String? {
        var failed: HTTP2ClientConnection?
        var why = "not connected to the gateway before the fetch window ended"
        while let live = await link.live(other: failed, before: deadline) {
            do {
                let response = try await live.connection.send(live.device.fetchResults([report]))
                if response.status == 204 { return nil }
                return "\"refused\":" + Self.refusal(status: response.status, body: String(buffer: response.body))
            } catch {
                failed = live.connection
                why = "the report failed (\(error)) and no new connection came before the fetch window ended"
            }
        }
        return "\"unreported\":" + JSONText.quote(why)
    }

    /// `{"status", "reason", "detail"}` from the gateway's JSON refusal; a body that is not one
    /// is given as the detail.
    static func refusal(status: Int, body: String) -> String {
        struct Refusal: Decodable {
            var reason: String?
            var detail: String?
        }
        let refusal = try? JSONDecoder().decode(Refusal.self, from: Data(body.utf8))
        let reason = refusal?.reason.map(JSONText.quote) ?? "null"
        let detail = refusal?.detail ?? (refusal == nil ? RetryableRefusal.oneLine(body) : nil)
        return "{\"status\":\(status),\"reason\":\(reason),\"detail\":\(detail.map(JSONText.quote) ?? "null")}"
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}

/// The agent's connection while it has one, for what goes beside the stream (stdin commands,
/// fetch reports); a fetch report waits for the next one.
final class AgentLink: Sendable {
    typealias Live = (connection: HTTP2ClientConnection, device: DeviceRequests)

    private struct State {
        var live: Live?
        var waiters: [Int: CheckedContinuation<Live?, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = NIOLockedValueBox(State())

    var current: Live? { state.withLockedValue { $0.live } }

    func connected(_ live: Live) {
        let waiters = state.withLockedValue { state in
            state.live = live
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: live) }
    }

    func disconnected() {
        state.withLockedValue { $0.live = nil }
    }

    /// The live connection unless it is `stale`; else the next one, if it comes before `deadline`.
    func live(other stale: HTTP2ClientConnection?, before deadline: ContinuousClock.Instant) async -> Live? {
        await withTaskGroup(of: Live?.self) { group in
            group.addTask { await self.next(other: stale) }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    private func next(other stale: HTTP2ClientConnection?) async -> Live? {
        let id = state.withLockedValue { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLockedValue { state -> Live?? in
                    if let live = state.live, live.connection !== stale { return .some(live) }
                    // Cancelled before waiting: the handler below found nothing to resume.
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }
}
