import PushgateDelivery
import PushgateModel

/// Why a notification waits, in the words the admin API and dashboard show an operator.
enum WaitWords {
    static func describe(_ reason: DeviceInspection.WaitReason, now: Int64) -> String {
        switch reason {
        case .belowUrgency(let urgency, let power):
            "Web Push urgency \(urgency.rawValue): a device in \(power.rawValue) takes \(power.minimumUrgency.rawValue) and above; it waits until the power state allows \(urgency.rawValue), or its TTL runs out, and no wake event brings it"
        case .offline(let since):
            "device offline since \(UTCTime.words(since, now: now)); sent when its event stream opens"
        case .lowPower:
            "device in lowPower: silent pushes wait for a wake event (a priority-10 push, a keep-alive, awake)"
        case .behindOlderSilent(let count):
            "behind \(count) older silent push\(count == 1 ? "" : "es") of its app, released oldest first"
        case .fetchIntervalNever:
            "its app's fetch interval is never: silent pushes wait for a wake event (a priority-10 push, a keep-alive, the device coming online or awake)"
        case .fetchInterval(let seconds, let until):
            "its app's fetch interval is \(seconds) s: the next budget release is allowed at \(UTCTime.words(until, now: now))"
        case .appBudgetEmpty(let until):
            "app budget empty until \(UTCTime.words(until, now: now))"
        case .deviceBudgetEmpty(let until):
            "device budget empty until \(UTCTime.words(until, now: now))"
        case .releaseDue:
            "budget available: released at the scheduler's next check"
        case .deferred(let until):
            "priority 5: deferred until \(UTCTime.words(until, now: now)) or a wake event"
        case .waitsForWake:
            "priority 1: waits for a wake event (a priority-10 push, a keep-alive, the device coming online or awake)"
        case .behindUnackedWindow(let bytes):
            "queued behind \(bytes) bytes sent and not yet acknowledged (the unacked window)"
        case .awaitingAck(let inKeepaliveResponse):
            inKeepaliveResponse
                ? "sent in a keep-alive response; waits for the device's ack" : "sent; waits for the device's ack"
        }
    }

    /// The time the reason names, if it names one.
    static func until(_ reason: DeviceInspection.WaitReason) -> Int64? {
        switch reason {
        case .appBudgetEmpty(let until), .deviceBudgetEmpty(let until), .deferred(let until),
            .fetchInterval(_, let until):
            until
        default: nil
        }
    }
}

/// Why an app's silent refill is what it is, in words: "refill 1.5/h instead of 3/h: score 0.5
/// over the last 4 results (2 newData, 2 timeout); halved until 12:04:10 UTC after a timeout".
enum FetchWords {
    static func explain(_ fetch: DeviceInspection.Fetch, refillPerHour: Double, now: Int64) -> String {
        let configured = fetch.configuredRefillPerHour
        let penalty = fetch.penaltyUntil.map { "; halved until \(UTCTime.words($0, now: now)) after a timeout" } ?? ""
        guard !fetch.results.isEmpty else {
            return "refill \(rate(refillPerHour))/h as configured: no fetch result yet" + penalty
        }
        let counts = FetchResult.allCases.compactMap { result -> String? in
            let count = fetch.results.filter { $0 == result }.count
            return count == 0 ? nil : "\(count) \(result.rawValue)"
        }
        let score =
            "score \(rate(fetch.score)) over the last \(fetch.results.count) result\(fetch.results.count == 1 ? "" : "s") (\(counts.joined(separator: ", ")))"
        let floor =
            refillPerHour <= Double(fetch.minRefillPerHour) && refillPerHour < Double(configured)
            ? ", at the floor of \(fetch.minRefillPerHour)/h" : ""
        let head =
            refillPerHour < Double(configured)
            ? "refill \(rate(refillPerHour))/h instead of \(configured)/h\(floor)"
            : "refill \(configured)/h as configured"
        return "\(head): \(score)\(penalty)"
    }

    /// At most three decimals, none when whole: 1.5, 3, 0.667.
    private static func rate(_ value: Double) -> String {
        let rounded = (value * 1000).rounded() / 1000
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }
}

/// Times in UTC, for people: the time of day when it is today, else the date too.
enum UTCTime {
    static func words(_ millis: Int64, now: Int64) -> String {
        let (day, time) = split(millis)
        return day == split(now).day ? "\(time) UTC" : "\(date(day)) \(time) UTC"
    }

    /// Days since the epoch and "HH:MM:SS".
    private static func split(_ millis: Int64) -> (day: Int64, time: String) {
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let day = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let second = seconds - day * 86_400
        return (day, "\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))")
    }

    /// "YYYY-MM-DD" of a day since the epoch (proleptic Gregorian; Howard Hinnant's
    /// days-to-civil).
    private static func date(_ days: Int64) -> String {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return "\(year)-\(two(month))-\(two(day))"
    }

    private static func two(_ value: Int64) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }
}
