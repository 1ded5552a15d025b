import NIOCore
import Testing

@testable import PushgateGateway

/// The kernel's CPU lists, as `/proc/self/status` gives them in `Cpus_allowed_list`.
@Suite("Available cores")
struct AvailableCoresTests {
    @Test(
        "a CPU list counts single CPUs and ranges; anything else does not parse",
        arguments: [
            ("0", 1), ("1", 1), ("0-1", 2), ("0-3,8,10-11", 7), ("\t0-1", 2),
        ]
    )
    func counts(list: String, expected: Int) {
        #expect(cpuCount(list: Substring(list)) == expected)
    }

    @Test(
        "malformed lists are refused, so the caller falls back to NIO's count",
        arguments: ["", "3-1", "a", "0-1-2", "0,,x"]
    )
    func malformed(list: String) {
        #expect(cpuCount(list: Substring(list)) == nil)
    }

    @Test("the process's own count is at least one and at most NIO's")
    func own() {
        #expect((1...System.coreCount).contains(availableCores()))
    }
}
