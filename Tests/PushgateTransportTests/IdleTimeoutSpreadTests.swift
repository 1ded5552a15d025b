import NIOCore
import Testing

@testable import PushgateTransport

@Suite("Idle timeouts spread per connection")
struct IdleTimeoutSpreadTests {
    @Test(
        "each connection's idle timeouts are stretched by one draw within the spread; without a spread they are exact"
    )
    func spread() {
        var configuration = HTTP2ServerConfiguration()
        configuration.idleTimeout = .seconds(300)
        configuration.unauthenticatedIdleTimeout = .seconds(16)
        #expect(configuration.idleTimeoutsOfOneConnection().idle == .seconds(300))
        #expect(configuration.idleTimeoutsOfOneConnection().unauthenticated == .seconds(16))
        configuration.idleTimeoutSpread = 0.25
        let drawn = (0..<1000).map { _ in configuration.idleTimeoutsOfOneConnection() }
        for (idle, unauthenticated) in drawn {
            let idle = idle!.nanoseconds
            let unauthenticated = unauthenticated!.nanoseconds
            #expect(idle >= 300_000_000_000 && idle <= 375_000_000_000)
            #expect(unauthenticated >= 16_000_000_000 && unauthenticated <= 20_000_000_000)
            // One draw for both: the same stretch.
            #expect(abs(Double(idle) / 300 - Double(unauthenticated) / 16) < 2)
        }
        #expect(
            Set(drawn.map { $0.unauthenticated!.nanoseconds / 1_000_000 }).count > 100,
            "spread over the quarter, not one value"
        )
    }

    @Test("a timeout near TimeAmount's limit stretches to the limit instead of trapping the connection")
    func nearTheLimit() {
        var configuration = HTTP2ServerConfiguration()
        configuration.idleTimeout = .nanoseconds(.max)
        configuration.unauthenticatedIdleTimeout = .nanoseconds(Int64.max / 5 * 4)
        configuration.idleTimeoutSpread = 0.25
        for _ in 0..<100 {
            let (idle, unauthenticated) = configuration.idleTimeoutsOfOneConnection()
            #expect(idle == .nanoseconds(.max))
            #expect(unauthenticated!.nanoseconds >= Int64.max / 5 * 4)
        }
    }
}
