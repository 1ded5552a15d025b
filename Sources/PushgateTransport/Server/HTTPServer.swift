import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PushgateTLS

#if canImport(Glibc)
import Glibc
#endif

/// One address to listen on, cleartext (h2c + HTTP/1.1 by sniffing) or TLS.
public struct ListenerConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// Replaceable: a reload gives new connections a new certificate.
    public var tls: TLSContextSource?
    /// What asked for this listener in the operator's words (the setting), for its errors.
    public var name: String?

    public init(host: String, port: Int, tls: TLSContextSource? = nil, name: String? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.name = name
    }
}

public struct HTTPServerConfiguration: Sendable {
    public var http2 = HTTP2ServerConfiguration()
    /// Largest request body accepted over HTTP/1.1 (operator routes only need small ones).
    public var maxHTTP1RequestBodySize = 64 * 1024
    /// What request bodies may hold across connections, HTTP/2 and HTTP/1.1 alike; servers given
    /// the same budget share it.
    public var requestBodyBudget = RequestBodyBudget()
    /// Time a new connection has to finish TLS and show which protocol it speaks.
    public var connectionSetupTimeout: TimeAmount = .seconds(10)
    /// Connections the server takes, in all and per client address; one over a limit is closed
    /// as soon as it is accepted.
    public var connectionLimits = ConnectionLimits()
    public var backlog: Int32 = 1024
    /// Set on every accepted connection; one the kernel refuses closes that connection, logged
    /// and counted (`HTTPServer.connectionSetupFailures`).
    public var socketOptions: [AcceptedSocketOption] = [.tcpNoDelay]

    public init() {}
}

/// Listens on every configured address and serves the application on each connection.
public final class HTTPServer: Sendable {
    public enum ServerError: Error, CustomStringConvertible {
        /// `listener`: the listener's name (the setting that asked for it), when it has one.
        case bindFailed(host: String, port: Int, listener: String?, underlying: any Error)
        case alreadyStarted

        private static func hint(port: Int, error: any Error) -> String {
            switch (error as? IOError)?.errnoCode {
            case EACCES where port < 1024:
                return
                    "ports below 1024 need CAP_NET_BIND_SERVICE: systemd's AmbientCapabilities=CAP_NET_BIND_SERVICE, "
                    + "or `setcap cap_net_bind_service=+ep` on the binary; or listen on a port from 1024 up"
            case EADDRINUSE:
                return "another process, or another listener of this gateway, has the port"
            case EADDRNOTAVAIL:
                return "the address is not one of this machine's"
            default:
                return "is another process using the port, or is the address not local?"
            }
        }

        public var description: String {
            switch self {
            case .bindFailed(let host, let port, let listener, let error):
                let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
                // The system's reason, not NIO's "bind(descriptor:ptr:bytes:): ... (errno: 98)".
                let reason =
                    (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
                return
                    "cannot listen on \(address)\(listener.map { " (\($0))" } ?? ""): \(reason) (\(Self.hint(port: port, error: error)))"
            case .alreadyStarted:
                return "the server was already started"
            }
        }
    }

    /// In the order `start` returns their addresses.
    public let listeners: [ListenerConfiguration]
    private let configuration: HTTPServerConfiguration
    private let application: any HTTPServerHandler
    private let group: any EventLoopGroup
    private let logger: Logger
    private let tracker: ConnectionTracker
    private let setupFailures = ConnectionSetupFailures()
    /// Open HTTP/2 connections by role and their open streams.
    public let statistics = ConnectionStatistics()
    private let serverChannels = NIOLockedValueBox<[any Channel]?>(nil)

    public init(
        listeners: [ListenerConfiguration],
        configuration: HTTPServerConfiguration = .init(),
        application: any HTTPServerHandler,
        group: any EventLoopGroup,
        logger: Logger
    ) {
        self.listeners = listeners
        self.configuration = configuration
        self.application = application
        self.group = group
        self.logger = logger
        self.tracker = ConnectionTracker(limits: configuration.connectionLimits)
    }

    /// Binds every listener; returns the bound addresses in listener order (port 0 resolved).
    @discardableResult
    public func start() async throws -> [SocketAddress] {
        var bound: [any Channel] = []
        do {
            for listener in listeners {
                let channel: any Channel
                do {
                    channel = try await bootstrap(for: listener).bind(host: listener.host, port: listener.port).get()
                } catch {
                    throw ServerError.bindFailed(
                        host: listener.host,
                        port: listener.port,
                        listener: listener.name,
                        underlying: error
                    )
                }
                // Added once bound, so that it sits after SwiftNIO's accept handler, whose
                // errors travel towards the pipeline's end.
                try await channel.pipeline.addHandler(ListenerErrorHandler(failures: setupFailures, logger: logger))
                bound.append(channel)
                logger.info(
                    "listening",
                    metadata: [
                        "listener.address": "\(channel.localAddress.map { "\($0)" } ?? "?")",
                        "listener.tls": "\(listener.tls != nil)",
                    ]
                )
            }
        } catch {
            for channel in bound { try? await channel.close() }
            throw error
        }
        let started = serverChannels.withLockedValue { current -> Bool in
            guard current == nil else { return false }
            current = bound
            return true
        }
        guard started else {
            for channel in bound { try? await channel.close() }
            throw ServerError.alreadyStarted
        }
        return bound.compactMap(\.localAddress)
    }

    public var openConnections: Int { tracker.count }

    /// Connections accepted and closed at once because they could not be set up, and accepts
    /// that failed, since start. The first failure of each cause is logged.
    public var connectionSetupFailures: Int { setupFailures.total }

    /// Connections closed as soon as they were accepted, because of `connectionLimits`, since
    /// start. The first of each reason is logged.
    public func refusedConnections(_ reason: ConnectionRefusal) -> Int { tracker.refusals(reason) }

    /// Stops accepting, asks every connection to finish what is in flight (HTTP/2: shutdown
    /// notice, then GOAWAY), waits up to `deadline` for them to close, then closes the rest.
    public func shutdownGracefully(deadline: TimeAmount) async {
        let channels = serverChannels.withLockedValue { $0 ?? [] }
        for channel in channels { try? await channel.close() }
        let connections = tracker.beginDraining()
        logger.info("draining connections", metadata: ["connections": "\(connections.count)"])
        for connection in connections {
            connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
        let loop = group.next()
        let timeout = loop.scheduleTask(in: deadline) {
            for connection in connections where connection.isActive {
                connection.close(promise: nil)
            }
        }
        for connection in connections {
            try? await connection.closeFuture.get()
        }
        timeout.cancel()
    }

    private static func logFirstRefusal(
        _ reason: ConnectionRefusal,
        peer: SocketAddress?,
        limits: ConnectionLimits,
        logger: Logger
    ) {
        let limit: String
        switch reason {
        case .serverFull:
            limit = "maxConnections (\(limits.maxConnections.map(String.init) ?? "none")) connections are open"
        case .addressFull:
            limit =
                "maxConnectionsPerAddress (\(limits.maxPerAddress.map(String.init) ?? "none")) connections from this client's address are open"
        }
        var metadata: Logger.Metadata = ["connection.refusal": "\(reason.rawValue)"]
        if let peer { metadata["connection.peer"] = "\(peer)" }
        logger.warning(
            "connection closed on arrival: \(limit); later ones are counted in pushgate_connections_refused_total, not logged",
            metadata: metadata
        )
    }

    private func bootstrap(for listener: ListenerConfiguration) -> ServerBootstrap {
        let configuration = self.configuration
        let application = self.application
        let tracker = self.tracker
        let logger = self.logger
        let http2 = SharedHTTP2ServerConfiguration(configuration.http2)
        let setupFailures = self.setupFailures
        let statistics = self.statistics
        return ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: configuration.backlog)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // NIO keeps each connection's last receive buffer for reuse. Starting small (and
            // adapting up under load) keeps that at a few hundred bytes on idle connections,
            // where the default would hold 2 KiB on each of them.
            .childChannelOption(
                .recvAllocator,
                value: AdaptiveRecvByteBufferAllocator(minimum: 128, initial: 256, maximum: 64 * 1024)
            )
            // Socket options are set here rather than as child channel options: SwiftNIO closes a
            // connection whose option fails and reports it nowhere a person would see.
            .childChannelInitializer { channel in
                let id: UInt64
                switch tracker.register(channel) {
                case .admitted(let admitted):
                    id = admitted
                case .draining:
                    return channel.close()
                case .refused(let reason, let isFirst):
                    if isFirst {
                        Self.logFirstRefusal(
                            reason,
                            peer: channel.remoteAddress,
                            limits: configuration.connectionLimits,
                            logger: logger
                        )
                    }
                    return channel.close()
                }
                let options = configuration.socketOptions.reduce(channel.eventLoop.makeSucceededVoidFuture()) {
                    done,
                    option in
                    done.flatMap { option.apply(to: channel) }
                }
                return options.flatMapThrowing {
                    try ServerConnectionPipeline(
                        id: id,
                        tls: listener.tls,
                        configuration: configuration,
                        http2: http2,
                        application: application,
                        statistics: statistics,
                        logger: logger
                    ).configure(channel.pipeline.syncOperations, channel: channel)
                }.flatMapError { error in
                    setupFailures.record(error, stage: "setup", peer: channel.remoteAddress, logger: logger)
                    channel.close(promise: nil)
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
            }
    }
}
