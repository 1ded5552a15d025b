import PropertyBased
import PushgateCluster
import Testing

/// Ownership (leases, epochs, claims, fencing) over random interleavings of claims, lease
/// expiry, pauses and message delays (`OwnershipSimulation`). One issue per run, the first, so
/// that shrinking stays fast.
@Suite struct OwnershipPropertyTests {
    static let events = Gen.uint64().array(of: 1...200)
    static let runs = 300

    /// A node acts as an owner (delivers, commits) only while the database holds its lease
    /// alive: however its requests are delayed or it is paused, it stops in time, so a device
    /// taken over after its lease expired is never served by it again.
    @Test func noNodeActsPastItsLease() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = OwnershipSimulation.run(words).violations.first { !$0.hasPrefix("after healing") }
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    /// The writes the database takes for a device come from one owner at a time: their epochs
    /// never go back, and each epoch is one lease's.
    @Test func writesAreFenced() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = Self.firstStaleWrite(in: OwnershipSimulation.run(words))
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    /// Once pauses end and messages arrive, every device a node was asked to act for is owned
    /// under a live lease.
    @Test func everyWantedDeviceEndsUpOwned() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = OwnershipSimulation.run(words).violations.first { $0.hasPrefix("after healing") }
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    @Test func theSimulationReachesEveryOutcome() {
        // The properties above mean little if the random runs never get there.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var totals: [String: Int] = [:]
        for _ in 0..<Self.runs {
            var words: [UInt64] = []
            for _ in 0..<200 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                words.append(state)
            }
            totals.merge(OwnershipSimulation.run(words).counts, uniquingKeysWith: +)
        }
        for outcome in [
            "claim.new", "claim.moved", "claim.again", "claim.ownedElsewhere", "claim.leaseNotAlive",
            "renew.refused", "write.taken", "write.fenced", "lease.givenUp",
        ] {
            #expect((totals[outcome] ?? 0) > 0, "\(outcome) never happened: \(totals)")
        }
    }

    static func firstStaleWrite(in run: OwnershipSimulation) -> String? {
        var last: [String: OwnershipSimulation.Write] = [:]
        var leaseOfEpoch: [String: UInt64] = [:]
        for write in run.writes {
            if let previous = last[write.device], previous.epoch > write.epoch {
                return
                    "\(write.device): epoch \(write.epoch) taken at \(write.time) after epoch \(previous.epoch) at \(previous.time)"
            }
            let key = "\(write.device)/\(write.epoch)"
            if let lease = leaseOfEpoch[key], lease != write.lease {
                return "\(write.device): epoch \(write.epoch) written under leases \(lease) and \(write.lease)"
            }
            leaseOfEpoch[key] = write.lease
            last[write.device] = write
        }
        return nil
    }
}
