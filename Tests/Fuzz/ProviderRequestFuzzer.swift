// Fuzz target 1: APNs provider request validation (Tests/Fuzz/run.sh provider-request).
//
// Input: a request as text, the seeds' format:
//
//     METHOD LF PATH LF (NAME ":" VALUE LF)* LF BODY
//
// Checked beyond "does not crash": an accepted request carries exactly the body it came with,
// a lowercase 64-digit token and a valid topic; a payload the scanner accepts is a JSON object
// Foundation reads too, with the same facts about `aps` (kind, alert/badge/sound,
// content-available).
import Foundation
import NIOCore
import PushgateModel

@testable import PushgateProviderAPI

private let validator = ProviderRequestValidator(uuidGenerator: { (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210) })

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    let request = FuzzRequest(input)
    let body = ByteBuffer(bytes: request.body)
    switch validator.validate(method: request.method, path: request.path, headers: request.headers, body: body) {
    case .accepted(let push, _):
        check(push.payload == request.body, "an accepted push carries its body unchanged")
        check(
            push.deviceToken.utf8.count == 64
                && push.deviceToken.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) },
            "token normalized: \(push.deviceToken)"
        )
        check(TopicRules.isValid(push.topic), "accepted topic \(push.topic) is valid")
    case .rejected(_, let apnsID):
        check(apnsID.utf8.count == 36, "every answer carries an apns-id")
    }
    request.body.withUnsafeBytes { bytes in
        compareWithFoundation(bytes)
    }
    return 0
}

/// The scanner against Foundation's reader: whatever the scanner accepts, Foundation reads as an
/// object with the same facts. (Not the other way round: the scanner refuses, on purpose, what
/// Foundation lets through, such as lone surrogates and nesting beyond 64 levels.)
private func compareWithFoundation(_ bytes: UnsafeRawBufferPointer) {
    guard case .success(let facts) = PayloadScanner.scan(bytes) else { return }
    let object: Any
    do {
        object = try JSONSerialization.jsonObject(with: Data(bytes), options: [])
    } catch {
        fail("the scanner accepted what Foundation refuses (\(error)): \(String(decoding: bytes, as: UTF8.self))")
    }
    guard let top = object as? [String: Any] else { fail("the scanner accepted a non-object") }
    let aps = top["aps"]
    check(
        kind(of: aps) == facts.aps,
        "aps kind: scanner \(String(describing: facts.aps)), Foundation \(String(describing: kind(of: aps)))"
    )
    if let aps = aps as? [String: Any] {
        check((aps["alert"] != nil) == facts.hasAlert, "alert")
        check((aps["badge"] != nil) == facts.hasBadge, "badge")
        check((aps["sound"] != nil) == facts.hasSound, "sound")
        check((aps["content-available"] != nil) == (facts.contentAvailable != nil), "content-available")
    }
}

private func kind(of value: Any?) -> JSONValueKind? {
    switch value {
    case nil: return nil
    case is [String: Any]: return .object
    case is [Any]: return .array
    case is String: return .string
    case is NSNull: return .null
    case let number as NSNumber:
        // Foundation's booleans are NSNumbers of type "c" (a C char).
        return String(cString: number.objCType) == "c" ? .bool : .number
    default: return nil
    }
}
