import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import PushgateCrypto
import PushgateModel
import PushgateTransport

/// HTTP/2 connections to the other nodes, one per node, opened when first needed and again
/// after one fails. Every request carries the cluster's secret (`pushgate-cluster`), which the
/// receiving node checks before it trusts what the request says was checked already.
final class PeerConnections: Sendable {
    static let secretHeader = "pushgate-cluster"

    private let secret: String
    private let group: any EventLoopGroup
    private let logger: Logger
    private let connections = NIOLockedValueBox<[String: Task<HTTP2ClientConnection, any Error>]>([:])
    /// The connections made so far, for `submit`, which takes only one that exists.
    private let open = NIOLockedValueBox<[String: HTTP2ClientConnection]>([:])

    init(secret: String, group: any EventLoopGroup, logger: Logger) {
        self.secret = secret
        self.group = group
        self.logger = logger
    }

    /// Whether `headers` carry this cluster's secret.
    static func proves(_ headers: HTTPHeaders, secret: String) -> Bool {
        guard let given = headers.first(name: secretHeader) else { return false }
        return constantTimeEquals(Array(given.utf8), Array(secret.utf8))
    }

    /// `request` sent to the node at `address` (`http://HOST:PORT`), with the secret; its answer
    /// within `timeout`, or `PeerTimeout` (the connection is then dropped: a node paused or cut
    /// off answers nothing, and the caller asks the database again).
    func send(
        _ request: HTTPClientRequest,
        to address: String,
        timeout: TimeAmount = PeerConnections.timeout
    ) async throws -> HTTPClientResponse {
        var request = request
        request.headers.replaceOrAdd(name: Self.secretHeader, value: secret)
        let loop = group.next()
        let answer = loop.makePromise(of: HTTPClientResponse.self)
        let attempt = Task {
            do {
                let connection = try await connection(to: address)
                answer.succeed(try await connection.send(request))
            } catch {
                answer.fail(error)
            }
        }
        // Whichever comes first completes the promise; the other's completion is ignored.
        let timer = loop.scheduleTask(in: timeout) {
            answer.fail(PeerTimeout(address: address, timeout: timeout))
            attempt.cancel()
        }
        defer { timer.cancel() }
        do {
            return try await answer.futureResult.get()
        } catch {
            forget(address)
            throw error
        }
    }

    /// `request` sent to the node at `address` on the connection already open to it, without a
    /// task: the future completes on that connection's loop with the answer, or fails with
    /// `PeerTimeout` after `timeout` (the connection is then dropped). Nil when no connection is
    /// open yet: `send` makes one.
    func submit(
        _ request: HTTPClientRequest,
        to address: String,
        timeout: TimeAmount = PeerConnections.timeout
    ) -> EventLoopFuture<HTTPClientResponse>? {
        guard let connection = open.withLockedValue({ $0[address] }) else { return nil }
        var request = request
        request.headers.replaceOrAdd(name: Self.secretHeader, value: secret)
        let submitted = connection.submit(request)
        let loop = submitted.eventLoop
        let answer = loop.makePromise(of: HTTPClientResponse.self)
        let timer = loop.scheduleTask(in: timeout) {
            answer.fail(PeerTimeout(address: address, timeout: timeout))
        }
        submitted.whenComplete { result in
            timer.cancel()
            answer.completeWith(result)
        }
        answer.futureResult.whenFailure { [self] _ in forget(address) }
        return answer.futureResult
    }

    /// The longest a node waits for another's answer. A forwarded push is committed by its
    /// owner in milliseconds; twice this is what a provider waits at most before a 503 when the
    /// owner is paused and its lease not yet expired.
    static let timeout: TimeAmount = .seconds(2)

    /// Tells the node at `address` that the device is claimed at `epoch` elsewhere now.
    func release(_ deviceID: String, epoch: UInt64, at address: String) async {
        let body = ByteBuffer(string: "{\"deviceId\":\(JSONText.quote(deviceID)),\"epoch\":\(epoch)}")
        let request = HTTPClientRequest(
            method: "POST",
            path: "/internal/v1/release",
            headers: ["content-type": "application/json"],
            body: body
        )
        do {
            _ = try await send(request, to: address)
        } catch {
            logger.debug("telling a node of a release failed", metadata: ["peer": "\(address)", "error": "\(error)"])
        }
    }

    func close() async {
        open.withLockedValue { $0 = [:] }
        let all = connections.withLockedValue { connections in
            defer { connections = [:] }
            return Array(connections.values)
        }
        for task in all { await (try? task.value)?.close() }
    }

    private func connection(to address: String) async throws -> HTTP2ClientConnection {
        let task = connections.withLockedValue { connections in
            if let task = connections[address] { return task }
            let group = group
            let task = Task<HTTP2ClientConnection, any Error> {
                guard let (host, port) = Self.hostAndPort(address) else {
                    throw PeerAddressError(address: address)
                }
                let connection = try await HTTP2ClientConnection.connect(host: host, port: port, group: group)
                self.open.withLockedValue { $0[address] = connection }
                return connection
            }
            connections[address] = task
            return task
        }
        do {
            return try await task.value
        } catch {
            forget(address)
            throw error
        }
    }

    private func forget(_ address: String) {
        open.withLockedValue { _ = $0.removeValue(forKey: address) }
        let task = connections.withLockedValue { $0.removeValue(forKey: address) }
        Task { await (try? task?.value)?.close() }
    }

    /// `http://HOST:PORT` (IPv6 in brackets).
    static func hostAndPort(_ address: String) -> (String, Int)? {
        guard address.hasPrefix("http://") else { return nil }
        return ListenAddress(String(address.dropFirst("http://".count))).map { ($0.host, $0.port) }
    }
}

struct PeerTimeout: Error, CustomStringConvertible {
    var address: String
    var timeout: TimeAmount
    var description: String { "no answer from \(address) within \(timeout.nanoseconds / 1_000_000) ms" }
}

struct PeerAddressError: Error, CustomStringConvertible {
    var address: String
    var description: String { "\(address) is not a node address (http://HOST:PORT)" }
}
