import GRDB
import GRDBSQLite
import PushgateModel
import PushgateStore

import struct Foundation.Data

/// Applies `StoreCommand`s on the writer's connection with cached prepared statements.
/// Runs only on the database queue, inside the group transaction.
enum SQLiteCommands {
    /// A command that could not be applied; its batch fails with this message.
    struct Failure: Error {
        var message: String
        /// SQLite's extended result code, when SQLite refused (not our own checks).
        var code: Int32? = nil
    }

    /// True when the command is exactly one SQL statement: alone in its batch it needs no
    /// savepoint, because SQLite undoes a failing statement by itself (statement atomicity).
    static func isSingleStatement(_ command: StoreCommand) -> Bool {
        switch command {
        case .createDevice, .register, .enqueue, .assignSeq, .ack, .setAppState, .reserveSeqs:
            return true
        case .saveBuckets(let buckets):
            return buckets.count <= 1
        case .addTotals(let totals):
            return totals.count <= 1
        case .saveFetchStates(let states):
            return states.count <= 1
        case .openFetchWindows(let windows):
            return windows.count <= 1
        case .closeFetchWindows(_, let seqs), .forgetFetchWindows(_, let seqs):
            return seqs.count <= 1
        case .forgetRegistrations(let tokens):
            return tokens.count <= 1
        case .remove, .deleteDevice, .unregister:
            return false
        case .fence:
            // No statement: one gateway owns every device of its SQLite store.
            return true
        }
    }

    static func apply(_ command: StoreCommand, _ db: Database) throws(Failure) {
        do {
            try applyUnchecked(command, db)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(
                message: "\(command.summary): \(SQLiteBackend.describe(error))",
                code: (error as? DatabaseError)?.extendedResultCode.rawValue
            )
        }
    }

    private static func applyUnchecked(_ command: StoreCommand, _ db: Database) throws {
        switch command {
        case .createDevice(let device):
            try db.cachedStatement(
                sql: """
                    INSERT INTO devices (id, secret_hash, created_at, last_seq) VALUES (?, ?, ?, ?)
                    """
            ).execute(arguments: [
                device.id, Data(device.secretHash), device.createdAt, try int64(device.lastSeq, "lastSeq", command),
            ])

        case .forgetRegistrations(let tokens):
            for token in tokens {
                try db.cachedStatement(sql: "DELETE FROM registrations WHERE token = ? AND unregistered_at IS NOT NULL")
                    .execute(arguments: [token])
            }

        case .deleteDevice(let id, let at, let acceptanceIDs):
            try deleteNotifications(acceptanceIDs, db, command)
            try db.cachedStatement(
                sql: """
                    DELETE FROM buckets WHERE key = 'device:' || ?1 \
                    OR key IN (SELECT 'app:' || token FROM registrations WHERE device_id = ?1)
                    """
            ).execute(arguments: [id])
            try db.cachedStatement(
                sql: """
                    DELETE FROM fetch_states WHERE token IN (SELECT token FROM registrations WHERE device_id = ?)
                    """
            ).execute(arguments: [id])
            try db.cachedStatement(sql: "DELETE FROM fetch_windows WHERE device_id = ?")
                .execute(arguments: [id])
            try db.cachedStatement(
                sql: """
                    UPDATE registrations SET unregistered_at = ? WHERE device_id = ? AND unregistered_at IS NULL
                    """
            ).execute(arguments: [at, id])
            try db.cachedStatement(sql: "DELETE FROM devices WHERE id = ?")
                .execute(arguments: [id])

        case .register(let registration):
            try db.cachedStatement(
                sql: """
                    INSERT INTO registrations (token, device_id, topic, created_at, unregistered_at, kind, \
                    application_server_key) VALUES (?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                registration.token, registration.deviceID, registration.topic,
                registration.createdAt, registration.unregisteredAt, registration.kind.rawValue,
                registration.applicationServerKey.map { Data($0) },
            ])

        case .unregister(let token, let at):
            try db.cachedStatement(
                sql: """
                    UPDATE registrations SET unregistered_at = ? WHERE token = ? AND unregistered_at IS NULL
                    """
            ).execute(arguments: [at, token])
            try db.cachedStatement(sql: "DELETE FROM buckets WHERE key = 'app:' || ?")
                .execute(arguments: [token])
            try db.cachedStatement(sql: "DELETE FROM fetch_states WHERE token = ?")
                .execute(arguments: [token])
            // By token: an unregistered app's windows (few, and only while they are open).
            try db.cachedStatement(sql: "DELETE FROM fetch_windows WHERE token = ?")
                .execute(arguments: [token])

        case .saveBuckets(let buckets):
            let statement = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO buckets (key, level, at) VALUES (?, ?, ?)"
            )
            for bucket in buckets {
                try statement.execute(arguments: [bucket.key, Int64(bucket.level), bucket.at])
            }

        case .setAppState(let token, let state):
            try db.cachedStatement(sql: "UPDATE registrations SET app_state = ? WHERE token = ?")
                .execute(arguments: [state.rawValue, token])

        case .saveFetchStates(let states):
            let statement = try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO fetch_states \
                    (token, results, result_count, penalty_until, fetch_interval, last_budget_at) VALUES (?, ?, ?, ?, ?, ?)
                    """
            )
            for state in states {
                let interval: Int64 =
                    switch state.interval {
                    case .minimum: 0
                    case .never: -1
                    case .seconds(let seconds): Int64(seconds)
                    }
                try statement.execute(arguments: [
                    state.token, Int64(state.results), state.resultCount, state.penaltyUntil, interval,
                    state.lastBudgetAt,
                ])
            }

        case .openFetchWindows(let windows):
            let statement = try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO fetch_windows (device_id, seq, token, opened_at) VALUES (?, ?, ?, ?)
                    """
            )
            for window in windows {
                guard let seq = Int64(exactly: window.seq) else {
                    throw Failure(
                        message: "\(command.summary): seq \(window.seq) exceeds the largest storable value \(Int64.max)"
                    )
                }
                try statement.execute(arguments: [window.deviceID, seq, window.token, window.openedAt])
            }

        case .closeFetchWindows(let deviceID, let seqs):
            let statement = try db.cachedStatement(
                sql: "UPDATE fetch_windows SET closed = 1 WHERE device_id = ? AND seq = ?"
            )
            for seq in seqs {
                guard let seq = Int64(exactly: seq) else { continue }
                try statement.execute(arguments: [deviceID, seq])
            }

        case .forgetFetchWindows(let deviceID, let seqs):
            let statement = try db.cachedStatement(sql: "DELETE FROM fetch_windows WHERE device_id = ? AND seq = ?")
            for seq in seqs {
                guard let seq = Int64(exactly: seq) else { continue }
                try statement.execute(arguments: [deviceID, seq])
            }

        case .fence:
            // One gateway owns every device of its SQLite store: nothing to check.
            break

        case .addTotals(let totals):
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO totals (name, value) VALUES (?, ?) \
                    ON CONFLICT (name) DO UPDATE SET value = value + excluded.value
                    """
            )
            for (name, count) in totals {
                try statement.execute(arguments: [name, count])
            }

        case .enqueue(let n):
            // The hot commands bind through SQLite's C API: GRDB's `StatementArguments` would
            // box every value and copy the payload into a `Data` first. Text and blobs are
            // bound in place (SQLITE_STATIC): `step` runs inside the closures that lend their
            // bytes, so SQLite copies each value once, into the record, and no more.
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO notifications (acceptance_id, device_id, token, topic, apns_id, push_type, \
                    priority, collapse_id, payload, accepted_at, expires_at, seq, urgency) \
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            )
            let acceptanceID = try int64(n.acceptanceID, "acceptanceID", command)
            let seq = try n.seq.map { seq throws(Failure) in try int64(seq, "seq", command) }
            let push = n.push
            var (deviceID, token, topic, apnsID, pushType) = (
                n.deviceID, push.deviceToken, push.topic, push.apnsID, push.pushType.rawValue
            )
            var collapseID = push.collapseID ?? ""
            try deviceID.withUTF8 { deviceID in
                try token.withUTF8 { token in
                    try topic.withUTF8 { topic in
                        try apnsID.withUTF8 { apnsID in
                            try pushType.withUTF8 { pushType in
                                try collapseID.withUTF8 { collapse in
                                    try push.payload.withUnsafeBytes { payload in
                                        try step(statement, db, command) { h in
                                            sqlite3_bind_int64(h, 1, acceptanceID)
                                            bindText(h, 2, deviceID)
                                            bindText(h, 3, token)
                                            bindText(h, 4, topic)
                                            bindText(h, 5, apnsID)
                                            bindText(h, 6, pushType)
                                            sqlite3_bind_int64(h, 7, Int64(push.priority.rawValue))
                                            if push.collapseID != nil {
                                                bindText(h, 8, collapse)
                                            } else {
                                                sqlite3_bind_null(h, 8)
                                            }
                                            if let base = payload.baseAddress {
                                                sqlite3_bind_blob(h, 9, base, Int32(payload.count), inPlace)
                                            } else {
                                                sqlite3_bind_zeroblob(h, 9, 0)
                                            }
                                            sqlite3_bind_int64(h, 10, n.acceptedAt)
                                            sqlite3_bind_int64(h, 11, n.expiresAt)
                                            if let seq {
                                                sqlite3_bind_int64(h, 12, seq)
                                            } else {
                                                sqlite3_bind_null(h, 12)
                                            }
                                            if let urgency = push.urgency {
                                                let word = Self.urgencyWord(urgency)
                                                _ = sqlite3_bind_text(
                                                    h,
                                                    13,
                                                    UnsafeRawPointer(word.utf8Start).assumingMemoryBound(
                                                        to: CChar.self
                                                    ),
                                                    Int32(word.utf8CodeUnitCount),
                                                    inPlace
                                                )
                                            } else {
                                                sqlite3_bind_null(h, 13)
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }

        case .assignSeq(let acceptanceID, let seq):
            let seqValue = try int64(seq, "seq", command)
            let idValue = try int64(acceptanceID, "acceptanceID", command)
            let statement = try db.cachedStatement(sql: "UPDATE notifications SET seq = ? WHERE acceptance_id = ?")
            try step(statement, db, command) { h in
                sqlite3_bind_int64(h, 1, seqValue)
                sqlite3_bind_int64(h, 2, idValue)
            }

        case .remove(let acceptanceIDs):
            // Seqs are covered by `reserveSeqs`, except those of rows written before
            // reservations existed or after the batch carrying their reservation failed: a row
            // leaving without an ack hands its seq to `last_seq`, so that seqs are never reused.
            // (Not on the per-push path: expiry and coalescing only.)
            let keepSeq = try db.cachedStatement(
                sql: """
                    UPDATE devices SET last_seq = max(last_seq, n.seq) \
                    FROM (SELECT device_id, seq FROM notifications WHERE acceptance_id = ? AND seq IS NOT NULL) AS n \
                    WHERE devices.id = n.device_id
                    """
            )
            for id in acceptanceIDs {
                // Ids beyond Int64 cannot have been stored: nothing to remove.
                guard let id = Int64(exactly: id) else { continue }
                try keepSeq.execute(arguments: [id])
            }
            try deleteNotifications(acceptanceIDs, db, command)

        case .ack(_, let acceptanceIDs):
            try deleteNotifications(acceptanceIDs, db, command)

        case .reserveSeqs(let deviceID, let through):
            let through = try int64(through, "through", command)
            let statement = try db.cachedStatement(sql: "UPDATE devices SET last_seq = max(last_seq, ?) WHERE id = ?")
            try step(statement, db, command) { h in
                sqlite3_bind_int64(h, 1, through)
                sqlite3_bind_text(h, 2, deviceID, -1, transient)
            }
        }
    }

    /// Deletes rows by acceptance id (the rowid): each a lookup on a recent page. One statement
    /// for any number of ids (a JSON array through `json_each`), so that a command stays a
    /// single statement, atomic without a savepoint: a savepoint would copy every page the
    /// deletes touch into its journal.
    private static func deleteNotifications(_ acceptanceIDs: [UInt64], _ db: Database, _ command: StoreCommand) throws {
        // Ids beyond Int64 cannot have been stored: nothing to delete.
        let ids = acceptanceIDs.lazy.filter { $0 <= UInt64(Int64.max) }
        guard let first = ids.first else { return }
        if acceptanceIDs.count == 1 {
            let delete = try db.cachedStatement(sql: "DELETE FROM notifications WHERE acceptance_id = ?")
            try step(delete, db, command) { h in sqlite3_bind_int64(h, 1, Int64(first)) }
            return
        }
        var list: [UInt8] = []
        list.reserveCapacity(acceptanceIDs.count * 21 + 2)
        list.append(UInt8(ascii: "["))
        for id in ids {
            if list.count > 1 { list.append(UInt8(ascii: ",")) }
            appendDecimal(id, to: &list)
        }
        list.append(UInt8(ascii: "]"))
        let delete = try db.cachedStatement(
            sql: "DELETE FROM notifications WHERE acceptance_id IN (SELECT value FROM json_each(?))"
        )
        try list.withUnsafeBufferPointer { list in
            try step(delete, db, command) { h in bindText(h, 1, list) }
        }
    }

    private static func appendDecimal(_ value: UInt64, to bytes: inout [UInt8]) {
        let start = bytes.count
        var v = value
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(v % 10))
            v /= 10
        } while v > 0
        bytes[start...].reverse()
    }

    /// Binds bytes that outlive the statement's step (see `step`).
    private static func bindText(_ h: OpaquePointer, _ index: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        if let base = bytes.baseAddress {
            base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { text in
                _ = sqlite3_bind_text(h, index, text, Int32(bytes.count), inPlace)
            }
        } else {
            sqlite3_bind_text(h, index, "", 0, transient)
        }
    }

    /// SQLITE_STATIC: SQLite reads the caller's memory, which must outlive the step.
    private static let inPlace: sqlite3_destructor_type? = nil

    /// An urgency's word as static text, which SQLite may read in place.
    private static func urgencyWord(_ urgency: WebPushUrgency) -> StaticString {
        switch urgency {
        case .veryLow: "very-low"
        case .low: "low"
        case .normal: "normal"
        case .high: "high"
        }
    }

    /// SQLite copies bound text and blobs (the caller's memory is temporary).
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    /// Binds and runs one statement that returns no rows.
    /// Values bound with SQLITE_STATIC must stay valid until `step` returns; they are unbound
    /// before it returns, so the statement never keeps a pointer to memory that is gone.
    private static func step(
        _ statement: Statement,
        _ db: Database,
        _ command: StoreCommand,
        bind: (OpaquePointer) -> Void
    ) throws(Failure) {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        bind(handle)
        let rc = sqlite3_step(handle)
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        guard rc == SQLITE_DONE else {
            let code = sqlite3_extended_errcode(db.sqliteConnection)
            throw Failure(
                message:
                    "\(command.summary): SQLite error \(code): \(String(cString: sqlite3_errmsg(db.sqliteConnection)))",
                code: code
            )
        }
    }

    /// Records an acceptance id as committed, for when its row is deleted (never lowering it).
    static func raiseMaxAcceptanceID(to value: UInt64, _ db: Database) throws {
        try db.cachedStatement(sql: "UPDATE meta SET value = max(value, ?) WHERE key = ?")
            .execute(arguments: [Int64(clamping: value), SQLiteSchema.maxAcceptanceIDKey])
    }

    /// SQLite integers are signed 64-bit: larger values are refused, not wrapped.
    private static func int64(_ value: UInt64, _ field: String, _ command: StoreCommand) throws(Failure) -> Int64 {
        guard let result = Int64(exactly: value) else {
            throw Failure(
                message: "\(command.summary): \(field) \(value) exceeds the largest storable value \(Int64.max)"
            )
        }
        return result
    }
}
