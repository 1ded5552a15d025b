import Logging
import NIOCore
import NIOHTTP1
import PushgateTLS

/// Assembles a new server connection's pipeline: optional TLS, protocol selection, then either
/// HTTP/2 or HTTP/1.1 in front of the application.
struct ServerConnectionPipeline {
    let id: UInt64
    let tls: TLSContextSource?
    let configuration: HTTPServerConfiguration
    /// `configuration.http2`, shared by the server's connections.
    let http2: SharedHTTP2ServerConfiguration
    let application: any HTTPServerHandler
    /// Where HTTP/2 connections and their streams are counted, and every connection's timeouts.
    let statistics: ConnectionStatistics
    let logger: Logger

    func configure(_ pipeline: ChannelPipeline.SynchronousOperations, channel: any Channel) throws {
        let logger = self.logger
        let tlsHandler = tls.map { TLSHandler(context: $0.current) }
        if let tlsHandler { try pipeline.addHandler(tlsHandler) }

        let id = self.id
        let configuration = self.configuration
        let http2 = self.http2
        let application = self.application
        let statistics = self.statistics
        let selection = ProtocolSelectionHandler(
            awaitingTLS: tlsHandler != nil,
            setupTimeout: configuration.connectionSetupTimeout,
            statistics: statistics
        ) { selected, outcome, context in
            let info = ConnectionInfo(
                id: id,
                remoteAddress: context.channel.remoteAddress,
                localAddress: context.channel.localAddress,
                httpVersion: selected == .http2 ? .http2 : .http1_1,
                isTLS: tlsHandler != nil,
                negotiatedProtocol: outcome?.negotiatedProtocol,
                peerCertificate: tlsHandler?.peerCertificate,
                eventLoop: context.eventLoop,
                statistics: selected == .http2 ? statistics : nil
            )
            if selected == .http2 {
                context.channel.closeFuture.whenComplete { _ in info.closed() }
            }
            let operations = context.pipeline.syncOperations
            switch selected {
            case .http2:
                try operations.addHandler(
                    HTTP2ServerHandler(
                        configuration: http2,
                        application: application,
                        connection: info,
                        bodyBudget: configuration.requestBodyBudget,
                        logger: logger
                    ),
                    position: .after(context.handler)
                )
            case .http1:
                let handlers = Self.http1Handlers(
                    connection: info,
                    configuration: configuration,
                    application: application,
                    statistics: statistics,
                    logger: logger
                )
                try operations.addHandlers(handlers, position: .after(context.handler))
            }
        }
        try pipeline.addHandler(selection)
    }

    /// The HTTP/1.1 side of a connection, in pipeline order.
    static func http1Handlers(
        connection info: ConnectionInfo,
        configuration: HTTPServerConfiguration,
        application: any HTTPServerHandler,
        statistics: ConnectionStatistics,
        logger: Logger
    ) -> [any ChannelHandler] {
        var logger = logger
        logger[metadataKey: "connection.id"] = "\(info.id)"
        if let remote = info.remoteAddress { logger[metadataKey: "connection.peer"] = "\(remote)" }
        let idleTimeouts = configuration.http2.idleTimeoutsOfOneConnection()
        let handler = HTTP1ServerHandler(
            application: application,
            connection: info,
            maxBodySize: configuration.maxHTTP1RequestBodySize,
            bodyBudget: configuration.requestBodyBudget,
            idleTimeout: idleTimeouts.idle ?? .seconds(300),
            unauthenticatedIdleTimeout: idleTimeouts.unauthenticated,
            requestTimeout: configuration.http2.requestTimeout,
            statistics: statistics,
            logger: logger
        )
        return [
            HTTPResponseEncoder(),
            // Operator requests are small; the cap keeps a client from making the decoder
            // buffer without bound.
            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes), maximumBufferSize: 256 * 1024),
            HTTP1QuiesceObserver(handler),
            HTTPServerPipelineHandler(),
            HTTP1MalformedRequestHandler(application: application),
            handler,
        ]
    }
}
