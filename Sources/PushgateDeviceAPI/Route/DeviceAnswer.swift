import NIOCore
import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateTransport

/// How a device request is answered: with what its operation gives, or with a refusal.
struct DeviceAnswer {
    let core: DeliveryCore
    let target: DeviceRequest
    let responder: HTTPResponder

    var deviceID: String { target.deviceID }
    var secret: String { target.secret }
    var body: ByteBuffer { target.request.body }

    /// Answers with `success` or the refusal; a success proves the device's secret, which lifts
    /// a gated connection's stream limit.
    func complete<T>(_ future: EventLoopFuture<T>, _ success: @escaping @Sendable (T) -> HTTPServerResponse) {
        let connection = target.request.connection
        let responder = responder
        future.whenComplete { result in
            switch result {
            case .success(let value):
                connection.markAuthenticated()
                responder.respond(success(value))
            case .failure(let error): responder.respond(.refusal(for: error))
            }
        }
    }

    /// The body's value, or nil once its refusal is on its way. A body the route cannot use is
    /// refused only once the secret is proven, and only then is the client told what is wrong
    /// with it: a request with a wrong secret gets its 401, as one without any does, and learns
    /// nothing from its body. The secret lives on the device's shard, so only a refused body
    /// pays for this hop; a good one goes straight to its operation, which checks the secret
    /// itself.
    func value<T>(_ parsed: Result<T, Refusal>) -> T? {
        switch parsed {
        case .success(let value): return value
        case .failure(let refusal):
            refuse(refusal)
            return nil
        }
    }

    func refuse(_ refusal: Refusal) {
        let responder = responder
        core.authenticate(deviceID: deviceID, secret: secret).whenComplete { result in
            switch result {
            case .success: responder.respond(.refusal(refusal))
            case .failure(let error): responder.respond(.refusal(for: error))
            }
        }
    }
}
