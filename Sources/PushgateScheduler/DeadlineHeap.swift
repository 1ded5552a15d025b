/// A timer of the scheduler: a device's next budget check or a held push's next deadline (its
/// deferral end or its expiry). Entries are never removed when they become stale; the owner checks
/// each one against its record when it comes out (and when the heap is compacted).
struct Timer {
    var time: Int64
    var slot: UInt32
    /// The target's generation in the low 31 bits, the kind in the top bit. A generation that
    /// wraps onto a stale entry only costs a check: the owner also compares `time` with the
    /// record's own due time.
    var tag: UInt32

    static let budgetBit: UInt32 = 1 << 31

    static func budget(device slot: UInt32, generation: UInt32, at time: Int64) -> Timer {
        Timer(time: time, slot: slot, tag: (generation & ~budgetBit) | budgetBit)
    }

    static func held(slot: UInt32, generation: UInt32, at time: Int64) -> Timer {
        Timer(time: time, slot: slot, tag: generation & ~budgetBit)
    }

    var isBudget: Bool { tag & Self.budgetBit != 0 }

    func matches(generation: UInt32) -> Bool { tag & ~Self.budgetBit == generation & ~Self.budgetBit }
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
