// Fuzz target 3: the device API's request bodies (Tests/Fuzz/run.sh device-bodies): a
// registration's topic, an ack, a state report, fetch results, and the headers of the event
// stream and of the rest, through the gateway's router as the HTTP/2 server hands requests over
// (head first, then the whole body).
//
// Input: a selector byte (which request), then the body. For the event stream, which has no
// body, the bytes are its `last-event-id` header instead.
//
// Checked beyond "does not crash": every request is answered exactly once, never with a 5xx;
// the ack fast path (`{"upTo":N}` read without Foundation) agrees with Foundation's decoder on
// every body it takes.
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PushgateHTTP

@testable import PushgateDeviceAPI
@testable import PushgateTransport

private let requests: [(method: String, path: String)] = [
    ("POST", "registrations"), ("POST", "ack"), ("PUT", "state"), ("POST", "fetch-results"),
    ("GET", "events"), ("POST", "keepalive"), ("DELETE", "registrations/" + FuzzGateway.token), ("DELETE", ""),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var reader = FuzzReader(UnsafeBufferPointer(start: data, count: size))
    let (method, action) = requests[Int(reader.byte()) % requests.count]
    let body = reader.rest()
    compareAckParsers(body)

    let loop = EmbeddedEventLoop()
    let core = FuzzGateway.core(on: loop)
    let router = FuzzGateway.router(core: core)
    let connection = ConnectionInfo(
        id: 1,
        remoteAddress: nil,
        localAddress: nil,
        httpVersion: .http2,
        isTLS: false,
        negotiatedProtocol: nil,
        peerCertificate: nil,
        eventLoop: loop
    )
    var headers: HTTPHeaders = ["authorization": "bearer " + FuzzGateway.deviceSecret]
    let path = "/v1/devices/" + FuzzGateway.deviceID + (action.isEmpty ? "" : "/" + action)
    if action == "events" { headers.add(name: "last-event-id", value: String(decoding: body, as: UTF8.self)) }
    let head = HTTPServerRequest(method: method, path: path, headers: headers, connection: connection)

    let sink = RecordingSink()
    let responder = HTTPResponder(sink: sink, streamID: 1, eventLoop: loop)
    switch router.admit(head, responder: responder) {
    case .answered:
        break
    case .readBody(let maxBodySize):
        if body.count > maxBodySize {
            router.refuse(head, .bodyTooLarge(limit: maxBodySize), responder: responder)
        } else {
            var request = head
            if action != "events" { request.body = ByteBuffer(bytes: body) }
            router.handle(request, responder: responder)
        }
    }
    loop.run()
    check(sink.answers.count == 1, "\(method) \(action) answered \(sink.answers.count) times: \(sink.answers)")
    check(
        sink.answers.allSatisfy { $0 < 500 },
        "\(method) \(action) answered \(sink.answers): \(String(decoding: body, as: UTF8.self))"
    )
    // The connection goes away: as the HTTP/2 handler's teardown does, forget the open event
    // stream's writer (which holds the sink) and tell it.
    let writers = sink.writers
    sink.writers = []
    for writer in writers { writer.streamClosed(.connectionClosed) }
    loop.run()
    try? loop.syncShutdownGracefully()
    return 0
}

/// What `fastUpTo` takes, Foundation's decoder reads as the same number.
private func compareAckParsers(_ body: [UInt8]) {
    guard let fast = DeviceBodies.AckBody.fastUpTo(ByteBuffer(bytes: body)) else { return }
    let decoded = try? JSONDecoder().decode(DeviceBodies.AckBody.self, from: Data(body))
    check(
        decoded?.upTo == fast,
        "fast path read \(fast), Foundation \(String(describing: decoded?.upTo)): \(String(decoding: body, as: UTF8.self))"
    )
}

/// The responses' statuses, as the HTTP/2 handler would send them.
final class RecordingSink: HTTPResponseSink {
    var answers: [Int] = []
    var writers: [ResponseBodyWriter] = []
    var connectionBufferedBytes: Int { 0 }

    func sendResponse(_ response: HTTPServerResponse, streamID: Int32) { answers.append(response.head.status) }

    func startStreaming(_ head: ResponseHead, streamID: Int32, writer: ResponseBodyWriter) -> Bool {
        answers.append(head.status)
        writers.append(writer)
        return true
    }

    func writeBody(_ buffer: ByteBuffer?, end: Bool, streamID: Int32) -> Bool { true }
    func bufferedBodyBytes(streamID: Int32) -> Int { 0 }
    func cancelStream(streamID: Int32) {}
}
