import NIOConcurrencyHelpers
import NIOCore

/// The server's open connections, so that shutdown can reach every one of them, and their
/// counts against `ConnectionLimits`.
///
/// Its lock is taken when a connection opens or closes, never per request.
final class ConnectionTracker: Sendable {
    enum Registration {
        case admitted(id: UInt64)
        /// The server is draining: the caller closes the channel.
        case draining
        /// Over a limit: the caller closes the channel. `isFirst`: the first refusal for this
        /// reason, to be logged (later ones are counted).
        case refused(ConnectionRefusal, isFirst: Bool)
    }

    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var counts: ConnectionCounts
        var nextID: UInt64 = 1
        var draining = false
        var refused: [ConnectionRefusal: Int] = [:]
    }

    private let state: NIOLockedValueBox<State>

    init(limits: ConnectionLimits) {
        state = NIOLockedValueBox(State(counts: ConnectionCounts(limits: limits)))
    }

    func register(_ channel: any Channel) -> Registration {
        let address = channel.remoteAddress.flatMap(ClientAddress.init)
        let registration = state.withLockedValue { state -> Registration in
            if state.draining { return .draining }
            if let refusal = state.counts.admit(address) {
                state.refused[refusal, default: 0] += 1
                return .refused(refusal, isFirst: state.refused[refusal] == 1)
            }
            state.channels[ObjectIdentifier(channel)] = channel
            defer { state.nextID += 1 }
            return .admitted(id: state.nextID)
        }
        guard case .admitted = registration else { return registration }
        channel.closeFuture.whenComplete { [weak self] _ in
            self?.state.withLockedValue {
                $0.channels.removeValue(forKey: ObjectIdentifier(channel))
                $0.counts.release(address)
            }
        }
        return registration
    }

    var count: Int { state.withLockedValue { $0.channels.count } }

    /// Connections closed on arrival for `reason` since the server started.
    func refusals(_ reason: ConnectionRefusal) -> Int {
        state.withLockedValue { $0.refused[reason, default: 0] }
    }

    /// Stops registering and returns the connections open now.
    func beginDraining() -> [any Channel] {
        state.withLockedValue { state in
            state.draining = true
            return Array(state.channels.values)
        }
    }
}
