import NIOCore
import Testing

@testable import PushgateTransport

@Suite("Connection limits: per client address and in all, without sockets")
struct ConnectionLimitsTests {
    private static func address(_ ip: String) throws -> ClientAddress {
        try #require(ClientAddress(try SocketAddress(ipAddress: ip, port: 443)))
    }

    @Test("IPv4 by address; IPv6 by its /64; IPv4 mapped into IPv6 as IPv4; 127/8, ::1 and ::ffff:127.x are loopback")
    func addresses() throws {
        #expect(try Self.address("192.0.2.1") == .v4(0xC000_0201))
        #expect(try Self.address("192.0.2.1") != Self.address("192.0.2.2"))
        #expect(try Self.address("2001:db8:1:2::1") == Self.address("2001:db8:1:2:ffff::9"))
        #expect(try Self.address("2001:db8:1:2::1") != Self.address("2001:db8:1:3::1"))
        #expect(try Self.address("::ffff:192.0.2.1") == Self.address("192.0.2.1"))
        for loopback in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            #expect(try Self.address(loopback) == .loopback, "\(loopback)")
        }
        for other in ["::2", "::", "0.0.0.0", "128.0.0.1", "10.0.0.1", "::ffff:10.0.0.1", "fd00::1"] {
            #expect(try Self.address(other) != .loopback, "\(other)")
        }
        #expect(ClientAddress(try SocketAddress(unixDomainSocketPath: "/tmp/x")) == nil)
    }

    @Test(
        "per address: the limit counts each address apart; a closed connection frees its place; an address's entry goes with its last connection"
    )
    func perAddress() throws {
        var counts = ConnectionCounts(limits: ConnectionLimits(maxPerAddress: 2))
        let a = try Self.address("192.0.2.1")
        let b = try Self.address("2001:db8::1")
        #expect(counts.admit(a) == nil)
        #expect(counts.admit(a) == nil)
        #expect(counts.admit(a) == .addressFull)
        #expect(counts.admit(b) == nil)
        #expect(counts.total == 3)
        counts.release(a)
        #expect(counts.admit(a) == nil)
        counts.release(a)
        counts.release(a)
        counts.release(b)
        #expect(counts.total == 0)
        #expect(counts.byAddress.isEmpty)
    }

    @Test(
        "loopback clients are not counted per address unless the exemption is off; unknown addresses count in the total only"
    )
    func loopbackAndUnknown() throws {
        var counts = ConnectionCounts(limits: ConnectionLimits(maxConnections: 4, maxPerAddress: 1))
        #expect(counts.admit(.loopback) == nil)
        #expect(counts.admit(.loopback) == nil)
        #expect(counts.admit(nil) == nil)
        #expect(counts.byAddress.isEmpty)

        var limits = ConnectionLimits(maxPerAddress: 1)
        limits.exemptsLoopback = false
        var strict = ConnectionCounts(limits: limits)
        #expect(strict.admit(.loopback) == nil)
        #expect(strict.admit(.loopback) == .addressFull)
    }

    @Test("in all: the server's limit comes first; a refused connection counts nowhere")
    func total() throws {
        var counts = ConnectionCounts(limits: ConnectionLimits(maxConnections: 2, maxPerAddress: 5))
        let a = try Self.address("192.0.2.1")
        #expect(counts.admit(a) == nil)
        #expect(counts.admit(.loopback) == nil)
        #expect(counts.admit(a) == .serverFull)
        #expect(counts.byAddress[a] == 1)
        counts.release(.loopback)
        #expect(counts.admit(a) == nil)
        #expect(counts.byAddress[a] == 2)
    }
}
