/// A timer of the scheduler: a device's next budget check, a held push's next deadline (its
/// deferral end or its expiry), or a fetch window's end.
/// Entries are never removed when they become stale; the owner checks each one against its record
/// when it comes out (and when the heap is compacted).
struct Timer {
    var time: Int64
    var slot: UInt32
    /// The target's generation in the low 30 bits, the kind in the top two. A generation that
    /// wraps onto a stale entry only costs a check: the owner also compares `time` with the
    /// record's own due time.
    var tag: UInt32

    enum Kind: UInt32 {
        case held = 0
        case budget = 1
        case fetchWindow = 2
    }

    private static let generationMask: UInt32 = (1 << 30) - 1

    init(_ kind: Kind, slot: UInt32, generation: UInt32, at time: Int64) {
        self.time = time
        self.slot = slot
        tag = kind.rawValue << 30 | generation & Self.generationMask
    }

    static func budget(device slot: UInt32, generation: UInt32, at time: Int64) -> Timer {
        Timer(.budget, slot: slot, generation: generation, at: time)
    }

    static func held(slot: UInt32, generation: UInt32, at time: Int64) -> Timer {
        Timer(.held, slot: slot, generation: generation, at: time)
    }

    /// (The fourth value of the two bits is never made.)
    var kind: Kind { Kind(rawValue: tag >> 30) ?? .held }

    func matches(generation: UInt32) -> Bool { tag & Self.generationMask == generation & Self.generationMask }
}

/// A binary min-heap of timers by time.
struct DeadlineHeap {
    private(set) var timers: [Timer] = []

    var count: Int { timers.count }
    var first: Timer? { timers.first }

    mutating func push(_ timer: Timer) {
        timers.append(timer)
        siftUp(timers.count - 1)
    }

    @discardableResult
    mutating func removeFirst() -> Timer {
        let first = timers[0]
        let last = timers.removeLast()
        if !timers.isEmpty {
            timers[0] = last
            siftDown(0)
        }
        return first
    }

    /// Keeps the timers for which `isKept` holds, in O(n).
    mutating func retain(where isKept: (Timer) -> Bool) {
        timers.removeAll { !isKept($0) }
        var index = timers.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let moving = timers[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard moving.time < timers[parent].time else { break }
            timers[child] = timers[parent]
            child = parent
        }
        timers[child] = moving
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let moving = timers[parent]
        let count = timers.count
        while true {
            var child = 2 * parent + 1
            guard child < count else { break }
            if child + 1 < count, timers[child + 1].time < timers[child].time { child += 1 }
            guard timers[child].time < moving.time else { break }
            timers[parent] = timers[child]
            parent = child
        }
        timers[parent] = moving
    }
}
