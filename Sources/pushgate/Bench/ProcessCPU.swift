import Foundation

/// CPU time a process on this machine has used so far, from /proc: all its threads, and its
/// NIO event-loop threads apart (the rest of a gateway's is nearly all the store's writer).
/// Lets `bench --server-pid` count the gateway's CPU over the pushes alone, without the
/// devices' creation and connection before them.
struct ProcessCPU: Sendable {
    var totalSeconds: Double
    var eventLoopSeconds: Double

    struct Unreadable: Error, CustomStringConvertible {
        var description: String
    }

    static func sample(pid: Int32) throws(Unreadable) -> ProcessCPU {
        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard let total = ticks(statFile: "/proc/\(pid)/stat") else {
            throw Unreadable(description: "cannot read /proc/\(pid)/stat: is \(pid) a process on this machine?")
        }
        var loops = 0
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            // A thread may end between the listing and the read: it then counts in the total only.
            guard let name = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8),
                name.hasPrefix("NIO-ELT-"),
                let used = ticks(statFile: "/proc/\(pid)/task/\(task)/stat")
            else { continue }
            loops += used
        }
        return ProcessCPU(
            totalSeconds: Double(total) / ticksPerSecond,
            eventLoopSeconds: Double(loops) / ticksPerSecond
        )
    }

    /// What the process used between `earlier` and this sample.
    func since(_ earlier: ProcessCPU) -> ProcessCPU {
        ProcessCPU(
            totalSeconds: totalSeconds - earlier.totalSeconds,
            eventLoopSeconds: eventLoopSeconds - earlier.eventLoopSeconds
        )
    }

    /// utime + stime of a stat line. The command name (field 2) may hold spaces and
    /// parentheses, so the fields are counted from after its last ')': state is the first,
    /// utime and stime (fields 14 and 15) the 12th and 13th.
    private static func ticks(statLine: String) -> Int? {
        guard let close = statLine.lastIndex(of: ")") else { return nil }
        let fields = statLine[statLine.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    private static func ticks(statFile: String) -> Int? {
        guard let line = try? String(contentsOfFile: statFile, encoding: .utf8) else { return nil }
        return ticks(statLine: line)
    }
}
