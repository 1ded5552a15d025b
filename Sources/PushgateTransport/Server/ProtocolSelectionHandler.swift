import NIOCore
import NIOTLS

/// Decides which HTTP version a new connection speaks, then replaces itself with that pipeline.
///
/// After TLS, ALPN decides. Without ALPN (cleartext, or a TLS client that offered none, as some
/// APNs libraries do) the first bytes decide: the HTTP/2 client preface means HTTP/2 with prior
/// knowledge, anything else HTTP/1.1. A connection that has not decided within the setup timeout
/// (a stalled handshake, a truncated preface) is closed.
final class ProtocolSelectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    enum Selection: Equatable {
        case http2
        case http1
    }

    /// What the TLS handshake told us, if there was one.
    struct TLSOutcome {
        var negotiatedProtocol: String?
    }

    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private enum State {
        case awaitingHandshake
        case sniffing
        case selected
    }

    private var state: State
    private var buffered: ByteBuffer?
    private let setupTimeout: TimeAmount
    /// Where a setup that ran out of time is counted.
    private let statistics: ConnectionStatistics
    private var timer: Scheduled<Void>?
    private let install: (Selection, TLSOutcome?, ChannelHandlerContext) throws -> Void
    private var tlsOutcome: TLSOutcome?

    /// - Parameter install: adds the chosen protocol's handlers after this one (synchronously).
    init(
        awaitingTLS: Bool,
        setupTimeout: TimeAmount,
        statistics: ConnectionStatistics,
        install: @escaping (Selection, TLSOutcome?, ChannelHandlerContext) throws -> Void
    ) {
        self.state = awaitingTLS ? .awaitingHandshake : .sniffing
        self.setupTimeout = setupTimeout
        self.statistics = statistics
        self.install = install
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let statistics = self.statistics
        timer = context.eventLoop.scheduleTask(in: setupTimeout) {
            statistics.count(.connectionSetup)
            loopBound.value.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Nothing is in flight before a protocol is chosen: a draining server just closes.
        if event is ChannelShouldQuiesceEvent {
            context.close(promise: nil)
            return
        }
        guard state == .awaitingHandshake, let tlsEvent = event as? TLSUserEvent,
            case .handshakeCompleted(let negotiated) = tlsEvent
        else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        tlsOutcome = TLSOutcome(negotiatedProtocol: negotiated)
        context.fireUserInboundEventTriggered(event)
        switch negotiated {
        case "h2": select(.http2, context: context)
        case "http/1.1": select(.http1, context: context)
        default:
            state = .sniffing
            if buffered != nil { sniff(context: context) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if buffered == nil {
            buffered = bytes
        } else {
            buffered!.writeBuffer(&bytes)
        }
        if state == .sniffing { sniff(context: context) }
    }

    private func sniff(context: ChannelHandlerContext) {
        guard let bytes = buffered else { return }
        let count = min(bytes.readableBytes, Self.preface.count)
        let head = bytes.getBytes(at: bytes.readerIndex, length: count) ?? []
        if head[...] != Self.preface[..<count] {
            select(.http1, context: context)
        } else if count == Self.preface.count {
            select(.http2, context: context)
        }
        // Otherwise a prefix of the preface: wait for more bytes.
    }

    private func select(_ selection: Selection, context: ChannelHandlerContext) {
        state = .selected
        timer?.cancel()
        timer = nil
        do {
            try install(selection, tlsOutcome, context)
        } catch {
            context.fireErrorCaught(error)
            context.close(promise: nil)
            return
        }
        if let bytes = buffered {
            buffered = nil
            context.fireChannelRead(wrapInboundOut(bytes))
            context.fireChannelReadComplete()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}

@available(*, unavailable)
extension ProtocolSelectionHandler: Sendable {}
