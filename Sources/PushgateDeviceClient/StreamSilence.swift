/// When an agent takes its event stream's connection as dead: it only reads, so a connection
/// whose far end vanished (the gateway's host lost power, a NAT dropped its mapping, a laptop
/// slept through a network change) never fails on its own; TCP would wait for hours. The gateway
/// writes to a silent stream at least every heartbeat interval (the stream response's
/// `pushgate-heartbeat-interval`, in seconds), so hearing nothing for twice that and a margin
/// for a slow network means nobody is there.
public struct StreamSilence: Sendable {
    /// What a gateway that does not say (or whose header a proxy dropped) is taken to use: its
    /// default.
    public static let defaultHeartbeatSeconds = 30
    /// Added to twice the interval: a heartbeat delayed by retransmissions on a poor link is not
    /// a dead connection.
    public static let marginSeconds = 5

    /// The gateway's heartbeat interval, in seconds.
    public let heartbeatSeconds: Int
    /// How long a silence may last before the connection counts as dead.
    public let limit: Duration
    private(set) var lastHeard: ContinuousClock.Instant

    /// - Parameter heartbeatIntervalHeader: the stream response's `pushgate-heartbeat-interval`:
    ///   whole seconds, 1 to 3600; anything else is taken as the default.
    public init(heartbeatIntervalHeader: String?, openedAt: ContinuousClock.Instant) {
        // HTTP/2 field values carry no surrounding whitespace (nghttp2 refuses them).
        let announced = heartbeatIntervalHeader.flatMap { Int($0) }
        heartbeatSeconds = announced.flatMap { (1...3600).contains($0) ? $0 : nil } ?? Self.defaultHeartbeatSeconds
        limit = .seconds(2 * heartbeatSeconds + Self.marginSeconds)
        lastHeard = openedAt
    }

    /// Bytes arrived on the stream (an event or a heartbeat alike).
    public mutating func heard(at instant: ContinuousClock.Instant) {
        if instant > lastHeard { lastHeard = instant }
    }

    /// When the connection counts as dead if nothing more arrives.
    public var deadline: ContinuousClock.Instant { lastHeard + limit }

    public func isDead(at now: ContinuousClock.Instant) -> Bool { now >= deadline }

    /// What the agent says when it gives the connection up.
    public var failure: any Error { Silent(limit: limit, heartbeatSeconds: heartbeatSeconds) }

    private struct Silent: Error, CustomStringConvertible {
        var limit: Duration
        var heartbeatSeconds: Int
        var description: String {
            "nothing arrived on the event stream for \(limit.components.seconds) s, though the gateway writes to it at least every \(heartbeatSeconds) s: the connection is taken as dead"
        }
    }
}
