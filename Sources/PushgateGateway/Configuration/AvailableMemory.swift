import Foundation

/// Memory this process may use: the lowest `memory.max` of its cgroup (v2) and the cgroups above
/// it, else the machine's `MemTotal`. A container's or a systemd unit's limit is what the kernel
/// enforces, not the machine's size.
func availableMemoryBytes() -> Int? {
    var limits: [Int] = []
    if let meminfo = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8),
        let line = meminfo.split(separator: "\n").first(where: { $0.hasPrefix("MemTotal:") }),
        let kibibytes = Int(line.split(separator: " ").dropFirst().first ?? "")
    {
        limits.append(kibibytes * 1024)
    }
    if let cgroup = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8),
        let line = cgroup.split(separator: "\n").first(where: { $0.hasPrefix("0::") })
    {
        var path = String(line.dropFirst(3))
        while true {
            let file = "/sys/fs/cgroup" + (path == "/" ? "" : path) + "/memory.max"
            if let text = try? String(contentsOfFile: file, encoding: .utf8),
                let bytes = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
            {
                limits.append(bytes)
            }
            guard path != "/", let slash = path.lastIndex(of: "/") else { break }
            path = slash == path.startIndex ? "/" : String(path[..<slash])
        }
    }
    return limits.min()
}

/// The default `queuedNotificationBudgetBytes`: a quarter of `availableMemoryBytes()` (1 GiB
/// when it cannot be read), leaving the rest for connections, the store's cache and the heap's
/// slack.
func defaultQueuedNotificationBudget() -> Int {
    availableMemoryBytes().map { $0 / 4 } ?? 1 << 30
}
