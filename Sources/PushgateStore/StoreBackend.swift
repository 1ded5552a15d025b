/// A database behind `GroupCommitStore`: it applies what the store's writer hands it, one
/// transaction per group of batches, and reads everything back. Group commit, ordering, the
/// limit of waiting commands and closing are the store's, so that each database (SQLite today,
/// a PostgreSQL shared by several gateway nodes later) writes only its own SQL.
///
/// The store calls a backend from its writer only, one call at a time: never concurrently, so a
/// backend needs no lock of its own for the calls below.
public protocol StoreBackend: Sendable {
    /// Reads everything: devices ordered by id, registrations by token, notifications by
    /// acceptance id, buckets by key; each device's `lastSeq` covering the seqs still stored.
    func load() throws(StoreError) -> StoreSnapshot

    /// Applies `group` in one transaction and returns once it is durable, with one result per
    /// batch, in order. Each batch is atomic: one that fails is undone alone (its commands, none
    /// of the others'), and the rest of the group commits. Throws when the transaction itself
    /// fails (it cannot begin or commit, or the database rolled it back): then no batch of the
    /// group was applied.
    func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>]

    /// Releases the database, once every group has been applied; no call follows.
    func close() throws(StoreError)

    /// The writer has nothing left to apply, for now: a moment for housekeeping that must not
    /// wait in a commit (SQLite copies its WAL back into the database then).
    func writerIdle()

    /// How often the store calls `probe` while it commits nothing; nil: never. A database
    /// across a network can go away (or come back) while no request comes, and readiness must
    /// say so without waiting for traffic; a local file cannot.
    var probeInterval: Duration? { get }

    /// Checks that the database would take a commit now (reconnecting if it must): throws
    /// `.unavailable` when it would not. Called on the writer, between transactions.
    func probe() throws(StoreError)
}

extension StoreBackend {
    public func writerIdle() {}
    public var probeInterval: Duration? { nil }
    public func probe() throws(StoreError) {}
}
