import CLibPQ
import Logging
import PushgateStore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Committing a group: one pipelined transaction, batches refused for their content taken out
/// and the rest sent again, and the outcome of a commit whose answer was lost looked up.
extension PostgresSession {
    /// What a query of the pipeline was, to read its result.
    private enum Sent {
        case control
        case transactionID
        case commit
        case command(batch: Int, command: Int)
        /// One lease's fences (`Fences.byLease`).
        case fences(Int)
    }

    private enum Attempt {
        case committed
        /// The batch was refused for its content; the transaction was rolled back.
        case refused(batch: Int, StoreError)
    }

    func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
        var results = [Result<Void, StoreError>?](repeating: nil, count: group.count)
        for (index, commands) in group.enumerated() {
            if let refusal = commands.lazy.compactMap(PostgresCommands.refusal).first {
                results[index] = .failure(
                    StoreError(.database, "batch of \(commands.count) command(s) refused: \(refusal)")
                )
            }
        }
        while true {
            let sending = results.indices.filter { results[$0] == nil && !group[$0].isEmpty }
            switch try attempt(group, sending) {
            case .committed:
                for index in results.indices where results[index] == nil { results[index] = .success(()) }
                committedMaxAcceptanceID =
                    StoreCommand.highestAcceptanceID(
                        committing: sending.lazy.map { group[$0] },
                        above: committedMaxAcceptanceID
                    )
                    .id
                return results.map { $0! }
            case .refused(let batch, let error):
                status.errors.add(.batch)
                results[batch] = .failure(error)
            }
        }
    }

    /// The fences of a transaction's batches, one statement per lease (one, but for batches
    /// queued just before the node joined again), each device once: once its fence passed, the
    /// same fence again in a later batch of the group can only pass too.
    private struct Fences {
        struct OfLease {
            var lease: UInt64
            var devices: [String] = []
            var epochs: [UInt64] = []
            /// The batch of each entry, to refuse when the entry fails.
            var batches: [Int] = []
            var seen: Set<FenceKey> = []
        }

        struct FenceKey: Hashable {
            var device: String
            var epoch: UInt64
        }

        var byLease: [OfLease] = []

        init(_ group: [[StoreCommand]], _ sending: [Int]) {
            for batch in sending {
                for case .fence(let device, let lease, let epoch) in group[batch] {
                    let index =
                        byLease.firstIndex { $0.lease == lease }
                        ?? {
                            byLease.append(OfLease(lease: lease))
                            return byLease.count - 1
                        }()
                    guard byLease[index].seen.insert(FenceKey(device: device, epoch: epoch)).inserted else { continue }
                    byLease[index].devices.append(device)
                    byLease[index].epochs.append(epoch)
                    byLease[index].batches.append(batch)
                }
            }
        }
    }

    /// One transaction with the batches `sending`, in one pipeline.
    private func attempt(_ group: [[StoreCommand]], _ sending: [Int]) throws(StoreError) -> Attempt {
        let connection = try connected()
        let fences = Fences(group, sending)
        let deadline = self.deadline()
        var sent: [Sent] = []
        var transactionID: Int64?
        var commitSent = false
        var committed = false
        var firstError: (Sent, PGError)?
        do throws(PGError) {
            try connection.enterPipeline()
            params.removeAll()
            if !connection.isIdleOutsideTransaction {
                // A refused batch left the transaction aborted.
                try connection.sendQuery("ROLLBACK", params)
                sent.append(.control)
            }
            try connection.sendQuery("BEGIN", params)
            sent.append(.control)
            if !sending.isEmpty {
                try connection.sendQuery("SELECT txid_current()", params, binaryResults: true)
                sent.append(.transactionID)
                try connection.flushRequest()
            }
            // Every fence first: the rows are held before anything changes.
            for (index, fences) in fences.byLease.enumerated() {
                try PostgresCommands.sendFences(lease: fences.lease, fences.devices, fences.epochs, connection, &params)
                sent.append(.fences(index))
            }
            for batch in sending {
                for (index, command) in group[batch].enumerated() {
                    let count = try PostgresCommands.send(command, connection, &params)
                    for _ in 0..<count { sent.append(.command(batch: batch, command: index)) }
                }
            }
            let highest = StoreCommand.highestAcceptanceID(
                committing: sending.lazy.map { group[$0] },
                above: committedMaxAcceptanceID
            )
            if highest.deleted {
                try PostgresCommands.sendRaiseMaxAcceptanceID(highest.id, connection, &params)
                sent.append(.control)
            }
            params.removeAll()
            // A commit that waits for a synchronous standby, cancelled by the statement timeout,
            // would commit locally and answer COMMIT (with a warning): the 200 would not wait
            // for the standby. Without the timeout the writer's own deadline ends the wait, and
            // `resolve` gives the group its answer.
            try connection.sendQuery("SET LOCAL statement_timeout = 0", params)
            sent.append(.control)
            try connection.sendQuery("COMMIT", params)
            sent.append(.commit)
            try connection.sync()
            commitSent = true
            try connection.flush(deadline: deadline)
            for query in sent {
                var first: PGResult?
                while let result = try connection.nextResult(deadline: deadline) {
                    if first == nil { first = result }
                }
                guard let result = first else { continue }
                if let error = result.error {
                    if firstError == nil { firstError = (query, error) }
                    continue
                }
                switch query {
                case .transactionID where result.status == PGRES_TUPLES_OK && result.rows == 1:
                    transactionID = result.integer(0, 0)
                case .commit where result.status == PGRES_COMMAND_OK:
                    // COMMIT of an aborted transaction answers ROLLBACK without an error.
                    committed = firstError == nil
                default:
                    break
                }
            }
            // The sync point.
            while let result = try connection.nextResult(deadline: deadline) {
                if result.status == PGRES_PIPELINE_SYNC { break }
            }
            try connection.exitPipeline()
        } catch {
            // No answer, or the connection broke: the commit may or may not have happened.
            let failure = lost(error, kind: error.timedOut ? .timeout : .connectionLost)
            guard commitSent, firstError == nil else { throw failure }
            status.errors.add(.commitUnknown)
            guard let transactionID else {
                logger.error(
                    "the connection to PostgreSQL broke while a commit was on its way, before its transaction id was known: whether its batches committed cannot be learned; they were refused (503), and any that did commit take effect when their devices are read again (a restart, or a node taking them over)",
                    metadata: ["batches": "\(sending.count)", "error": "\(error.message)"]
                )
                throw failure
            }
            logger.warning(
                "the connection to PostgreSQL broke while a commit was on its way; asking the server whether it committed",
                metadata: [
                    "transaction": "\(transactionID)", "batches": "\(sending.count)", "error": "\(error.message)",
                ]
            )
            switch resolve(transactionID, pid: connection.backendPID, batches: sending.count, until: self.deadline()) {
            case .some(true):
                logger.notice("it had committed", metadata: ["transaction": "\(transactionID)"])
                return .committed
            case .some(false):
                logger.notice("it had not committed", metadata: ["transaction": "\(transactionID)"])
                throw failure
            case .none:
                unresolved = (transactionID, sending.count)
                throw StoreError(
                    failure.kind,
                    "\(failure.message) (while committing: the outcome is looked up when PostgreSQL answers again)"
                )
            }
        }
        if committed { return .committed }
        guard let (query, error) = firstError else {
            throw StoreError(.unavailable, "PostgreSQL (\(target)) did not commit the transaction and gave no reason")
        }
        if case .fences(let index) = query, error.sqlState == PostgresSchema.fencedState,
            let entry = error.detail.flatMap(Int.init), fences.byLease[index].batches.indices.contains(entry - 1)
        {
            let batch = fences.byLease[index].batches[entry - 1]
            return .refused(
                batch: batch,
                StoreError(
                    .fenced,
                    "batch of \(group[batch].count) command(s) refused: PostgreSQL error \(error.sqlState ?? "?"): \(error.message)"
                )
            )
        }
        if case .command(let batch, let command) = query, error.sqlClass == "23" || error.sqlClass == "22" {
            let commands = group[batch]
            return .refused(
                batch: batch,
                StoreError(
                    .database,
                    "batch of \(commands.count) command(s) refused: \(commands[command].summary): PostgreSQL error \(error.sqlState ?? "?"): \(error.message)"
                )
            )
        }
        status.errors.add(.transaction)
        if error.connectionBroken { disconnect() }
        throw StoreError(
            Self.isRetryable(error) ? .unavailable : .database,
            "PostgreSQL (\(target)) refused the transaction: \(error.sqlState ?? "?"): \(error.message)"
        )
    }

    /// Whether the same transaction may succeed later: the server ran out of something, is
    /// shutting down or recovering, is a read-only standby, or lost a race (SQLSTATE classes 08,
    /// 25, 40, 53, 55, 57, 58, XX). Anything else (a permission, a missing table) needs a person.
    static func isRetryable(_ error: PGError) -> Bool {
        guard let sqlClass = error.sqlClass else { return true }
        return ["08", "25", "40", "53", "55", "57", "58", "XX"].contains(sqlClass)
    }

    /// Whether transaction `txid`, whose connection (server process `pid`) broke while it
    /// committed, committed: asked on a new connection. Nil when the server cannot be asked
    /// before `until`.
    ///
    /// Committed means its commit ended on its own, the answer alone lost. A transaction still
    /// in progress (its session still runs: a commit waiting for a synchronous standby, a slow
    /// flush) has its session ended and counts as not committed: ending it while it waits for a
    /// standby commits it locally without the standby, and a 200 must not stand for less than
    /// the server's synchronous_commit promises. That it committed locally is logged; it is in
    /// the database, answered 503, as described in `PostgresBackend`.
    private func resolve(_ txid: Int64, pid: Int32, batches: Int, until: UInt64) -> Bool? {
        var ended = false
        while monotonicNanoseconds() < until {
            do throws(PGError) {
                let probe = try connect()
                defer { status.connectionClosed() }
                while monotonicNanoseconds() < until {
                    var params = PGParams()
                    params.int64(txid)
                    let answer = try probe.execute("SELECT txid_status($1::bigint)", params, deadline: until)?.value()
                    switch answer {
                    case "in progress":
                        var pidParam = PGParams()
                        pidParam.int32(pid)
                        try probe.execute("SELECT pg_terminate_backend($1::integer)", pidParam, deadline: until)
                        ended = true
                        usleep(50_000)
                    case "committed" where !ended:
                        return true
                    case "committed":
                        logger.error(
                            "a commit still waiting when its connection broke was ended by the gateway and committed locally (without the synchronous standby, if one is configured): its \(batches) batch(es) were refused (503) but are in the database, and take effect at the next restart"
                        )
                        return false
                    default:
                        // Aborted, or unknown to the server (never begun there).
                        return false
                    }
                }
            } catch {
                usleep(200_000)
            }
        }
        return nil
    }

    /// Logs the outcome of a transaction whose commit's answer was lost.
    func lookUpUnresolved(_ connection: PGConnection) {
        guard let (txid, batches) = unresolved else { return }
        var params = PGParams()
        params.int64(txid)
        guard
            let answer = try? connection.execute("SELECT txid_status($1::bigint)", params, deadline: deadline())?
                .value()
        else { return }
        unresolved = nil
        if answer == "committed" {
            logger.error(
                "a transaction whose commit's answer was lost with the connection had committed: its \(batches) batch(es) were refused (503) but are in the database, and take effect when their devices are read again (a restart, or a node taking them over: pushes among them are delivered then, possibly beside a provider's retry)"
            )
        } else {
            logger.notice(
                "a transaction whose commit's answer was lost with the connection did not commit, as answered"
            )
        }
    }
}
