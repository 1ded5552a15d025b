import Logging
import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Commits and sequence numbers.
extension DeviceShard {
    /// Commits, then runs `then` back on this shard's loop. A failure is logged here once (but
    /// a storage fault, which the store logs as it begins and ends); the caller undoes its
    /// in-memory change and answers the request.
    func commit(
        _ commands: [StoreCommand],
        urgency: CommitUrgency = .prompt,
        then: @escaping (Result<Void, StoreError>) -> Void
    ) {
        let continuation = NIOLoopBound(then, eventLoop: eventLoop)
        let shard = NIOLoopBound(self, eventLoop: eventLoop)
        let logger = self.logger
        let completions = self.completions
        store.commit(commands, urgency: urgency) { result in
            // A storage fault is logged by the store's health when it begins and ends, not per request.
            if case .failure(let error) = result, error.kind != .unavailable {
                logger.error("store commit failed", metadata: Self.metadata(of: commands, failedWith: error))
            }
            completions.submit {
                if case .failure = result { shard.value.forgetReservations(in: commands) }
                continuation.value(result)
            }
        }
    }

    /// A failed commit's log metadata: the error, and the device and the push it changed when
    /// it changed one (a request's commit does); a count when it changed several.
    private static func metadata(of commands: [StoreCommand], failedWith error: StoreError) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["error": "\(error)", "store.commands": "\(commands.count)"]
        let devices = Set(commands.compactMap(\.deviceID))
        if devices.count == 1, let device = devices.first {
            metadata[LogMetadataKey.device] = "\(device)"
        } else if devices.count > 1 {
            metadata["store.devices"] = "\(devices.count)"
        }
        let pushes = commands.compactMap(\.apnsID)
        if pushes.count == 1, let push = pushes.first {
            metadata[LogMetadataKey.apnsID] = "\(push)"
        } else if pushes.count > 1 {
            metadata["store.pushes"] = "\(pushes.count)"
        }
        return metadata
    }

    // MARK: Sequence numbers

    /// Seqs reserved on disk at a time: a restart continues after the block, so most pushes and
    /// acks write no device row (at most this many seqs are skipped per restart).
    private static let seqReservationBlock: UInt64 = 1024

    /// The device's next seq. Passing its reservation reserves the next block in the same commit.
    func takeSeq(_ device: DeviceState, into commands: inout [StoreCommand]) -> UInt64 {
        let seq = device.nextSeq
        device.nextSeq += 1
        reserveSeqs(of: device, through: seq, into: &commands)
        return seq
    }

    func reserveSeqs(of device: DeviceState, through seq: UInt64, into commands: inout [StoreCommand]) {
        guard seq > device.reservedSeq else { return }
        // Seqs are stored as SQLite integers (signed 64-bit): never reserve past that.
        let through = max(seq, min(seq &+ Self.seqReservationBlock - 1, UInt64(Int64.max)))
        commands.append(.reserveSeqs(deviceID: device.id, through: through))
        device.reservedSeq = through
    }

    /// A reservation that did not reach the disk is made again by the next seq or ack.
    private func forgetReservations(in commands: [StoreCommand]) {
        for case .reserveSeqs(let deviceID, _) in commands {
            devices[deviceID]?.reservedSeq = 0
        }
    }
}
