import Logging

/// A connection's logger: the server's logger plus the connection's id and peer, added only to
/// messages actually emitted. A `Logger` carrying them would cost every idle connection its own
/// metadata dictionary and log-handler copy (about half a kilobyte) for logs rarely written.
struct ConnectionLogger: Sendable {
    let base: Logger
    let connection: ConnectionInfo

    func error(_ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata = [:]) {
        log(.error, message(), metadata())
    }

    func debug(_ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata = [:]) {
        log(.debug, message(), metadata())
    }

    func trace(_ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata = [:]) {
        log(.trace, message(), metadata())
    }

    private func log(
        _ level: Logger.Level,
        _ message: @autoclosure () -> Logger.Message,
        _ metadata: @autoclosure () -> Logger.Metadata
    ) {
        guard base.logLevel <= level else { return }
        var all = metadata()
        all["connection.id"] = "\(connection.id)"
        if let peer = connection.remoteAddress { all["connection.peer"] = "\(peer)" }
        base.log(level: level, message(), metadata: all)
    }
}
