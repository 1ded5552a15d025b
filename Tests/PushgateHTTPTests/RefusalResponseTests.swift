import Foundation
import NIOCore
import PushgateHTTP
import PushgateModel
import PushgateTransport
import Testing

/// The one error format, as every route renders a refusal.
@Suite("Refusal responses")
struct RefusalResponseTests {
    static func body(_ response: HTTPServerResponse) throws -> [String: Any] {
        let bytes = try #require(response.body)
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes.readableBytesView)) as? [String: Any])
    }

    @Test("status from the catalog, reason and detail in JSON, escaped")
    func plain() throws {
        let response = HTTPServerResponse.refusal(Refusal(.badTopic, "the topic \"x\ny\" is not registered"))
        #expect(response.head.status == 400)
        #expect(response.head.headers.first(name: "content-type") == "application/json")
        #expect(response.head.headers.first(name: "apns-id") == nil)
        let body = try Self.body(response)
        #expect(body["reason"] as? String == "BadTopic")
        #expect(body["detail"] as? String == "the topic \"x\ny\" is not registered")
        #expect(body["timestamp"] == nil)
    }

    @Test("410 carries its timestamp; provider answers carry apns-id")
    func unregistered() throws {
        let response = HTTPServerResponse.refusal(
            Refusal(.unregistered, "gone", timestamp: 1_700_000_000_000),
            apnsID: "id-1"
        )
        #expect(response.head.status == 410)
        #expect(response.head.headers.first(name: "apns-id") == "id-1")
        #expect(try Self.body(response)["timestamp"] as? Int == 1_700_000_000_000)
    }

    @Test("an error that is not a refusal is a 500 naming it")
    func otherError() throws {
        struct Broken: Error, CustomStringConvertible { var description: String { "broken thing" } }
        let response = HTTPServerResponse.refusal(for: Broken())
        #expect(response.head.status == 500)
        let body = try Self.body(response)
        #expect(body["reason"] as? String == "InternalServerError")
        #expect(body["detail"] as? String == "broken thing")
        #expect(HTTPServerResponse.refusal(for: Refusal.unauthorized).head.status == 401)
    }
}

/// What the transport refuses before a route sees the request is answered from the catalog too.
@Suite("Router: transport refusals")
struct RouterTransportRefusalTests {
    @Test("a body over its limit: 413 PayloadTooLarge in the one error format")
    func bodyTooLarge() throws {
        let response = HTTPServerResponse.refusal(Refusal(transport: .bodyTooLarge(limit: 5120)))
        #expect(response.head.status == 413)
        #expect(response.head.headers.first(name: "retry-after") == nil)
        let body = try RefusalResponseTests.body(response)
        #expect(body["reason"] as? String == "PayloadTooLarge")
        #expect(body["detail"] as? String == "request body larger than 5120 bytes")
    }

    @Test("the server's body budget spent (HTTP/1.1): 503 ServiceUnavailable, retry after a second")
    func bodyBudgetExhausted() throws {
        let response = HTTPServerResponse.refusal(Refusal(transport: .bodyBudgetExhausted))
        #expect(response.head.status == 503)
        #expect(response.head.headers.first(name: "retry-after") == "1")
        #expect(try RefusalResponseTests.body(response)["reason"] as? String == "ServiceUnavailable")
    }
}
