import NIOConcurrencyHelpers
import NIOCore

/// The server's open connections, so that shutdown can reach every one of them.
///
/// Its lock is taken when a connection opens or closes, never per request.
final class ConnectionTracker: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var nextID: UInt64 = 1
        var draining = false
    }

    private let state = NIOLockedValueBox(State())

    /// Registers `channel` and returns its connection id, or nil when the server is draining (the
    /// caller closes the channel).
    func register(_ channel: any Channel) -> UInt64? {
        let id = state.withLockedValue { state -> UInt64? in
            if state.draining { return nil }
            state.channels[ObjectIdentifier(channel)] = channel
            defer { state.nextID += 1 }
            return state.nextID
        }
        guard let id else { return nil }
        channel.closeFuture.whenComplete { [weak self] _ in
            self?.state.withLockedValue { _ = $0.channels.removeValue(forKey: ObjectIdentifier(channel)) }
        }
        return id
    }

    var count: Int { state.withLockedValue { $0.channels.count } }

    /// Stops registering and returns the connections open now.
    func beginDraining() -> [any Channel] {
        state.withLockedValue { state in
            state.draining = true
            return Array(state.channels.values)
        }
    }
}
