/// The PostgreSQL schema, as numbered migrations. Append-only: never edit one that has shipped;
/// add the next one below. Each runs in the transaction that records it in
/// `pushgate_migrations`, under an advisory lock, so that gateways starting together on one
/// database migrate it once.
///
/// The tables are the SQLite store's (see its `SQLiteSchema`), shaped for several gateway nodes
/// sharing one database:
/// - Text keys sort in byte order (`COLLATE "C"`), as SQLite's BINARY collation does, so that
///   `load()` returns the same order from either database, whatever the database's locale.
/// - 64-bit values are `bigint`: ids, seqs and times above `Int64.max` are refused by the
///   gateway before they are sent, as SQLite refuses them.
/// - `notifications` has no foreign key to `devices`: any node inserts a push for any device
///   without touching (or locking) the device's row, which its owner node updates.
/// - Acceptance ids stay unique across nodes by blocks: `meta`'s `max_acceptance_id` row is the
///   only allocator. One node alone keeps it as SQLite does (raised by the transaction that
///   deletes the highest id's row; the table says it otherwise); several nodes each take a block
///   with `UPDATE pushgate_meta SET value = value + <block> WHERE key = 'max_acceptance_id'
///   RETURNING value` and give ids from it, so no two nodes ever give the same id, and ids
///   continue above everything a single node gave before. Delivery order is per device, by seq,
///   so ids from different blocks need not be in acceptance order across nodes.
/// - A device is owned by one node's lease at a time (v2: `owner_lease`, NULL when no node
///   has claimed it) and `owner_epoch` fences it: every transaction a node commits for its
///   devices starts with `pushgate_fence_all` (v3; v2's `pushgate_fence` checked one device a
///   call), and a claim raises the epoch, so a node that lost the device changes nothing.
/// - "Pending pushes of these devices" (an owner woken for a list of device ids, or taking a
///   device over) is `WHERE device_id = ANY($1)` on `notifications_device`.
enum PostgresSchema {
    /// The advisory lock that serializes migrations (any 64-bit constant of our own: "pushgate").
    static let migrationLockKey: Int64 = 0x7075_7368_6761_7465

    /// The advisory lock a single gateway holds for as long as its connection lives: one gateway
    /// per database, as one per SQLite directory (each keeps the store's state in memory, and
    /// two would give the same acceptance ids). Held per session, so it goes with the
    /// connection, and a gateway killed with -9 leaves it to its successor at once. The cluster
    /// replaces it with node leases.
    static let singleGatewayLockKey: Int64 = migrationLockKey + 1

    /// `meta`'s record of the highest acceptance id ever committed (see above).
    static let maxAcceptanceIDKey = "max_acceptance_id"

    /// Version N is `migrations[N - 1]`.
    static let migrations: [String] = [v1, v2, v3]

    /// The SQLSTATE `pushgate_fence` raises when a device is not owned as the node says.
    static let fencedState = "PGF01"

    static var latestVersion: Int { migrations.count }

    private static let v1 = """
        CREATE TABLE devices (
            id          text COLLATE "C" NOT NULL PRIMARY KEY,
            secret_hash bytea  NOT NULL,
            created_at  bigint NOT NULL,
            -- At least every seq ever given to the device (stored rows' seqs are folded in on load).
            last_seq    bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
            -- The node whose stream holds the device, and the fencing epoch of that ownership
            -- (see the comment of PostgresSchema). NULL and 0 on a single gateway.
            owner_node  text COLLATE "C",
            owner_epoch bigint NOT NULL DEFAULT 0 CHECK (owner_epoch >= 0)
        );

        -- Kept after the device is deleted (unregistered_at set) so that providers get 410:
        -- hence no foreign key to devices.
        CREATE TABLE registrations (
            token           text COLLATE "C" NOT NULL PRIMARY KEY,
            device_id       text COLLATE "C" NOT NULL,
            topic           text COLLATE "C" NOT NULL,
            created_at      bigint NOT NULL,
            unregistered_at bigint,
            app_state       text
        );
        CREATE INDEX registrations_device ON registrations (device_id);
        -- At most one active registration per app on a device.
        CREATE UNIQUE INDEX registrations_active_topic ON registrations (device_id, topic)
            WHERE unregistered_at IS NULL;

        -- seq IS NULL while the scheduler holds the notification.
        CREATE TABLE notifications (
            acceptance_id bigint   NOT NULL PRIMARY KEY CHECK (acceptance_id >= 0),
            device_id     text COLLATE "C" NOT NULL,
            token         text COLLATE "C" NOT NULL,
            topic         text     NOT NULL,
            apns_id       text     NOT NULL,
            push_type     text     NOT NULL,
            priority      smallint NOT NULL CHECK (priority BETWEEN 0 AND 255),
            collapse_id   text,
            payload       bytea    NOT NULL,
            accepted_at   bigint   NOT NULL,
            expires_at    bigint   NOT NULL,
            seq           bigint   CHECK (seq >= 0)
        );
        -- A device's pending pushes, in acceptance order (see above).
        CREATE INDEX notifications_device ON notifications (device_id, acceptance_id);

        -- Silent-budget bucket levels, so that a restart (or a takeover) never refills them.
        CREATE TABLE buckets (
            key   text COLLATE "C" NOT NULL PRIMARY KEY,
            level bigint NOT NULL CHECK (level >= 0),
            at    bigint NOT NULL
        );

        -- Durable totals (received, delivered, ...) since the store was created.
        CREATE TABLE totals (
            name  text COLLATE "C" NOT NULL PRIMARY KEY,
            value bigint NOT NULL
        );

        -- Background fetch: each app's last results, penalty, interval (0 minimum, -1 never,
        -- otherwise seconds) and last budget release.
        CREATE TABLE fetch_states (
            token          text COLLATE "C" NOT NULL PRIMARY KEY,
            results        bigint  NOT NULL CHECK (results BETWEEN 0 AND 4294967295),
            result_count   integer NOT NULL CHECK (result_count BETWEEN 0 AND 16),
            penalty_until  bigint,
            fetch_interval bigint  NOT NULL CHECK (fetch_interval >= -1),
            last_budget_at bigint
        );

        -- The fetch windows of unacknowledged silent pushes, open or closed.
        CREATE TABLE fetch_windows (
            device_id text COLLATE "C" NOT NULL,
            seq       bigint  NOT NULL CHECK (seq >= 0),
            token     text COLLATE "C" NOT NULL,
            opened_at bigint  NOT NULL,
            closed    boolean NOT NULL DEFAULT false,
            PRIMARY KEY (device_id, seq)
        );
        CREATE INDEX fetch_windows_token ON fetch_windows (token);

        -- Small durable facts: the highest acceptance id ever stored (see above).
        CREATE TABLE pushgate_meta (
            key   text COLLATE "C" NOT NULL PRIMARY KEY,
            value bigint NOT NULL
        );
        INSERT INTO pushgate_meta (key, value) VALUES ('\(maxAcceptanceIDKey)', 0);
        """

    /// Web Push (the SQLite store's v7), and several gateway nodes on one database:
    /// - registrations have a kind (`apns`, `webpush`) and, for a restricted Web Push
    ///   subscription, its application server key; notifications their Web Push urgency.
    /// - `node_leases`: one row per node's joining (`PushgateCluster.OwnershipRules`), alive
    ///   while `expires_at` (the database's clock) is ahead; a node that lets its lease lapse
    ///   joins again under a new id, so nothing done under the old one survives the gap. Each
    ///   renewal records how many devices the node holds, for the admin API's node list.
    /// - A device is owned by a lease (`owner_lease`) at an epoch; `pushgate_fence` is the check
    ///   every owner's batch starts with: it holds the device's row (FOR SHARE) until the
    ///   transaction ends, so that a claim by another node waits for it, and raises
    ///   `fencedState` when the device is not owned so.
    /// - `pushgate_cluster`'s secret: what nodes prove to one another (random, made here).
    private static let v2 = """
        ALTER TABLE registrations
            ADD COLUMN kind text NOT NULL DEFAULT 'apns' CHECK (kind IN ('apns', 'webpush')),
            ADD COLUMN application_server_key bytea;
        ALTER TABLE notifications
            ADD COLUMN urgency text CHECK (urgency IN ('very-low', 'low', 'normal', 'high'));

        CREATE TABLE node_leases (
            lease_id   bigserial PRIMARY KEY,
            node_name  text NOT NULL,
            address    text NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            devices_held integer NOT NULL DEFAULT 0
        );
        ALTER TABLE devices DROP COLUMN owner_node;
        ALTER TABLE devices ADD COLUMN owner_lease bigint;

        CREATE FUNCTION pushgate_fence(p_device text, p_lease bigint, p_epoch bigint) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM 1 FROM devices d JOIN node_leases l ON l.lease_id = d.owner_lease
                WHERE d.id = p_device AND d.owner_lease = p_lease AND d.owner_epoch = p_epoch
                AND l.expires_at > clock_timestamp()
                FOR SHARE OF d;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'device % is not owned by lease % at epoch %', p_device, p_lease, p_epoch
                    USING ERRCODE = '\(fencedState)';
            END IF;
        END $$;

        CREATE TABLE pushgate_cluster (secret text NOT NULL);
        INSERT INTO pushgate_cluster (secret)
            VALUES (replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));
        """

    /// v3: `pushgate_fence_all`, the fence of every device of a transaction in one call (one
    /// statement per transaction where `pushgate_fence` took one per device). It holds the rows
    /// (FOR SHARE) until the transaction ends, as `pushgate_fence` does, so a claim by another
    /// node waits for the commit; then, in a statement of its own (a snapshot taken after the
    /// locks, so a claim that committed while it waited is seen), it checks each device's owner
    /// and epoch and the lease's life. A failure raises `fencedState` with the failing entry's
    /// position (from 1) as its DETAIL, so that the gateway refuses that device's batch alone.
    /// `pushgate_fence` stays for gateways of the previous version during a rolling update.
    private static let v3 = """
        CREATE FUNCTION pushgate_fence_all(p_lease bigint, p_devices text[], p_epochs bigint[]) RETURNS void
        LANGUAGE plpgsql AS $$
        DECLARE
            v_failed bigint;
        BEGIN
            PERFORM 1 FROM devices d WHERE d.id = ANY(p_devices) FOR SHARE OF d;
            IF NOT EXISTS (SELECT 1 FROM node_leases l WHERE l.lease_id = p_lease AND l.expires_at > clock_timestamp()) THEN
                v_failed := 1;
            ELSE
                SELECT min(x.n) INTO v_failed
                    FROM unnest(p_devices, p_epochs) WITH ORDINALITY AS x(id, epoch, n)
                    LEFT JOIN devices d ON d.id = x.id
                    WHERE d.id IS NULL OR d.owner_lease IS DISTINCT FROM p_lease OR d.owner_epoch <> x.epoch;
            END IF;
            IF v_failed IS NOT NULL THEN
                RAISE EXCEPTION 'device % is not owned by lease % at epoch %',
                    p_devices[v_failed], p_lease, p_epochs[v_failed]
                    USING ERRCODE = '\(fencedState)', DETAIL = v_failed::text;
            END IF;
        END $$;
        """

    /// The tables a store holds, for `store copy`'s emptiness check and its counts.
    static let dataTables = [
        "devices", "registrations", "notifications", "buckets", "totals", "fetch_states", "fetch_windows",
    ]

    /// Brings the schema up to `latestVersion`, under the advisory lock, in one transaction.
    /// Refuses a database whose schema is newer than this version knows.
    static func migrate(_ connection: PGConnection, deadline: UInt64) throws(PGError) -> (from: Int, to: Int) {
        try connection.execute("BEGIN", deadline: deadline)
        do throws(PGError) {
            // Waiting for another gateway's migration, or a long one of our own, is bounded by
            // `deadline`, not by the session's statement timeout.
            try connection.execute("SET LOCAL statement_timeout = 0", deadline: deadline)
            var params = PGParams()
            params.int64(migrationLockKey)
            try connection.execute("SELECT pg_advisory_xact_lock($1::bigint)", params, deadline: deadline)
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS pushgate_migrations (
                    version    integer PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """,
                deadline: deadline
            )
            let current =
                Int(
                    try connection.execute(
                        "SELECT coalesce(max(version), 0) FROM pushgate_migrations",
                        deadline: deadline
                    )?
                    .value() ?? "0"
                ) ?? 0
            if current > latestVersion {
                throw PGError(
                    message: """
                        the database has Pushgate schema version \(current), written by a newer Pushgate; \
                        this version knows versions 1 to \(latestVersion) only: run a newer pushgate, or \
                        point --database-url at another database
                        """,
                    connectionBroken: false
                )
            }
            for version in (current + 1)...max(current + 1, latestVersion) where version <= latestVersion {
                try connection.execute(migrations[version - 1], deadline: deadline)
                var params = PGParams()
                params.int32(Int32(version))
                try connection.execute(
                    "INSERT INTO pushgate_migrations (version) VALUES ($1::integer)",
                    params,
                    deadline: deadline
                )
            }
            try connection.execute("COMMIT", deadline: deadline)
            return (current, latestVersion)
        } catch {
            if !error.connectionBroken { _ = try? connection.execute("ROLLBACK", deadline: deadline) }
            throw error
        }
    }
}
