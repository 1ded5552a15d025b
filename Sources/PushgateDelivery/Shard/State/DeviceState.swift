import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

/// One notification in a device's queue: committed to the store or on its way there.
///
/// A class: `CircularBuffer` has no in-place element access, so with a struct every read of an
/// entry copied its record (half a dozen strings and the payload, a retain each) and every flag
/// set copied it out and back. Confined to its shard's event loop, like the device.
final class QueuedNotification {
    var record: AcceptedPush
    /// Written to disk: only committed notifications are delivered, so a device never sees a
    /// push its provider was not told was accepted.
    var committed: Bool
    var delivery: DeliveryKind
    /// For `piggyback`: the apns-id of the priority-10 push it rode on.
    let carrier: String?
    /// Bytes of its event on the current stream, counted against the unacked window.
    var eventSize = 0
    /// Released by a keep-alive and sent in its response: the current stream skips it. A new
    /// stream sends it again if it is still unacknowledged (at-least-once).
    var sentInKeepalive = false
    /// Sent to the device at least once (on any stream, or in a keep-alive response) since this
    /// process loaded or accepted it. An ack stops below the first entry never sent, so acking a
    /// keep-alive release cannot delete older pushes still waiting in the queue.
    var sent = false
    /// Read from the store at start: whether an earlier process sent it is not known, so a
    /// stream's `Last-Event-ID` above it acks it (that process may have sent it on the stream
    /// the device resumes). One accepted by this process and never sent stops that ack.
    let loaded: Bool
    /// A silent push whose fetch window was opened (in this process or, from the store, an
    /// earlier one): written again, it opens none.
    var windowOpened = false

    var seq: UInt64 { record.seq ?? 0 }

    init(record: AcceptedPush, committed: Bool, delivery: DeliveryKind, carrier: String? = nil, loaded: Bool = false) {
        self.record = record
        self.loaded = loaded
        self.committed = committed
        self.delivery = delivery
        self.carrier = carrier
    }
}

/// The device's event stream. It exists before its response head is sent (`sink` nil until
/// then), so a push accepted after the agent has seen the head finds the device connected.
final class StreamBinding {
    let generation: UInt64
    var sink: (any EventSink)?
    var lastWriteMillis: Int64

    init(generation: UInt64, now: Int64) {
        self.generation = generation
        self.lastWriteMillis = now
    }
}

/// A registration as the router of provider pushes needs it.
struct RegistrationState {
    let deviceID: String
    /// An APNs app's topic, or a Web Push subscription's name.
    let topic: String
    var kind: RegistrationKind = .apns
    /// A Web Push subscription's application server key (RFC 8292 section 4), when restricted.
    var applicationServerKey: [UInt8]?
    var unregisteredAt: Int64?
    /// The app in the shard's scheduler, while the registration is active.
    var app: AppHandle?
    /// Set while the registration's commit is pending: further registrations of the same topic
    /// complete with it, so no caller gets a token before it is on disk.
    var committing: EventLoopFuture<String>?
}

/// Everything the gateway keeps in memory for one device. Confined to its shard's event loop.
final class DeviceState {
    let id: String
    let secretHash: [UInt8]
    /// The device in the shard's scheduler.
    let handle: DeviceHandle
    /// Notifications the scheduler holds for it (their records are in the shard's `held`).
    var heldCount = 0
    var tokensByTopic: [String: String] = [:]
    /// Unacknowledged notifications in sequence order.
    var queue = DeviceState.emptyQueue

    /// Even at capacity 0 a `CircularBuffer` allocates storage (48 bytes here); devices start
    /// out sharing this one and copy it on their first notification. Shared across shards
    /// safely: it never holds an entry (an append copies it first), and its storage's reference
    /// count is atomic.
    nonisolated(unsafe) static let emptyQueue = CircularBuffer<QueuedNotification>(initialCapacity: 0)
    /// Room an emptied queue keeps (see `DeviceShard.queueShrank`).
    static let retainedQueueCapacity = 16
    /// The next sequence number to assign.
    var nextSeq: UInt64
    /// Seqs up to this one are reserved on disk (or in a commit on its way): 0 until this
    /// process reserves any, so the first seq or ack after a start reserves again.
    var reservedSeq: UInt64 = 0
    /// The highest seq acknowledged since this process loaded the device (acks delete rows and
    /// record no level, so it starts at 0).
    var ackedSeq: UInt64 = 0
    /// Deletions of acks applied in memory whose commit failed: the next ack commits them, so
    /// that an ack answered 204 is on disk even when it repeats one that was refused.
    var uncommittedAcks: [StoreCommand] = []
    /// The device's ack commits on their way to the disk. An ack is answered once they and its own
    /// have committed, so that its answer covers every seq up to it, not only what it deleted
    /// itself; one that fails leaves the list, its deletions to `uncommittedAcks`.
    var ackCommitsInFlight: [EventLoopFuture<Void>] = []
    var stream: StreamBinding?
    /// The node's ownership of the device, when several gateway nodes share the database: every
    /// commit that changes the device is fenced with it. Nil for a gateway alone on its store.
    var owner: DeviceOwner?
    /// Since when the device has had no stream: its last stream's end, or when this process
    /// loaded or created it. For the admin view's "offline since".
    var offlineSince: Int64
    /// How many queue entries (from the front) were written on the current stream.
    var deliveredCount = 0
    var unackedBytes = 0

    /// `lastSeq`: the store's `DeviceRecord.lastSeq`, which covers every seq ever assigned.
    init(id: String, secretHash: [UInt8], handle: DeviceHandle, lastSeq: UInt64, offlineSince: Int64) {
        self.offlineSince = offlineSince
        self.id = id
        self.secretHash = secretHash
        self.handle = handle
        self.nextSeq = lastSeq + 1
    }

    /// Forgets what the current stream was sent: the next stream starts again after the last ack.
    func resetStreamProgress() {
        deliveredCount = 0
        unackedBytes = 0
        for entry in queue {
            entry.eventSize = 0
            entry.sentInKeepalive = false
        }
    }
}
