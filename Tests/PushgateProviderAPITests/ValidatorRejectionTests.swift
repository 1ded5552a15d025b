import NIOCore
import PushgateModel
import Testing

@testable import PushgateProviderAPI

/// One request with one fault, and exactly how it must be refused.
struct RejectionCase: Sendable, CustomTestStringConvertible {
    var request: Request
    var status: Int
    var reason: String
    /// Every fragment must occur in the detail (it names the field and the bad value).
    var detail: [String]
    var testDescription: String { "\(request.label) → \(status) \(reason)" }

    init(_ request: Request, _ status: Int, _ reason: String, _ detail: [String]) {
        self.request = request
        self.status = status
        self.reason = reason
        self.detail = detail
    }
}

let voipBase = Request("voip").header("apns-topic", "com.example.app.voip").header("apns-push-type", "voip")
let backgroundBase = Request("background")
    .header("apns-push-type", "background").header("apns-priority", "5")
    .body(#"{"aps":{"content-available":1}}"#)
let token63 = String(sampleToken.dropLast())

let rejectionCases: [RejectionCase] = [
    // 1. Method.
    .init(base.method("GET").with { $0.label = "GET" }, 405, "MethodNotAllowed", [":method", "\"GET\""]),
    .init(base.method("post").with { $0.label = "lowercase post" }, 405, "MethodNotAllowed", ["\"post\""]),
    .init(base.method("PUT").with { $0.label = "PUT" }, 405, "MethodNotAllowed", ["\"PUT\""]),

    // 2. Path and token.
    .init(base.path("/").with { $0.label = "root path" }, 404, "BadPath", [":path", "\"/\""]),
    .init(base.path("/3/devices/" + sampleToken).with { $0.label = "devices" }, 404, "BadPath", ["/3/devices/"]),
    .init(base.path("/2/device/" + sampleToken).with { $0.label = "version 2" }, 404, "BadPath", ["/2/device/"]),
    .init(
        base.path("/3/device/" + sampleToken + "?x=1").with { $0.label = "query" },
        404,
        "BadPath",
        ["query", "?x=1"]
    ),
    .init(base.path("/3/device/" + sampleToken + "#f").with { $0.label = "fragment" }, 404, "BadPath", ["fragment"]),
    .init(
        base.path("/3/device/" + sampleToken + "/").with { $0.label = "trailing slash" },
        404,
        "BadPath",
        ["more than one segment"]
    ),
    .init(
        base.path("/3/device/a/" + sampleToken).with { $0.label = "extra segment" },
        404,
        "BadPath",
        ["more than one segment"]
    ),
    .init(base.path("/3/deviceX").with { $0.label = "prefix glued" }, 404, "BadPath", ["\"/3/deviceX\""]),
    .init(base.path("").with { $0.label = "empty path" }, 404, "BadPath", ["\"\""]),
    .init(
        base.path("/3/device/").with { $0.label = "empty token" },
        400,
        "MissingDeviceToken",
        ["no device token", "\"/3/device/\""]
    ),
    .init(
        base.path("/3/device").with { $0.label = "no token segment" },
        400,
        "MissingDeviceToken",
        ["no device token"]
    ),
    .init(
        base.path("/3/device/abc").with { $0.label = "short token" },
        400,
        "BadDeviceToken",
        ["64 hex digits", "got 3", "\"abc\""]
    ),
    .init(base.path("/3/device/" + token63).with { $0.label = "63 digits" }, 400, "BadDeviceToken", ["got 63"]),
    .init(
        base.path("/3/device/" + sampleToken + "0").with { $0.label = "65 digits" },
        400,
        "BadDeviceToken",
        ["got 65"]
    ),
    .init(
        base.path("/3/device/" + token63 + "g").with { $0.label = "non-hex g" },
        400,
        "BadDeviceToken",
        ["'g'", "position 64"]
    ),
    .init(
        base.path("/3/device/%20" + token63.dropFirst(2)).with { $0.label = "percent" },
        400,
        "BadDeviceToken",
        ["'%'", "position 1"]
    ),
    .init(
        base.path("/3/device/" + String(repeating: "ab", count: 200)).with { $0.label = "400 digits" },
        400,
        "BadDeviceToken",
        ["got 400", "…\" (400 bytes)"]
    ),

    // 3. Duplicate headers.
    .init(
        base.adding("apns-topic", "com.example.app").with { $0.label = "topic twice" },
        400,
        "DuplicateHeaders",
        ["\"apns-topic\""]
    ),
    .init(
        base.adding("x-custom", "1").adding("x-custom", "2").with { $0.label = "unknown header twice" },
        400,
        "DuplicateHeaders",
        ["\"x-custom\""]
    ),
    .init(
        base.adding("apns-priority", "10").adding("apns-expiration", "0").adding("apns-expiration", "0").adding(
            "apns-priority",
            "10"
        )
        .with { $0.label = "first repeat wins" },
        400,
        "DuplicateHeaders",
        ["\"apns-expiration\""]
    ),
    .init(
        base.adding("apns-id", "123e4567-e89b-12d3-a456-4266554400a0").adding(
            "apns-id",
            "123e4567-e89b-12d3-a456-4266554400a0"
        )
        .with { $0.label = "apns-id twice" },
        400,
        "DuplicateHeaders",
        ["\"apns-id\""]
    ),

    // 4. apns-id.
    .init(
        base.header("apns-id", "abc").with { $0.label = "apns-id short" },
        400,
        "BadMessageId",
        ["apns-id", "\"abc\""]
    ),
    .init(
        base.header("apns-id", "").with { $0.label = "apns-id empty" },
        400,
        "BadMessageId",
        ["apns-id", "got \"\""]
    ),
    .init(
        base.header("apns-id", "123e4567e89b12d3a4564266554400a0").with { $0.label = "apns-id no hyphens" },
        400,
        "BadMessageId",
        ["123e4567e89b12d3a4564266554400a0"]
    ),
    .init(
        base.header("apns-id", "{123e4567-e89b-12d3-a456-4266554400a0}").with { $0.label = "apns-id braces" },
        400,
        "BadMessageId",
        ["{123e4567"]
    ),
    .init(
        base.header("apns-id", "123e4567-e89b-12d3-a456-4266554400ag").with { $0.label = "apns-id non-hex" },
        400,
        "BadMessageId",
        ["4266554400ag"]
    ),
    .init(
        base.header("apns-id", "123e4567-e89b12d3--a456-4266554400a0").with { $0.label = "apns-id hyphens moved" },
        400,
        "BadMessageId",
        ["e89b12d3--a456"]
    ),

    // 5. apns-topic.
    .init(
        base.header("apns-topic", nil).with { $0.label = "no topic" },
        400,
        "MissingTopic",
        ["apns-topic is required"]
    ),
    .init(base.header("apns-topic", "").with { $0.label = "empty topic" }, 400, "BadTopic", ["apns-topic is empty"]),
    .init(
        base.header("apns-topic", "com.example app").with { $0.label = "space in topic" },
        400,
        "BadTopic",
        ["' '", "position 12", "\"com.example app\""]
    ),
    .init(base.header("apns-topic", "com.exämple").with { $0.label = "non-ASCII topic" }, 400, "BadTopic", ["U+00E4"]),
    .init(base.header("apns-topic", "com/example").with { $0.label = "slash in topic" }, 400, "BadTopic", ["'/'"]),
    .init(
        base.header("apns-topic", String(repeating: "a", count: 256)).with { $0.label = "256-byte topic" },
        400,
        "BadTopic",
        ["256 bytes", "255"]
    ),

    // 6. apns-push-type.
    .init(
        base.header("apns-push-type", "Alert").with { $0.label = "capitalised type" },
        400,
        "InvalidPushType",
        ["apns-push-type", "\"Alert\"", "alert, background"]
    ),
    .init(base.header("apns-push-type", "").with { $0.label = "empty type" }, 400, "InvalidPushType", ["got \"\""]),
    .init(
        base.header("apns-push-type", "silent").with { $0.label = "unknown type" },
        400,
        "InvalidPushType",
        ["\"silent\""]
    ),
    .init(
        voipBase.header("apns-topic", "com.example.app").with { $0.label = "voip without suffix" },
        400,
        "BadTopic",
        [".voip", "\"com.example.app\""]
    ),
    .init(
        voipBase.header("apns-topic", "com.example.app.voip-ptt").with { $0.label = "voip to ptt topic" },
        400,
        "BadTopic",
        [".voip"]
    ),
    .init(
        base.header("apns-push-type", "liveactivity").header("apns-topic", "com.x.push-type.widgets").with {
            $0.label = "liveactivity to widgets topic"
        },
        400,
        "BadTopic",
        [".push-type.liveactivity", "\"com.x.push-type.widgets\""]
    ),
    .init(
        base.header("apns-push-type", "voip").header("apns-topic", ".voip").with { $0.label = "suffix only" },
        400,
        "BadTopic",
        ["<bundle id>.voip", "\".voip\""]
    ),
    .init(
        base.header("apns-push-type", "complication").header("apns-topic", "complication").with {
            $0.label = "suffix without dot/bundle"
        },
        400,
        "BadTopic",
        [".complication"]
    ),
    .init(
        base.header("apns-push-type", "alert").header("apns-topic", "com.example.app.voip").with {
            $0.label = "alert to voip topic"
        },
        400,
        "BadTopic",
        ["\".voip\"", "voip pushes", "alert pushes go to the bare bundle id"]
    ),
    .init(
        backgroundBase.header("apns-topic", "com.example.app.complication").with {
            $0.label = "background to complication topic"
        },
        400,
        "BadTopic",
        ["\".complication\"", "background"]
    ),
    .init(
        base.header("apns-push-type", "mdm").header("apns-topic", "com.example.location-query").with {
            $0.label = "mdm to location topic"
        },
        400,
        "BadTopic",
        ["\".location-query\"", "MDM"]
    ),

    // 7. apns-priority.
    .init(
        base.header("apns-priority", "7").with { $0.label = "priority 7" },
        400,
        "BadPriority",
        ["apns-priority", "1, 5 or 10", "\"7\""]
    ),
    .init(base.header("apns-priority", "").with { $0.label = "priority empty" }, 400, "BadPriority", ["got \"\""]),
    .init(base.header("apns-priority", "05").with { $0.label = "priority 05" }, 400, "BadPriority", ["\"05\""]),
    .init(
        base.header("apns-priority", " 10").with { $0.label = "priority leading space" },
        400,
        "BadPriority",
        ["\" 10\""]
    ),
    .init(
        base.header("apns-priority", "10 ").with { $0.label = "priority trailing space" },
        400,
        "BadPriority",
        ["\"10 \""]
    ),
    .init(base.header("apns-priority", "high").with { $0.label = "priority word" }, 400, "BadPriority", ["\"high\""]),

    // 8. apns-expiration.
    .init(
        base.header("apns-expiration", "-1").with { $0.label = "negative expiration" },
        400,
        "BadExpirationDate",
        ["apns-expiration", "\"-1\""]
    ),
    .init(
        base.header("apns-expiration", "+5").with { $0.label = "signed expiration" },
        400,
        "BadExpirationDate",
        ["\"+5\""]
    ),
    .init(
        base.header("apns-expiration", "tomorrow").with { $0.label = "word expiration" },
        400,
        "BadExpirationDate",
        ["\"tomorrow\""]
    ),
    .init(
        base.header("apns-expiration", "1.5").with { $0.label = "fractional expiration" },
        400,
        "BadExpirationDate",
        ["\"1.5\""]
    ),
    .init(
        base.header("apns-expiration", "").with { $0.label = "empty expiration" },
        400,
        "BadExpirationDate",
        ["got \"\""]
    ),
    .init(
        base.header("apns-expiration", " 5").with { $0.label = "spaced expiration" },
        400,
        "BadExpirationDate",
        ["\" 5\""]
    ),
    .init(
        base.header("apns-expiration", "9223372036854775808").with { $0.label = "expiration Int64.max+1" },
        400,
        "BadExpirationDate",
        ["\"9223372036854775808\""]
    ),
    .init(
        base.header("apns-expiration", "99999999999999999999999").with { $0.label = "expiration huge" },
        400,
        "BadExpirationDate",
        ["99999999999999999999999"]
    ),

    // 9. apns-collapse-id.
    .init(
        base.header("apns-collapse-id", String(repeating: "c", count: 65)).with { $0.label = "collapse 65 bytes" },
        400,
        "BadCollapseId",
        ["apns-collapse-id", "65 bytes", "64"]
    ),
    .init(
        base.header("apns-collapse-id", String(repeating: "é", count: 33)).with {
            $0.label = "collapse 33×é = 66 bytes"
        },
        400,
        "BadCollapseId",
        ["66 bytes"]
    ),

    // 10. content-encoding.
    .init(
        base.header("content-encoding", "gzip").with { $0.label = "gzip" },
        400,
        "BadPayload",
        ["compressed", "\"gzip\""]
    ),

    // 11. Size.
    .init(base.body("").with { $0.label = "empty body" }, 400, "PayloadEmpty", ["empty"]),
    .init(
        base.body(alertPayload(size: 4097)).with { $0.label = "4097 bytes, inferred" },
        413,
        "PayloadTooLarge",
        ["4097 bytes", "4096 bytes"]
    ),
    .init(
        base.header("apns-push-type", "alert").body(alertPayload(size: 4097)).with { $0.label = "4097 bytes alert" },
        413,
        "PayloadTooLarge",
        ["4097", "alert pushes", "4096"]
    ),
    .init(
        voipBase.body(plainPayload(size: 5121)).with { $0.label = "5121 bytes voip" },
        413,
        "PayloadTooLarge",
        ["5121", "voip pushes", "5120"]
    ),
    .init(
        voipBase.header("apns-push-type", nil).body(plainPayload(size: 5121)).with {
            $0.label = "5121 bytes, voip by topic"
        },
        413,
        "PayloadTooLarge",
        ["5121", "5120"]
    ),
    .init(
        base.header("apns-push-type", "liveactivity").header("apns-topic", "a.push-type.liveactivity").body(
            plainPayload(size: 4097)
        )
        .with { $0.label = "4097 bytes liveactivity" },
        413,
        "PayloadTooLarge",
        ["4097", "4096"]
    ),
    .init(
        base.body(plainPayload(size: 5000) + "garbage").with { $0.label = "too large beats bad JSON" },
        413,
        "PayloadTooLarge",
        ["5007"]
    ),

    // 12. JSON.
    .init(
        base.body("[]").with { $0.label = "array" },
        400,
        "BadPayload",
        ["not a valid JSON object", "byte offset 0", "'{'", "found '['"]
    ),
    .init(base.body("null").with { $0.label = "null" }, 400, "BadPayload", ["byte offset 0", "found 'n'"]),
    .init(base.body("{").with { $0.label = "unterminated" }, 400, "BadPayload", ["byte offset 1", "end of input"]),
    .init(
        base.body(#"{"aps":{"alert":"x"}} x"#).with { $0.label = "trailing garbage" },
        400,
        "BadPayload",
        ["byte offset 22", "end of input after the top-level object", "found 'x'"]
    ),
    .init(
        base.body(#"{"aps":{"alert":"x",}}"#).with { $0.label = "trailing comma" },
        400,
        "BadPayload",
        ["byte offset 20", "trailing commas"]
    ),
    .init(
        base.body(#"{"aps":{"alert":01}}"#).with { $0.label = "leading zero" },
        400,
        "BadPayload",
        ["byte offset 17", "leading zeros"]
    ),
    .init(
        base.body(bytes: Array(#"{"aps":{"alert":""#.utf8) + [0xFF] + Array(#""}}"#.utf8)).with {
            $0.label = "invalid UTF-8"
        },
        400,
        "BadPayload",
        ["byte offset 17", "0xFF"]
    ),
    .init(
        base.body(#"{"aps":{"alert":"\ud800"}}"#).with { $0.label = "lone surrogate" },
        400,
        "BadPayload",
        ["low surrogate"]
    ),
    .init(
        base.body("\u{FEFF}{\"aps\":{\"alert\":\"x\"}}").with { $0.label = "BOM" },
        400,
        "BadPayload",
        ["byte offset 0", "0xEF"]
    ),
    .init(
        base.body(String(repeating: "{\"a\":", count: 100) + "1" + String(repeating: "}", count: 100)).with {
            $0.label = "nesting 100"
        },
        400,
        "BadPayload",
        ["at most 64 levels"]
    ),

    // 13. aps not an object.
    .init(
        base.body(#"{"aps":"alert"}"#).with { $0.label = "aps string" },
        400,
        "BadPayload",
        ["\"aps\" must be a JSON object", "a string"]
    ),
    .init(
        base.body(#"{"aps":[]}"#).header("apns-push-type", "alert").with { $0.label = "aps array, declared alert" },
        400,
        "BadPayload",
        ["an array"]
    ),
    .init(voipBase.body(#"{"aps":null}"#).with { $0.label = "aps null on voip" }, 400, "BadPayload", ["got null"]),
    .init(
        base.body(#"{"aps":{"alert":"x"},"aps":7}"#).with { $0.label = "last aps is a number" },
        400,
        "BadPayload",
        ["a number"]
    ),

    // 14. Inference.
    .init(
        base.body(#"{"x":1}"#).with { $0.label = "no aps, no type" },
        400,
        "BadPayload",
        ["cannot infer the push type", "no \"aps\"", "apns-push-type"]
    ),
    .init(
        base.body(#"{"aps":{}}"#).with { $0.label = "empty aps" },
        400,
        "BadPayload",
        ["cannot infer the push type", "send apns-push-type"]
    ),
    .init(
        base.body(#"{"aps":{"mutable-content":1,"category":"c"}}"#).with {
            $0.label = "aps without alert/badge/sound/c-a"
        },
        400,
        "BadPayload",
        ["cannot infer"]
    ),
    .init(
        base.body(#"{"aps":{"content-available":0}}"#).with { $0.label = "c-a 0 inferred" },
        400,
        "BadPayload",
        ["cannot infer", "content-available is 0", "not the integer 1"]
    ),
    .init(
        base.body(#"{"aps":{"content-available":"1"}}"#).with { $0.label = "c-a \"1\" inferred" },
        400,
        "BadPayload",
        ["content-available is \"1\""]
    ),
    .init(
        base.body(#"{"aps":{"alert":"x"},"aps":{"content-available":true}}"#).with {
            $0.label = "last aps wins for inference"
        },
        400,
        "BadPayload",
        ["content-available is true"]
    ),

    // 15. Background rules.
    .init(
        backgroundBase.body(#"{"aps":{"content-available":1.0}}"#).with { $0.label = "c-a 1.0" },
        400,
        "BadPayload",
        ["exactly the integer 1", "got 1.0"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":"1"}}"#).with { $0.label = "c-a \"1\"" },
        400,
        "BadPayload",
        ["got \"1\""]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":true}}"#).with { $0.label = "c-a true" },
        400,
        "BadPayload",
        ["got true"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":0}}"#).with { $0.label = "c-a 0" },
        400,
        "BadPayload",
        ["got 0"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":2}}"#).with { $0.label = "c-a 2" },
        400,
        "BadPayload",
        ["got 2"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":1e0}}"#).with { $0.label = "c-a 1e0" },
        400,
        "BadPayload",
        ["got 1e0"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":-1}}"#).with { $0.label = "c-a -1" },
        400,
        "BadPayload",
        ["got -1"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":10}}"#).with { $0.label = "c-a 10" },
        400,
        "BadPayload",
        ["got 10"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":null}}"#).with { $0.label = "c-a null" },
        400,
        "BadPayload",
        ["got null"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":[1]}}"#).with { $0.label = "c-a [1]" },
        400,
        "BadPayload",
        ["got [1]"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":1,"content-available":0}}"#).with {
            $0.label = "last c-a wins"
        },
        400,
        "BadPayload",
        ["got 0"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":"\#(String(repeating: "z", count: 200))"}}"#).with {
            $0.label = "c-a long string"
        },
        400,
        "BadPayload",
        ["got \"zzz", "zzz…"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{}}"#).with { $0.label = "background, aps without c-a" },
        400,
        "BadPayload",
        ["content-available", "missing"]
    ),
    .init(
        backgroundBase.body(#"{"data":"x"}"#).with { $0.label = "background without aps" },
        400,
        "BadPayload",
        ["no \"aps\""]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":1,"badge":3}}"#).with { $0.label = "background with badge" },
        400,
        "BadPayload",
        ["must not carry", "has badge"]
    ),
    .init(
        backgroundBase.body(#"{"aps":{"content-available":1,"alert":"x","sound":"default"}}"#).with {
            $0.label = "background with alert+sound"
        },
        400,
        "BadPayload",
        ["has alert, sound"]
    ),
    .init(
        backgroundBase.header("apns-priority", "10").with { $0.label = "background priority 10" },
        400,
        "BadPriority",
        ["background", "5 or 1", "got 10"]
    ),
    .init(
        base.header("apns-priority", "10").body(#"{"aps":{"content-available":1}}"#).with {
            $0.label = "inferred background priority 10"
        },
        400,
        "BadPriority",
        ["5 or 1"]
    ),
]

@Test(arguments: rejectionCases)
func rejection(_ c: RejectionCase) {
    expectRejected(c.request.validate(), c.status, c.reason, detailContains: c.detail)
}

/// Two or more faults: the first in the documented order decides.
let orderCases: [RejectionCase] = [
    .init(base.method("GET").path("/nope").with { $0.label = "method before path" }, 405, "MethodNotAllowed", []),
    .init(
        base.path("/3/device/xyz").adding("apns-topic", "a").with { $0.label = "token before duplicates" },
        400,
        "BadDeviceToken",
        []
    ),
    .init(
        base.adding("apns-topic", "a").header("apns-id", "nope").with { $0.label = "duplicates before apns-id" },
        400,
        "DuplicateHeaders",
        []
    ),
    .init(
        base.header("apns-id", "nope").header("apns-topic", nil).with { $0.label = "apns-id before topic" },
        400,
        "BadMessageId",
        []
    ),
    .init(
        base.header("apns-topic", nil).header("apns-push-type", "bogus").with { $0.label = "topic before push type" },
        400,
        "MissingTopic",
        []
    ),
    .init(
        base.header("apns-push-type", "bogus").header("apns-priority", "7").with {
            $0.label = "push type before priority"
        },
        400,
        "InvalidPushType",
        []
    ),
    .init(
        base.header("apns-priority", "7").header("apns-expiration", "x").with {
            $0.label = "priority before expiration"
        },
        400,
        "BadPriority",
        []
    ),
    .init(
        base.header("apns-expiration", "x").header("apns-collapse-id", String(repeating: "c", count: 65)).with {
            $0.label = "expiration before collapse id"
        },
        400,
        "BadExpirationDate",
        []
    ),
    .init(
        base.header("apns-collapse-id", String(repeating: "c", count: 65)).header("content-encoding", "gzip").with {
            $0.label = "collapse id before encoding"
        },
        400,
        "BadCollapseId",
        []
    ),
    .init(
        base.header("content-encoding", "gzip").body("").with { $0.label = "encoding before size" },
        400,
        "BadPayload",
        ["compressed"]
    ),
    .init(
        base.header("apns-priority", "7").body("").with { $0.label = "headers before empty body" },
        400,
        "BadPriority",
        []
    ),
    .init(
        base.body("{" + String(repeating: " ", count: 5000)).with { $0.label = "size before JSON" },
        413,
        "PayloadTooLarge",
        []
    ),
    .init(
        backgroundBase.header("apns-priority", "10").body(#"{"aps":{"content-available":1,"alert":"x"}}"#).with {
            $0.label = "payload rules before background priority"
        },
        400,
        "BadPayload",
        ["must not carry"]
    ),
    .init(
        backgroundBase.header("apns-priority", "10").body(#"{"aps":{"content-available":true,"alert":"x"}}"#).with {
            $0.label = "c-a before alert"
        },
        400,
        "BadPayload",
        ["got true"]
    ),
]

@Test(arguments: orderCases)
func ruleOrder(_ c: RejectionCase) {
    expectRejected(c.request.validate(), c.status, c.reason, detailContains: c.detail)
}

@Test func detailQuotesAndEscapesValues() {
    let outcome = base.header("apns-priority", "a\"b\\c\nd\u{1}").validate()
    let rejection = expectRejected(outcome, 400, "BadPriority", detailContains: [])
    #expect(rejection?.detail == #"apns-priority must be 1, 5 or 10, got "a\"b\\c\nd\u{01}""#)
}

@Test func longValuesAreCutShort() {
    let value = String(repeating: "x", count: 10_000)
    let rejection = expectRejected(
        base.header("apns-expiration", value).validate(),
        400,
        "BadExpirationDate",
        detailContains: ["…\" (10000 bytes)"]
    )
    #expect((rejection?.detail.utf8.count ?? 0) < 200)
}
