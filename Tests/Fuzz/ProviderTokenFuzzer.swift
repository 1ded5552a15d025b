// Fuzz target 2: the provider token (APNs JWT) parser and its signature check
// (Tests/Fuzz/run.sh provider-token).
//
// The keyring holds two keys of the test fixtures (Tests/Fixtures/tls/*-key.pem are P-256
// PKCS#8 keys, what an APNs .p8 is): KEY0000001 of team TEAM000001 for com.example.app, and
// KEY0000002 of team TEAM000002, development only, for org.example.app, on a production gateway.
//
// Input, by its first byte:
// - even: the rest is an `authorization` header value, as sent (the seeds are real tokens,
//   signed with the fixture key, for mutations to break apart);
// - odd: the rest is `HEADER LF CLAIMS` (JSON texts) that the harness encodes and signs with
//   KEY0000001's private key, so that the signature holds whatever the JSON says and the checks
//   after it (alg, crit, kid, iss, iat, environment, topic) are reached.
// Each token is tried twice on one connection, the second time a minute later (the cache).
//
// Checked beyond "does not crash": a token is authorized only when its header, read by
// Foundation, says alg ES256 and a configured kid without crit, and its claims name that key's
// team and an iat (a whole number) within the hour before now or a minute after it.
import Foundation
import PushgateCrypto
import PushgateModel
import PushgateProviderAuth

private let now: Int64 = 1_700_000_000_000
private let signingKey = try! ES256PrivateKey(pem: fixture("tls/client-key.pem"))
private let otherKey = try! ES256PrivateKey(pem: fixture("tls/other-ca-key.pem"))
private let keyring = try! ProviderKeyring(
    keys: [
        ProviderKey(
            teamID: "TEAM000001",
            keyID: "KEY0000001",
            publicKey: signingKey.publicKey,
            topics: ["com.example.app"]
        ),
        ProviderKey(
            teamID: "TEAM000002",
            keyID: "KEY0000002",
            publicKey: otherKey.publicKey,
            topics: ["org.example.app"],
            environment: .development
        ),
    ],
    environment: .production
)
private let teams = ["KEY0000001": "TEAM000001", "KEY0000002": "TEAM000002"]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var reader = FuzzReader(UnsafeBufferPointer(start: data, count: size))
    let signs = reader.byte() & 1 == 1
    let rest = reader.rest()
    let authorization: String
    if signs {
        let newline = rest.firstIndex(of: 0x0A) ?? rest.endIndex
        let header = rest[..<newline]
        let claims = newline < rest.endIndex ? rest[(newline + 1)...] : []
        let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        authorization = "bearer " + input + "." + Base64URL.encode(signingKey.sign(input.utf8))
    } else {
        authorization = String(decoding: rest, as: UTF8.self)
    }

    var connection = ProviderConnectionAuth(keyring: keyring)
    for (offset, topic) in [(0, "com.example.app"), (60_000, "org.example.app")] {
        let result = connection.authorize(authorization: authorization, topic: topic, nowMillis: now + Int64(offset))
        if case .success(let provider) = result {
            checkAuthorized(authorization, provider, atMillis: now + Int64(offset))
        }
    }
    return 0
}

/// What an authorized token must say, read independently with Foundation.
private func checkAuthorized(_ authorization: String, _ provider: AuthorizedProvider, atMillis nowMillis: Int64) {
    let parts = authorization.split(separator: " ", maxSplits: 1)
    check(parts.count == 2 && parts[0].lowercased() == "bearer", "authorized without a bearer scheme: \(authorization)")
    let segments = parts[1].split(separator: ".", omittingEmptySubsequences: false)
    check(segments.count == 3, "authorized a token of \(segments.count) parts")
    guard let header = object(segments[0]), let claims = object(segments[1]) else {
        fail("authorized a token whose header or claims Foundation cannot read: \(authorization)")
    }
    check(header["alg"] as? String == "ES256", "authorized alg \(String(describing: header["alg"]))")
    check(header["crit"] == nil, "authorized a token with crit")
    guard let kid = header["kid"] as? String, let team = teams[kid] else {
        fail("authorized unknown kid \(String(describing: header["kid"]))")
    }
    check(kid == "KEY0000001", "authorized a development key on a production gateway")
    check(claims["iss"] as? String == team, "authorized iss \(String(describing: claims["iss"])) for team \(team)")
    guard let iat = (claims["iat"] as? NSNumber)?.doubleValue, iat == iat.rounded() else {
        fail("authorized iat \(String(describing: claims["iat"]))")
    }
    let seconds = Double(nowMillis) / 1000
    check(iat >= seconds - 3600 - 1 && iat <= seconds + 60, "authorized iat \(iat) at \(seconds)")
    check(provider.identity == .token(teamID: team, keyID: kid), "identity \(provider.identity)")
    check(provider.topic == "com.example.app", "authorized topic \(provider.topic)")
}

private func object(_ segment: Substring) -> [String: Any]? {
    var base64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    guard let data = Data(base64Encoded: base64) else { return nil }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
}
