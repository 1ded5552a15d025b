import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The process's own figures, read from /proc at each scrape (the usual `process_*` metrics).
struct ProcessStatistics {
    var cpuSeconds: Double
    var residentBytes: Double
    var virtualBytes: Double
    var openFileDescriptors: Double
    var maxFileDescriptors: Double
    /// Seconds since the epoch.
    var startTime: Double

    /// Nil where /proc cannot be read (not Linux).
    static func read() -> ProcessStatistics? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name, which may itself hold spaces and parentheses: the
        // third after it is field 3 (state).
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 21,
            let utime = Double(fields[11]), let stime = Double(fields[12]),
            let startTicks = Double(fields[19]), let virtualBytes = Double(fields[20]),
            let residentPages = Double(fields[21])
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        return ProcessStatistics(
            cpuSeconds: (utime + stime) / ticks,
            residentBytes: residentPages * pageSize,
            virtualBytes: virtualBytes,
            openFileDescriptors: Double(descriptors),
            maxFileDescriptors: Double(limit.rlim_cur),
            startTime: bootTime() + startTicks / ticks
        )
    }

    private static func bootTime() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let seconds = Double(line.dropFirst("btime ".count))
        else { return 0 }
        return seconds
    }
}
