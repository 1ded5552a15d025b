import PushgateModel

// Held queues: the per-app lists of held records, their slots, and the ways out of them.

extension Scheduler {
    /// Holds `push` in its app's list. A held push of the same app and class with the same collapse
    /// id is replaced (and reported as `coalesced`); a regular replacement keeps the earlier
    /// deferral deadline, so a collapse group is never deferred longer than its first member
    /// would have been. Above the app's `maxHeldPerApp` silent pushes the oldest go (`overflow`).
    /// Returns the id of the replaced push, if any.
    func hold(_ push: SchedulerPush, app a: Int, deadline: Int64, drops: inout [Drop]) -> UInt64? {
        let silentClass = push.pushClass == .silent
        var deadline = deadline
        let replaced = coalesceHeld(app: a, with: push, drops: &drops)
        // Only a regular replacement inherits a deferral deadline: a silent push has none, at
        // priority 5 it waits for budget and at priority 1 for a wake event, whatever it replaced.
        if let replaced, !silentClass { deadline = min(deadline, replaced.deadline) }
        insertHeld(push, app: a, deadline: deadline)
        if silentClass { capHeldSilent(of: a, drops: &drops) }
        return replaced?.id
    }

    /// Drops the held push of `push`'s app and class with `push`'s collapse id, if there is one
    /// (`coalesced`), and returns it: `push` replaces it.
    /// A Web Push message's `Topic` replaces its subscription's held message of that topic
    /// whatever their urgencies (RFC 8030 section 5.4: the new one brings its own urgency).
    func coalesceHeld(app a: Int, with push: SchedulerPush, drops: inout [Drop]) -> HeldSlot? {
        guard let collapseID = push.collapseID else { return nil }
        // nil: either class.
        let silentClass: Bool? = push.urgency != nil ? nil : push.pushClass == .silent
        var slot =
            silentClass != false ? heldSlot(in: apps[a].silent, silentClass: true, collapseID: collapseID) : noSlot
        if slot == noSlot { slot = heldSlot(in: apps[a].regular, silentClass: silentClass, collapseID: collapseID) }
        guard slot != noSlot else { return nil }
        let old = removeHeld(slot)
        drops.append(drop(old, reason: .coalesced))
        return old
    }

    private func heldSlot(in list: HeldList, silentClass: Bool?, collapseID: String) -> UInt32 {
        var slot = list.head
        while slot != noSlot,
            silentClass.map({ held[Int(slot)].isSilentClass != $0 }) ?? false
                || held[Int(slot)].collapseID != collapseID
        {
            slot = held[Int(slot)].next
        }
        return slot
    }

    /// Above the app's `maxHeldPerApp` held silent pushes, the oldest go (`overflow`), whichever
    /// list holds them: those at priority 1 wait in the regular list (usually empty), counted by
    /// a walk of it.
    private func capHeldSilent(of a: Int, drops: inout [Drop]) {
        let maxHeld = policy(ofApp: a).maxHeld
        var waitingForWake = firstSilentClass(from: apps[a].regular.head)
        var waitingCount = silentClassCount(from: waitingForWake)
        while apps[a].silent.count + waitingCount > maxHeld {
            let head = apps[a].silent.head
            let slot: UInt32
            if waitingForWake != noSlot, head == noSlot || held[Int(waitingForWake)].id < held[Int(head)].id {
                slot = waitingForWake
                waitingForWake = firstSilentClass(from: held[Int(slot)].next)
                waitingCount -= 1
            } else {
                slot = head
            }
            drops.append(drop(removeHeld(slot), reason: .overflow))
        }
    }

    /// The first silent push from `slot` on in a regular list, or `noSlot`.
    private func firstSilentClass(from slot: UInt32) -> UInt32 {
        var slot = slot
        while slot != noSlot, !held[Int(slot)].isSilentClass { slot = held[Int(slot)].next }
        return slot
    }

    private func silentClassCount(from slot: UInt32) -> UInt32 {
        var count: UInt32 = 0
        var slot = slot
        while slot != noSlot {
            if held[Int(slot)].isSilentClass { count += 1 }
            slot = held[Int(slot)].next
        }
        return count
    }

    /// Adds a held record at its place by id (the tail, for pushes arriving in acceptance order)
    /// and sets its timer.
    func insertHeld(_ push: SchedulerPush, app a: Int, deadline: Int64) {
        let silent = push.waitsForBudget
        let slot: UInt32
        if let free = freeHeld.popLast() {
            slot = free
            let s = Int(slot)
            held[s].id = push.id
            held[s].expiresAt = push.expiresAt
            held[s].deadline = deadline
            held[s].collapseID = push.collapseID
            held[s].app = UInt32(a)
            held[s].isSilent = silent
            held[s].isSilentClass = push.pushClass == .silent
            held[s].isLive = true
            held[s].urgency = push.urgency
        } else {
            slot = UInt32(held.count)
            held.append(
                HeldSlot(
                    id: push.id,
                    expiresAt: push.expiresAt,
                    deadline: deadline,
                    collapseID: push.collapseID,
                    app: UInt32(a),
                    prev: noSlot,
                    next: noSlot,
                    generation: 0,
                    isSilent: silent,
                    isSilentClass: push.pushClass == .silent,
                    isLive: true,
                    urgency: push.urgency
                )
            )
        }
        var list = silent ? apps[a].silent : apps[a].regular
        var after = list.tail
        while after != noSlot, held[Int(after)].id > push.id { after = held[Int(after)].prev }
        let before = after == noSlot ? list.head : held[Int(after)].next
        held[Int(slot)].prev = after
        held[Int(slot)].next = before
        if after == noSlot { list.head = slot } else { held[Int(after)].next = slot }
        if before == noSlot { list.tail = slot } else { held[Int(before)].prev = slot }
        list.count += 1
        if silent { apps[a].silent = list } else { apps[a].regular = list }

        let d = Int(apps[a].device)
        if silent { devices[d].heldSilent += 1 } else { devices[d].heldRegular += 1 }
        heldCount += 1
        schedule(.held(slot: slot, generation: held[Int(slot)].generation, at: held[Int(slot)].due))
    }

    /// Unlinks a held record from its app's list and frees its slot; returns the record as it was.
    @discardableResult
    func removeHeld(_ slot: UInt32) -> HeldSlot {
        let record = held[Int(slot)]
        let a = Int(record.app)
        var list = record.isSilent ? apps[a].silent : apps[a].regular
        if record.prev == noSlot { list.head = record.next } else { held[Int(record.prev)].next = record.next }
        if record.next == noSlot { list.tail = record.prev } else { held[Int(record.next)].prev = record.prev }
        list.count -= 1
        if record.isSilent { apps[a].silent = list } else { apps[a].regular = list }
        let d = Int(apps[a].device)
        if record.isSilent { devices[d].heldSilent -= 1 } else { devices[d].heldRegular -= 1 }
        freeHeldSlot(slot)
        return record
    }

    /// Frees a slot whose list is being discarded as a whole (the caller fixes the counts).
    func freeHeldSlot(_ slot: UInt32) {
        let s = Int(slot)
        held[s].isLive = false
        held[s].generation &+= 1
        held[s].collapseID = nil
        freeHeld.append(slot)
        heldCount -= 1
    }

    /// Drops every held push of one list of an app.
    func dropAll(of a: Int, silent: Bool, reason: DropReason, into drops: inout [Drop]) {
        var slot = silent ? apps[a].silent.head : apps[a].regular.head
        while slot != noSlot {
            let next = held[Int(slot)].next
            drops.append(drop(removeHeld(slot), reason: reason))
            slot = next
        }
    }

    /// Drops every held silent push of an app: its silent list, and those at priority 1 in its
    /// regular list.
    func dropSilent(of a: Int, reason: DropReason, into drops: inout [Drop]) {
        dropAll(of: a, silent: true, reason: reason, into: &drops)
        var slot = firstSilentClass(from: apps[a].regular.head)
        while slot != noSlot {
            let next = firstSilentClass(from: held[Int(slot)].next)
            drops.append(drop(removeHeld(slot), reason: reason))
            slot = next
        }
    }

    /// A wake event: everything held for the device goes, in acceptance order, without taking
    /// budget. Held pushes already past their expiry are dropped instead, even if their timer has
    /// not fired yet: expiry is enforced at release time. A Web Push message below the urgency
    /// the device's power state allows stays held: it is never delivered below it, so it does
    /// not ride along either (RFC 8030 section 5.3).
    func releaseAll(device d: Int, kind: DeliveryKind, now: Int64, into output: inout SchedulerOutput) {
        devices[d].budgetDue = DeviceSlot.noBudgetDue
        guard devices[d].heldTotal > 0 else { return }
        // Awake, every urgency is allowed: nothing to look at one by one.
        guard devices[d].power.minimumUrgency == .veryLow else {
            release(device: d, kind: kind, now: now, into: &output) { _ in true }
            rescheduleBudget(device: d)
            return
        }
        var slots: [UInt32] = []
        slots.reserveCapacity(Int(devices[d].heldTotal))
        var a = devices[d].firstApp
        while a != noSlot {
            appendSlots(of: apps[Int(a)].silent, to: &slots)
            appendSlots(of: apps[Int(a)].regular, to: &slots)
            apps[Int(a)].silent = HeldList()
            apps[Int(a)].regular = HeldList()
            a = apps[Int(a)].nextSibling
        }
        devices[d].heldSilent = 0
        devices[d].heldRegular = 0
        slots.sort { held[Int($0)].id < held[Int($1)].id }
        for slot in slots {
            let record = held[Int(slot)]
            freeHeldSlot(slot)
            if record.expiresAt <= now {
                output.drops.append(drop(record, reason: .expired))
            } else {
                output.releases.append(release(record, kind: kind))
            }
        }
    }

    /// Releases (or drops, when expired) the device's held pushes that `selected` picks among
    /// those its power state allows, in acceptance order; the others stay held.
    func release(
        device d: Int,
        kind: DeliveryKind,
        now: Int64,
        into output: inout SchedulerOutput,
        where selected: (HeldSlot) -> Bool
    ) {
        let minimum = devices[d].power.minimumUrgency
        var taken: [HeldSlot] = []
        var a = devices[d].firstApp
        while a != noSlot {
            for list in [apps[Int(a)].silent, apps[Int(a)].regular] {
                var slot = list.head
                while slot != noSlot {
                    let record = held[Int(slot)]
                    if record.expiresAt <= now || (Self.allows(record, minimum) && selected(record)) {
                        taken.append(removeHeld(slot))
                    }
                    slot = record.next
                }
            }
            a = apps[Int(a)].nextSibling
        }
        taken.sort { $0.id < $1.id }
        for record in taken {
            if record.expiresAt <= now {
                output.drops.append(drop(record, reason: .expired))
            } else {
                output.releases.append(release(record, kind: kind))
            }
        }
    }

    /// Whether a device whose power state takes `minimum` and above may be given `record` now.
    static func allows(_ record: HeldSlot, _ minimum: WebPushUrgency) -> Bool {
        record.urgency.map { $0 >= minimum } ?? true
    }

    func appendSlots(of list: HeldList, to slots: inout [UInt32]) {
        var slot = list.head
        while slot != noSlot {
            slots.append(slot)
            slot = held[Int(slot)].next
        }
    }

    func release(_ record: HeldSlot, kind: DeliveryKind) -> Release {
        let a = Int(record.app)
        return Release(id: record.id, device: deviceHandle(Int(apps[a].device)), app: appHandle(a), kind: kind)
    }

    func drop(_ record: HeldSlot, reason: DropReason) -> Drop {
        let a = Int(record.app)
        return Drop(id: record.id, device: deviceHandle(Int(apps[a].device)), app: appHandle(a), reason: reason)
    }
}
