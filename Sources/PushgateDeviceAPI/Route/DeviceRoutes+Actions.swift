import PushgateCrypto
import PushgateDelivery
import PushgateModel
import PushgateTransport

// What each device route does: its body to a value (`DeviceBodies`), the operation on the
// device's shard, the answer.
extension DeviceRoutes {
    static func deleteDevice(_ answer: DeviceAnswer) {
        answer.complete(answer.core.deleteDevice(deviceID: answer.deviceID, secret: answer.secret)) { _ in
            .init(status: 204)
        }
    }

    static func register(_ answer: DeviceAnswer) {
        guard let topic = answer.value(DeviceBodies.topic(answer.body)) else { return }
        answer.complete(answer.core.register(deviceID: answer.deviceID, secret: answer.secret, topic: topic)) {
            token in .json(status: 201, JSONText.object(["token": token, "topic": topic]))
        }
    }

    /// `201 {"name", "token", "endpoint", "applicationServerKey"}`: the endpoint under the
    /// configured origin, else the one this request came to.
    static func subscribe(_ answer: DeviceAnswer, origin configured: String?) {
        guard let subscription = answer.value(DeviceBodies.subscription(answer.body)) else { return }
        let request = answer.target.request
        guard
            let origin = configured ?? WebPushEndpoint.origin(of: request)
        else {
            answer.refuse(
                Refusal(
                    .badRequest,
                    "the request names no host (Host or :authority), so the endpoint's origin is unknown; send one, or have the operator set webpushOrigin"
                )
            )
            return
        }
        let subscribed = answer.core.subscribe(
            deviceID: answer.deviceID,
            secret: answer.secret,
            name: subscription.name,
            applicationServerKey: subscription.applicationServerKey
        )
        answer.complete(subscribed) { token in
            let key = subscription.applicationServerKey.map { JSONText.quote(Base64URL.encode($0)) } ?? "null"
            return .json(
                status: 201,
                "{\"name\":\(JSONText.quote(subscription.name)),\"token\":\(JSONText.quote(token)),\"endpoint\":\(JSONText.quote(WebPushEndpoint.url(origin: origin, token: token))),\"applicationServerKey\":\(key)}"
            )
        }
    }

    static func unsubscribe(_ token: String, _ answer: DeviceAnswer) {
        answer.complete(answer.core.unsubscribe(deviceID: answer.deviceID, secret: answer.secret, token: token)) { _ in
            .init(status: 204)
        }
    }

    static func unregister(_ token: String, _ answer: DeviceAnswer) {
        answer.complete(answer.core.unregister(deviceID: answer.deviceID, secret: answer.secret, token: token)) { _ in
            .init(status: 204)
        }
    }

    static func ack(_ answer: DeviceAnswer) {
        guard let upTo = answer.value(DeviceBodies.ackUpTo(answer.body)) else { return }
        answer.complete(answer.core.ack(deviceID: answer.deviceID, secret: answer.secret, upTo: upTo)) { _ in
            .init(status: 204)
        }
    }

    static func keepalive(_ answer: DeviceAnswer) {
        answer.complete(answer.core.keepalive(deviceID: answer.deviceID, secret: answer.secret)) { released in
            HTTPServerResponse(
                status: 200,
                headers: ["content-type": "application/json"],
                body: EventStreamEncoder.keepaliveBody(released)
            )
        }
    }

    static func setState(_ answer: DeviceAnswer) {
        guard let report = answer.value(DeviceBodies.state(answer.body)) else { return }
        let applied = answer.core.setState(
            deviceID: answer.deviceID,
            secret: answer.secret,
            power: report.power,
            apps: report.apps,
            fetchIntervals: report.fetchIntervals
        )
        answer.complete(applied) { .json(status: 200, DeviceResponses.state($0)) }
    }

    static func reportFetchResults(_ answer: DeviceAnswer) {
        guard let results = answer.value(DeviceBodies.fetchResults(answer.body)) else { return }
        let reported = answer.core.reportFetchResults(
            deviceID: answer.deviceID,
            secret: answer.secret,
            results: results
        )
        answer.complete(reported) { _ in .init(status: 204) }
    }
}

/// Bodies of the device routes' answers (the keep-alive's is the event stream's encoder's).
enum DeviceResponses {
    /// `{"power": "...", "apps": {"<topic>": {"state": "...", "reported": "...", "reason": "..."}}}`:
    /// what is in force after a state report, with the reported state and why only for an app
    /// whose state is not the one reported.
    static func state(_ applied: AppliedState) -> String {
        var apps: [String] = []
        for app in applied.apps {
            var fields = ["\"state\":" + JSONText.quote(app.state.rawValue)]
            if let reason = app.reason {
                fields.append("\"reported\":" + JSONText.quote(app.reported.rawValue))
                fields.append("\"reason\":" + JSONText.quote(reason))
            }
            apps.append(JSONText.quote(app.topic) + ":{" + fields.joined(separator: ",") + "}")
        }
        return "{\"power\":" + JSONText.quote(applied.power.rawValue) + ",\"apps\":{" + apps.joined(separator: ",")
            + "}}"
    }
}
