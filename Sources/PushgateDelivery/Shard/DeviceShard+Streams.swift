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
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        let replaced = device.stream
        replaced?.sink?.finish()
        logDevice("event stream opened", deviceID, ["stream.replaced": "\(replaced != nil)"])
        streamGenerations += 1
        let now = clock.nowMillis()
        setStream(StreamBinding(generation: streamGenerations, now: now), of: device)
        device.resetStreamProgress()
        heartbeats.schedule((device, streamGenerations), dueMillis: now + configuration.heartbeatLeadMillis)
        var acked: EventLoopFuture<Void>?
        if let lastEventID {
            let committed = eventLoop.makePromise(of: Void.self)
            acknowledge(device, upTo: lastEventID, onlySent: false, promise: committed)
            acked = committed.futureResult
        }
        // A wake event: stored pushes are already queued, held ones follow them (`online`).
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        _ = apply(scheduler.connect(device.handle, now: now), into: &commands, entries: &entries)
        finish(commands, entries: entries) { _ in }
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
        guard let device = devices[deviceID], let stream = device.stream, stream.generation == generation else {
            sink.finish()
            return
        }
        stream.sink = sink
        pump(device)
    }

    /// The stream ended, or its head could not be sent. A newer stream is left alone.
    func close(deviceID: String, generation: UInt64) {
        guard let device = devices[deviceID], let stream = device.stream, stream.generation == generation else {
            return
        }
        logDevice("event stream closed", deviceID)
        disconnect(device)
    }

    private func disconnect(_ device: DeviceState) {
        scheduler.disconnect(device.handle)
        armSchedulerTimer()
        setStream(nil, of: device)
        device.offlineSince = clock.nowMillis()
        device.resetStreamProgress()
    }

    /// The one way a device's current stream changes, so that the count of connected devices
    /// follows it.
    func setStream(_ stream: StreamBinding?, of device: DeviceState) {
        connectedDevices += (stream == nil ? 0 : 1) - (device.stream == nil ? 0 : 1)
        device.stream = stream
    }

    func ack(deviceID: String, secret: String, upTo: UInt64, promise: EventLoopPromise<Void>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        acknowledge(device, upTo: upTo, onlySent: true, promise: promise)
    }

    /// Cumulative ack. Only committed notifications can have been seen, so removal stops at the
    /// first uncommitted one; an ack beyond anything assigned is clamped.
    /// `onlySent`: an ack (`POST .../ack`) may name a seq from a keep-alive response, below which
    /// older pushes may not have been sent yet, so it stops below the first one never sent. A
    /// `Last-Event-ID` stops below the first one this process accepted and never sent too (an
    /// agent may resume with a keep-alive's seq, newer than a stored push still waiting: that
    /// push was deleted unseen), but acks those read from the store at start, which an earlier
    /// process may have sent on the stream being resumed.
    private func acknowledge(
        _ device: DeviceState,
        upTo requested: UInt64,
        onlySent: Bool,
        promise: EventLoopPromise<Void>?
    ) {
        var upTo = min(requested, device.nextSeq - 1)
        // Everything before `deliveredCount` went out on this stream or in a keep-alive.
        var index = device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)
        while index != device.queue.endIndex, device.queue[index].sent || (!onlySent && device.queue[index].loaded) {
            index = device.queue.index(after: index)
        }
        if index != device.queue.endIndex { upTo = min(upTo, device.queue[index].seq - 1) }
        guard upTo > device.ackedSeq || !device.uncommittedAcks.isEmpty else {
            // Nothing more to delete; the ack that deleted it may still be on its way to the disk.
            promise?.completeWith(EventLoopFuture.andAllSucceed(device.ackCommitsInFlight, on: eventLoop))
            return
        }
        upTo = max(upTo, device.ackedSeq)
        var removed: [UInt64] = []
        var windows: [UInt64] = []
        while let first = device.queue.first, first.committed, first.seq <= upTo {
            device.queue.removeFirst()
            leftMemory(first.record)
            removed.append(first.record.acceptanceID)
            // A closed window goes with its push; an open one stays until its result or end.
            if first.windowOpened, !scheduler.isFetchWindowOpen(device: device.handle, seq: first.seq) {
                windows.append(first.seq)
            }
            if device.deliveredCount > 0 {
                device.deliveredCount -= 1
                device.unackedBytes -= first.eventSize
            }
        }
        counters.acknowledged(removed.count)
        queueShrank(device)
        device.ackedSeq = upTo
        var deletions = device.uncommittedAcks
        device.uncommittedAcks = []
        deletions.append(.ack(deviceID: device.id, acceptanceIDs: removed))
        if !windows.isEmpty { deletions.append(.forgetFetchWindows(deviceID: device.id, seqs: windows)) }
        var commands = deletions
        // After a restart nothing is reserved yet: the seqs this ack deletes must stay covered.
        reserveSeqs(of: device, through: upTo, into: &commands)
        // Applied in memory already (the window it frees is free now): the commit the 200 waits
        // for can be the next one made for a push. If it fails, memory stays as it is (the device
        // has these notifications) and the next ack carries the deletions to the disk.
        let committed = eventLoop.makePromise(of: Void.self)
        promise?.completeWith(
            EventLoopFuture.andAllSucceed(device.ackCommitsInFlight + [committed.futureResult], on: eventLoop)
        )
        device.ackCommitsInFlight.append(committed.futureResult)
        commit(commands, urgency: .deferrable) { [self] result in
            if case .failure = result, devices[device.id] === device {
                device.uncommittedAcks = deletions + device.uncommittedAcks
            }
            device.ackCommitsInFlight.removeAll { $0 === committed.futureResult }
            committed.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
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
                leftMemory(entry.record)
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
                fetchWindowSeconds: scheduler.configuration.fetchWindowSeconds(of: entry.record),
                into: &buffer!
            )
            let size = buffer!.writerIndex - before
            entry.eventSize = size
            // Delivered once, at its first write; written again on a later stream (it was not
            // acknowledged on an earlier one), it is redelivered.
            if entry.sent {
                counters.recordRedelivery()
            } else {
                metrics.deliveryLatency.record(millis: now - entry.record.acceptedAt)
                counters.recordDelivery(entry.delivery)
            }
            if !entry.windowOpened, entry.record.push.pushType.pushClass == .silent { firstWrites.append(entry) }
            entry.sent = true
            device.unackedBytes += size
            device.deliveredCount += 1
        }
        if !expired.isEmpty {
            dropExpired(expired, from: device)
        }
        guard let buffer else { return }
        stream.lastWriteMillis = now
        sink.send(buffer)
        if !firstWrites.isEmpty { openFetchWindows(firstWrites, on: device, now: now) }
    }
}
