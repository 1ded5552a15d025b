import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import PushgateDelivery

@Suite("LoopInbox")
struct LoopInboxTests {
    @Test("items from many threads all run once, on the loop, each thread's in its order", .timeLimit(.minutes(1)))
    func ordering() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let inbox = LoopInbox(loop: loop)
        let threads = 4
        let perThread = 2_000
        let seen = NIOLockedValueBox([[Int]](repeating: [], count: threads))
        let offLoop = Atomic<Int>(0)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let remaining = Atomic<Int>(threads * perThread)
            for thread in 0..<threads {
                Thread.detachNewThread {
                    for i in 0..<perThread {
                        inbox.submit {
                            if !loop.inEventLoop { offLoop.add(1, ordering: .relaxed) }
                            seen.withLockedValue { $0[thread].append(i) }
                            if remaining.subtract(1, ordering: .relaxed).newValue == 0 { done.resume() }
                        }
                    }
                }
            }
        }
        #expect(offLoop.load(ordering: .relaxed) == 0)
        seen.withLockedValue { seen in
            for thread in 0..<threads { #expect(seen[thread] == Array(0..<perThread)) }
        }
        try await group.shutdownGracefully()
    }
}
