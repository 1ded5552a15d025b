import PushgateModel
import Testing

/// `authorization: bearer <credential>`, as provider tokens and device secrets alike are read.
@Suite("Bearer credentials")
struct BearerCredentialTests {
    @Test(
        "scheme in any case, blanks trimmed, nothing else accepted",
        arguments: [
            ("bearer abc", String?.some("abc")),
            ("Bearer abc", "abc"),
            ("BEARER  abc \t", "abc"),
            ("\tbearer abc", nil),
            ("bearer\tabc", nil),
            (" bearer abc", nil),
            ("bearer", nil),
            ("bearer ", nil),
            ("bearerabc", nil),
            ("basic abc", nil),
            ("bear abc", nil),
            ("", nil),
        ]
    )
    func credential(header: String, expected: String?) {
        #expect(BearerCredential.credential(in: header).map(String.init) == expected)
    }

    @Test("what is wrong, for a provider token's refusal")
    func verdicts() {
        #expect(BearerCredential(header: "Basic dXNlcg==") == .otherScheme("Basic"))
        #expect(BearerCredential(header: "") == .otherScheme(""))
        #expect(BearerCredential(header: "bearer   ") == .empty)
        #expect(BearerCredential(header: "bearer a.b.c") == .credential("a.b.c"))
        #expect(BearerCredential.credential(in: nil) == nil)
    }
}
