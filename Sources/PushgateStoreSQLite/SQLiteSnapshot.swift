import GRDB
import PushgateModel
import PushgateStore

import struct Foundation.Data

/// Reads the whole database into a `StoreSnapshot`, at start.
enum SQLiteSnapshot {
    static func read(_ db: Database) throws -> StoreSnapshot {
        var registrations: [RegistrationRecord] = []
        let registrationRows = try Row.fetchCursor(
            db,
            sql: """
                SELECT token, device_id, topic, created_at, unregistered_at, app_state, kind, application_server_key
                FROM registrations ORDER BY token
                """
        )
        while let row = try registrationRows.next() {
            // A state this version does not know is one the app never reported.
            let appState = (row[5] as String?).flatMap(AppState.init(rawValue:))
            let kindName: String = row[6]
            guard let kind = RegistrationKind(rawValue: kindName) else {
                throw SQLiteCommands.Failure(
                    message:
                        "registration \(row[0] as String) has kind \"\(kindName)\"; the database was not written by Pushgate or is damaged"
                )
            }
            registrations.append(
                RegistrationRecord(
                    token: row[0],
                    deviceID: row[1],
                    topic: row[2],
                    createdAt: row[3],
                    unregisteredAt: row[4],
                    appState: appState,
                    kind: kind,
                    applicationServerKey: (row[7] as Data?).map { [UInt8]($0) }
                )
            )
        }

        var buckets: [BucketRecord] = []
        let bucketRows = try Row.fetchCursor(db, sql: "SELECT key, level, at FROM buckets ORDER BY key")
        while let row = try bucketRows.next() {
            buckets.append(BucketRecord(key: row[0], level: UInt32(clamping: row[1] as Int64), at: row[2]))
        }

        var totals: [String: Int64] = [:]
        let totalRows = try Row.fetchCursor(db, sql: "SELECT name, value FROM totals")
        while let row = try totalRows.next() {
            totals[row[0]] = row[1]
        }

        var fetchStates: [FetchStateRecord] = []
        let fetchStateRows = try Row.fetchCursor(
            db,
            sql: """
                SELECT token, results, result_count, penalty_until, fetch_interval, last_budget_at FROM fetch_states ORDER BY token
                """
        )
        while let row = try fetchStateRows.next() {
            let interval: FetchInterval =
                switch row[4] as Int64 {
                case 0: .minimum
                case -1: .never
                case let seconds: .seconds(UInt32(clamping: seconds))
                }
            fetchStates.append(
                FetchStateRecord(
                    token: row[0],
                    results: UInt32(clamping: row[1] as Int64),
                    resultCount: row[2],
                    penaltyUntil: row[3],
                    interval: interval,
                    lastBudgetAt: row[5]
                )
            )
        }

        var fetchWindows: [FetchWindowRecord] = []
        let windowRows = try Row.fetchCursor(
            db,
            sql: "SELECT device_id, seq, token, opened_at, closed FROM fetch_windows ORDER BY device_id, seq"
        )
        while let row = try windowRows.next() {
            fetchWindows.append(
                FetchWindowRecord(
                    deviceID: row[0],
                    seq: UInt64(row[1] as Int64),
                    token: row[2],
                    openedAt: row[3],
                    closed: (row[4] as Int64) != 0
                )
            )
        }

        var notifications: [AcceptedPush] = []
        var maxSeqByDevice: [String: UInt64] = [:]
        var maxAcceptanceID: UInt64 = 0
        let notificationRows = try Row.fetchCursor(
            db,
            sql: """
                SELECT acceptance_id, device_id, token, topic, apns_id, push_type, priority, collapse_id,
                       payload, accepted_at, expires_at, seq, urgency
                FROM notifications ORDER BY acceptance_id
                """
        )
        while let row = try notificationRows.next() {
            let payload: Data = row[8]
            let seq: Int64? = row[11]
            let acceptanceID = UInt64(row[0] as Int64)
            let typeName: String = row[5]
            let priorityValue: Int64 = row[6]
            let urgencyName: String? = row[12]
            // Only the gateway writes these columns, from validated pushes.
            guard let pushType = PushType(rawValue: typeName),
                let priority = UInt8(exactly: priorityValue).flatMap(PushPriority.init(rawValue:)),
                (urgencyName == nil) == (pushType != .webpush)
            else {
                throw SQLiteCommands.Failure(
                    message:
                        "notification \(acceptanceID) has push type \"\(typeName)\", priority \(priorityValue) and urgency \(urgencyName ?? "none"); the database was not written by Pushgate or is damaged"
                )
            }
            let push = Push(
                deviceToken: row[2],
                apnsID: row[4],
                topic: row[3],
                pushType: pushType,
                priority: priority,
                collapseID: row[7],
                payload: [UInt8](payload),
                urgency: urgencyName.flatMap(WebPushUrgency.init(rawValue:))
            )
            let record = AcceptedPush(
                acceptanceID: acceptanceID,
                deviceID: row[1],
                push: push,
                acceptedAt: row[9],
                expiresAt: row[10],
                seq: seq.map { UInt64($0) }
            )
            maxAcceptanceID = max(maxAcceptanceID, record.acceptanceID)
            if let seq = record.seq, seq > maxSeqByDevice[record.deviceID, default: 0] {
                maxSeqByDevice[record.deviceID] = seq
            }
            notifications.append(record)
        }

        // A device's last seq also covers the seqs still stored, taken from the rows read above
        // (the table has no index by device to ask per device): rows older than reservations,
        // and a row committed without a reservation of its own because the batch that carried
        // one failed (the next seq or ack reserves again, but a restart may come first).
        var devices: [DeviceRecord] = []
        let deviceRows = try Row.fetchCursor(
            db,
            sql: """
                SELECT id, secret_hash, created_at, max(last_seq, acked_seq) FROM devices ORDER BY id
                """
        )
        while let row = try deviceRows.next() {
            let secret: Data = row[1]
            let id: String = row[0]
            devices.append(
                DeviceRecord(
                    id: id,
                    secretHash: [UInt8](secret),
                    createdAt: row[2],
                    lastSeq: max(UInt64(row[3] as Int64), maxSeqByDevice[id] ?? 0)
                )
            )
        }

        maxAcceptanceID = max(maxAcceptanceID, try recordedMaxAcceptanceID(db))
        return StoreSnapshot(
            devices: devices,
            registrations: registrations,
            notifications: notifications,
            maxAcceptanceID: maxAcceptanceID,
            buckets: buckets,
            totals: totals,
            fetchStates: fetchStates,
            fetchWindows: fetchWindows
        )
    }

    /// The highest acceptance id ever committed: the newest row's, or the one `meta` recorded
    /// when that row was deleted.
    static func maxAcceptanceID(_ db: Database) throws -> UInt64 {
        let newestRow = try Int64.fetchOne(db, sql: "SELECT max(acceptance_id) FROM notifications") ?? 0
        return max(UInt64(max(newestRow, 0)), try recordedMaxAcceptanceID(db))
    }

    private static func recordedMaxAcceptanceID(_ db: Database) throws -> UInt64 {
        let recorded =
            try Int64.fetchOne(
                db,
                sql: "SELECT value FROM meta WHERE key = ?",
                arguments: [SQLiteSchema.maxAcceptanceIDKey]
            ) ?? 0
        return UInt64(max(recorded, 0))
    }
}
