import NIOCore
@testable import PushgateDelivery
import Testing

@Suite("Event stream encoding")
struct EventStreamEncoderTests {
    @Test("numbers are written as decimal digits", arguments: [0, 7, 10, 1_700_000_000_123, UInt64.max])
    func decimal(_ value: UInt64) {
        var buffer = ByteBuffer()
        EventStreamEncoder.writeDecimal(value, into: &buffer)
        #expect(String(buffer: buffer) == String(value))
    }
}
