import NIOCore
import PushgateModel
import Testing

@testable import PushgateProviderAPI

@Test func minimalAlertIsAcceptedExactly() {
    let source = BitsSource()
    let outcome = base.validate(with: makeValidator(source))
    let expected = Push(
        deviceToken: sampleToken,
        apnsID: fixedGeneratedID,
        topic: "com.example.app",
        pushType: .alert,
        priority: .high,
        collapseID: nil,
        payload: bytes(#"{"aps":{"alert":"Hello"}}"#)
    )
    #expect(outcome == .accepted(expected, expiration: .defaultLifetime))
    #expect(outcome.apnsID == fixedGeneratedID)
    #expect(source.callCount == 1)
}

@Test func everyHeaderIsCarriedOver() {
    let source = BitsSource()
    let outcome =
        base
        .header("apns-id", "123E4567-E89B-12D3-A456-4266554400A0")
        .header("apns-push-type", "alert")
        .header("apns-priority", "5")
        .header("apns-expiration", "1700000000")
        .header("apns-collapse-id", "score")
        .adding("authorization", "bearer x")
        .adding("user-agent", "test")
        .path("/3/device/" + sampleToken.uppercased())
        .validate(with: makeValidator(source))
    let push = expectAccepted(outcome)
    #expect(acceptedExpiration(outcome) == .at(epochSeconds: 1_700_000_000))
    #expect(push?.deviceToken == sampleToken)
    #expect(push?.apnsID == "123e4567-e89b-12d3-a456-4266554400a0")
    #expect(push?.priority == .normal)
    #expect(push?.collapseID == "score")
    #expect(push?.pushType.pushClass == .regular)
    #expect(source.callCount == 0, "no apns-id is generated when the request has one")
}

struct TypeCase: Sendable, CustomTestStringConvertible {
    var type: PushType
    var topic: String
    var body: String
    var priority: String?
    var testDescription: String { type.rawValue }
}

let happyTypeCases: [TypeCase] = PushType.apnsTypes.map { type in
    switch type {
    case .background:
        return TypeCase(
            type: type,
            topic: "com.example.app",
            body: #"{"aps":{"content-available":1},"acme":42}"#,
            priority: "5"
        )
    case .alert:
        return TypeCase(
            type: type,
            topic: "com.example.app",
            body: #"{"aps":{"alert":{"title":"Hi","body":"There"},"sound":"default"}}"#
        )
    case .mdm:
        return TypeCase(
            type: type,
            topic: "com.apple.mgmt.External.1b2c3d4e-0000-1111-2222-333344445555",
            body: #"{"mdm":"abc"}"#
        )
    case .voip:
        return TypeCase(type: type, topic: "com.example.app.voip", body: #"{"caller":"Ann"}"#)
    default:
        return TypeCase(
            type: type,
            topic: "com.example.app" + type.topicSuffix!,
            body: #"{"aps":{"alert":"x","content-state":{}}}"#
        )
    }
}

@Test(arguments: happyTypeCases)
func eachPushTypeWithItsTopic(_ c: TypeCase) {
    var request = base.header("apns-push-type", c.type.rawValue).header("apns-topic", c.topic).body(c.body)
    if let priority = c.priority { request = request.header("apns-priority", priority) }
    let push = expectAccepted(request.validate())
    #expect(push?.pushType == c.type)
    #expect(push?.topic == c.topic)
    #expect(push?.payload == bytes(c.body))
    #expect(push?.pushType.pushClass == (c.type == .background ? .silent : .regular))
}

@Test(arguments: PushType.allCases.filter { $0.topicSuffix != nil })
func topicSuffixAloneImpliesTheType(_ type: PushType) {
    let push = expectAccepted(
        base.header("apns-topic", "com.example.app" + type.topicSuffix!).body(#"{"k":1}"#).validate()
    )
    #expect(push?.pushType == type)
}

struct InferenceCase: Sendable, CustomTestStringConvertible {
    var body: String
    var type: PushType
    var priority: PushPriority
    var testDescription: String { body }
}

@Test(arguments: [
    InferenceCase(body: #"{"aps":{"alert":"x"}}"#, type: .alert, priority: .high),
    InferenceCase(body: #"{"aps":{"badge":0}}"#, type: .alert, priority: .high),
    InferenceCase(body: #"{"aps":{"sound":"default"}}"#, type: .alert, priority: .high),
    InferenceCase(body: #"{"aps":{"alert":null}}"#, type: .alert, priority: .high),
    InferenceCase(body: #"{"aps":{"content-available":1,"alert":"x"}}"#, type: .alert, priority: .high),
    InferenceCase(body: #"{"aps":{"content-available":0,"badge":1}}"#, type: .alert, priority: .high),
    InferenceCase(body: #"{"aps":{"content-available":1}}"#, type: .background, priority: .normal),
    InferenceCase(
        body: #"{"aps":{"content-available":1,"thread-id":"t"},"acme":[1,2]}"#,
        type: .background,
        priority: .normal
    ),
    InferenceCase(
        body: #"{"aps":{"content-available":0},"aps":{"content-available":1}}"#,
        type: .background,
        priority: .normal
    ),
    InferenceCase(body: #"{"aps":{"\u0063ontent-available":1}}"#, type: .background, priority: .normal),
    InferenceCase(body: #"{"\u0061ps":{"b\u0061dge":1}}"#, type: .alert, priority: .high),
    InferenceCase(
        body: #"{"x":{"aps":{"alert":1}},"aps":{"content-available":1}}"#,
        type: .background,
        priority: .normal
    ),
    InferenceCase(body: #"{"aps":{"x":{"alert":1},"content-available":1}}"#, type: .background, priority: .normal),
    InferenceCase(body: " \n\t{ \"aps\" : { \"content-available\" : 1 } }\r\n", type: .background, priority: .normal),
])
func inference(_ c: InferenceCase) {
    let push = expectAccepted(base.body(c.body).validate())
    #expect(push?.pushType == c.type)
    #expect(push?.priority == c.priority)
}

@Test func keysThatOnlyLookLikeApsDoNotCount() {
    // "APS", "aps " and an "aps" nested elsewhere are not the top-level aps member.
    for body in [
        #"{"APS":{"alert":"x"}}"#, #"{"aps ":{"alert":"x"}}"#, #"{"a":{"aps":{"alert":"x"}}}"#,
        #"{"aps\u0000":{"alert":"x"}}"#,
    ] {
        expectRejected(base.body(body).validate(), 400, "BadPayload", detailContains: ["no \"aps\""])
    }
    expectRejected(
        base.body(#"{"aps":{"Alert":"x","alerts":1,"content-available ":1}}"#).validate(),
        400,
        "BadPayload",
        detailContains: ["cannot infer"]
    )
}

@Test func expiration() {
    func expiration(_ value: String?) -> Expiration? {
        acceptedExpiration(base.header("apns-expiration", value).validate())
    }
    #expect(expiration(nil) == .defaultLifetime)
    #expect(expiration("0") == .immediately)
    #expect(expiration("000") == .immediately)
    #expect(expiration("1") == .at(epochSeconds: 1))
    #expect(expiration("0042") == .at(epochSeconds: 42))
    #expect(expiration("4102444800") == .at(epochSeconds: 4_102_444_800))
    #expect(expiration("9223372036854775807") == .at(epochSeconds: Int64.max))
}

@Test func priorities() {
    func priority(_ value: String?, _ request: Request = base) -> PushPriority? {
        expectAccepted(request.header("apns-priority", value).validate())?.priority
    }
    #expect(priority(nil) == .high)
    #expect(priority("10") == .high)
    #expect(priority("5") == .normal)
    #expect(priority("1") == .low)
    // Background: an absent header means 5; explicit 5 and 1 are kept.
    #expect(priority(nil, backgroundBase) == .normal)
    #expect(priority("5", backgroundBase) == .normal)
    #expect(priority("1", backgroundBase) == .low)
    // A configured default applies, except that a background push never defaults to 10.
    let lowDefault = makeValidator(defaultPriority: .low)
    #expect(expectAccepted(base.validate(with: lowDefault))?.priority == .low)
    #expect(expectAccepted(backgroundBase.header("apns-priority", nil).validate(with: lowDefault))?.priority == .low)
}

@Test func collapseID() {
    #expect(expectAccepted(base.header("apns-collapse-id", "").validate())?.collapseID == nil)
    let sixtyFour = String(repeating: "c", count: 64)
    #expect(expectAccepted(base.header("apns-collapse-id", sixtyFour).validate())?.collapseID == sixtyFour)
    let multiByte = String(repeating: "é", count: 32)  // 64 bytes
    #expect(expectAccepted(base.header("apns-collapse-id", multiByte).validate())?.collapseID == multiByte)
}

@Test func payloadSizeBoundaries() {
    #expect(alertPayload(size: 4096).utf8.count == 4096)
    #expect(expectAccepted(base.body(alertPayload(size: 4096)).validate())?.pushType == .alert)
    expectRejected(
        base.body(alertPayload(size: 4097)).validate(),
        413,
        "PayloadTooLarge",
        detailContains: ["4097", "4096"]
    )
    #expect(expectAccepted(voipBase.body(plainPayload(size: 5120)).validate())?.pushType == .voip)
    #expect(
        expectAccepted(voipBase.header("apns-push-type", nil).body(plainPayload(size: 5120)).validate())?.pushType
            == .voip
    )
    expectRejected(
        voipBase.body(plainPayload(size: 5121)).validate(),
        413,
        "PayloadTooLarge",
        detailContains: ["5121", "5120"]
    )
    // A voip-sized payload is too large for any other type.
    expectRejected(
        base.header("apns-push-type", "pushtotalk").header("apns-topic", "a.voip-ptt").body(plainPayload(size: 4097))
            .validate(),
        413,
        "PayloadTooLarge",
        detailContains: ["pushtotalk"]
    )
    // A one-byte object is fine.
    #expect(expectAccepted(voipBase.body("{}").validate())?.payload == bytes("{}"))
}

@Test func payloadKeepsTheReadableSliceOnly() {
    var body = ByteBuffer(string: "garbage")
    body.moveReaderIndex(forwardBy: 7)
    body.writeString(#"{"aps":{"alert":"x"}}"#)
    let outcome = makeValidator().validate(
        method: "POST",
        path: "/3/device/" + sampleToken,
        headers: [(name: "apns-topic", value: "a.b")],
        body: body
    )
    #expect(expectAccepted(outcome)?.payload == bytes(#"{"aps":{"alert":"x"}}"#))
}

@Test func cookiesMayRepeat() {
    expectAccepted(base.adding("cookie", "a=1").adding("cookie", "b=2").validate())
}

/// Duplicates are looked for only when two names share a length and end bytes: names that do
/// without being equal are not duplicates, and a real one among them is still found.
@Test func namesAlikeInLengthAndEndsAreNotDuplicates() {
    expectAccepted(base.adding("x-ab", "1").adding("x-cb", "2").adding("x-eb", "3").validate())
    let outcome = base.adding("x-ab", "1").adding("x-cb", "2").adding("x-ab", "3").validate()
    guard case .rejected(let refusal, _) = outcome else {
        Issue.record("accepted a repeated x-ab")
        return
    }
    #expect(refusal.reason == .duplicateHeaders)
    #expect(refusal.detail.contains("\"x-ab\""))
}

@Test func unknownHeadersAndIdentityEncodingAreIgnored() {
    expectAccepted(
        base.adding("content-encoding", "identity").adding("x-anything", "?").adding("content-type", "application/json")
            .validate()
    )
    expectAccepted(base.adding("content-encoding", "IDENTITY").validate())
}

// MARK: apns-id on responses

@Test func generatedIDIsCanonicalLowercaseV4() {
    #expect(UUIDText.v4((0, 0)) == "00000000-0000-4000-8000-000000000000")
    #expect(UUIDText.v4((.max, .max)) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
    #expect(UUIDText.v4(fixedBits) == fixedGeneratedID)
    var rng = SeededRandom(seed: 7)
    for _ in 0..<1000 {
        let id = UUIDText.v4((rng.next(), rng.next()))
        #expect(isCanonicalV4(id), "\(id)")
    }
    // The default generator (OpenSSL's) gives distinct canonical ids.
    let validator = ProviderRequestValidator()
    let a = validator.validate(
        method: "POST",
        path: "/3/device/" + sampleToken,
        headers: [(name: "apns-topic", value: "a.b")],
        body: buffer(#"{"aps":{"alert":"x"}}"#)
    )
    let b = validator.validate(
        method: "POST",
        path: "/3/device/" + sampleToken,
        headers: [(name: "apns-topic", value: "a.b")],
        body: buffer(#"{"aps":{"alert":"x"}}"#)
    )
    #expect(isCanonicalV4(a.apnsID) && isCanonicalV4(b.apnsID))
    #expect(a.apnsID != b.apnsID)
}

@Test func rejectionsEchoAValidRequestID() {
    let source = BitsSource()
    let validator = makeValidator(source)
    let upper = "123E4567-E89B-12D3-A456-4266554400A0"
    let lower = "123e4567-e89b-12d3-a456-4266554400a0"
    // Even for rules checked before apns-id itself.
    #expect(base.header("apns-id", upper).method("GET").validate(with: validator).apnsID == lower)
    #expect(base.header("apns-id", upper).path("/x").validate(with: validator).apnsID == lower)
    #expect(base.header("apns-id", upper).header("apns-topic", nil).validate(with: validator).apnsID == lower)
    #expect(base.header("apns-id", lower).body("[]").validate(with: validator).apnsID == lower)
    #expect(source.callCount == 0)
}

@Test func rejectionsWithoutAValidRequestIDGetAGeneratedOne() {
    let source = BitsSource()
    let validator = makeValidator(source)
    #expect(
        base.method("GET").validate(with: validator)
            == .rejected(
                Refusal(.methodNotAllowed, #":method must be POST, got "GET""#, allowedMethods: ["POST"]),
                apnsID: fixedGeneratedID
            )
    )
    #expect(base.header("apns-id", "nope").validate(with: validator).apnsID == fixedGeneratedID)
    // Two apns-id headers: neither is trusted.
    let twice = base.adding("apns-id", "123e4567-e89b-12d3-a456-4266554400a0").adding(
        "apns-id",
        "223e4567-e89b-12d3-a456-4266554400a0"
    )
    #expect(twice.validate(with: validator).apnsID == fixedGeneratedID)
    #expect(source.callCount == 3)
}

@Test func uuidSyntax() {
    #expect(FieldSyntax.canonicalUUID("00000000-0000-0000-0000-000000000000") == "00000000-0000-0000-0000-000000000000")
    #expect(FieldSyntax.canonicalUUID("ABCDEFAB-CDEF-ABCD-EFAB-CDEFABCDEFAB") == "abcdefab-cdef-abcd-efab-cdefabcdefab")
    #expect(FieldSyntax.canonicalUUID("abcdefab-cdef-abcd-efab-cdefabcdefa") == nil)
    #expect(FieldSyntax.canonicalUUID("abcdefab-cdef-abcd-efab-cdefabcdefabc") == nil)
    #expect(FieldSyntax.canonicalUUID("abcdefab_cdef-abcd-efab-cdefabcdefab") == nil)
    #expect(FieldSyntax.canonicalUUID("abcdefab-cdef-abcd-efab-cdefabcdéfa") == nil)
}

/// The byte-wise suffix test behind topic suffixes, on small (inline) and heap strings alike.
@Test(arguments: [
    ("a.voip", ".voip", true), ("com.example.app.voip", ".voip", true), ("com.example.app.voip-ptt", ".voip", false),
    (".voip", ".voip", false), ("voip", ".voip", false), ("com.example.app.VOIP", ".voip", false),
    ("é.voip", ".voip", true), ("com.example.app.push-type.liveactivity", ".push-type.liveactivity", true),
    ("x", "", true), ("", "", false),
])
func properSuffix(_ topic: String, _ suffix: String, _ expected: Bool) {
    #expect(FieldSyntax.hasProperSuffix(topic, suffix) == expected)
}

/// `isHex` is arithmetic: every byte against the digits spelled out, and the device path's fast
/// check (which lowers as it goes) against the bytes either side of each range.
@Test func hexDigits() {
    let digits = Set("0123456789abcdefABCDEF".utf8)
    for byte in UInt8.min...UInt8.max {
        #expect(FieldSyntax.isHex(byte) == digits.contains(byte), "byte \(byte)")
    }
    let token = String(repeating: "0", count: 63)
    for neighbour in ["/", ":", "@", "G", "`", "g", "\u{7f}"] {
        guard case .failure(let refusal) = ProviderRequestValidator.parsePath("/3/device/" + token + neighbour) else {
            Issue.record("\(neighbour) taken for a hex digit")
            continue
        }
        #expect(refusal.reason == .badDeviceToken || refusal.reason == .badPath, "\(neighbour): \(refusal)")
    }
    guard case .token(let lowered) = ProviderRequestValidator.parsePath("/3/device/" + token + "F") else {
        Issue.record("an uppercase digit refused")
        return
    }
    #expect(lowered == token + "f")
}
