import PushgateModel
import PushgateScheduler
import PushgateStore

// Acknowledgements: what a cumulative ack deletes.
extension ShardState {
    /// Cumulative ack, applied to memory: the plan deletes what it removed (and what earlier
    /// acks could not commit); nil when there is nothing more to delete. Only committed
    /// notifications can have been seen, so removal stops at the first uncommitted one; an ack
    /// beyond anything assigned is clamped.
    /// `onlySent`: an ack (`POST .../ack`) may name a seq from a keep-alive response, below which
    /// older pushes may not have been sent yet, so it stops below the first one never sent. A
    /// `Last-Event-ID` stops below the first one this process accepted and never sent too (an
    /// agent may resume with a keep-alive's seq, newer than a stored push still waiting: that
    /// push was deleted unseen), but acks those read from the store at start, which an earlier
    /// process may have sent on the stream being resumed.
    /// If the plan's commit fails, memory stays as it is (the device has these notifications)
    /// and the device's next ack carries the deletions to the disk.
    func acknowledge(_ device: DeviceState, upTo requested: UInt64, onlySent: Bool) -> ShardPlan? {
        var upTo = min(requested, device.nextSeq - 1)
        // Everything before `deliveredCount` went out on this stream or in a keep-alive.
        var index = device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)
        while index != device.queue.endIndex, device.queue[index].sent || (!onlySent && device.queue[index].loaded) {
            index = device.queue.index(after: index)
        }
        if index != device.queue.endIndex { upTo = min(upTo, device.queue[index].seq - 1) }
        guard upTo > device.ackedSeq || !device.uncommittedAcks.isEmpty else { return nil }
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
        var plan = ShardPlan(commands: deletions, restorations: [.ackDeletions(deviceID: device.id, deletions)])
        // After a restart nothing is reserved yet: the seqs this ack deletes must stay covered.
        reserveSeqs(of: device, through: upTo, into: &plan)
        return plan
    }
}
