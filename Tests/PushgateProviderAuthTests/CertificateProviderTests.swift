import PushgateModel
import Testing

@testable import PushgateProviderAuth

@Suite("client-certificate providers")
struct CertificateProviderTests {
    static let subject = "UID=com.example.app,CN=Apple Push Services: com.example.app,OU=TEAM000001,O=Example Inc,C=US"
    let certificate = CertificateProvider(userID: "com.example.app", subject: Self.subject)

    @Test(
        "the UID's bundle id and its push-type forms are allowed",
        arguments: [
            "com.example.app", "com.example.app.voip", "com.example.app.complication",
            "com.example.app.pushkit.fileprovider",
            "com.example.app.voip-ptt", "com.example.app.push-type.widgets", "com.example.app.push-type.controls",
        ]
    )
    func allowed(topic: String) {
        let result = certificate.authorize(topic: topic)
        #expect(result.authorized == AuthorizedProvider(identity: .certificate(subject: Self.subject), topic: topic))
    }

    @Test("without apns-topic, the certificate's bundle id is the topic")
    func impliedTopic() {
        #expect(certificate.authorize(topic: nil).authorized?.topic == "com.example.app")
        #expect(certificate.bundleID == "com.example.app")
    }

    @Test(
        "other topics are TopicDisallowed; token-only push types say so",
        arguments: [
            ("com.example.other", "may not push to topic \"com.example.other\""),
            ("com.example.ap", "may not push to topic"),
            ("com.example.app.unknown", "may not push to topic"),
            ("com.example.app.location-query", "needs token authentication"),
            ("com.example.app.push-type.liveactivity", "needs token authentication"),
        ]
    )
    func disallowed(topic: String, detail: String) {
        let refusal = certificate.authorize(topic: topic).refusal
        #expect(refusal?.status == 400)
        #expect(refusal?.reason == .topicDisallowed)
        #expect(refusal?.detail.contains(detail) == true, "\(String(describing: refusal))")
    }

    @Test(
        "a certificate without a usable UID is BadCertificate, naming its subject",
        arguments: [
            (nil, "has no UID attribute"),
            ("", "not a bundle id"),
            ("com example app", "not a bundle id"),
        ] as [(String?, String)]
    )
    func badCertificate(userID: String?, detail: String) {
        let certificate = CertificateProvider(userID: userID, subject: "CN=someone,O=Example Inc")
        #expect(certificate.bundleID == nil)
        for topic in ["com.example.app", nil] {
            let refusal = certificate.authorize(topic: topic).refusal
            #expect(refusal?.status == 403)
            #expect(refusal?.reason == .badCertificate)
            #expect(refusal?.detail.contains("\"CN=someone,O=Example Inc\"") == true)
            #expect(refusal?.detail.contains(detail) == true, "\(String(describing: refusal))")
        }
    }
}
