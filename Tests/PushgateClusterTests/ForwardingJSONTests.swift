import NIOCore
import PushgateDelivery
import PushgateModel
import Testing

@testable import PushgateClusterNode

/// What one node hands another for a device's owner, and the owner's answer, read back as
/// written, and read as nodes that wrote them with Foundation's coders do.
@Suite("Cluster node: forwarded work and answers in JSON")
struct ForwardingJSONTests {
    static let token = String(repeating: "ab", count: 32)

    static func push(collapseID: String?, urgency: WebPushUrgency?) -> Push {
        Push(
            deviceToken: token,
            apnsID: "6E1D8C1A-27B5-4F27-A0F4-4C4C1F5E6C0B",
            topic: "com.example.\"quoted\"\\app",
            pushType: .alert,
            priority: .high,
            collapseID: collapseID,
            payload: Array(#"{"aps":{"alert":"h\u00e9llo\n"}}"#.utf8) + [0, 255],
            urgency: urgency
        )
    }

    @Test(
        "a push and its expiration come back as sent, with or without the optional fields",
        arguments: [
            (Expiration.defaultLifetime, nil, nil), (.immediately, "c1", nil),
            (.at(epochSeconds: 1_900_000_000), nil, .low),
            (.lifetime(seconds: 60), "c2", .veryLow),
        ] as [(Expiration, String?, WebPushUrgency?)]
    )
    func pushRoundTrip(expiration: Expiration, collapseID: String?, urgency: WebPushUrgency?) throws {
        let work = ForwardedWork(push: Self.push(collapseID: collapseID, urgency: urgency), expiration: expiration)
        let read = try #require(ForwardedWork(json: work.json))
        #expect(read.id == work.id)
        let (push, readExpiration) = try #require(read.decodedPush())
        #expect(push == Self.push(collapseID: collapseID, urgency: urgency))
        #expect(readExpiration == expiration)
    }

    @Test("a Web Push submission comes back as sent: a message or its refusal, each VAPID verdict")
    func webPushRoundTrip() throws {
        let message = WebPushMessage(push: Self.push(collapseID: "topic", urgency: .high), ttlSeconds: 3_600)
        let refusal = Refusal(.badRequest, "the TTL header is \"x\"", timestamp: 12, retryAfterSeconds: 3)
        for submission in [
            WebPushSubmission(token: Self.token, message: .success(message), vapid: .absent),
            WebPushSubmission(token: Self.token, message: .success(message), vapid: .valid(key: [4, 1, 2, 255])),
            WebPushSubmission(
                token: Self.token,
                message: .failure(refusal),
                vapid: .invalid(Refusal(.forbidden, "bad"))
            ),
        ] {
            let read = try #require(ForwardedWork(json: ForwardedWork(webPush: submission).json))
            #expect(read.webPush?.decoded() == submission)
        }
    }

    @Test("answers come back as sent: a disposition, a Web Push acceptance, a refusal")
    func answers() throws {
        let delivered = try #require(ForwardedAnswer(json: ForwardedAnswer(disposition: .delivered).json))
        #expect(try delivered.decodedDisposition() == .delivered)
        let acceptance = WebPushAcceptance(messageID: "m-1", ttlSeconds: 60, disposition: .stored)
        let accepted = try #require(ForwardedAnswer(json: ForwardedAnswer(acceptance).json))
        #expect(try accepted.webPushAcceptance() == acceptance)
        let refusal = Refusal(.serviceUnavailable, "retry \"soon\"", retryAfterSeconds: 1)
        let refused = try #require(ForwardedAnswer(json: ForwardedAnswer(refusal: WireRefusal(refusal)).json))
        #expect(throws: refusal) { try refused.decodedDisposition() }
    }

    @Test("JSON as Foundation's coders wrote it (members in any order, nil left out or null) is read")
    func foundationWritten() throws {
        let work = try #require(
            ForwardedWork(
                json: ByteBuffer(
                    string: """
                        {"expiration":"for:30","push":{"pushType":"background","priority":5,"token":"\(Self.token)",\
                        "apnsID":"A","topic":"t","payload":"e30=","collapseID":null},"id":"w-1","webPush":null}
                        """
                )
            )
        )
        #expect(work.id == "w-1")
        let (push, expiration) = try #require(work.decodedPush())
        #expect(push.pushType == .background && push.priority == .normal && push.collapseID == nil)
        #expect(push.payload == Array("{}".utf8))
        #expect(expiration == .lifetime(seconds: 30))
        let answer = try #require(ForwardedAnswer(json: ByteBuffer(string: #"{"disposition":"held"}"#)))
        #expect(try answer.decodedDisposition() == .held)
    }

    @Test(
        "what is not forwarded work is refused, not misread",
        arguments: [
            "", "[]", #"{"push":{}}"#, #"{"id":1}"#,
            #"{"id":"w","push":{"token":"t","apnsID":"a","topic":"t","pushType":"alert","priority":300,"payload":""}}"#,
            #"{"id":"w","expiration":5}"#,
        ]
    )
    func refused(text: String) {
        #expect(ForwardedWork(json: ByteBuffer(string: text)) == nil)
    }
}
