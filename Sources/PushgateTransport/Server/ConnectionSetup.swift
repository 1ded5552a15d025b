import Logging
import NIOConcurrencyHelpers
import NIOCore

/// A socket option set on every accepted connection.
///
/// Given with its level: SwiftNIO's `.socketOption(.tcp_nodelay)` means level `SOL_SOCKET`, where
/// option 1 is `SO_DEBUG`, which the kernel refuses to any process without CAP_NET_ADMIN. Set
/// that way, every connection of a gateway running as its own user was closed at accept.
public struct AcceptedSocketOption: Sendable, CustomStringConvertible {
    public var level: NIOBSDSocket.OptionLevel
    public var name: NIOBSDSocket.Option
    public var value: SocketOptionValue
    /// The option's C name, for the log line of a refusal.
    public var description: String

    public init(
        level: NIOBSDSocket.OptionLevel,
        name: NIOBSDSocket.Option,
        value: SocketOptionValue,
        description: String
    ) {
        self.level = level
        self.name = name
        self.value = value
        self.description = description
    }

    /// Responses and events leave at once instead of waiting for Nagle's algorithm to fill a
    /// segment.
    public static let tcpNoDelay = AcceptedSocketOption(
        level: .tcp,
        name: .tcp_nodelay,
        value: 1,
        description: "TCP_NODELAY"
    )

    func apply(to channel: any Channel) -> EventLoopFuture<Void> {
        channel.setOption(ChannelOptions.Types.SocketOption(level: level, name: name), value: value)
            .flatMapErrorThrowing { error in throw SocketOptionRefused(option: description, underlying: error) }
    }
}

struct SocketOptionRefused: Error, CustomStringConvertible {
    var option: String
    var underlying: any Error
    var description: String { "setsockopt(\(option)) failed: \(underlying)" }
}

/// Connections the server accepted but could not set up (a socket option the kernel refused, a
/// pipeline that could not be built) and accepts that failed (no file descriptors left).
///
/// Each one is counted; the first of each cause is logged with that cause, the rest only
/// counted: a cause that hits one connection hits them all, and a line per connection would
/// flood the log exactly when the gateway is in trouble.
final class ConnectionSetupFailures: Sendable {
    private struct State {
        var total = 0
        var loggedCauses: Set<String> = []
    }

    private let state = NIOLockedValueBox(State())

    var total: Int { state.withLockedValue { $0.total } }

    /// Counts one failure; returns the running total and whether `cause` is new (to be logged).
    func record(cause: String) -> (total: Int, isNewCause: Bool) {
        state.withLockedValue { state in
            state.total += 1
            return (state.total, state.loggedCauses.insert(cause).inserted)
        }
    }

    func record(_ error: any Error, stage: String, peer: SocketAddress?, logger: Logger) {
        let cause = "\(error)"
        let (total, isNewCause) = record(cause: cause)
        guard isNewCause else { return }
        var metadata: Logger.Metadata = [
            "error": "\(cause)",
            "connection.stage": "\(stage)",
            "failures.total": "\(total)",
        ]
        if let peer { metadata["connection.peer"] = "\(peer)" }
        logger.warning(
            "connection setup failed; the connection was closed (later failures with this cause are counted, not logged)",
            metadata: metadata
        )
    }
}

/// On a listening channel: accept errors (EMFILE, ENFILE, ...) reach the pipeline's end here,
/// where SwiftNIO would drop them unseen.
final class ListenerErrorHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = any Channel

    private let failures: ConnectionSetupFailures
    private let logger: Logger

    init(failures: ConnectionSetupFailures, logger: Logger) {
        self.failures = failures
        self.logger = logger
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failures.record(error, stage: "accept", peer: nil, logger: logger)
    }
}
