import NIOCore

/// A client as the connection and creation limits count it: an IPv4 address, or the /64 an IPv6
/// address is in (a subscriber is given a whole /64, so counting single IPv6 addresses would let
/// one client count as 2^64). IPv4 mapped into IPv6 counts as the IPv4 address. Loopback clients
/// are one value of their own, which the limits exempt: a proxy or a load test on the machine.
public enum ClientAddress: Hashable, Sendable {
    case loopback
    case v4(UInt32)
    case v6Prefix(UInt64)

    /// Nil for a Unix socket or an address family the limits do not know.
    public init?(_ address: SocketAddress) {
        switch address {
        case .v4(let v4):
            let host = UInt32(bigEndian: v4.address.sin_addr.s_addr)
            self = host >> 24 == 127 ? .loopback : .v4(host)
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            guard bytes.count == 16 else { return nil }
            let high = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let low = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            if high == 0, low == 1 {
                self = .loopback
            } else if high == 0, low >> 32 == 0xFFFF {
                let host = UInt32(truncatingIfNeeded: low)
                self = host >> 24 == 127 ? .loopback : .v4(host)
            } else {
                self = .v6Prefix(high)
            }
        default:
            return nil
        }
    }

    public var isLoopback: Bool { self == .loopback }
}
