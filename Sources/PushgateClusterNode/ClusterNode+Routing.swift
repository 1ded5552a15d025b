import Foundation
import NIOCore
import NIOHTTP1
import PushgateCluster
import PushgateDelivery
import PushgateDeviceAPI
import PushgateModel
import PushgateTransport

/// Where each request goes: pushes to their device's owner, device requests likewise, event
/// streams here (claiming the device).
extension ClusterNode: PushAcceptor, DevicePlacement {
    public func accept(_ push: Push, expiration: Expiration) -> EventLoopFuture<Disposition> {
        serve(token: push.deviceToken, ForwardedWork(push: push, expiration: expiration)) { [core] in
            core.accept(push, expiration: expiration).map { ForwardedAnswer(disposition: $0) }
        }.flatMapThrowing { try $0.decodedDisposition() }
    }

    public func acceptWebPush(_ submission: WebPushSubmission) -> EventLoopFuture<WebPushAcceptance> {
        serve(token: submission.token, ForwardedWork(webPush: submission)) { [core] in
            core.acceptWebPush(submission).map { ForwardedAnswer($0) }
        }.flatMapThrowing { try $0.webPushAcceptance() }
    }

    /// Serves `work` for the device `token` names. The common cases need no task and no
    /// database: a device this node holds is served here at once; one whose owner is known,
    /// with a connection open to it, is handed to the owner straight from the event loop; a
    /// token not seen before is looked up first (in a batch with others). Anything else, and
    /// anything that goes wrong on the way, goes through `route`.
    private func serve(
        token: String,
        _ work: @escaping @Sendable @autoclosure () -> ForwardedWork,
        lookedUp: Bool = false,
        here: @escaping @Sendable () -> EventLoopFuture<ForwardedAnswer>
    ) -> EventLoopFuture<ForwardedAnswer> {
        if !lookedUp, !knows(token: token) {
            return locate(token: token).map { Optional.some($0) }.recover { _ in nil }.flatMap { [self] found in
                switch found {
                case .some(.some): return serve(token: token, work(), lookedUp: true, here: here)
                // No device has it: this node's core gives the usual answer.
                case .some(.none): return here()
                // The lookup failed: `route` asks again, and answers with what it finds.
                case .none: return routed(token: token, work(), here: here)
                }
            }
        }
        switch placeAtOnce(token: token) {
        case .here:
            let served = here()
            return served.flatMapError { [self] error in
                // Let go meanwhile (a fenced commit): placed again.
                guard (error as? Refusal)?.reason == .badDeviceToken else {
                    return served.eventLoop.makeFailedFuture(error)
                }
                return routed(token: token, work(), here: here)
            }
        case .node(let deviceID, let address):
            let work = work()
            guard let sent = handOver(work, to: address) else { return routed(token: token, work, here: here) }
            return sent.flatMap { [self] answer in
                if let answer, answer.refusal?.reason != Refusal.Reason.misdirectedRequest.rawValue {
                    return sent.eventLoop.makeSucceededFuture(answer)
                }
                // That was the first attempt: the database is asked once, as `route` does after
                // its own first.
                forgetOwner(of: deviceID)
                return routed(token: token, work, from: 1, here: here)
            }
        case nil:
            return routed(token: token, work(), here: here)
        }
    }

    private func routed(
        token: String,
        _ work: ForwardedWork,
        from attempt: Int = 0,
        here: @escaping @Sendable () -> EventLoopFuture<ForwardedAnswer>
    ) -> EventLoopFuture<ForwardedAnswer> {
        promise { [self] in try await route(token: token, work, from: attempt) { try await here().get() } }
    }

    /// `work` on the connection open to its owner: the owner's answer, or nil when it did not
    /// come (the caller then asks the database). Nil at once when no connection is open.
    private func handOver(_ work: ForwardedWork, to address: String) -> EventLoopFuture<ForwardedAnswer?>? {
        let request = HTTPClientRequest(
            method: "POST",
            path: "/internal/v1/push",
            headers: ["content-type": "application/json"],
            body: work.json
        )
        guard let sent = peers.submit(request, to: address) else { return nil }
        count { $0.forwardedPushes += 1 }
        return sent.map { response -> ForwardedAnswer? in
            guard response.status == 200 else { return nil }
            return ForwardedAnswer(json: response.body)
        }.recover { _ in nil }
    }

    public func place(
        deviceID: String,
        opensStream: Bool,
        forwarded: Bool,
        on loop: any EventLoop
    ) -> EventLoopFuture<DevicePlace> {
        // The common case, a device's request (an ack, a keep-alive) where its stream is: no
        // task and no database. A stream opening claims the device, which only the database
        // can grant.
        if !opensStream {
            switch placeAtOnce(deviceID: deviceID) {
            case .here: return loop.makeSucceededFuture(.here)
            case .node(_, let address) where forwarded:
                return loop.makeSucceededFuture(.refused(Self.misdirected(deviceID, owner: address)))
            case .node(_, let address): return loop.makeSucceededFuture(.node(address))
            case nil: break
            }
        }
        return promise { [self] in
            do {
                switch try await place(deviceID, opensStream ? .stream : .takeover) {
                case .here: return .here
                case .node(let address) where forwarded:
                    return .refused(Self.misdirected(deviceID, owner: address))
                case .node(let address): return .node(address)
                }
            } catch let refusal as Refusal {
                return .refused(refusal)
            }
        }
    }

    public func forward(_ request: HTTPServerRequest, to address: String) -> EventLoopFuture<HTTPServerResponse> {
        promise { [self] in
            var headers = HTTPHeaders()
            for name in ["authorization", "content-type", "last-event-id"] {
                if let value = request.headers.first(name: name) { headers.add(name: name, value: value) }
            }
            let forwarded = HTTPClientRequest(
                method: request.method,
                path: request.path,
                authority: request.authority,
                scheme: request.scheme ?? "http",
                headers: headers,
                body: request.body.readableBytes > 0 ? request.body : nil
            )
            count { $0.forwardedDeviceRequests += 1 }
            let response = try await reaching(address) { try await self.peers.send(forwarded, to: address) }
            var answer = HTTPHeaders()
            for name in ["content-type", "retry-after", "allow"] {
                if let value = response.headers.first(name: name) { answer.add(name: name, value: value) }
            }
            return HTTPServerResponse(status: response.status, headers: answer, body: response.body)
        }
    }

    public func isForwarded(_ request: HTTPServerRequest) -> Bool {
        PeerConnections.proves(request.headers, secret: secret)
    }

    // MARK: Placing

    enum Place {
        case here
        case node(String)
    }

    /// Where `deviceID` is served: here when this node holds it or has just claimed it for
    /// `reason`, else its owner's address.
    func place(_ deviceID: String, _ reason: OwnershipRules.ClaimReason) async throws -> Place {
        guard actingLease != nil else { throw Self.notAMember }
        if reason == .takeover {
            if holds(deviceID) { return .here }
            if let address = knownOwner(of: deviceID) { return .node(address) }
        }
        switch try await claim(deviceID, reason) {
        case .claimed, .unknownDevice:
            forgetOwner(of: deviceID)
            return .here
        case .ownedElsewhere(let node):
            rememberOwner(of: deviceID, node.address)
            return .node(node.address)
        case .leaseNotAlive:
            throw Self.notAMember
        }
    }

    /// Serves a push here or at its device's owner. An owner that cannot be reached, or that
    /// says the device moved, is asked about once more from the database: by then the device may
    /// be another node's, or no live node's (and so this one's).
    func route(
        token: String,
        _ work: ForwardedWork,
        from firstAttempt: Int = 0,
        here: @escaping @Sendable () async throws -> ForwardedAnswer
    ) async throws -> ForwardedAnswer {
        // A token no device has: this node's core gives the usual answer.
        guard let deviceID = try await device(ofToken: token) else { return try await here() }
        for attempt in firstAttempt..<2 {
            switch try await place(deviceID, .takeover) {
            case .here:
                do {
                    return try await here()
                } catch let refusal as Refusal where refusal.reason == .badDeviceToken && attempt == 0 {
                    // The core let the device go since (a fenced commit): place it again.
                    forgetHeld(deviceID)
                }
            case .node(let address):
                count { $0.forwardedPushes += 1 }
                do {
                    let answer = try await send(work, to: address)
                    if answer.refusal?.reason == Refusal.Reason.misdirectedRequest.rawValue, attempt == 0 {
                        forgetOwner(of: deviceID)
                        continue
                    }
                    return answer
                } catch  where attempt == 0 {
                    forgetOwner(of: deviceID)
                }
            }
        }
        throw Refusal(
            .serviceUnavailable,
            "the device's node cannot be reached and its lease has not expired yet; retry",
            retryAfterSeconds: 1
        )
    }

    private func send(_ work: ForwardedWork, to address: String) async throws -> ForwardedAnswer {
        let request = HTTPClientRequest(
            method: "POST",
            path: "/internal/v1/push",
            headers: ["content-type": "application/json"],
            body: work.json
        )
        let response = try await reaching(address) { try await self.peers.send(request, to: address) }
        guard response.status == 200 else {
            throw Refusal(
                .serviceUnavailable,
                "the device's node answered \(response.status); retry",
                retryAfterSeconds: 1
            )
        }
        guard let answer = ForwardedAnswer(json: response.body) else {
            throw Refusal(.internalServerError, "the device's node answered with what is not a forwarded answer")
        }
        return answer
    }

    /// What the owner does with forwarded work: serves it here, claiming the device if no live
    /// node owns it; a device another node owns now is refused `MisdirectedRequest`. Work seen
    /// before (a second attempt) gets the first attempt's answer, served once.
    func serveForwarded(_ work: ForwardedWork) -> EventLoopFuture<ForwardedAnswer> {
        served.answer(work.id, on: eventLoopForFutures) { [self] in
            serveAtOnce(work) ?? promise { await self.serve(work) }
        }
    }

    /// Forwarded work for a device this node holds and may act for, served without a task; nil
    /// for anything else.
    private func serveAtOnce(_ work: ForwardedWork) -> EventLoopFuture<ForwardedAnswer>? {
        let served: EventLoopFuture<ForwardedAnswer>
        if let (push, expiration) = work.decodedPush(), case .here = placeAtOnce(token: push.deviceToken) {
            served = core.accept(push, expiration: expiration).map { ForwardedAnswer(disposition: $0) }
        } else if let submission = work.webPush?.decoded(), case .here = placeAtOnce(token: submission.token) {
            served = core.acceptWebPush(submission).map { ForwardedAnswer($0) }
        } else {
            return nil
        }
        return served.flatMapError { [self] error in
            // Let go meanwhile (a fenced commit): placed again, as any other work.
            guard (error as? Refusal)?.reason == .badDeviceToken else {
                return served.eventLoop.makeSucceededFuture(ForwardedAnswer(refusal: WireRefusal(Refusal(error))))
            }
            return promise { await self.serve(work) }
        }
    }

    private func serve(_ work: ForwardedWork) async -> ForwardedAnswer {
        do {
            if let (push, expiration) = work.decodedPush() {
                try await servedHere(token: push.deviceToken)
                return ForwardedAnswer(disposition: try await core.accept(push, expiration: expiration).get())
            }
            if let submission = work.webPush?.decoded() {
                try await servedHere(token: submission.token)
                return ForwardedAnswer(try await core.acceptWebPush(submission).get())
            }
            return ForwardedAnswer(refusal: WireRefusal(Refusal(.badRequest, "not a push this node understands")))
        } catch {
            return ForwardedAnswer(refusal: WireRefusal(Refusal(error)))
        }
    }

    private func servedHere(token: String) async throws {
        guard let deviceID = try await device(ofToken: token) else { return }
        if case .node(let address) = try await place(deviceID, .takeover) {
            throw Self.misdirected(deviceID, owner: address)
        }
    }

    /// `body`'s answer from another node; a node that cannot be reached is a 503 to retry (by
    /// then its lease may have expired, and the device be another's).
    func reaching<T>(_ address: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw Refusal(
                .serviceUnavailable,
                "the device's node at \(address) cannot be reached (\(error)); retry",
                retryAfterSeconds: 1
            )
        }
    }

    static let notAMember = Refusal(
        .serviceUnavailable,
        "this gateway node is not a member of its cluster now (its lease lapsed or it is joining); retry",
        retryAfterSeconds: 1
    )

    static func misdirected(_ deviceID: String, owner: String) -> Refusal {
        Refusal(.misdirectedRequest, "device \(deviceID) is owned by the node at \(owner) now")
    }

    /// `body`'s result, as a future on this node's loop.
    func promise<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> EventLoopFuture<T> {
        let promise = eventLoopForFutures.makePromise(of: T.self)
        promise.completeWithTask(body)
        return promise.futureResult
    }
}

extension ForwardedAnswer {
    init(disposition: Disposition) {
        self.disposition = disposition.rawValue
    }

    init(_ acceptance: WebPushAcceptance) {
        disposition = acceptance.disposition.rawValue
        messageID = acceptance.messageID
        ttlSeconds = acceptance.ttlSeconds
    }

    init(refusal: WireRefusal) {
        self.refusal = refusal
    }

    func decodedDisposition() throws -> Disposition {
        if let refusal {
            throw refusal.decoded() ?? Refusal(.internalServerError, "\(refusal.reason): \(refusal.detail)")
        }
        guard let disposition = disposition.flatMap(Disposition.init(rawValue:)) else {
            throw Refusal(.internalServerError, "the device's node answered without a disposition")
        }
        return disposition
    }

    func webPushAcceptance() throws -> WebPushAcceptance {
        let disposition = try decodedDisposition()
        guard let messageID, let ttlSeconds else {
            throw Refusal(.internalServerError, "the device's node answered without the message's id")
        }
        return WebPushAcceptance(messageID: messageID, ttlSeconds: ttlSeconds, disposition: disposition)
    }
}
