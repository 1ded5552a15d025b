import PushgateTransport
import Testing

@Suite("Listen addresses")
struct ListenAddressTests {
    @Test(
        "HOST:PORT, IPv6 in brackets",
        arguments: [
            ("127.0.0.1:2197", "127.0.0.1", 2197, "127.0.0.1:2197"),
            ("[::1]:0", "::1", 0, "[::1]:0"),
            ("localhost:65535", "localhost", 65535, "localhost:65535"),
        ]
    )
    func valid(text: String, host: String, port: Int, written: String) throws {
        let address = try #require(ListenAddress(text))
        #expect(address.host == host)
        #expect(address.port == port)
        #expect(address.description == written)
    }

    @Test(
        "refused: no port, a port out of range, an unbracketed IPv6 host, no host",
        arguments: [
            "127.0.0.1", "127.0.0.1:65536", "::1:2197", ":2197", "[::1]2197", "host:-1",
        ]
    )
    func invalid(text: String) {
        #expect(ListenAddress(text) == nil)
    }
}
