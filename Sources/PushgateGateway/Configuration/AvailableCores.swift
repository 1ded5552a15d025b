import Foundation
import NIOCore

/// Cores this process may run on: NIO's count (cgroup quota or cpuset, else all online cores)
/// narrowed by the affinity mask, which NIO does not read. A gateway started under `taskset` or
/// systemd's `CPUAffinity=` with one loop per online core would run several loops on one core,
/// and every hop between them would cost a context switch.
public func availableCores() -> Int {
    // `sched_getaffinity` is a GNU extension that Swift's Glibc module leaves out; the kernel
    // shows the same mask here.
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") }),
        let allowed = cpuCount(list: line.dropFirst("Cpus_allowed_list:".count))
    else { return System.coreCount }
    return min(System.coreCount, allowed)
}

/// The number of CPUs in a list such as `0-3,8,10-11`; nil when it does not parse or is empty.
func cpuCount(list: Substring) -> Int? {
    var count = 0
    for range in list.split(separator: ",") {
        let bounds = range.split(separator: "-").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        switch bounds.count {
        case 1:
            guard bounds[0] != nil else { return nil }
            count += 1
        case 2:
            guard let low = bounds[0], let high = bounds[1], high >= low else { return nil }
            count += high - low + 1
        default:
            return nil
        }
    }
    return count > 0 ? count : nil
}
