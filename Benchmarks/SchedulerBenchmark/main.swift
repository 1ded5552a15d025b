// The scheduler alone, on one thread: memory per idle device at 1,000,000 devices, then events/s
// for a random mix of everything a shard feeds it. Run in release:
//   swift run -c release SchedulerBenchmark [devices] [events]

import PushgateModel
import PushgateScheduler

#if canImport(Glibc)
import Glibc
#endif

/// xorshift64*: deterministic, so runs are comparable.
struct Random {
    var state: UInt64

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

/// Resident set size from /proc/self/statm (second field, in pages).
func residentBytes() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    guard fgets(&line, Int32(line.count), file) != nil else { return 0 }
    let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * sysconf(Int32(_SC_PAGESIZE))
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let deviceCount = arguments.first ?? 1_000_000
let eventCount = arguments.dropFirst().first ?? 10_000_000
let start: Int64 = 1_700_000_000_000

// Handle storage is the benchmark's, not the scheduler's: allocate and touch it before measuring.
let devices = UnsafeMutablePointer<DeviceHandle>.allocate(capacity: deviceCount)
let apps = UnsafeMutablePointer<AppHandle>.allocate(capacity: deviceCount)
UnsafeMutableRawPointer(devices).initializeMemory(
    as: UInt8.self,
    repeating: 0,
    count: deviceCount * MemoryLayout<DeviceHandle>.stride
)
UnsafeMutableRawPointer(apps).initializeMemory(
    as: UInt8.self,
    repeating: 0,
    count: deviceCount * MemoryLayout<AppHandle>.stride
)

let before = residentBytes()
let scheduler = try Scheduler(configuration: SchedulerConfiguration(), expectedDevices: deviceCount)
for index in 0..<deviceCount {
    let device = scheduler.addDevice(now: start)
    (devices + index).initialize(to: device)
    (apps + index).initialize(to: scheduler.addApp(device: device, topic: "com.example.app")!)
    _ = scheduler.connect(device, now: start)
}
let after = residentBytes()
let rssPerDevice = Double(after - before) / Double(deviceCount)
let computedPerDevice = Double(scheduler.storageBytes) / Double(deviceCount)
print("devices:           \(deviceCount), each with one app, connected, nothing held")
print("RSS growth:        \(after - before) bytes = \(String(rssPerDevice, places: 1)) bytes per idle device")
print(
    "scheduler arrays:  \(scheduler.storageBytes) bytes = \(String(computedPerDevice, places: 1)) bytes per idle device"
)
print("records:           \(Scheduler.idleDeviceRecordBytes) bytes per device with one app")

/// The mix: 35% silent, 15% regular (p10, p5, p1 alike), 12% keep-alives, 3% fetch results, 5%
/// connects, 5% disconnects, 5% power reports, 20% advance. A silent push delivered at once opens
/// a fetch window; a result report names one of the last 1,024 windows opened (some already
/// closed by a report or a timeout, as agents repeat themselves), and the rest time out. One simulated millisecond per event: 10M events are
/// 2.8 hours, so buckets empty, refill and release held pushes by budget along the way.
struct Workload {
    let scheduler: Scheduler
    let devices: UnsafeMutablePointer<DeviceHandle>
    let apps: UnsafeMutablePointer<AppHandle>
    let deviceCount: Int
    var random = Random(state: 0x9E37_79B9_7F4A_7C15)
    var now: Int64
    var nextID: UInt64 = 0
    var released = 0
    var dropped = 0
    var timeouts = 0
    var windows = [(index: Int, seq: UInt64)](repeating: (0, 0), count: 1024)
    var windowCount = 0
    /// Counts by disposition: delivered, held, coalesced, stored, discarded.
    var dispositions = [0, 0, 0, 0, 0]
    static let powers: [DevicePower] = [.awake, .idle, .lowPower]
    static let priorities: [PushPriority] = [.high, .normal, .low]

    mutating func run(events: Int) {
        for _ in 0..<events {
            now += 1
            let roll = random.next()
            let index = Int((roll >> 16) % UInt64(deviceCount))
            switch roll % 100 {
            case 0..<35:
                accept(.silent, .normal, index: index, roll: roll >> 8)
            case 35..<50:
                accept(.regular, Self.priorities[Int(roll >> 8 % 3)], index: index, roll: roll >> 8)
            case 50..<62:
                released += scheduler.keepalive(devices[index], now: now).releases.count
            case 62..<65:
                let window = windows[Int(roll >> 8) % windows.count]
                let result = FetchResult.reportable[Int(roll >> 20) % 3]
                _ = scheduler.reportFetchResult(
                    device: devices[window.index],
                    seq: window.seq,
                    result: result,
                    now: now
                )
            case 65..<70:
                released += scheduler.connect(devices[index], now: now).releases.count
            case 70..<75:
                scheduler.disconnect(devices[index])
            case 75..<80:
                released += scheduler.setPower(devices[index], Self.powers[Int(roll >> 8 % 3)], now: now).releases.count
            default:
                let output = scheduler.advance(now: now)
                released += output.releases.count
                dropped += output.drops.count
                timeouts += output.fetchTimeouts.count
            }
        }
    }

    private mutating func accept(_ pushClass: PushClass, _ priority: PushPriority, index: Int, roll: UInt64) {
        nextID += 1
        let push = SchedulerPush(
            id: nextID,
            app: apps[index],
            pushClass: pushClass,
            priority: priority,
            collapseID: roll & 7 == 0 ? "sync" : nil,
            expiresAt: now + (roll & 0xF0 == 0 ? 60_000 : 30 * 24 * 3_600_000),
            nowOrNever: roll & 0x1F00 == 0
        )
        let acceptance = scheduler.accept(push, now: now)!
        released += acceptance.releases.count
        dropped += acceptance.drops.count
        switch acceptance.disposition {
        case .delivered:
            dispositions[0] += 1
            if pushClass == .silent, scheduler.openFetchWindow(app: apps[index], seq: nextID, now: now) {
                windows[windowCount % windows.count] = (index, nextID)
                windowCount += 1
            }
        case .held: dispositions[1] += 1
        case .coalesced: dispositions[2] += 1
        case .stored: dispositions[3] += 1
        case .discarded: dispositions[4] += 1
        }
    }
}

var workload = Workload(scheduler: scheduler, devices: devices, apps: apps, deviceCount: deviceCount, now: start)
let elapsed = ContinuousClock().measure { workload.run(events: eventCount) }
let rate = Double(eventCount) / seconds(elapsed)
print("events:            \(eventCount) in \(String(seconds(elapsed), places: 3)) s on one thread")
let names = ["delivered", "held", "coalesced", "stored", "discarded"]
print("dispositions:      \(zip(names, workload.dispositions).map { "\($0) \($1)" }.joined(separator: ", "))")
print("released:          \(workload.released), dropped: \(workload.dropped), still held: \(scheduler.heldCount)")
print("fetch windows:     \(workload.windowCount) opened, \(workload.timeouts) timed out")
print("RSS after the mix: \(residentBytes() - before) bytes over the empty scheduler")
print(
    "SUMMARY SchedulerBenchmark: \(deviceCount) idle devices at \(String(rssPerDevice, places: 1)) B/device RSS"
        + " (\(String(computedPerDevice, places: 1)) B/device in arrays; target <= 300),"
        + " \(String(rate / 1e6, places: 2))M events/s on one core (target >= 1M)"
)

extension String {
    init(_ value: Double, places: Int) {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = "\(rounded)"
        let decimals = text.split(separator: ".").dropFirst().first?.count ?? 0
        if decimals < places { text += String(repeating: "0", count: places - decimals) }
        self = text
    }
}
