import PushgateModel

/// What checking a token once found out: it verified (its clock checks are still to be made at
/// each use), or it never will.
enum TokenVerdict: Sendable {
    case verified(VerifiedProviderToken)
    case refused(Refusal)
}

/// The last few tokens a connection sent that it is not using, with their verdicts, so that a
/// client repeating a refused token costs a string compare rather than JSON and ECDSA. Fixed
/// capacity, oldest replaced first: a client cycling through endless bad tokens costs CPU (one
/// verification each, as on any new connection) but never memory.
struct RecentTokenVerdicts {
    static let capacity = 8

    private var entries: [(authorization: String, verdict: TokenVerdict)] = []
    /// Where the next entry goes once ``entries`` is full.
    private var oldest = 0

    var count: Int { entries.count }

    func verdict(for authorization: String) -> TokenVerdict? {
        entries.first { $0.authorization == authorization }?.verdict
    }

    mutating func remember(_ verdict: TokenVerdict, for authorization: String) {
        if entries.count < Self.capacity {
            entries.append((authorization, verdict))
        } else {
            entries[oldest] = (authorization, verdict)
            oldest = (oldest + 1) % Self.capacity
        }
    }
}
