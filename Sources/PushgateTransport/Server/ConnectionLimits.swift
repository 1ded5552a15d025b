/// How many connections a server takes, in all and from one client address, and what it holds
/// now: a plain value with no I/O, so that every rule is tested without sockets. `HTTPServer`'s
/// tracker keeps one under its lock (taken when a connection opens or closes, never per request).
public struct ConnectionLimits: Sendable, Equatable {
    /// Open connections of the server at most; nil: no limit.
    public var maxConnections: Int?
    /// Open connections from one `ClientAddress` at most; nil: no limit. Loopback clients are not
    /// counted when `exemptsLoopback`.
    public var maxPerAddress: Int?
    public var exemptsLoopback = true

    public init(maxConnections: Int? = nil, maxPerAddress: Int? = nil) {
        self.maxConnections = maxConnections
        self.maxPerAddress = maxPerAddress
    }
}

/// Why a connection was closed as soon as it was accepted.
public enum ConnectionRefusal: String, Sendable, CaseIterable {
    /// `maxConnections` connections were open.
    case serverFull = "server_full"
    /// `maxPerAddress` connections from the client's address were open.
    case addressFull = "address_full"
}

struct ConnectionCounts: Sendable {
    let limits: ConnectionLimits
    private(set) var total = 0
    /// Only addresses with connections open: an address's entry goes with its last connection.
    private(set) var byAddress: [ClientAddress: Int] = [:]

    init(limits: ConnectionLimits) {
        self.limits = limits
    }

    /// Counts the connection, or says why it may not open (and counts nothing).
    mutating func admit(_ address: ClientAddress?) -> ConnectionRefusal? {
        if let max = limits.maxConnections, total >= max { return .serverFull }
        if let key = counted(address), let max = limits.maxPerAddress {
            let open = byAddress[key, default: 0]
            guard open < max else { return .addressFull }
            byAddress[key] = open + 1
        }
        total += 1
        return nil
    }

    /// An admitted connection closed.
    mutating func release(_ address: ClientAddress?) {
        total -= 1
        guard let key = counted(address), limits.maxPerAddress != nil, let open = byAddress[key] else { return }
        byAddress[key] = open > 1 ? open - 1 : nil
    }

    private func counted(_ address: ClientAddress?) -> ClientAddress? {
        guard let address, !(limits.exemptsLoopback && address.isLoopback) else { return nil }
        return address
    }
}
