import Synchronization

/// Request body bytes the server may hold at once, across every connection of every server given
/// the same budget: bodies are buffered until their request ends, and without a bound a crowd of
/// clients that each send part of a body and stop would hold as much memory as they like.
///
/// A body whose next bytes do not fit is refused, not waited for: HTTP/2 resets its stream with
/// REFUSED_STREAM (RFC 9113 section 8.7: not processed, safe to retry; HTTP/2 client stacks such
/// as Go's and OkHttp retry it by themselves), HTTP/1.1 answers `503` with `retry-after`.
/// Requests without a body are never refused for it.
public final class RequestBodyBudget: Sendable {
    /// 64 MiB: 12,000 provider bodies of the largest size (5,120 bytes) at once, while a
    /// gateway serving a few thousand pushes a second holds a few hundred.
    public static let defaultLimit = 64 * 1024 * 1024

    public let limit: Int
    private let held = Atomic<Int>(0)
    private let refusals = Atomic<Int>(0)

    public init(limit: Int = RequestBodyBudget.defaultLimit) {
        self.limit = limit
    }

    /// Body bytes held now.
    public var heldBytes: Int { held.load(ordering: .relaxed) }

    /// Request bodies refused because they did not fit, since the start.
    public var refusedBodies: Int { refusals.load(ordering: .relaxed) }

    /// How full the budget may be (all bodies together, proven connections' included) for a
    /// body on a connection that has proven nothing to be taken: a quarter. Device routes read
    /// their body before the secret is checked (on the device's shard), so requests with a
    /// made-up secret filled the whole budget (64 KiB per stream, held until the request
    /// timeout) and real providers' pushes were refused.
    public var unauthenticatedLimit: Int { limit / 4 }

    /// Takes `bytes` for a body; false, taking nothing and counting a refusal, when they do not
    /// fit: in the whole budget, or, for a connection that has not authenticated, in its part.
    func take(_ bytes: Int, authenticated: Bool) -> Bool {
        let ceiling = authenticated ? limit : unauthenticatedLimit
        var current = held.load(ordering: .relaxed)
        while true {
            guard current + bytes <= ceiling else {
                refusals.add(1, ordering: .relaxed)
                return false
            }
            let (exchanged, original) = held.compareExchange(
                expected: current,
                desired: current + bytes,
                ordering: .relaxed
            )
            if exchanged { return true }
            current = original
        }
    }

    /// Gives back bytes taken for a body that was handed over, refused or dropped.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        held.subtract(bytes, ordering: .relaxed)
    }
}
