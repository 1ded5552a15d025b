import Foundation
import PushgateCrypto
import Testing

@Suite("base64url without padding")
struct Base64URLTests {
    @Test(
        "RFC 4648 test vectors, unpadded",
        arguments: [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ]
    )
    func vectors(plain: String, encoded: String) {
        #expect(Base64URL.encode(plain.utf8) == encoded)
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test("the URL-safe alphabet: - and _ where standard base64 has + and /")
    func urlAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    @Test("agrees with Foundation's base64 on every length up to 70 bytes")
    func agreesWithFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(Base64URL.decode(expected) == bytes)
        }
    }

    @Test(
        "strict decoding rejects",
        arguments: [
            "Zg==",  // padding
            "Zg=",
            "Zm9v+A",  // standard alphabet
            "Zm9v/A",
            "Zm9v YQ",  // whitespace
            "Zm9v\nYQ",
            "Zm9vY",  // one dangling character cannot hold a byte
            "Zh",  // "f" is "Zg": non-zero unused bits
            "Zm9", "Zm-",  // "fo" is "Zm8"
            "Zm9vé",
        ]
    )
    func rejects(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("decodes from a substring without copying it first")
    func substring() {
        let token = "Zm9v.YmFy"
        let parts = token.split(separator: ".")
        #expect(Base64URL.decode(parts[0]) == Array("foo".utf8))
        #expect(Base64URL.decode(parts[1]) == Array("bar".utf8))
    }
}
