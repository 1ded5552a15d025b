// Fuzz target 7: a push to a Web Push endpoint, its header fields and VAPID (Tests/Fuzz/run.sh
// webpush-request).
//
// Input, by its first byte:
// - even: the rest is header lines (`Name: value`, LF-separated), an empty line, then the body,
//   as a sender wrote them (the seeds carry real VAPID headers, for mutations to break apart);
// - odd: the rest is `HEADER LF CLAIMS` (JSON texts) that the harness encodes and signs with a
//   fixture key into `authorization: vapid t=..., k=...`, so that the signature holds whatever
//   the JSON says and the checks after it (alg, crit, aud, exp, duplicates) are reached; the
//   message itself is then a valid one.
// Each request is validated twice on one connection's memory of verified tokens.
//
// Checked beyond "does not crash": an accepted message has a TTL of digits, an Urgency of the
// four, a Topic of 1 to 32 base64url characters, a body of at most 4096 bytes that is empty or
// declared aes128gcm, each header once; a valid VAPID verdict comes from a vapid header whose
// k is the signer's and whose JWT, read by Foundation, says ES256 without crit, this endpoint's
// origin and an exp within a day (and a minute) after now.
import Foundation
import NIOCore
import PushgateCrypto
import PushgateDelivery
import PushgateModel

@testable import PushgateWebPush

private let now: Int64 = 1_700_000_000_000
private let origin = "https://push.example.com"
private let signingKey = try! ES256PrivateKey(pem: fixture("tls/client-key.pem"))
private let signingPoint: [UInt8] = {
    let der = signingKey.publicKey.pemRepresentation.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    return Array(Data(base64Encoded: der)!.suffix(65))
}()
private let validator = WebPushRequestValidator(maxTTLSeconds: 86_400, uuidGenerator: { (1, 2) })
private let token = String(repeating: "ab", count: 32)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var reader = FuzzReader(UnsafeBufferPointer(start: data, count: size))
    let signs = reader.byte() & 1 == 1
    let rest = reader.rest()
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    if signs {
        let newline = rest.firstIndex(of: 0x0A) ?? rest.endIndex
        let header = rest[..<newline]
        let claims = newline < rest.endIndex ? rest[(newline + 1)...] : []
        let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let jwt = input + "." + Base64URL.encode(signingKey.sign(input.utf8))
        headers = [("TTL", "60"), ("authorization", "vapid t=\(jwt), k=\(Base64URL.encode(signingPoint))")]
    } else {
        var lines = rest.split(separator: 0x0A, omittingEmptySubsequences: false)[...]
        while let line = lines.popFirst(), !line.isEmpty {
            let text = String(decoding: line, as: UTF8.self)
            guard let colon = text.firstIndex(of: ":") else { continue }
            headers.append(
                (String(text[..<colon]), String(text[text.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
            )
        }
        body = Array(lines.joined(separator: [0x0A]))
    }
    let verified = VerifiedVAPIDTokens()
    for _ in 0..<2 {
        let submission = validator.validate(
            token: token,
            fields: WebPushHeaderFields(headers),
            body: ByteBuffer(bytes: body),
            origin: origin,
            nowMillis: now,
            verify: verified.verify
        )
        if case .success(let message) = submission.message { checkAccepted(message, headers, body) }
        if case .valid(let key) = submission.vapid { checkVAPID(key, headers) }
    }
    return 0
}

private func values(_ name: String, _ headers: [(name: String, value: String)]) -> [String] {
    headers.filter { $0.name.lowercased() == name }.map(\.value)
}

private func checkAccepted(_ message: WebPushMessage, _ headers: [(name: String, value: String)], _ body: [UInt8]) {
    let ttl = values("ttl", headers)
    check(ttl.count == 1, "accepted \(ttl.count) TTL fields")
    let digits = ttl[0].trimmingCharacters(in: .whitespaces)
    check(!digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isNumber }, "accepted TTL \(ttl[0])")
    check(message.ttlSeconds <= 86_400, "kept TTL \(message.ttlSeconds) past the maximum")
    let urgency = values("urgency", headers)
    check(urgency.count <= 1, "accepted \(urgency.count) Urgency fields")
    if let value = urgency.first {
        check(
            ["very-low", "low", "normal", "high"].contains(value.trimmingCharacters(in: .whitespaces).lowercased()),
            "accepted Urgency \(value)"
        )
    } else {
        check(message.push.urgency == .normal, "no Urgency is normal, got \(String(describing: message.push.urgency))")
    }
    let topic = values("topic", headers)
    check(topic.count <= 1, "accepted \(topic.count) Topic fields")
    if let collapse = message.push.collapseID {
        check(
            (1...32).contains(collapse.utf8.count)
                && collapse.unicodeScalars.allSatisfy {
                    $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_")
                },
            "accepted Topic \(collapse)"
        )
    }
    check(body.count <= 4096, "accepted a body of \(body.count) bytes")
    check(message.push.payload == body, "the body changed on the way")
    if !body.isEmpty {
        let encoding = values("content-encoding", headers)
        check(
            encoding.count == 1 && encoding[0].trimmingCharacters(in: .whitespaces).lowercased() == "aes128gcm",
            "accepted a body with Content-Encoding \(encoding)"
        )
    }
}

private func checkVAPID(_ key: [UInt8], _ headers: [(name: String, value: String)]) {
    guard let authorization = values("authorization", headers).first else { fail("a valid verdict without a header") }
    check(authorization.trimmingCharacters(in: .whitespaces).lowercased().hasPrefix("vapid"), "valid \(authorization)")
    check(ES256PublicKey(uncompressedPoint: key) != nil, "a valid verdict for a key off the curve")
    guard let t = authorization.range(of: "t=") else { fail("valid without t=: \(authorization)") }
    let jwt = authorization[t.upperBound...].prefix { $0 != "," && $0 != " " }
    let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
    check(parts.count == 3, "valid JWT of \(parts.count) parts")
    guard let header = object(parts[0]), let claims = object(parts[1]) else {
        fail("valid JWT whose header or claims Foundation cannot read: \(jwt)")
    }
    check(header["alg"] as? String == "ES256" && header["crit"] == nil, "valid header \(header)")
    check(
        (claims["aud"] as? String).map(WebPushEndpoint.normalized) == origin,
        "valid aud \(String(describing: claims["aud"]))"
    )
    guard let exp = (claims["exp"] as? NSNumber)?.int64Value else {
        fail("valid exp \(String(describing: claims["exp"]))")
    }
    check(exp > now / 1000 && exp <= now / 1000 + 86_400 + 60, "valid exp \(exp)")
}

private func object(_ segment: Substring) -> [String: Any]? {
    var base64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    guard let data = Data(base64Encoded: base64) else { return nil }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
}
