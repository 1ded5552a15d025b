import PushgateTestKit
import Testing

/// Sequence numbers sent back by agents (ack `upTo`, a fetch result's `seq`, `Last-Event-ID`)
/// are whole numbers up to 2^63 - 1, the largest the store keeps; beyond, or negative, or a
/// fraction, is a 400 that names the range (schemathesis found 2^63 acked with 204, and -1 or
/// 1e20 answered "not valid JSON").
@Suite("Sequence numbers from agents: bounded at 2^63 - 1, refusals that say so", .timeLimit(.minutes(1)))
struct SequenceNumberTests {
    @Test(
        "upTo, seq and last-event-id beyond 2^63 - 1, negative or fractional: 400 naming the range; 2^63 - 1 is taken"
    )
    func bounds() async throws {
        try await withGateway { gateway in
            let api = try await API(gateway)
            let device = try await api.createDevice()
            let range = "a whole number from 0 to 9223372036854775807"

            #expect(try await api.ack(device, upTo: 9_223_372_036_854_775_807).status == 204)
            for body in [
                #"{"upTo":9223372036854775808}"#, #"{ "upTo": 18446744073709551615 }"#, #"{"upTo":-1}"#,
                #"{"upTo":1.5}"#, #"{"upTo":1e20}"#,
            ] {
                let reply = try await api.device(device, "POST", "ack", body: body)
                #expect(reply.status == 400, "\(body): \(reply.status) \(reply.text)")
                #expect(reply.json["reason"] as? String == "BadRequest", "\(body): \(reply.text)")
                #expect((reply.json["detail"] as? String)?.contains(range) == true, "\(body): \(reply.text)")
            }
            let broken = try await api.device(device, "POST", "ack", body: #"{"upTo":"#)
            #expect(broken.status == 400 && broken.text.contains("not valid JSON ("), "\(broken.text)")

            let fetch = try await api.device(
                device,
                "POST",
                "fetch-results",
                body: #"{"results":[{"seq":9223372036854775808,"result":"newData"}]}"#
            )
            #expect(fetch.status == 400 && fetch.json["reason"] as? String == "BadRequest", "\(fetch.text)")
            #expect((fetch.json["detail"] as? String)?.contains(range) == true, "\(fetch.text)")

            let stream = try await api.device(
                device,
                "GET",
                "events",
                headers: [("last-event-id", "9223372036854775808")]
            )
            #expect(stream.status == 400 && stream.json["reason"] as? String == "BadLastEventId", "\(stream.text)")
            #expect((stream.json["detail"] as? String)?.contains(range) == true, "\(stream.text)")
            await api.close()
        }
    }
}
