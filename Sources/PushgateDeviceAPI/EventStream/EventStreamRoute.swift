import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateTransport

extension DeviceRoutes {
    /// `GET /v1/devices/{id}/events`: the device's event stream, opened on its shard before the
    /// head is sent (so that a push accepted once the agent sees the head finds the device
    /// connected), then bound to the response once the head is out.
    static func openEventStream(_ answer: DeviceAnswer) {
        let request = answer.target.request
        let responder = answer.responder
        guard let lastEventID = answer.value(DeviceBodies.lastEventID(request.headers.first(name: "last-event-id")))
        else { return }
        let (core, deviceID) = (answer.core, answer.deviceID)
        // The longest the stream stays silent, in seconds: the agent's measure of a dead connection.
        let heartbeatInterval = String(core.heartbeatIntervalMillis / 1000)
        core.openStream(deviceID: deviceID, secret: answer.secret, lastEventID: lastEventID).whenComplete { result in
            let generation: UInt64
            switch result {
            case .success(let opened):
                generation = opened
                request.connection.markAuthenticated()
            case .failure(let error):
                responder.respond(.refusal(for: error))
                return
            }
            let head = ResponseHead(
                status: 200,
                headers: [
                    "content-type": "text/event-stream", "cache-control": "no-store",
                    "pushgate-heartbeat-interval": heartbeatInterval,
                ]
            )
            responder.startStream(head).whenComplete { started in
                switch started {
                case .success(let writer):
                    writer.onClose = { _ in core.closeStream(deviceID: deviceID, generation: generation) }
                    // Called as the connection is sent GOAWAY: ending the stream with a retry hint
                    // lets the agent reconnect elsewhere while the server drains.
                    writer.onShutdown = {
                        writer.write(EventStreamEncoder.shutdown)
                        writer.finish()
                    }
                    core.bindStream(deviceID: deviceID, generation: generation, sink: EventStreamSink(writer: writer))
                case .failure:
                    core.closeStream(deviceID: deviceID, generation: generation)
                }
            }
        }
    }
}
