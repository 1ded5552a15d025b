import PushgateModel
import PushgateStore

/// Reads the whole store into a `StoreSnapshot`, in one read-only transaction (one consistent
/// view of every table), with binary results.
enum PostgresSnapshot {
    /// Notifications are read this many at a time (by acceptance id), so that a large backlog
    /// is never held twice over in libpq's buffers and the snapshot.
    static let notificationPage = 10_000

    /// Everything, or (`device`) one device's records: the device, its registrations,
    /// notifications, buckets, fetch figures and windows (no totals).
    static func read(
        _ connection: PGConnection,
        device: String? = nil,
        deadline: () -> UInt64
    ) throws(PGError) -> StoreSnapshot {
        try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", deadline: deadline())
        do throws(PGError) {
            let snapshot = try readTables(connection, device: device, deadline: deadline)
            try connection.execute("COMMIT", deadline: deadline())
            return snapshot
        } catch {
            if !error.connectionBroken { _ = try? connection.execute("ROLLBACK", deadline: deadline()) }
            throw error
        }
    }

    private static func query(
        _ connection: PGConnection,
        _ sql: String,
        _ params: borrowing PGParams = PGParams(),
        deadline: UInt64
    ) throws(PGError) -> PGResult {
        guard let result = try connection.execute(sql, params, binaryResults: true, deadline: deadline) else {
            throw PGError(message: "no result for a query", connectionBroken: true)
        }
        return result
    }

    private static func readTables(
        _ connection: PGConnection,
        device: String?,
        deadline: () -> UInt64
    ) throws(PGError)
        -> StoreSnapshot
    {
        // One device's rows: each query's own condition on it, as its first parameter.
        func only(_ condition: String) -> String { device == nil ? "" : " WHERE " + condition }
        var deviceParameter = PGParams()
        if let device { deviceParameter.text(device) }

        var registrations: [RegistrationRecord] = []
        var result = try query(
            connection,
            """
            SELECT token, device_id, topic, created_at, unregistered_at, app_state, kind, application_server_key \
            FROM registrations\(only("device_id = $1::text")) ORDER BY token
            """,
            deviceParameter,
            deadline: deadline()
        )
        registrations.reserveCapacity(result.rows)
        for row in 0..<result.rows {
            let kindName = result.text(row, 6)
            guard let kind = RegistrationKind(rawValue: kindName) else {
                throw PGError(
                    message: """
                        registration \(result.text(row, 0)) has kind "\(kindName)"; the database was not \
                        written by Pushgate or is damaged
                        """,
                    connectionBroken: false
                )
            }
            registrations.append(
                RegistrationRecord(
                    token: result.text(row, 0),
                    deviceID: result.text(row, 1),
                    topic: result.text(row, 2),
                    createdAt: result.integer(row, 3),
                    unregisteredAt: result.optionalInteger(row, 4),
                    // A state this version does not know is one the app never reported.
                    appState: result.optionalText(row, 5).flatMap(AppState.init(rawValue:)),
                    kind: kind,
                    applicationServerKey: result.optionalByteArray(row, 7)
                )
            )
        }
        let tokensOfDevice = "(SELECT token FROM registrations WHERE device_id = $1::text)"

        var buckets: [BucketRecord] = []
        result = try query(
            connection,
            """
            SELECT key, level, at FROM buckets\(only("key = 'device:' || $1::text OR key IN (SELECT 'app:' || token FROM registrations WHERE device_id = $1::text)")) \
            ORDER BY key
            """,
            deviceParameter,
            deadline: deadline()
        )
        for row in 0..<result.rows {
            buckets.append(
                BucketRecord(
                    key: result.text(row, 0),
                    level: UInt32(clamping: result.integer(row, 1)),
                    at: result.integer(row, 2)
                )
            )
        }

        var totals: [String: Int64] = [:]
        if device == nil {
            result = try query(connection, "SELECT name, value FROM totals", deadline: deadline())
            for row in 0..<result.rows { totals[result.text(row, 0)] = result.integer(row, 1) }
        }

        var fetchStates: [FetchStateRecord] = []
        result = try query(
            connection,
            """
            SELECT token, results, result_count, penalty_until, fetch_interval, last_budget_at \
            FROM fetch_states\(only("token IN " + tokensOfDevice)) ORDER BY token
            """,
            deviceParameter,
            deadline: deadline()
        )
        for row in 0..<result.rows {
            let interval: FetchInterval =
                switch result.integer(row, 4) {
                case 0: .minimum
                case -1: .never
                case let seconds: .seconds(UInt32(clamping: seconds))
                }
            fetchStates.append(
                FetchStateRecord(
                    token: result.text(row, 0),
                    results: UInt32(clamping: result.integer(row, 1)),
                    resultCount: Int(result.integer(row, 2)),
                    penaltyUntil: result.optionalInteger(row, 3),
                    interval: interval,
                    lastBudgetAt: result.optionalInteger(row, 5)
                )
            )
        }

        var fetchWindows: [FetchWindowRecord] = []
        result = try query(
            connection,
            """
            SELECT device_id, seq, token, opened_at, closed FROM fetch_windows\(only("device_id = $1::text")) \
            ORDER BY device_id, seq
            """,
            deviceParameter,
            deadline: deadline()
        )
        for row in 0..<result.rows {
            fetchWindows.append(
                FetchWindowRecord(
                    deviceID: result.text(row, 0),
                    seq: UInt64(result.integer(row, 1)),
                    token: result.text(row, 2),
                    openedAt: result.integer(row, 3),
                    closed: result.boolean(row, 4)
                )
            )
        }

        var notifications: [AcceptedPush] = []
        var maxSeqByDevice: [String: UInt64] = [:]
        var after: Int64 = -1
        while true {
            var params = PGParams()
            params.int64(after)
            params.int64(Int64(notificationPage))
            if let device { params.text(device) }
            result = try query(
                connection,
                """
                SELECT acceptance_id, device_id, token, topic, apns_id, push_type, priority, collapse_id, \
                payload, accepted_at, expires_at, seq, urgency FROM notifications WHERE acceptance_id > $1::bigint\
                \(device == nil ? "" : " AND device_id = $3::text") ORDER BY acceptance_id LIMIT $2::bigint
                """,
                params,
                deadline: deadline()
            )
            for row in 0..<result.rows {
                let acceptanceID = result.integer(row, 0)
                let typeName = result.text(row, 5)
                let priorityValue = result.integer(row, 6)
                let urgencyName = result.optionalText(row, 12)
                // Only the gateway writes these columns, from validated pushes.
                guard let pushType = PushType(rawValue: typeName),
                    let priority = UInt8(exactly: priorityValue).flatMap(PushPriority.init(rawValue:)),
                    (urgencyName == nil) == (pushType != .webpush)
                else {
                    throw PGError(
                        message: """
                            notification \(acceptanceID) has push type "\(typeName)" and priority \(priorityValue); \
                            the database was not written by Pushgate or is damaged
                            """,
                        connectionBroken: false
                    )
                }
                let record = AcceptedPush(
                    acceptanceID: UInt64(acceptanceID),
                    deviceID: result.text(row, 1),
                    push: Push(
                        deviceToken: result.text(row, 2),
                        apnsID: result.text(row, 4),
                        topic: result.text(row, 3),
                        pushType: pushType,
                        priority: priority,
                        collapseID: result.optionalText(row, 7),
                        payload: result.byteArray(row, 8),
                        urgency: urgencyName.flatMap(WebPushUrgency.init(rawValue:))
                    ),
                    acceptedAt: result.integer(row, 9),
                    expiresAt: result.integer(row, 10),
                    seq: result.optionalInteger(row, 11).map { UInt64($0) }
                )
                if let seq = record.seq, seq > maxSeqByDevice[record.deviceID, default: 0] {
                    maxSeqByDevice[record.deviceID] = seq
                }
                notifications.append(record)
                after = acceptanceID
            }
            if result.rows < notificationPage { break }
        }

        // A device's last seq also covers the seqs still stored (see the SQLite snapshot).
        var devices: [DeviceRecord] = []
        result = try query(
            connection,
            "SELECT id, secret_hash, created_at, last_seq FROM devices\(only("id = $1::text")) ORDER BY id",
            deviceParameter,
            deadline: deadline()
        )
        devices.reserveCapacity(result.rows)
        for row in 0..<result.rows {
            let id = result.text(row, 0)
            devices.append(
                DeviceRecord(
                    id: id,
                    secretHash: result.byteArray(row, 1),
                    createdAt: result.integer(row, 2),
                    lastSeq: max(UInt64(result.integer(row, 3)), maxSeqByDevice[id] ?? 0)
                )
            )
        }

        let maxAcceptanceID = max(
            notifications.last?.acceptanceID ?? 0,
            try recordedMaxAcceptanceID(connection, deadline: deadline())
        )
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

    /// What a cluster node reads at start: no device (it takes each over when it must act for
    /// it), the durable totals, and a block of acceptance ids of its own (`acceptanceBlock` ids
    /// above every id reserved or committed so far): `maxAcceptanceID` is the block's start, so
    /// the node's ids continue above it, and no two nodes give the same id.
    static func nodeStart(_ connection: PGConnection, deadline: () -> UInt64) throws(PGError) -> StoreSnapshot {
        var totals: [String: Int64] = [:]
        var result = try query(connection, "SELECT name, value FROM totals", deadline: deadline())
        for row in 0..<result.rows { totals[result.text(row, 0)] = result.integer(row, 1) }
        var params = PGParams()
        params.int64(acceptanceBlock)
        params.text(PostgresSchema.maxAcceptanceIDKey)
        result = try query(
            connection,
            """
            UPDATE pushgate_meta SET value = greatest(value, (SELECT coalesce(max(acceptance_id), 0) FROM notifications)) \
            + $1::bigint WHERE key = $2::text RETURNING value - $1::bigint
            """,
            params,
            deadline: deadline()
        )
        let start = result.rows == 0 ? 0 : UInt64(max(result.integer(0, 0), 0))
        return StoreSnapshot(devices: [], registrations: [], notifications: [], maxAcceptanceID: start, totals: totals)
    }

    /// Acceptance ids a node reserves at start: at 30,000 pushes a second it lasts a year.
    static let acceptanceBlock: Int64 = 1 << 40

    /// The highest acceptance id ever committed: the newest row's, or the one `meta` recorded
    /// when that row was deleted.
    static func maxAcceptanceID(_ connection: PGConnection, deadline: UInt64) throws(PGError) -> UInt64 {
        let newest = try query(
            connection,
            "SELECT coalesce(max(acceptance_id), 0) FROM notifications",
            deadline: deadline
        )
        return max(UInt64(max(newest.integer(0, 0), 0)), try recordedMaxAcceptanceID(connection, deadline: deadline))
    }

    private static func recordedMaxAcceptanceID(_ connection: PGConnection, deadline: UInt64) throws(PGError) -> UInt64
    {
        var params = PGParams()
        params.text(PostgresSchema.maxAcceptanceIDKey)
        let result = try query(
            connection,
            "SELECT value FROM pushgate_meta WHERE key = $1::text",
            params,
            deadline: deadline
        )
        return result.rows == 0 ? 0 : UInt64(max(result.integer(0, 0), 0))
    }
}
