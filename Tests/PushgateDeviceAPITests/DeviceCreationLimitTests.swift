import NIOCore
import PushgateTransport
import Testing

@testable import PushgateDeviceAPI

@Suite("Device creation per client address: a token bucket an hour deep, with an injected clock")
struct DeviceCreationLimitTests {
    private let a = ClientAddress.v4(0xC000_0201)
    private let b = ClientAddress.v6Prefix(0x2001_0DB8_0000_0001)

    @Test(
        "an hour's allowance at once, then one per 3600/N seconds, with retry-after to the next one; other addresses unaffected"
    )
    func bucket() {
        var limit = DeviceCreationLimit(perHour: 4)
        for _ in 0..<4 { #expect(limit.take(a, nowMillis: 0) == .allowed) }
        #expect(limit.take(a, nowMillis: 0) == .refused(retryAfterSeconds: 900))
        #expect(limit.take(b, nowMillis: 0) == .allowed)
        #expect(limit.take(a, nowMillis: 899_000) == .refused(retryAfterSeconds: 1))
        #expect(limit.take(a, nowMillis: 900_000) == .allowed)
        #expect(limit.take(a, nowMillis: 900_000) == .refused(retryAfterSeconds: 900))
        // After an hour the bucket is full again, never fuller.
        for _ in 0..<4 { #expect(limit.take(a, nowMillis: 10 * 3_600_000) == .allowed) }
        #expect(limit.take(a, nowMillis: 10 * 3_600_000) != .allowed)
    }

    @Test("loopback and unknown addresses are not limited")
    func exempt() {
        var limit = DeviceCreationLimit(perHour: 1)
        for _ in 0..<10 {
            #expect(limit.take(.loopback, nowMillis: 0) == .allowed)
            #expect(limit.take(nil, nowMillis: 0) == .allowed)
        }
        #expect(limit.trackedAddresses == 0)
    }

    @Test("the table holds addresses until their bucket refills; full, new addresses wait for one to refill")
    func table() {
        var limit = DeviceCreationLimit(perHour: 2, maxAddresses: 2)
        #expect(limit.take(a, nowMillis: 0) == .allowed)
        #expect(limit.take(b, nowMillis: 1_000) == .allowed)
        let c = ClientAddress.v4(0xC000_0203)
        #expect(limit.take(c, nowMillis: 2_000) == .refused(retryAfterSeconds: 1800))
        // a refills (one token per 1,800 s) at 1,800 s and is forgotten; b is not full until 1,801 s.
        #expect(limit.take(c, nowMillis: 1_800_000) == .allowed)
        #expect(limit.trackedAddresses == 2)
    }
}
