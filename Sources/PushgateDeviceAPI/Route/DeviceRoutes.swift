import Foundation
import NIOCore
import NIOHTTP1
import PushgateCrypto
import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateTransport

/// The device agents' API (PRODUCT.md section 3). The event stream is HTTP/2 only: a device
/// holds one HTTP/2 connection whose stream carries its pushes while its acks and reports share
/// the connection; over HTTP/1.1 the stream would take a connection of its own and the agent a
/// second one for everything else. The JSON routes (creation, registrations, ack, keep-alive,
/// state, fetch results, deletion) also answer HTTP/1.1, so that provisioning scripts, plain
/// curl and HTTP/1.1-only libraries can set a device up.
///
/// Every route but device creation needs `authorization: bearer <device secret>`; a missing or
/// wrong secret and an unknown device id get the same 401, so the answer never tells whether a
/// device exists.
///
/// On a gateway that authenticates providers, a new connection may open one stream until it has
/// proven who it is (APNs' rule, applied to every connection on the port); a request that
/// passes device authentication (or the registration secret) marks the connection
/// authenticated, which lifts that limit and gives it the full idle timeout.
///
/// What the head alone shows is refused before the body is read: a wrong registration secret,
/// no device secret at all. A device secret itself is checked by the device's shard, with the
/// body (at most `Router.defaultMaxBodySize`).
public enum DeviceRoutes {
    /// `registrationSecret`: when set, `POST /v1/devices` needs `authorization: bearer <it>`;
    /// otherwise anyone who can reach the port may create devices. `creationLimit`: how many
    /// devices one client address may create (checked after the secret, which an app ships and
    /// anyone may extract); nil: no limit.
    /// `webPushOrigin`: the origin of Web Push endpoints (`webpushOrigin`, for a gateway behind
    /// a proxy); nil: the one each subscription's request came to.
    public static func register(
        on router: inout Router,
        core: DeliveryCore,
        registrationSecret: String? = nil,
        creationLimit: DeviceCreationGate? = nil,
        webPushOrigin: String? = nil,
        placement: (any DevicePlacement)? = nil
    ) {
        let webPushOrigin = webPushOrigin.map(WebPushEndpoint.normalized)
        let expectedSecret = registrationSecret.map { SHA256.hash($0.utf8) }
        let creation = RouteAdmission(admits: { head, responder in
            if let expectedSecret {
                guard
                    let given = BearerCredential.credential(in: head.headers.first(name: "authorization")).map(
                        String.init
                    ),
                    constantTimeEquals(SHA256.hash(given.utf8), expectedSecret)
                else {
                    responder.respond(
                        .refusal(
                            Refusal(
                                .unauthorized,
                                "creating a device needs authorization: bearer <registration secret>, as configured on the gateway"
                            )
                        )
                    )
                    return false
                }
                head.connection.markAuthenticated()
            }
            if let refusal = creationLimit?.refusal(for: head.connection.remoteAddress.flatMap(ClientAddress.init)) {
                responder.respond(.refusal(refusal))
                return false
            }
            return true
        })
        router.add("POST", "/v1/devices", protocols: .http1AndHTTP2, role: .device, admission: creation) {
            _,
            responder in
            core.createDevice().whenComplete { result in
                switch result {
                case .success(let created):
                    responder.respond(
                        .json(status: 201, JSONText.object(["deviceId": created.deviceID, "secret": created.secret]))
                    )
                case .failure(let error):
                    responder.respond(.refusal(for: error))
                }
            }
        }
        let device = RouteAdmission(admits: { head, responder in target(of: head, responder) != nil })
        router.addPrefix(nil, devicePrefix, protocols: .http1AndHTTP2, role: .device, admission: device) {
            request,
            responder in
            guard let placement else {
                route(request, responder, core: core, webPushOrigin: webPushOrigin)
                return
            }
            place(request, responder, placement) {
                route(request, responder, core: core, webPushOrigin: webPushOrigin)
            }
        }
    }

    /// A node of several: the request is served here once the device is, or forwarded to its
    /// owner and the owner's answer relayed.
    private static func place(
        _ request: HTTPServerRequest,
        _ responder: HTTPResponder,
        _ placement: any DevicePlacement,
        here: @escaping @Sendable () -> Void
    ) {
        let path = request.path[..<(request.path.utf8.firstIndex(of: UInt8(ascii: "?")) ?? request.path.endIndex)]
        let (deviceID, action) = DevicePath.parse(path.dropFirst(devicePrefix.utf8.count))
        let forwarded = placement.isForwarded(request)
        let loop = request.connection.eventLoop
        placement.place(deviceID: deviceID, opensStream: action == .events, forwarded: forwarded, on: loop)
            .hop(to: loop)
            .whenComplete { result in
                switch result {
                case .success(.here):
                    here()
                case .success(.node(let address)):
                    placement.forward(request, to: address).hop(to: loop).whenComplete { answer in
                        switch answer {
                        case .success(let response): responder.respond(response)
                        case .failure(let error): responder.respond(.refusal(for: error))
                        }
                    }
                case .success(.refused(let refusal)):
                    responder.respond(.refusal(refusal))
                case .failure(let error):
                    responder.respond(.refusal(for: error))
                }
            }
    }

    private static let devicePrefix = "/v1/devices/"

    /// The device, what is asked of it and the secret offered, from the request's head; nil once
    /// the refusal is answered (no device id, no secret, an event stream over HTTP/1.1).
    private static func target(
        of request: HTTPServerRequest,
        _ responder: HTTPResponder
    ) -> DeviceRequest? {
        // A slice, not `split`: no array per request (acks come with every delivered push).
        let path = request.path[..<(request.path.utf8.firstIndex(of: UInt8(ascii: "?")) ?? request.path.endIndex)]
        let (deviceID, action) = DevicePath.parse(path.dropFirst(devicePrefix.utf8.count))
        guard !deviceID.isEmpty else {
            responder.respond(.refusal(Refusal(.notFound, "no route for \(path)")))
            return nil
        }
        if action == .events, request.connection.httpVersion == .http1_1 {
            responder.respond(.refusal(.http2Required(path)))
            return nil
        }
        guard
            let secret = BearerCredential.credential(in: request.headers.first(name: "authorization")).map(String.init)
        else {
            responder.respond(.refusal(Refusal.unauthorized))
            return nil
        }
        return DeviceRequest(request: request, path: path, deviceID: deviceID, action: action, secret: secret)
    }

    /// One function per action (`DeviceRoutes+Actions.swift`); a known path with another method
    /// is 405 with `allow`.
    private static func route(
        _ request: HTTPServerRequest,
        _ responder: HTTPResponder,
        core: DeliveryCore,
        webPushOrigin: String?
    ) {
        guard let target = target(of: request, responder) else { return }
        let answer = DeviceAnswer(core: core, target: target, responder: responder)
        switch (request.method, target.action) {
        case ("DELETE", .device): deleteDevice(answer)
        case ("POST", .registrations): register(answer)
        case ("DELETE", .registration(let token)): unregister(token, answer)
        case ("POST", .subscriptions): subscribe(answer, origin: webPushOrigin)
        case ("DELETE", .subscription(let token)): unsubscribe(token, answer)
        case ("POST", .ack): ack(answer)
        case ("POST", .keepalive): keepalive(answer)
        case ("PUT", .state): setState(answer)
        case ("POST", .fetchResults): reportFetchResults(answer)
        case ("GET", .events): openEventStream(answer)
        case (let method, let action) where !action.methods.isEmpty:
            responder.respond(.refusal(.methodNotAllowed(target.path, allowed: action.methods, not: method)))
        default:
            responder.respond(.refusal(Refusal(.notFound, "no route for \(target.path)")))
        }
    }
}

/// A device request whose head named a device and offered a secret.
struct DeviceRequest {
    let request: HTTPServerRequest
    let path: Substring
    let deviceID: String
    let action: DeviceAction
    let secret: String
}
