/// What providers sent, since the process started: pushes accepted (answered 200, whatever
/// their disposition) by push type, and refusals by reason (authentication, validation and
/// delivery's alike). Every provider request that is answered counts in exactly one of them.
public final class ProviderCounters: Sendable {
    public let received = CounterFamily<PushType>()
    public let rejected = CounterFamily<Refusal.Reason>()

    public init() {}
}
