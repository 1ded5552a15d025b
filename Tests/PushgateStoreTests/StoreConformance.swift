@_spi(Testing) import PushgateStore
import PushgateStorePostgres
import PushgateStoreSQLite
import PushgateStoreTestKit
import Testing

/// The backends every conformance test runs against (ntfy's `forEachBackend`): a new backend
/// joins here, and must pass every test of `ConformanceCommandTests` and
/// `ConformanceGroupCommitTests`. PostgreSQL runs on the test process's own server
/// (`PostgresServer.shared`), a fresh database per test.
enum StoreBackendKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case memory
    case postgres

    var testDescription: String { rawValue }
}

/// What the conformance suite drives: a store with the group-commit queue's counters and test
/// hooks, whichever backend is under it.
protocol StoreUnderTest: NotificationStore {
    var transactionsCommitted: UInt64 { get }
    var commandsCommitted: UInt64 { get }
    var batchesCommitted: UInt64 { get }
    var batchesFailed: UInt64 { get }
    var batchesRejectedOverloaded: UInt64 { get }
    var lastTransactionNanoseconds: UInt64 { get }
    var maxTransactionNanoseconds: UInt64 { get }
    var totalTransactionNanoseconds: UInt64 { get }
    var pendingCommands: Int { get }
    func pauseWriter()
    func resumeWriter()
}

extension GroupCommitStore: StoreUnderTest {}

/// Where one test's data lives: a directory for SQLite, a storage object in memory, a database
/// for PostgreSQL. Opening a store again on it is a restart.
struct StoreFixture {
    private enum Location {
        case directory(TempDirectory)
        case memory(InMemoryStorage)
        case database(url: String)
    }

    private let location: Location

    init(_ kind: StoreBackendKind) throws {
        switch kind {
        case .sqlite: location = .directory(try TempDirectory())
        case .memory: location = .memory(InMemoryStorage())
        case .postgres:
            let server = try PostgresServer.shared()
            location = .database(url: server.url(database: try server.createDatabase()))
        }
    }

    func open(maxPendingCommands: Int = 100_000, maxGroupCommands: Int = 4096) throws -> any StoreUnderTest {
        switch location {
        case .directory(let directory):
            let backend = try SQLiteBackend(directory: directory.path, logger: quietLogger)
            return GroupCommitStore(
                backend: backend,
                maxPendingCommands: maxPendingCommands,
                maxGroupCommands: maxGroupCommands,
                logger: quietLogger
            )
        case .memory(let storage):
            let backend = InMemoryBackend(storage: storage)
            return GroupCommitStore(
                backend: backend,
                maxPendingCommands: maxPendingCommands,
                maxGroupCommands: maxGroupCommands,
                logger: quietLogger
            )
        case .database(let url):
            let backend = try PostgresBackend(url: url, logger: quietLogger)
            return GroupCommitStore(
                backend: backend,
                maxPendingCommands: maxPendingCommands,
                maxGroupCommands: maxGroupCommands,
                logger: quietLogger
            )
        }
    }

    func remove() {
        if case .directory(let directory) = location { directory.remove() }
    }
}

/// Runs `body` with a fixture of `kind`, removed afterwards.
func withFixture(_ kind: StoreBackendKind, _ body: (StoreFixture) async throws -> Void) async throws {
    let fixture = try StoreFixture(kind)
    defer { fixture.remove() }
    try await body(fixture)
}

/// Runs `body` with a store of `kind` on a fresh fixture, then closes it.
func withStore(
    _ kind: StoreBackendKind,
    maxPendingCommands: Int = 100_000,
    maxGroupCommands: Int = 4096,
    _ body: (any StoreUnderTest) async throws -> Void
) async throws {
    try await withFixture(kind) { fixture in
        let store = try fixture.open(maxPendingCommands: maxPendingCommands, maxGroupCommands: maxGroupCommands)
        do {
            try await body(store)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}
