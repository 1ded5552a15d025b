import PushgateStore
import Testing

/// The writer's pacing decisions, without a writer: arrivals and instants are given.
@Suite("CommitPacer")
struct CommitPacerTests {
    let ms: UInt64 = 1_000_000
    let us: UInt64 = 1000

    /// A pacer that has seen batches arrive every `gap` nanoseconds, the last at `last`.
    func pacer(_ pacing: CommitPacing = .default, gap: UInt64, arrivals: Int = 16, last: UInt64) -> CommitPacer {
        var pacer = CommitPacer(pacing: pacing)
        for i in 0..<arrivals { pacer.arrived(at: last - UInt64(arrivals - 1 - i) * gap) }
        return pacer
    }

    @Test("without a rate estimate (the first batch) a prompt batch commits at once")
    func firstBatch() {
        var pacer = CommitPacer(pacing: .default)
        pacer.arrived(at: 5 * ms)
        #expect(pacer.decide(now: 5 * ms, oldestPrompt: 5 * ms, oldestDeferrable: nil, pendingBatches: 1) == .commitNow)
    }

    @Test("at 4,000 batches/s a lone push waits for the next few, within the linger")
    func moderateRate() {
        let now = 100 * ms
        let pacer = pacer(gap: 250 * us, last: now)
        // Eight wanted, one pending: seven gaps (1.75 ms) exceed the 1 ms linger.
        #expect(
            pacer.decide(now: now, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 1)
                == .wait(until: now + ms)
        )
        // Six pending: two more gaps, within the linger.
        #expect(
            pacer.decide(now: now, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 6)
                == .wait(until: now + 500 * us)
        )
        // The target reached: no reason to wait.
        #expect(pacer.decide(now: now, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 8) == .commitNow)
        // The oldest has waited its linger.
        #expect(pacer.decide(now: now + ms, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 2) == .commitNow)
    }

    @Test(
        "right after a commit, prompt batches (they came while the writer was busy) commit at once; lone acks still wait"
    )
    func afterCommit() {
        let now = 100 * ms
        let pacer = pacer(gap: 250 * us, last: now)
        #expect(
            pacer.decide(now: now, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 1, justCommitted: true)
                == .commitNow
        )
        #expect(
            pacer.decide(now: now, oldestPrompt: nil, oldestDeferrable: now, pendingBatches: 1, justCommitted: true)
                == .wait(until: now + 10 * ms)
        )
    }

    @Test("when nobody is expected within the linger (a slow rate) nothing waits")
    func slowRate() {
        let now = 100 * ms
        let pacer = pacer(gap: 5 * ms, last: now)
        #expect(pacer.decide(now: now, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 1) == .commitNow)
        // Nor when the linger left is shorter than a gap.
        let fast = self.pacer(gap: 400 * us, last: now)
        #expect(
            fast.decide(now: now + 700 * us, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 1) == .commitNow
        )
    }

    @Test("the rate estimate recovers within a few arrivals after an idle spell")
    func idleSpell() {
        let now = 10_000 * ms
        var pacer = pacer(gap: 250 * us, last: now)
        pacer.arrived(at: now + 60_000 * ms)  // a minute of silence counts as one slow gap
        var t = now + 60_000 * ms
        for _ in 0..<8 {
            t += 250 * us
            pacer.arrived(at: t)
        }
        guard case .wait = pacer.decide(now: t, oldestPrompt: t, oldestDeferrable: nil, pendingBatches: 1) else {
            Issue.record("still treated as slow eight arrivals after the idle spell")
            return
        }
    }

    @Test("a deferrable batch alone waits its deferral; with a prompt one it follows the prompt's decision")
    func deferrable() {
        let now = 100 * ms
        let pacer = pacer(gap: 5 * ms, last: now)
        #expect(
            pacer.decide(now: now, oldestPrompt: nil, oldestDeferrable: now, pendingBatches: 1)
                == .wait(until: now + 10 * ms)
        )
        #expect(
            pacer.decide(now: now + 10 * ms, oldestPrompt: nil, oldestDeferrable: now, pendingBatches: 1) == .commitNow
        )
        #expect(
            pacer.decide(now: now + ms, oldestPrompt: now + ms, oldestDeferrable: now, pendingBatches: 2) == .commitNow
        )
    }

    @Test("immediate pacing never waits")
    func immediate() {
        let now = 100 * ms
        let pacer = pacer(.immediate, gap: 10 * us, last: now)
        #expect(pacer.decide(now: now, oldestPrompt: now, oldestDeferrable: nil, pendingBatches: 1) == .commitNow)
        #expect(pacer.decide(now: now, oldestPrompt: nil, oldestDeferrable: now, pendingBatches: 1) == .commitNow)
    }
}
