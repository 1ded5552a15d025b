import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Event streams: opening, binding, closing; acks; writing what a device may receive.
extension DeviceShard {
    /// Makes a new stream the device's current one (ending any older one) before its head is
    /// sent; `lastEventID` acknowledges up to that seq first. Succeeds with the stream's
    /// generation, which `bind` and `close` name; with `lastEventID`, once that ack is on disk
    /// (the stream's 200 answers it: an agent killed with the gateway right after it must not
    /// get those notifications again), and fails as an ack fails when it cannot be committed.
    func openStream(deviceID: String, secret: String, lastEventID: UInt64?, promise: EventLoopPromise<UInt64>) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        let replaced = device.stream
        replaced?.sink?.finish()
        state.logDevice("event stream opened", deviceID, ["stream.replaced": "\(replaced != nil)"])
        streamGenerations += 1
        let now = clock.nowMillis()
        state.setStream(StreamBinding(generation: streamGenerations, now: now), of: device)
        device.resetStreamProgress()
        heartbeats.schedule((device, streamGenerations), dueMillis: now + configuration.heartbeatLeadMillis)
        var acked: EventLoopFuture<Void>?
        if let lastEventID {
            let committed = eventLoop.makePromise(of: Void.self)
            acknowledge(device, upTo: lastEventID, onlySent: false, promise: committed)
            acked = committed.futureResult
        }
        // A wake event: stored pushes are already queued, held ones follow them (`online`).
        var plan = ShardPlan()
        state.apply(state.scheduler.connect(device.handle, now: now), into: &plan)
        carryOut(plan)
        let generation = streamGenerations
        guard let acked else {
            promise.succeed(generation)
            return
        }
        acked.assumeIsolated().whenComplete { [self] result in
            switch result {
            case .success:
                promise.succeed(generation)
            case .failure(let error):
                // No head will be sent: the stream never started.
                close(deviceID: deviceID, generation: generation)
                promise.fail(error)
            }
        }
    }

    /// The stream's head is out: events can be written to it.
    func bind(deviceID: String, generation: UInt64, sink: any EventSink) {
        guard let device = state.devices[deviceID], let stream = device.stream, stream.generation == generation else {
            sink.finish()
            return
        }
        stream.sink = sink
        pump(device)
    }

    /// The stream ended, or its head could not be sent. A newer stream is left alone.
    func close(deviceID: String, generation: UInt64) {
        guard let device = state.devices[deviceID], let stream = device.stream, stream.generation == generation
        else { return }
        state.logDevice("event stream closed", deviceID)
        state.scheduler.disconnect(device.handle)
        armSchedulerTimer()
        state.setStream(nil, of: device)
        device.offlineSince = clock.nowMillis()
        device.resetStreamProgress()
    }

    func ack(deviceID: String, secret: String, upTo: UInt64, promise: EventLoopPromise<Void>) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        acknowledge(device, upTo: upTo, onlySent: true, promise: promise)
    }

    /// A cumulative ack (`ShardState.acknowledge`), applied in memory at once (the window it
    /// frees is free now): the commit the answer waits for can be the next one made for a push.
    /// The answer waits for the device's earlier ack commits too, so that it covers every seq up
    /// to it, not only what it deleted itself.
    private func acknowledge(_ device: DeviceState, upTo: UInt64, onlySent: Bool, promise: EventLoopPromise<Void>) {
        guard let plan = state.acknowledge(device, upTo: upTo, onlySent: onlySent) else {
            // Nothing more to delete; the ack that deleted it may still be on its way to the disk.
            promise.completeWith(EventLoopFuture.andAllSucceed(device.ackCommitsInFlight, on: eventLoop))
            return
        }
        let committed = eventLoop.makePromise(of: Void.self)
        promise.completeWith(
            EventLoopFuture.andAllSucceed(device.ackCommitsInFlight + [committed.futureResult], on: eventLoop)
        )
        device.ackCommitsInFlight.append(committed.futureResult)
        carryOut(plan, urgency: .deferrable) { result in
            device.ackCommitsInFlight.removeAll { $0 === committed.futureResult }
            committed.completeWith(result.mapError { $0.refusal as any Error })
        }
        pump(device)
    }

    /// Writes what the device may receive now: committed, unexpired, in sequence order, within
    /// the unacked window.
    func pump(_ device: DeviceState) {
        guard let stream = device.stream, let sink = stream.sink else { return }
        let now = clock.nowMillis()
        var buffer: ByteBuffer?
        var expired: [AcceptedPush] = []
        var firstWrites: [QueuedNotification] = []
        while device.deliveredCount < device.queue.count {
            let entry = device.queue[device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)]
            guard entry.committed else { break }
            if entry.sentInKeepalive {
                device.deliveredCount += 1
                continue
            }
            // Never written again once expired, even if an earlier stream had it (PRODUCT.md:
            // expired pushes are never delivered); the sweep leaves sent ones to this check.
            if entry.record.expiresAt <= now {
                device.queue.remove(at: device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount))
                state.leftMemory(entry.record)
                expired.append(entry.record)
                continue
            }
            guard device.unackedBytes < configuration.unackedWindowBytes else { break }
            if buffer == nil { buffer = ByteBufferAllocator().buffer(capacity: sink.estimatedSize(of: entry.record)) }
            let before = buffer!.writerIndex
            sink.encode(
                entry.record,
                delivery: entry.delivery,
                carrier: entry.carrier,
                fetchWindowSeconds: state.scheduler.configuration.fetchWindowSeconds(of: entry.record),
                into: &buffer!
            )
            let size = buffer!.writerIndex - before
            entry.eventSize = size
            // Delivered once, at its first write; written again on a later stream (it was not
            // acknowledged on an earlier one), it is redelivered.
            if entry.sent {
                state.counters.recordRedelivery()
            } else {
                state.metrics.deliveryLatency.record(millis: now - entry.record.acceptedAt)
                state.counters.recordDelivery(entry.delivery)
            }
            if !entry.windowOpened, entry.record.push.pushClass == .silent { firstWrites.append(entry) }
            entry.sent = true
            device.unackedBytes += size
            device.deliveredCount += 1
        }
        if !expired.isEmpty {
            var plan = ShardPlan()
            state.dropQueued(expired, .expired, into: &plan)
            state.queueShrank(device)
            carryOut(plan)
        }
        guard let buffer else { return }
        stream.lastWriteMillis = now
        sink.send(buffer)
        if !firstWrites.isEmpty {
            record(state.openFetchWindows(firstWrites, on: device, now: now))
            armSchedulerTimer()
        }
    }
}
