/// Streams by the tick at which their silence may need a heartbeat, so that each tick looks only
/// at the few streams due then instead of at every open stream: with many idle devices a look at
/// every stream each second costs a cold cache line per device and a large share of the idle
/// CPU (`Benchmarks/idle.sh` measures it).
///
/// A timing wheel: one slot per tick, enough slots for the furthest due time (`horizonMillis`
/// ahead). Entries are looked at once, at their slot's tick; whoever takes them decides whether
/// to heartbeat and schedules them again. Pure: time comes in as arguments.
struct HeartbeatWheel<Entry> {
    let tickMillis: Int64
    private var slots: [[Entry]]
    /// The last tick whose slot was taken.
    private var lastTick: Int64

    /// - Parameter horizonMillis: no entry is scheduled further ahead of the last tick taken.
    init(tickMillis: Int64, horizonMillis: Int64, nowMillis: Int64) {
        precondition(tickMillis > 0 && horizonMillis >= 0)
        self.tickMillis = tickMillis
        slots = Array(repeating: [], count: Int(horizonMillis / tickMillis) + 2)
        lastTick = Self.floorDiv(nowMillis, tickMillis)
    }

    /// `entry` comes back from `takeDue` at the tick of the second that holds `dueMillis`, which
    /// may be a little before it: the taker looks at the due time again and schedules the entry
    /// anew if it is not there yet (it then comes back at the next tick). Rounding the other way
    /// would let a due time just after a tick wait for the tick after next. At the next tick if
    /// that second was already taken, and sooner than due if ticks have not been taken for longer
    /// than the horizon.
    mutating func schedule(_ entry: Entry, dueMillis: Int64) {
        let tick = Self.floorDiv(dueMillis, tickMillis)
        slots[slot(min(max(tick, lastTick + 1), lastTick + Int64(slots.count) - 1))].append(entry)
    }

    /// The entries of every tick up to `nowMillis` not taken yet, earliest first. After a gap of
    /// a whole turn or more (a clock that jumped), or a clock that went back, every entry comes
    /// out once.
    mutating func takeDue(nowMillis: Int64) -> [Entry] {
        let nowTick = Self.floorDiv(nowMillis, tickMillis)
        guard nowTick != lastTick else { return [] }
        let count = Int64(slots.count)
        var tick = nowTick > lastTick ? max(lastTick + 1, nowTick - count + 1) : nowTick - count + 1
        var due: [Entry] = []
        while tick <= nowTick {
            let index = slot(tick)
            if !slots[index].isEmpty {
                due += slots[index]
                slots[index].removeAll(keepingCapacity: true)
            }
            tick += 1
        }
        lastTick = nowTick
        return due
    }

    private func slot(_ tick: Int64) -> Int {
        let count = Int64(slots.count)
        return Int((tick % count + count) % count)
    }

    private static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }
}
