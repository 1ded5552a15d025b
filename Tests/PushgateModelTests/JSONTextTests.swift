import Foundation
import PushgateModel
import Testing

@Suite("JSON text")
struct JSONTextTests {
    @Test(
        "quoted strings are JSON strings a parser reads back exactly",
        arguments: [
            "plain", "with \"quotes\" and \\ backslash", "line\nbreak\r\ttab", "\u{01}\u{1f}", "é ✓ 🚀", "",
        ]
    )
    func roundTrip(_ text: String) throws {
        let parsed =
            try JSONSerialization.jsonObject(with: Data(JSONText.object(["k": text]).utf8)) as? [String: String]
        #expect(parsed == ["k": text])
    }
}
