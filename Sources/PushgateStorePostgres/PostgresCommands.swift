import PushgateModel
import PushgateStore

/// `StoreCommand`s as statements, prepared once per connection and queued into the writer's
/// pipeline. The statements are the SQLite backend's, one for one.
enum PostgresCommands {
    /// Every statement the commands use, by name: prepared on each new connection.
    static let statements: [(name: String, sql: String)] = [
        (
            "create_device",
            "INSERT INTO devices (id, secret_hash, created_at, last_seq) VALUES ($1::text, $2::bytea, $3::bigint, $4::bigint)"
        ),
        (
            "forget_registration",
            "DELETE FROM registrations WHERE token = $1::text AND unregistered_at IS NOT NULL"
        ),
        (
            "delete_device_buckets",
            """
            DELETE FROM buckets WHERE key = 'device:' || $1::text \
            OR key IN (SELECT 'app:' || token FROM registrations WHERE device_id = $1::text)
            """
        ),
        (
            "delete_device_fetch_states",
            "DELETE FROM fetch_states WHERE token IN (SELECT token FROM registrations WHERE device_id = $1::text)"
        ),
        ("delete_device_fetch_windows", "DELETE FROM fetch_windows WHERE device_id = $1::text"),
        (
            "unregister_device",
            "UPDATE registrations SET unregistered_at = $1::bigint WHERE device_id = $2::text AND unregistered_at IS NULL"
        ),
        ("delete_device", "DELETE FROM devices WHERE id = $1::text"),
        (
            "register",
            """
            INSERT INTO registrations (token, device_id, topic, created_at, unregistered_at, kind, \
            application_server_key) VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::text, $7::bytea)
            """
        ),
        (
            "unregister",
            "UPDATE registrations SET unregistered_at = $1::bigint WHERE token = $2::text AND unregistered_at IS NULL"
        ),
        ("delete_app_bucket", "DELETE FROM buckets WHERE key = 'app:' || $1::text"),
        ("delete_fetch_state", "DELETE FROM fetch_states WHERE token = $1::text"),
        ("delete_token_fetch_windows", "DELETE FROM fetch_windows WHERE token = $1::text"),
        (
            "save_bucket",
            """
            INSERT INTO buckets (key, level, at) VALUES ($1::text, $2::bigint, $3::bigint) \
            ON CONFLICT (key) DO UPDATE SET level = excluded.level, at = excluded.at
            """
        ),
        ("set_app_state", "UPDATE registrations SET app_state = $1::text WHERE token = $2::text"),
        (
            "save_fetch_state",
            """
            INSERT INTO fetch_states (token, results, result_count, penalty_until, fetch_interval, last_budget_at) \
            VALUES ($1::text, $2::bigint, $3::integer, $4::bigint, $5::bigint, $6::bigint) \
            ON CONFLICT (token) DO UPDATE SET results = excluded.results, result_count = excluded.result_count, \
            penalty_until = excluded.penalty_until, fetch_interval = excluded.fetch_interval, \
            last_budget_at = excluded.last_budget_at
            """
        ),
        (
            "open_fetch_window",
            """
            INSERT INTO fetch_windows (device_id, seq, token, opened_at, closed) \
            VALUES ($1::text, $2::bigint, $3::text, $4::bigint, false) \
            ON CONFLICT (device_id, seq) DO UPDATE SET token = excluded.token, opened_at = excluded.opened_at, closed = false
            """
        ),
        (
            "close_fetch_windows",
            "UPDATE fetch_windows SET closed = true WHERE device_id = $1::text AND seq = ANY($2::bigint[])"
        ),
        (
            "forget_fetch_windows",
            "DELETE FROM fetch_windows WHERE device_id = $1::text AND seq = ANY($2::bigint[])"
        ),
        (
            "add_total",
            """
            INSERT INTO totals (name, value) VALUES ($1::text, $2::bigint) \
            ON CONFLICT (name) DO UPDATE SET value = totals.value + excluded.value
            """
        ),
        (
            "enqueue",
            """
            INSERT INTO notifications (acceptance_id, device_id, token, topic, apns_id, push_type, priority, \
            collapse_id, payload, accepted_at, expires_at, seq, urgency) VALUES ($1::bigint, $2::text, $3::text, \
            $4::text, $5::text, $6::text, $7::smallint, $8::text, $9::bytea, $10::bigint, $11::bigint, $12::bigint, \
            $13::text)
            """
        ),
        ("assign_seq", "UPDATE notifications SET seq = $1::bigint WHERE acceptance_id = $2::bigint"),
        ("fence_all", "SELECT pushgate_fence_all($1::bigint, $2::text[], $3::bigint[])"),
        (
            // A row leaving without an ack hands its seq to `last_seq` (see the SQLite backend's
            // `remove`): per device, the highest of the rows named.
            "keep_removed_seqs",
            """
            UPDATE devices SET last_seq = greatest(devices.last_seq, n.seq) \
            FROM (SELECT device_id, max(seq) AS seq FROM notifications \
            WHERE acceptance_id = ANY($1::bigint[]) AND seq IS NOT NULL GROUP BY device_id) AS n \
            WHERE devices.id = n.device_id
            """
        ),
        ("delete_notification", "DELETE FROM notifications WHERE acceptance_id = $1::bigint"),
        ("delete_notifications", "DELETE FROM notifications WHERE acceptance_id = ANY($1::bigint[])"),
        (
            "reserve_seqs",
            "UPDATE devices SET last_seq = greatest(last_seq, $1::bigint) WHERE id = $2::text"
        ),
        (
            "raise_max_acceptance_id",
            "UPDATE pushgate_meta SET value = greatest(value, $1::bigint) WHERE key = '\(PostgresSchema.maxAcceptanceIDKey)'"
        ),
    ]

    /// Why a command cannot be stored at all (a value beyond `bigint`), found before anything is
    /// sent: the batch fails with the message SQLite gives.
    static func refusal(_ command: StoreCommand) -> String? {
        func check(_ value: UInt64, _ field: String) -> String? {
            value > UInt64(Int64.max)
                ? "\(command.summary): \(field) \(value) exceeds the largest storable value \(Int64.max)" : nil
        }
        switch command {
        case .createDevice(let device):
            return check(device.lastSeq, "lastSeq")
        case .enqueue(let notification):
            return check(notification.acceptanceID, "acceptanceID") ?? notification.seq.flatMap { check($0, "seq") }
        case .assignSeq(let acceptanceID, let seq):
            return check(seq, "seq") ?? check(acceptanceID, "acceptanceID")
        case .reserveSeqs(_, let through):
            return check(through, "through")
        case .openFetchWindows(let windows):
            return windows.lazy.compactMap { check($0.seq, "seq") }.first
        default:
            return nil
        }
    }

    /// Queues `command`'s statements; returns how many (each gives one result). `refusal` must
    /// have passed.
    static func send(_ command: StoreCommand, _ connection: PGConnection, _ p: inout PGParams) throws(PGError) -> Int {
        func run(_ name: String, _ bind: (inout PGParams) -> Void) throws(PGError) {
            p.removeAll()
            bind(&p)
            try connection.sendPrepared(name, p)
        }
        switch command {
        case .createDevice(let device):
            try run("create_device") {
                $0.text(device.id)
                $0.bytes(device.secretHash)
                $0.int64(device.createdAt)
                $0.int64(Int64(device.lastSeq))
            }
            return 1

        case .forgetRegistrations(let tokens):
            for token in tokens { try run("forget_registration") { $0.text(token) } }
            return tokens.count

        case .deleteDevice(let id, let at, let acceptanceIDs):
            var count = try deleteNotifications(acceptanceIDs, connection, &p)
            for name in ["delete_device_buckets", "delete_device_fetch_states", "delete_device_fetch_windows"] {
                try run(name) { $0.text(id) }
            }
            try run("unregister_device") {
                $0.int64(at)
                $0.text(id)
            }
            try run("delete_device") { $0.text(id) }
            count += 5
            return count

        case .register(let registration):
            try run("register") {
                $0.text(registration.token)
                $0.text(registration.deviceID)
                $0.text(registration.topic)
                $0.int64(registration.createdAt)
                $0.optionalInt64(registration.unregisteredAt)
                $0.text(registration.kind.rawValue)
                $0.optionalBytes(registration.applicationServerKey)
            }
            return 1

        case .unregister(let token, let at):
            try run("unregister") {
                $0.int64(at)
                $0.text(token)
            }
            for name in ["delete_app_bucket", "delete_fetch_state", "delete_token_fetch_windows"] {
                try run(name) { $0.text(token) }
            }
            return 4

        case .saveBuckets(let buckets):
            for bucket in buckets {
                try run("save_bucket") {
                    $0.text(bucket.key)
                    $0.int64(Int64(bucket.level))
                    $0.int64(bucket.at)
                }
            }
            return buckets.count

        case .setAppState(let token, let state):
            try run("set_app_state") {
                $0.text(state.rawValue)
                $0.text(token)
            }
            return 1

        case .saveFetchStates(let states):
            for state in states {
                let interval: Int64 =
                    switch state.interval {
                    case .minimum: 0
                    case .never: -1
                    case .seconds(let seconds): Int64(seconds)
                    }
                try run("save_fetch_state") {
                    $0.text(state.token)
                    $0.int64(Int64(state.results))
                    $0.int32(Int32(clamping: state.resultCount))
                    $0.optionalInt64(state.penaltyUntil)
                    $0.int64(interval)
                    $0.optionalInt64(state.lastBudgetAt)
                }
            }
            return states.count

        case .openFetchWindows(let windows):
            for window in windows {
                try run("open_fetch_window") {
                    $0.text(window.deviceID)
                    $0.int64(Int64(window.seq))
                    $0.text(window.token)
                    $0.int64(window.openedAt)
                }
            }
            return windows.count

        case .closeFetchWindows(let deviceID, let seqs), .forgetFetchWindows(let deviceID, let seqs):
            // Seqs beyond bigint cannot have been stored: nothing to change.
            let stored = seqs.lazy.filter { $0 <= UInt64(Int64.max) }.map { Int64($0) }
            if stored.isEmpty { return 0 }
            let name: String
            if case .closeFetchWindows = command { name = "close_fetch_windows" } else { name = "forget_fetch_windows" }
            try run(name) {
                $0.text(deviceID)
                $0.int64Array(stored)
            }
            return 1

        case .addTotals(let totals):
            for (name, count) in totals {
                try run("add_total") {
                    $0.text(name)
                    $0.int64(count)
                }
            }
            return totals.count

        case .enqueue(let n):
            let push = n.push
            try run("enqueue") {
                $0.int64(Int64(n.acceptanceID))
                $0.text(n.deviceID)
                $0.text(push.deviceToken)
                $0.text(push.topic)
                $0.text(push.apnsID)
                $0.text(push.pushType.rawValue)
                $0.int16(Int16(push.priority.rawValue))
                $0.optionalText(push.collapseID)
                $0.bytes(push.payload)
                $0.int64(n.acceptedAt)
                $0.int64(n.expiresAt)
                $0.optionalInt64(n.seq.map { Int64($0) })
                $0.optionalText(push.urgency?.rawValue)
            }
            return 1

        case .assignSeq(let acceptanceID, let seq):
            try run("assign_seq") {
                $0.int64(Int64(seq))
                $0.int64(Int64(acceptanceID))
            }
            return 1

        case .remove(let acceptanceIDs):
            let stored = acceptanceIDs.lazy.filter { $0 <= UInt64(Int64.max) }.map { Int64($0) }
            if stored.isEmpty { return 0 }
            try run("keep_removed_seqs") { $0.int64Array(stored) }
            return 1 + (try deleteNotifications(acceptanceIDs, connection, &p))

        case .ack(_, let acceptanceIDs):
            return try deleteNotifications(acceptanceIDs, connection, &p)

        case .reserveSeqs(let deviceID, let through):
            try run("reserve_seqs") {
                $0.int64(Int64(through))
                $0.text(deviceID)
            }
            return 1

        case .fence:
            // A transaction's fences go together, first (`sendFences`).
            return 0
        }
    }

    /// Queues one statement fencing `devices` (each at its epoch) for `lease`; one result.
    static func sendFences(
        lease: UInt64,
        _ devices: [String],
        _ epochs: [UInt64],
        _ connection: PGConnection,
        _ p: inout PGParams
    ) throws(PGError) {
        p.removeAll()
        p.int64(Int64(clamping: lease))
        p.textArray(devices)
        p.int64Array(epochs.map { Int64(clamping: $0) })
        try connection.sendPrepared("fence_all", p)
    }

    /// Deletes rows by acceptance id: one statement for any number of ids.
    private static func deleteNotifications(
        _ acceptanceIDs: [UInt64],
        _ connection: PGConnection,
        _ p: inout PGParams
    ) throws(PGError) -> Int {
        // Ids beyond bigint cannot have been stored: nothing to delete.
        let stored = acceptanceIDs.lazy.filter { $0 <= UInt64(Int64.max) }.map { Int64($0) }
        guard let first = stored.first else { return 0 }
        p.removeAll()
        if acceptanceIDs.count == 1 {
            p.int64(first)
            try connection.sendPrepared("delete_notification", p)
        } else {
            p.int64Array(stored)
            try connection.sendPrepared("delete_notifications", p)
        }
        return 1
    }

    /// Queues `raise_max_acceptance_id`.
    static func sendRaiseMaxAcceptanceID(
        _ value: UInt64,
        _ connection: PGConnection,
        _ p: inout PGParams
    )
        throws(PGError)
    {
        p.removeAll()
        p.int64(Int64(clamping: value))
        try connection.sendPrepared("raise_max_acceptance_id", p)
    }
}
