import Foundation
import PushgateDelivery
import PushgateModel

/// What one node hands the device's owner (`POST /internal/v1/push`): a provider push or a Web
/// Push submission, already authenticated and read by the node that took it, and the owner's
/// answer. JSON, payloads in base64 (`ForwardingJSON.swift`): the hop stays within the cluster,
/// and a push is small.
struct ForwardedWork: Sendable {
    /// The same for each attempt to hand this work over: the owner serves it once, and answers
    /// a second attempt (the first's answer lost, or late) with the first's answer.
    var id = UUID().uuidString
    var push: WirePush?
    /// With `push`: `default`, `now`, `at:SECONDS` or `for:SECONDS`.
    var expiration: String?
    var webPush: WireWebPush?

    init(push: Push, expiration: Expiration) {
        self.push = WirePush(push)
        switch expiration {
        case .defaultLifetime: self.expiration = "default"
        case .immediately: self.expiration = "now"
        case .at(let seconds): self.expiration = "at:\(seconds)"
        case .lifetime(let seconds): self.expiration = "for:\(seconds)"
        }
    }

    init(webPush submission: WebPushSubmission) {
        webPush = WireWebPush(submission)
    }

    /// The push and its expiration, if this is one.
    func decodedPush() -> (Push, Expiration)? {
        guard let push = push?.decoded(), let expiration else { return nil }
        switch expiration {
        case "default": return (push, .defaultLifetime)
        case "now": return (push, .immediately)
        default:
            if expiration.hasPrefix("at:"), let seconds = Int64(expiration.dropFirst(3)) {
                return (push, .at(epochSeconds: seconds))
            }
            if expiration.hasPrefix("for:"), let seconds = Int64(expiration.dropFirst(4)) {
                return (push, .lifetime(seconds: seconds))
            }
            return nil
        }
    }
}

struct WirePush: Sendable {
    var token: String
    var apnsID: String
    var topic: String
    var pushType: String
    var priority: UInt8
    var collapseID: String?
    var payload: String
    var urgency: String?

    init(_ push: Push) {
        token = push.deviceToken
        apnsID = push.apnsID
        topic = push.topic
        pushType = push.pushType.rawValue
        priority = push.priority.rawValue
        collapseID = push.collapseID
        payload = Data(push.payload).base64EncodedString()
        urgency = push.urgency?.rawValue
    }

    func decoded() -> Push? {
        guard let type = PushType(rawValue: pushType), let priority = PushPriority(rawValue: priority),
            let payload = Data(base64Encoded: payload)
        else { return nil }
        var urgencyValue: WebPushUrgency?
        if let urgency {
            guard let value = WebPushUrgency(rawValue: urgency) else { return nil }
            urgencyValue = value
        }
        return Push(
            deviceToken: token,
            apnsID: apnsID,
            topic: topic,
            pushType: type,
            priority: priority,
            collapseID: collapseID,
            payload: Array(payload),
            urgency: urgencyValue
        )
    }
}

struct WireWebPush: Sendable {
    var token: String
    var message: WirePush?
    var ttlSeconds: Int64?
    var refusal: WireRefusal?
    /// `absent`, `valid`, or `invalid`.
    var vapid: String
    var vapidKey: String?
    var vapidRefusal: WireRefusal?

    init(_ submission: WebPushSubmission) {
        token = submission.token
        switch submission.message {
        case .success(let message):
            self.message = WirePush(message.push)
            ttlSeconds = message.ttlSeconds
        case .failure(let refusal):
            self.refusal = WireRefusal(refusal)
        }
        switch submission.vapid {
        case .absent: vapid = "absent"
        case .valid(let key):
            vapid = "valid"
            vapidKey = Data(key).base64EncodedString()
        case .invalid(let refusal):
            vapid = "invalid"
            vapidRefusal = WireRefusal(refusal)
        }
    }

    func decoded() -> WebPushSubmission? {
        let message: Result<WebPushMessage, Refusal>
        if let push = self.message?.decoded(), let ttlSeconds {
            message = .success(WebPushMessage(push: push, ttlSeconds: ttlSeconds))
        } else if let refusal = refusal?.decoded() {
            message = .failure(refusal)
        } else {
            return nil
        }
        let verdict: VAPIDVerdict
        switch vapid {
        case "absent": verdict = .absent
        case "valid":
            guard let key = vapidKey.flatMap({ Data(base64Encoded: $0) }) else { return nil }
            verdict = .valid(key: Array(key))
        case "invalid":
            guard let refusal = vapidRefusal?.decoded() else { return nil }
            verdict = .invalid(refusal)
        default: return nil
        }
        return WebPushSubmission(token: token, message: message, vapid: verdict)
    }
}

struct WireRefusal: Sendable {
    var reason: String
    var detail: String
    var timestamp: Int64?
    var retryAfterSeconds: Int?

    init(_ refusal: Refusal) {
        reason = refusal.reason.rawValue
        detail = refusal.detail
        timestamp = refusal.timestamp
        retryAfterSeconds = refusal.retryAfterSeconds
    }

    func decoded() -> Refusal? {
        guard let reason = Refusal.Reason(rawValue: reason) else { return nil }
        return Refusal(reason, detail, timestamp: timestamp, retryAfterSeconds: retryAfterSeconds)
    }
}

/// The owner's answer: a disposition (and, for Web Push, the message's id and TTL), or the
/// refusal to relay.
struct ForwardedAnswer: Sendable {
    var disposition: String?
    var messageID: String?
    var ttlSeconds: Int64?
    var refusal: WireRefusal?
}
