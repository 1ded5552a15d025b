import PushgateCluster

/// Three nodes, three devices and a database, under random interleavings: requests and answers
/// delayed at random, nodes paused (SIGSTOP: their clocks run on, they do nothing), streams
/// opening on one node or another, pushes arriving anywhere. Every node follows `NodeLease` and
/// the database `OwnershipRules`. The run records what each node did as an owner and what the
/// database took, for the properties to check.
struct OwnershipSimulation {
    static let nodes = 3
    static let devices = ["d0", "d1", "d2"]
    static let configuration = NodeLease.Configuration(leaseMillis: 5_000, renewEveryMillis: 1_000, safetyMillis: 250)

    /// A node acting as a device's owner (a delivery, a commit sent) at `time`.
    struct Act: Equatable {
        var node: Int
        var device: String
        var lease: UInt64
        var epoch: UInt64
        var time: Int64
    }

    /// A write the database took.
    struct Write: Equatable {
        var device: String
        var lease: UInt64
        var epoch: UInt64
        var time: Int64
    }

    private enum Request {
        case join(request: UInt64)
        case renew(lease: UInt64, request: UInt64)
        case claim(device: String, lease: UInt64, reason: OwnershipRules.ClaimReason)
        case write(device: String, lease: UInt64, epoch: UInt64)
    }

    private enum Answer {
        case joined(lease: UInt64, request: UInt64)
        case renewed(lease: UInt64, request: UInt64)
        case refused(lease: UInt64, request: UInt64)
        case claim(device: String, lease: UInt64, result: OwnershipRules.ClaimResult)
        case write(device: String, epoch: UInt64, taken: Bool)
        /// The database tells a node that a device's stream opened elsewhere.
        case lost(device: String, epoch: UInt64)
    }

    private struct Message {
        var node: Int
        var at: Int64
        var toDatabase: Request?
        var toNode: Answer?
    }

    private struct Node {
        var lease = NodeLease(configuration: OwnershipSimulation.configuration)
        var owned: [String: UInt64] = [:]
        var pausedUntil: Int64 = 0
        /// Until then its requests take seconds to reach the database.
        var slowUntil: Int64 = 0
    }

    private(set) var now: Int64 = 1_000_000
    private(set) var database = OwnershipRules(leaseMillis: OwnershipSimulation.configuration.leaseMillis)
    private var nodes = Array(repeating: Node(), count: OwnershipSimulation.nodes)
    private var network: [Message] = []
    private(set) var acts: [Act] = []
    private(set) var writes: [Write] = []
    private(set) var violations: [String] = []
    /// How often the interesting things happened, so that a test can tell the runs reach them.
    private(set) var counts: [String: Int] = [:]
    /// Devices some node was asked to act for since the last heal, and the last node asked.
    private(set) var wanted: [String: Int] = [:]

    static func run(_ words: [UInt64]) -> OwnershipSimulation {
        var simulation = OwnershipSimulation()
        for word in words { simulation.step(word) }
        simulation.heal()
        return simulation
    }

    private mutating func step(_ word: UInt64) {
        let node = Int((word >> 8) % 3) % Self.nodes
        let device = Self.devices[Int(word >> 16) % Self.devices.count]
        let amount = Int64((word >> 24) % 4_096)
        switch word % 8 {
        case 0, 1, 2: advance(by: amount % 400 + 1)
        case 3: if running(node) { streamOpens(device, on: node) }
        case 4, 5: if running(node) { push(device, on: node) }
        case 6:
            // A pause (SIGSTOP) of up to 12 s, or a slow link to the database for as long.
            if word & (1 << 40) != 0 {
                nodes[node].pausedUntil = max(nodes[node].pausedUntil, now + amount * 3)
            } else {
                nodes[node].slowUntil = max(nodes[node].slowUntil, now + amount * 3)
            }
        default: deliverOne(Int(amount))
        }
        check()
    }

    /// Every pause ends, every message arrives, and time runs on with the nodes ticking and each
    /// wanted device asked for once more: every wanted device must end up owned under a live lease.
    private mutating func heal() {
        for index in nodes.indices {
            nodes[index].pausedUntil = 0
            nodes[index].slowUntil = 0
        }
        for _ in 0..<40 {
            advance(by: 300)
            for (device, node) in wanted.sorted(by: { $0.key < $1.key }) where !ownedAlive(device) {
                push(device, on: node)
            }
        }
        for device in wanted.keys.sorted() where !ownedAlive(device) {
            violations.append(
                "after healing, \(device) is owned by no live lease: \(String(describing: database.owners[device]))"
            )
        }
    }

    private func ownedAlive(_ device: String) -> Bool {
        database.owners[device].map { database.isAlive($0.lease, now: now) } ?? false
    }

    private func running(_ node: Int) -> Bool { nodes[node].pausedUntil <= now }

    /// Time runs on in small steps; in each, what has arrived is taken in (by running nodes) and
    /// every running node ticks.
    private mutating func advance(by millis: Int64) {
        let end = now + millis
        while now < end {
            now = min(end, now + 50)
            while let index = network.indices.first(where: { isDue(network[$0]) }) {
                let message = network.remove(at: index)
                if let request = message.toDatabase { database(message.node, request) }
                if let reply = message.toNode { node(message.node, reply) }
            }
            for index in nodes.indices { tick(index) }
            check()
        }
    }

    private func isDue(_ message: Message) -> Bool {
        message.at <= now && (message.toNode == nil || running(message.node))
    }

    private mutating func tick(_ node: Int) {
        guard running(node) else { return }
        for action in nodes[node].lease.tick(now: now) {
            switch action {
            case .join(let request): send(node, .join(request: request))
            case .renew(let id, let request): send(node, .renew(lease: id, request: request))
            case .giveUpDevices:
                counts["lease.givenUp", default: 0] += 1
                nodes[node].owned.removeAll()
            }
        }
    }

    private mutating func streamOpens(_ device: String, on node: Int) {
        wanted[device] = node
        guard nodes[node].lease.mayAct(now: now), let lease = nodes[node].lease.leaseID else { return }
        send(node, .claim(device: device, lease: lease, reason: .stream))
    }

    private mutating func push(_ device: String, on node: Int) {
        wanted[device] = node
        guard nodes[node].lease.mayAct(now: now), let lease = nodes[node].lease.leaseID else { return }
        if let epoch = nodes[node].owned[device] {
            act(node, device, lease: lease, epoch: epoch)
        } else {
            send(node, .claim(device: device, lease: lease, reason: .takeover))
        }
    }

    /// The node acts as the device's owner: a delivery now, and a write that the database
    /// fences when it arrives.
    private mutating func act(_ node: Int, _ device: String, lease: UInt64, epoch: UInt64) {
        acts.append(Act(node: node, device: device, lease: lease, epoch: epoch, time: now))
        send(node, .write(device: device, lease: lease, epoch: epoch))
    }

    private mutating func send(_ node: Int, _ request: Request) {
        let slow: Int64 = nodes[node].slowUntil > now ? 3_000 + Int64(network.count * 331 % 4_000) : 0
        network.append(Message(node: node, at: now + Int64(network.count * 37 % 200) + slow, toDatabase: request))
    }

    private mutating func answer(_ node: Int, _ answer: Answer, delay: Int64) {
        network.append(Message(node: node, at: now + delay, toNode: answer))
    }

    /// The `pick`th message in flight arrives (time moves to it if it is later), if its node is
    /// not paused (a paused node's answers wait in its socket).
    private mutating func deliverOne(_ pick: Int) {
        guard !network.isEmpty else { return }
        let index = pick % network.count
        let message = network[index]
        if message.toNode != nil, nodes[message.node].pausedUntil > max(now, message.at) {
            return
        }
        network.remove(at: index)
        now = max(now, message.at)
        if let request = message.toDatabase { database(message.node, request) }
        if let reply = message.toNode { node(message.node, reply) }
    }

    private mutating func database(_ node: Int, _ request: Request) {
        let delay = Int64(network.count * 53 % 150)
        switch request {
        case .join(let number):
            answer(node, .joined(lease: database.join(node: "n\(node)", now: now), request: number), delay: delay)
        case .renew(let lease, let number):
            let renewed = database.renew(lease, now: now)
            if !renewed { counts["renew.refused", default: 0] += 1 }
            answer(
                node,
                renewed ? .renewed(lease: lease, request: number) : .refused(lease: lease, request: number),
                delay: delay
            )
        case .claim(let device, let lease, let reason):
            let before = database.owners[device]
            let result = database.claim(device, by: lease, reason: reason, now: now)
            answer(node, .claim(device: device, lease: lease, result: result), delay: delay)
            switch result {
            case .claimed:
                counts[before.map { $0.lease == lease ? "claim.again" : "claim.moved" } ?? "claim.new", default: 0] += 1
            case .ownedElsewhere: counts["claim.ownedElsewhere", default: 0] += 1
            case .leaseNotAlive: counts["claim.leaseNotAlive", default: 0] += 1
            }
            if case .claimed(let epoch) = result, let before, before.lease != lease,
                let previous = database.leases[before.lease], let index = Int(previous.node.dropFirst())
            {
                answer(index, .lost(device: device, epoch: epoch), delay: delay + 100)
            }
        case .write(let device, let lease, let epoch):
            let taken = database.mayWrite(device, lease: lease, epoch: epoch, now: now)
            if taken { writes.append(Write(device: device, lease: lease, epoch: epoch, time: now)) }
            counts[taken ? "write.taken" : "write.fenced", default: 0] += 1
            answer(node, .write(device: device, epoch: epoch, taken: taken), delay: delay)
        }
    }

    private mutating func node(_ index: Int, _ answer: Answer) {
        switch answer {
        case .joined(let lease, let request):
            nodes[index].lease.joined(id: lease, request: request)
        case .renewed(let lease, let request):
            nodes[index].lease.renewed(id: lease, request: request)
        case .refused(let lease, let request):
            for action in nodes[index].lease.renewalRefused(id: lease, request: request) {
                if case .giveUpDevices = action { nodes[index].owned.removeAll() }
            }
        case .claim(let device, let lease, let result):
            // An answer under a lease the node no longer holds, or once it may no longer act,
            // claims nothing.
            guard case .claimed(let epoch) = result, nodes[index].lease.leaseID == lease,
                nodes[index].lease.mayAct(now: now)
            else { return }
            nodes[index].owned[device] = epoch
            act(index, device, lease: lease, epoch: epoch)
        case .write(let device, let epoch, let taken):
            if !taken, nodes[index].owned[device] == epoch { nodes[index].owned[device] = nil }
        case .lost(let device, let epoch):
            if let owned = nodes[index].owned[device], owned < epoch { nodes[index].owned[device] = nil }
        }
    }

    /// What must hold after every step.
    private mutating func check() {
        for (index, node) in nodes.enumerated() where node.lease.mayAct(now: now) {
            guard let lease = node.lease.leaseID, database.isAlive(lease, now: now) else {
                violations.append(
                    "n\(index) acts under lease \(String(describing: node.lease.leaseID)) at \(now), which the database holds expired: \(String(describing: node.lease.leaseID.flatMap { database.leases[$0] }))"
                )
                return
            }
        }
        if let last = acts.last, last.time == now, !database.isAlive(last.lease, now: now) {
            violations.append(
                "n\(last.node) acted for \(last.device) at \(now) under a lease the database holds expired"
            )
        }
    }
}
