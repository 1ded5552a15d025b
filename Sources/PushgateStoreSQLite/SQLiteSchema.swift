import GRDB

/// The SQLite schema, as GRDB migrations. Migrations are append-only: never edit one that has
/// shipped; add the next one ("v2", ...) below.
///
/// Held notifications live in `notifications` with `seq IS NULL`; the scheduler's bucket levels
/// and app states came with v3. The current shape of `notifications` is v4's.
///
/// Every table is STRICT (SQLite checks column types), so reads can trust the types.
enum SQLiteSchema {
    static let databaseFileName = "pushgate.sqlite"
    /// `meta`'s record of the highest acceptance id, raised by a transaction that deletes
    /// that id's row (while the row exists, the table itself says it).
    static let maxAcceptanceIDKey = "max_acceptance_id"

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: v1)
        }
        migrator.registerMigration("v2") { db in
            try db.execute(sql: v2)
        }
        migrator.registerMigration("v3") { db in
            try db.execute(sql: v3)
        }
        migrator.registerMigration("v4") { db in
            try db.execute(sql: v4)
        }
        migrator.registerMigration("v5") { db in
            try db.execute(sql: v5)
        }
        migrator.registerMigration("v6") { db in
            try db.execute(sql: v6)
        }
        migrator.registerMigration("v7") { db in
            try db.execute(sql: v7)
        }
        return migrator
    }

    /// Describes the tables of a database that is not a Pushgate store; nil for an empty
    /// database or a Pushgate store of any version. The migrator would otherwise add Pushgate's
    /// tables beside another program's, and a GRDB application's own migrations would read as
    /// "migrated by a newer Pushgate".
    static func foreignTables(_ db: Database) throws -> String? {
        let tables = try String.fetchAll(
            db,
            sql: """
                SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name
                """
        )
        if tables.isEmpty { return nil }
        if tables.contains("grdb_migrations"),
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM grdb_migrations WHERE identifier = 'v1')") == true
        {
            return nil
        }
        let shown = tables.prefix(5).joined(separator: ", ")
        switch tables.count {
        case 1: return "a table \(shown)"
        case ...5: return "the tables \(shown)"
        default: return "the tables \(shown) and \(tables.count - 5) more"
        }
    }

    /// Web Push: a registration is an APNs app or a Web Push subscription (whose topic is its
    /// name), which may be restricted to an application server's key (an uncompressed P-256
    /// point, RFC 8292 section 4); a Web Push message keeps its urgency (RFC 8030 section 5.3),
    /// NULL for an APNs push. Existing rows are APNs registrations and pushes.
    private static let v7 = """
        ALTER TABLE registrations ADD COLUMN kind TEXT NOT NULL DEFAULT 'apns' CHECK (kind IN ('apns', 'webpush'));
        ALTER TABLE registrations ADD COLUMN application_server_key BLOB;
        ALTER TABLE notifications ADD COLUMN urgency TEXT CHECK (urgency IN ('very-low', 'low', 'normal', 'high'));
        """

    /// Background fetch: each app's last results, penalty, fetch interval and last budget
    /// release, and the fetch windows of unacknowledged silent pushes (open, or closed by a
    /// result or a timeout), so that a restart neither loses a reported result, nor times out a
    /// window that had not ended, nor opens a second window for a push written again. `fetch_interval` is 0 for `minimum`, -1
    /// for `never`, otherwise seconds.
    private static let v6 = """
        CREATE TABLE fetch_states (
            token          TEXT    NOT NULL PRIMARY KEY,
            results        INTEGER NOT NULL CHECK (results BETWEEN 0 AND 4294967295),
            result_count   INTEGER NOT NULL CHECK (result_count BETWEEN 0 AND 16),
            penalty_until  INTEGER,
            fetch_interval INTEGER NOT NULL CHECK (fetch_interval >= -1),
            last_budget_at INTEGER
        ) STRICT, WITHOUT ROWID;
        CREATE TABLE fetch_windows (
            device_id TEXT    NOT NULL,
            seq       INTEGER NOT NULL CHECK (seq >= 0),
            token     TEXT    NOT NULL,
            opened_at INTEGER NOT NULL,
            closed    INTEGER NOT NULL DEFAULT 0 CHECK (closed IN (0, 1)),
            PRIMARY KEY (device_id, seq)
        ) STRICT, WITHOUT ROWID;
        """

    /// Durable totals (received, delivered, ...) since the store was created, for operators
    /// whose dashboards should not start from zero at every restart.
    private static let v5 = """
        CREATE TABLE totals (
            name  TEXT    NOT NULL PRIMARY KEY,
            value INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID;
        """

    /// `notifications` loses its index by (device_id, seq) and its foreign key to devices. The
    /// index ordered entries by device, so with many devices every insert and every ack's delete
    /// dirtied a page of its own: with acks arriving a few hundred milliseconds after their
    /// pushes, a group commit of 85 pushes and 85 acks wrote about 100 WAL frames, and the
    /// writer spent more time in pwrite than in SQLite. Now rows are in acceptance order only:
    /// inserts append, and acks delete by acceptance id on recent pages. The delivery core knows
    /// every queued acceptance id of a device (it loads them all), so acks and device deletion
    /// name them; the foreign key goes with the index (deleting a device would otherwise scan
    /// the table for its children). Rows of a device that no longer exists are removed at
    /// start. Unique seqs per device are the delivery core's invariant. SQLite cannot drop a
    /// foreign key in place, hence the rebuild.
    private static let v4 = """
        CREATE TABLE notifications_v4 (
            acceptance_id INTEGER NOT NULL PRIMARY KEY CHECK (acceptance_id >= 0),
            device_id     TEXT    NOT NULL,
            token         TEXT    NOT NULL,
            topic         TEXT    NOT NULL,
            apns_id       TEXT    NOT NULL,
            push_type     TEXT    NOT NULL,
            priority      INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 255),
            collapse_id   TEXT,
            payload       BLOB    NOT NULL,
            accepted_at   INTEGER NOT NULL,
            expires_at    INTEGER NOT NULL,
            seq           INTEGER CHECK (seq >= 0)
        ) STRICT;
        INSERT INTO notifications_v4 SELECT acceptance_id, device_id, token, topic, apns_id, push_type,
            priority, collapse_id, payload, accepted_at, expires_at, seq FROM notifications;
        DROP TABLE notifications;
        ALTER TABLE notifications_v4 RENAME TO notifications;
        """

    /// The scheduler's durable state: silent-budget bucket levels (so that a restart never
    /// refills them) and the app states devices reported (a terminated app stays terminated).
    /// Held notifications already live in `notifications` with `seq IS NULL`.
    private static let v3 = """
        CREATE TABLE buckets (
            key   TEXT    NOT NULL PRIMARY KEY,
            level INTEGER NOT NULL CHECK (level >= 0),
            at    INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID;
        ALTER TABLE registrations ADD COLUMN app_state TEXT;
        """

    /// The highest seq ever assigned per device: seqs are never reused, even after the
    /// notifications that had them expired and were deleted. Existing devices start from the
    /// highest seq still stored (or their ack).
    private static let v2 = """
        ALTER TABLE devices ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0);
        UPDATE devices SET last_seq = max(acked_seq,
            coalesce((SELECT max(seq) FROM notifications WHERE notifications.device_id = devices.id), 0));
        """

    private static let v1 = """
        CREATE TABLE devices (
            id          TEXT    NOT NULL PRIMARY KEY,
            secret_hash BLOB    NOT NULL,
            created_at  INTEGER NOT NULL,
            acked_seq   INTEGER NOT NULL DEFAULT 0 CHECK (acked_seq >= 0)
        ) STRICT, WITHOUT ROWID;

        -- Kept after the device is deleted (unregistered_at set) so that providers get 410:
        -- hence no foreign key to devices.
        CREATE TABLE registrations (
            token           TEXT    NOT NULL PRIMARY KEY,
            device_id       TEXT    NOT NULL,
            topic           TEXT    NOT NULL,
            created_at      INTEGER NOT NULL,
            unregistered_at INTEGER
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX registrations_device ON registrations(device_id);
        -- At most one active registration per app on a device.
        CREATE UNIQUE INDEX registrations_active_topic
            ON registrations(device_id, topic) WHERE unregistered_at IS NULL;

        -- acceptance_id is the rowid: rows are stored in acceptance order.
        -- seq IS NULL while the scheduler holds the notification.
        CREATE TABLE notifications (
            acceptance_id INTEGER NOT NULL PRIMARY KEY CHECK (acceptance_id >= 0),
            device_id     TEXT    NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            token         TEXT    NOT NULL,
            topic         TEXT    NOT NULL,
            apns_id       TEXT    NOT NULL,
            push_type     TEXT    NOT NULL,
            priority      INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 255),
            collapse_id   TEXT,
            payload       BLOB    NOT NULL,
            accepted_at   INTEGER NOT NULL,
            expires_at    INTEGER NOT NULL,
            seq           INTEGER CHECK (seq >= 0)
        ) STRICT;
        -- Serves ack (device_id, seq <= ?), deleteDevice and the foreign key; a device's
        -- sequence numbers are unique (NULLs, i.e. held notifications, are distinct).
        CREATE UNIQUE INDEX notifications_device_seq ON notifications(device_id, seq);

        -- Small durable facts, e.g. the highest acceptance id ever stored (kept when every
        -- notification has been deleted, so that acceptance ids are never reused).
        CREATE TABLE meta (
            key   TEXT    NOT NULL PRIMARY KEY,
            value INTEGER NOT NULL
        ) STRICT, WITHOUT ROWID;
        INSERT INTO meta (key, value) VALUES ('\(maxAcceptanceIDKey)', 0);
        """
}
