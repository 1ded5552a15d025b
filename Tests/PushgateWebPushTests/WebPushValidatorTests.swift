import Foundation
import NIOCore
import PushgateCrypto
import PushgateDelivery
import PushgateModel
import Testing

@testable import PushgateWebPush

let origin = "https://push.example.com"
let now: Int64 = 1_800_000_000_000
let endpointToken = String(repeating: "ab", count: 32)

/// A VAPID `authorization` signed by `key` with these claims (and header), as an application
/// server writes it.
func vapid(
    _ key: ES256PrivateKey,
    audience: String? = origin,
    expires: Int64? = now / 1000 + 12 * 3600,
    header: String = #"{"typ":"JWT","alg":"ES256"}"#,
    extra: String = ""
) -> String {
    var claims: [String] = []
    if let audience { claims.append("\"aud\":\"\(audience)\"") }
    if let expires { claims.append("\"exp\":\(expires)") }
    claims.append(#""sub":"mailto:ops@example.com""#)
    let input =
        Base64URL.encode(Array(header.utf8)) + "."
        + Base64URL.encode(Array(("{" + claims.joined(separator: ",") + extra + "}").utf8))
    let token = input + "." + Base64URL.encode(key.sign(Array(input.utf8)))
    return "vapid t=\(token), k=\(Base64URL.encode(point(of: key)))"
}

/// The uncompressed point of an ES256 key, as VAPID's `k` carries it.
func point(of key: ES256PrivateKey) -> [UInt8] {
    let pem = key.publicKey.pemRepresentation
        .split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    let der = base64(pem)
    return Array(der.suffix(65))
}

private func base64(_ text: String) -> [UInt8] {
    Base64URL.decode(
        text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").filter { $0 != "=" }
    )!
}

func validate(
    _ headers: [(String, String)],
    body: [UInt8] = [],
    validator: WebPushRequestValidator = WebPushRequestValidator(uuidGenerator: { (1, 2) })
) -> WebPushSubmission {
    validator.validate(
        token: endpointToken,
        fields: WebPushHeaderFields(headers.map { (name: $0.0, value: $0.1) }),
        body: ByteBuffer(bytes: body),
        origin: origin,
        nowMillis: now
    )
}

extension WebPushSubmission {
    var refusal: Refusal? {
        if case .failure(let refusal) = message { return refusal }
        return nil
    }

    var accepted: WebPushMessage? { try? message.get() }

    var vapidRefusal: Refusal? {
        if case .invalid(let refusal) = vapid { return refusal }
        return nil
    }
}

@Suite("Web Push: the push resource's rules")
struct WebPushValidatorTests {
    @Test("a message: TTL kept, urgency normal by default, topic as the collapse id, the body as it came")
    func accepted() throws {
        let body: [UInt8] = [1, 2, 3]
        let submission = validate(
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", "news_1-A")],
            body: body
        )
        let message = try #require(submission.accepted)
        #expect(message.ttlSeconds == 60)
        #expect(message.expiration == .lifetime(seconds: 60))
        #expect(message.push.pushType == .webpush)
        #expect(message.push.urgency == .normal)
        #expect(message.push.collapseID == "news_1-A")
        #expect(message.push.payload == body)
        #expect(message.push.deviceToken == endpointToken)
        #expect(message.push.apnsID == UUIDText.v4((1, 2)))
        #expect(submission.vapid == .absent)
    }

    @Test("TTL 0 is now or never; a TTL past the maximum is kept as the maximum; one past Int64 too")
    func ttl() throws {
        #expect(try #require(validate([("ttl", "0")]).accepted).expiration == .immediately)
        let capped = WebPushRequestValidator(maxTTLSeconds: 100)
        #expect(try #require(validate([("ttl", "101")], validator: capped).accepted).ttlSeconds == 100)
        #expect(try #require(validate([("ttl", "99999999999999999999999")]).accepted).ttlSeconds == 28 * 24 * 3600)
        #expect(try #require(validate([("ttl", " 5 ")]).accepted).ttlSeconds == 5)
    }

    @Test(
        "each 400, with its reason",
        arguments: [
            ([], Refusal.Reason.badTTL),
            ([("ttl", "")], .badTTL),
            ([("ttl", "-1")], .badTTL),
            ([("ttl", "1.5")], .badTTL),
            ([("ttl", "60"), ("ttl", "60")], .badTTL),
            ([("ttl", "60"), ("urgency", "urgent")], .badUrgency),
            ([("ttl", "60"), ("urgency", "low, high")], .badUrgency),
            ([("ttl", "60"), ("urgency", "low"), ("urgency", "low")], .badUrgency),
            ([("ttl", "60"), ("topic", "")], .badMessageTopic),
            ([("ttl", "60"), ("topic", String(repeating: "a", count: 33))], .badMessageTopic),
            ([("ttl", "60"), ("topic", "a.b")], .badMessageTopic),
            ([("ttl", "60"), ("topic", "YQ==")], .badMessageTopic),
            ([("ttl", "60"), ("topic", "a"), ("topic", "b")], .badMessageTopic),
        ] as [([(String, String)], Refusal.Reason)]
    )
    func headerRefusals(_ headers: [(String, String)], _ reason: Refusal.Reason) {
        #expect(validate(headers).refusal?.reason == reason)
    }

    @Test("every urgency in any case; a topic of 32 characters")
    func urgencies() {
        for urgency in WebPushUrgency.allCases {
            #expect(
                validate([("ttl", "1"), ("urgency", urgency.rawValue.uppercased())]).accepted?.push.urgency == urgency
            )
        }
        let topic = String(repeating: "Z", count: 32)
        #expect(validate([("ttl", "1"), ("topic", topic)]).accepted?.push.collapseID == topic)
    }

    @Test("the body: at most 4096 bytes; a non-empty one needs Content-Encoding aes128gcm; an empty one needs nothing")
    func body() {
        let full = [UInt8](repeating: 7, count: 4096)
        #expect(validate([("ttl", "1"), ("content-encoding", "aes128gcm")], body: full).accepted != nil)
        let over = validate([("ttl", "1"), ("content-encoding", "aes128gcm")], body: full + [7]).refusal
        #expect(over?.reason == .payloadTooLarge)
        #expect(over?.status == 413)
        for encoding in [nil, "aesgcm", "gzip", "aes128gcm, gzip"] as [String?] {
            var headers = [("ttl", "1")]
            if let encoding { headers.append(("content-encoding", encoding)) }
            #expect(validate(headers, body: [1]).refusal?.reason == .badContentEncoding, "\(encoding ?? "none")")
        }
        #expect(
            validate([("ttl", "1"), ("content-encoding", "aes128gcm"), ("content-encoding", "aes128gcm")], body: [1])
                .refusal?.reason == .badContentEncoding
        )
        #expect(validate([("ttl", "1"), ("content-encoding", "gzip")]).accepted?.push.payload == [])
    }

    @Test("the rules go in order: TTL before Urgency before Topic before size before encoding")
    func order() {
        let big = [UInt8](repeating: 0, count: 5000)
        #expect(validate([("urgency", "x"), ("topic", "!")], body: big).refusal?.reason == .badTTL)
        #expect(validate([("ttl", "1"), ("urgency", "x"), ("topic", "!")], body: big).refusal?.reason == .badUrgency)
        #expect(validate([("ttl", "1"), ("topic", "!")], body: big).refusal?.reason == .badMessageTopic)
        #expect(validate([("ttl", "1")], body: big).refusal?.reason == .payloadTooLarge)
        // A VAPID verdict is made whatever the message's rules say: the shard orders them.
        let key = try! ES256PrivateKey.generate()
        let both = validate([("authorization", vapid(key, audience: "https://elsewhere"))], body: big)
        #expect(both.refusal?.reason == .badTTL)
        #expect(both.vapidRefusal?.reason == .badJwtToken)
    }

    @Test("the token of an endpoint's path: 64 hex digits in either case, nothing else")
    func paths() {
        #expect(WebPushRequestValidator.token(inPath: "/webpush/" + endpointToken.uppercased()) == endpointToken)
        for path in [
            "/webpush/", "/webpush/abc", "/webpush/" + endpointToken + "/", "/webpush/" + endpointToken + "?x=1",
            "/webpush/" + String(repeating: "g", count: 64), "/other/" + endpointToken,
        ] {
            #expect(WebPushRequestValidator.token(inPath: path) == nil, "\(path)")
        }
    }
}

@Suite("Web Push: VAPID (RFC 8292)")
struct VAPIDTests {
    let key = try! ES256PrivateKey.generate()

    func verdict(_ authorization: String) -> VAPIDVerdict {
        validate([("ttl", "1"), ("Authorization", authorization)]).vapid
    }

    @Test("a valid token: its key; padded or standard-alphabet k too; the origin compared in one spelling")
    func valid() {
        #expect(verdict(vapid(key)) == .valid(key: point(of: key)))
        let padded = vapid(key).replacingOccurrences(of: "k=", with: "k=") + "="
        #expect(verdict(padded) == .valid(key: point(of: key)))
        #expect(verdict(vapid(key, audience: "https://PUSH.example.com:443/")) == .valid(key: point(of: key)))
        #expect(verdict("VAPID  " + vapid(key).dropFirst(6) + ", x=y") == .valid(key: point(of: key)))
    }

    @Test(
        "each way a token fails is 403 BadJwtToken",
        arguments: [
            "aud is", "expired", "24 hours", "no aud", "no exp", "alg", "crit", "twice", "sub", "signature", "scheme",
            "no t=", "no k=", "k is not", "three",
        ]
    )
    func invalid(_ what: String) throws {
        let other = try ES256PrivateKey.generate()
        let header: String
        switch what {
        case "aud is": header = vapid(key, audience: "https://evil.example.com")
        case "expired": header = vapid(key, expires: now / 1000)
        case "24 hours": header = vapid(key, expires: now / 1000 + 48 * 3600)
        case "no aud": header = vapid(key, audience: nil)
        case "no exp": header = vapid(key, expires: nil)
        case "alg": header = vapid(key, header: #"{"alg":"HS256"}"#)
        case "crit": header = vapid(key, header: #"{"alg":"ES256","crit":["x"]}"#)
        case "twice": header = vapid(key, extra: #","aud":"https://evil.example.com""#)
        case "sub": header = vapid(key, extra: ",\"sub\":1").replacingOccurrences(of: "mailto", with: "x")
        case "signature":
            let good = vapid(key)
            header = String(good[..<good.range(of: ", k=")!.lowerBound]) + ", k=" + Base64URL.encode(point(of: other))
        case "scheme": header = "WebPush " + vapid(key).dropFirst(6)
        case "no t=": header = "vapid k=" + Base64URL.encode(point(of: key))
        case "no k=": header = String(vapid(key).split(separator: ",")[0])
        case "k is not": header = "vapid t=a.b.c, k=AAAA"
        default: header = "vapid t=a.b, k=" + Base64URL.encode(point(of: key))
        }
        guard case .invalid(let refusal) = verdict(header) else {
            Issue.record("\(what): accepted \(header)")
            return
        }
        #expect(refusal.reason == .badJwtToken)
        #expect(refusal.status == 403)
        if ["aud is", "expired", "24 hours", "no aud", "no exp", "alg", "crit", "twice", "no t=", "no k="].contains(
            what
        ) {
            #expect(refusal.detail.contains(what), "\(what): \(refusal.detail)")
        }
    }

    @Test("exp may be 24 hours and a minute ahead, not more")
    func lifetime() {
        let claims = { (seconds: Int64) in VAPIDClaims(audience: origin, expiresAt: now / 1000 + seconds) }
        #expect(claims(24 * 3600 + 60).check(origin: origin, nowMillis: now) == nil)
        #expect(claims(24 * 3600 + 61).check(origin: origin, nowMillis: now)?.reason == .badJwtToken)
        #expect(claims(1).check(origin: origin, nowMillis: now) == nil)
        #expect(claims(0).check(origin: origin, nowMillis: now)?.reason == .badJwtToken)
    }

    @Test("a connection remembers a verified token: its claims are checked again, its signature not")
    func remembered() throws {
        let verified = VerifiedVAPIDTokens()
        let header = vapid(key)
        #expect(try verified.verify(header).get().claims.audience == origin)
        #expect(try verified.verify(header).get().key == point(of: key))
        let other = Base64URL.encode(point(of: try ES256PrivateKey.generate()))
        let forged = String(header[..<header.range(of: "k=")!.upperBound]) + other
        #expect(throws: Refusal.self) { try verified.verify(forged).get() }
    }
}
