import Logging
import PushgateCluster
import PushgateStore
import Synchronization

/// The cluster's side of the PostgreSQL store (`ClusterStore`): node leases, device ownership,
/// one device's records, on connections of their own (never the writer's, which commits groups),
/// so that a claim or a renewal never waits behind a commit. The lease has a connection to
/// itself, so that a renewal never waits behind claims (a reconnect storm makes thousands);
/// claims and lookups share a few, one device's always the same one. The SQL follows
/// `PushgateCluster.OwnershipRules`; times are the database's (`clock_timestamp()`), so that the
/// nodes' clocks never decide who owns what.
public final class PostgresCluster: ClusterStore {
    /// How long a lease lasts after each renewal (`NodeLease`'s `leaseMillis`).
    public let leaseMillis: Int64
    private let url: String
    private let options: PostgresOptions
    private let logger: Logger
    /// Joins, renewals, leaving, the node list.
    private let leaseConnection = Slot()
    /// Claims, lookups, a device's records, the sweep.
    private let ownershipConnections = (0..<4).map { _ in Slot() }

    /// A connection, when one is open: used under the lock only, which is what makes it safe to
    /// share (a libpq connection serves one thread at a time).
    private final class Slot: Sendable {
        let held = Mutex(Held())
    }

    private final class Held: @unchecked Sendable {
        var connection: PGConnection?
    }

    /// The ownership connection for `key` (a device id or token): one key's calls take turns.
    private func slot(_ key: String) -> Slot {
        var hash: UInt32 = 2_166_136_261
        for byte in key.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return ownershipConnections[Int(hash % UInt32(ownershipConnections.count))]
    }

    public init(url: String, options: PostgresOptions = PostgresOptions(), leaseMillis: Int64, logger: Logger) {
        self.url = url
        self.options = options
        self.leaseMillis = leaseMillis
        self.logger = logger
    }

    public func join(node: String, address: String) throws -> UInt64 {
        try run(leaseConnection) { connection, deadline throws(PGError) in
            var params = PGParams()
            params.text(node)
            params.text(address)
            params.int64(leaseMillis)
            let result = try connection.execute(
                """
                INSERT INTO node_leases (node_name, address, expires_at) \
                VALUES ($1::text, $2::text, clock_timestamp() + $3::bigint * interval '1 millisecond') \
                RETURNING lease_id
                """,
                params,
                deadline: deadline
            )
            return UInt64(result?.value().flatMap { UInt64($0) } ?? 0)
        }
    }

    public func renew(lease: UInt64, devicesHeld: Int) throws -> Bool {
        try run(leaseConnection) { connection, deadline throws(PGError) in
            var params = PGParams()
            params.int64(Int64(clamping: lease))
            params.int64(leaseMillis)
            params.int64(Int64(devicesHeld))
            let result = try connection.execute(
                """
                UPDATE node_leases SET expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond', \
                devices_held = $3::bigint WHERE lease_id = $1::bigint AND expires_at > clock_timestamp() RETURNING lease_id
                """,
                params,
                deadline: deadline
            )
            return (result?.rows ?? 0) == 1
        }
    }

    public func leave(lease: UInt64) throws {
        try run(leaseConnection) { connection, deadline throws(PGError) in
            var params = PGParams()
            params.int64(Int64(clamping: lease))
            try connection.execute(
                "UPDATE node_leases SET expires_at = clock_timestamp() WHERE lease_id = $1::bigint",
                params,
                deadline: deadline
            )
        }
    }

    public func claim(device: String, lease: UInt64, reason: OwnershipRules.ClaimReason) throws -> ClaimOutcome {
        try run(slot(device)) { connection, deadline throws(PGError) in
            try connection.execute("BEGIN", deadline: deadline)
            do throws(PGError) {
                let outcome = try claim(device, lease, reason, connection, deadline)
                try connection.execute("COMMIT", deadline: deadline)
                return outcome
            } catch {
                if !error.connectionBroken { _ = try? connection.execute("ROLLBACK", deadline: deadline) }
                throw error
            }
        }
    }

    /// The claim, in its transaction: the device's row locked (FOR UPDATE) so that claims of one
    /// device, and an owner's fenced commits (FOR SHARE), take turns.
    private func claim(
        _ device: String,
        _ lease: UInt64,
        _ reason: OwnershipRules.ClaimReason,
        _ connection: PGConnection,
        _ deadline: UInt64
    ) throws(PGError) -> ClaimOutcome {
        var params = PGParams()
        params.text(device)
        let current = try connection.execute(
            """
            SELECT d.owner_lease, d.owner_epoch, \(Self.nodeColumns("l")), l.expires_at > clock_timestamp() \
            FROM devices d LEFT JOIN node_leases l ON l.lease_id = d.owner_lease WHERE d.id = $1::text FOR UPDATE OF d
            """,
            params,
            binaryResults: true,
            deadline: deadline
        )
        guard let current, current.rows == 1 else { return .unknownDevice }
        var mine = PGParams()
        mine.int64(Int64(clamping: lease))
        let alive = try connection.execute(
            "SELECT 1 FROM node_leases WHERE lease_id = $1::bigint AND expires_at > clock_timestamp()",
            mine,
            deadline: deadline
        )
        guard (alive?.rows ?? 0) == 1 else { return .leaseNotAlive }
        let ownerLease = current.optionalInteger(0, 0).map { UInt64($0) }
        let epoch = UInt64(max(current.integer(0, 1), 0))
        let ownerAlive = !current.isNull(0, 8) && current.boolean(0, 8)
        let owner = ownerLease != nil && !current.isNull(0, 2) ? Self.node(current, 0, from: 2) : nil
        if ownerLease == lease { return .claimed(epoch: epoch, previous: nil) }
        if reason == .takeover, ownerAlive, let owner { return .ownedElsewhere(owner) }
        var update = PGParams()
        update.int64(Int64(clamping: lease))
        update.text(device)
        let claimed = try connection.execute(
            "UPDATE devices SET owner_lease = $1::bigint, owner_epoch = owner_epoch + 1 WHERE id = $2::text RETURNING owner_epoch",
            update,
            deadline: deadline
        )
        let newEpoch = claimed?.value().flatMap { UInt64($0) } ?? epoch + 1
        return .claimed(epoch: newEpoch, previous: ownerAlive ? owner : nil)
    }

    public func locate(tokens: [String]) throws -> [String: DeviceLocation] {
        guard let first = tokens.first else { return [:] }
        return try run(slot(first)) { connection, deadline throws(PGError) in
            var params = PGParams()
            params.textArray(tokens)
            let result = try connection.execute(
                """
                SELECT d.id, d.owner_epoch, \(Self.nodeColumns("l")), r.token \
                FROM registrations r JOIN devices d ON d.id = r.device_id \
                LEFT JOIN node_leases l ON l.lease_id = d.owner_lease AND l.expires_at > clock_timestamp() \
                WHERE r.token = ANY($1::text[])
                """,
                params,
                binaryResults: true,
                deadline: deadline
            )
            guard let result else { return [:] }
            var found: [String: DeviceLocation] = [:]
            for row in 0..<result.rows {
                // The token follows the node's six columns.
                found[result.text(row, 8)] = Self.location(result, row)
            }
            return found
        }
    }

    public func locate(device: String) throws -> DeviceLocation? {
        try run(slot(device)) { connection, deadline throws(PGError) in
            var params = PGParams()
            params.text(device)
            let result = try connection.execute(
                """
                SELECT d.id, d.owner_epoch, \(Self.nodeColumns("l")) FROM devices d \
                LEFT JOIN node_leases l ON l.lease_id = d.owner_lease AND l.expires_at > clock_timestamp() \
                WHERE d.id = $1::text
                """,
                params,
                binaryResults: true,
                deadline: deadline
            )
            guard let result, result.rows == 1 else { return nil }
            return Self.location(result, 0)
        }
    }

    /// A device's location from a row of `d.id, d.owner_epoch, <node columns>`.
    private static func location(_ result: PGResult, _ row: Int) -> DeviceLocation {
        DeviceLocation(
            deviceID: result.text(row, 0),
            owner: result.isNull(row, 2) ? nil : node(result, row, from: 2),
            epoch: UInt64(max(result.integer(row, 1), 0))
        )
    }

    public func lost(_ devices: [(device: String, epoch: UInt64)], lease: UInt64) throws -> [String] {
        try run(ownershipConnections[0]) { connection, deadline throws(PGError) in
            var params = PGParams()
            params.textArray(devices.map(\.device))
            params.int64Array(devices.map { Int64(clamping: $0.epoch) })
            params.int64(Int64(clamping: lease))
            let result = try connection.execute(
                """
                SELECT x.id FROM unnest($1::text[], $2::bigint[]) AS x(id, epoch) \
                LEFT JOIN devices d ON d.id = x.id \
                WHERE d.id IS NULL OR d.owner_lease IS DISTINCT FROM $3::bigint OR d.owner_epoch <> x.epoch
                """,
                params,
                binaryResults: true,
                deadline: deadline
            )
            return (0..<(result?.rows ?? 0)).map { result!.text($0, 0) }
        }
    }

    public func nodes() throws -> [NodeInfo] {
        try run(leaseConnection) { connection, deadline throws(PGError) in
            let result = try connection.execute(
                """
                SELECT \(Self.nodeColumns("l")) FROM node_leases l WHERE l.expires_at > clock_timestamp() \
                ORDER BY l.node_name, l.lease_id
                """,
                binaryResults: true,
                deadline: deadline
            )
            return (0..<(result?.rows ?? 0)).map { Self.node(result!, $0, from: 0) }
        }
    }

    public func records(ofDevice id: String) throws -> StoreSnapshot {
        try run(slot(id)) { connection, deadline throws(PGError) in
            try PostgresSnapshot.read(connection, device: id) { deadline }
        }
    }

    public func clusterSecret() throws -> String {
        try run(leaseConnection) { connection, deadline throws(PGError) in
            guard
                let secret = try connection.execute("SELECT secret FROM pushgate_cluster LIMIT 1", deadline: deadline)?
                    .value()
            else { throw PGError(message: "the database has no cluster secret", connectionBroken: false) }
            return secret
        }
    }

    // MARK: -

    /// A node's columns, `lease_id, node_name, address, started_at, expires_at, devices_held`
    /// (times in epoch milliseconds), of the table aliased `alias`.
    private static func nodeColumns(_ alias: String) -> String {
        """
        \(alias).lease_id, \(alias).node_name, \(alias).address, \
        (extract(epoch FROM \(alias).started_at) * 1000)::bigint, \
        (extract(epoch FROM \(alias).expires_at) * 1000)::bigint, \(alias).devices_held::bigint
        """
    }

    private static func node(_ result: PGResult, _ row: Int, from column: Int) -> NodeInfo {
        NodeInfo(
            lease: UInt64(max(result.integer(row, column), 0)),
            name: result.text(row, column + 1),
            address: result.text(row, column + 2),
            startedAt: result.integer(row, column + 3),
            expiresAt: result.integer(row, column + 4),
            devicesHeld: result.isNull(row, column + 5) ? 0 : Int(result.integer(row, column + 5))
        )
    }

    /// `body` on the slot's connection, made if need be; a broken connection is dropped. A
    /// connection kept from before that turns out broken (the server restarted, or ended it,
    /// since it was last used) is made again and `body` run once more on the new one: only
    /// a fresh connection's failure is the caller's.
    private func run<T: Sendable>(_ slot: Slot, _ body: (PGConnection, UInt64) throws(PGError) -> T) throws -> T {
        try slot.held.withLock { held throws -> T in
            let deadline = monotonicNanoseconds() + UInt64(options.statementTimeoutMilliseconds + 1000) * 1_000_000
            let reused = held.connection != nil
            do throws(PGError) {
                do throws(PGError) {
                    return try once(held, deadline, body)
                } catch  where reused && error.connectionBroken {
                    return try once(held, deadline, body)
                }
            } catch {
                throw StoreError(.unavailable, "PostgreSQL (cluster): \(error.message)")
            }
        }
    }

    private func once<T>(
        _ held: Held,
        _ deadline: UInt64,
        _ body: (PGConnection, UInt64) throws(PGError) -> T
    ) throws(PGError) -> T {
        do throws(PGError) {
            let connection: PGConnection
            if let existing = held.connection {
                connection = existing
            } else {
                connection = try PGConnection(
                    url: url,
                    defaults: [
                        ("client_encoding", "UTF8"), ("connect_timeout", "\(options.connectTimeoutSeconds)"),
                        ("application_name", "pushgate-cluster"),
                    ]
                )
                try connection.execute(
                    "SET statement_timeout = \(options.statementTimeoutMilliseconds)",
                    deadline: deadline
                )
                // As the store's own connections, for the same reason (`PostgresBackend.setUp`).
                try connection.execute("SET enable_seqscan = off", deadline: deadline)
                held.connection = connection
            }
            return try body(connection, deadline)
        } catch {
            if error.connectionBroken || error.timedOut { held.connection = nil }
            throw error
        }
    }
}
