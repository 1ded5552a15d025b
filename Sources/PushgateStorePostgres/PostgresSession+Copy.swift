import CLibPQ
import PushgateStore

/// `pushgate store copy`: the counts it checks, and the import into an empty database.
extension PostgresSession {
    func rowCounts() throws(StoreError) -> [(table: String, rows: Int)] {
        let connection = try connected()
        do {
            var counts: [(String, Int)] = []
            for table in PostgresSchema.dataTables {
                let value = try connection.execute("SELECT count(*) FROM \(table)", deadline: deadline())?.value()
                counts.append((table, Int(value ?? "0") ?? 0))
            }
            return counts
        } catch {
            if error.connectionBroken { throw lost(error, kind: .connectionLost) }
            throw StoreError(.database, "cannot count the rows in PostgreSQL (\(target)): \(error.message)")
        }
    }

    func importSnapshot(_ snapshot: StoreSnapshot) throws(StoreError) {
        let connection = try connected()
        do throws(PGError) {
            try connection.execute("BEGIN", deadline: deadline())
            // Nobody writes meanwhile (a gateway starting on the database waits).
            try connection.execute(
                "LOCK TABLE \((PostgresSchema.dataTables + ["pushgate_meta"]).joined(separator: ", ")) IN EXCLUSIVE MODE",
                deadline: deadline()
            )
            var held: [String] = []
            for table in PostgresSchema.dataTables {
                let value = try connection.execute("SELECT count(*) FROM \(table)", deadline: deadline())?.value()
                if let rows = Int(value ?? "0"), rows > 0 { held.append("\(rows) \(table)") }
            }
            let highest = try PostgresSnapshot.maxAcceptanceID(connection, deadline: deadline())
            if highest > 0 { held.append("acceptance ids up to \(highest)") }
            if !held.isEmpty {
                throw PGError(
                    message:
                        "the database is not empty: it holds \(held.joined(separator: ", ")); store copy writes into an empty database only, and changed nothing",
                    connectionBroken: false
                )
            }
            let commands = snapshot.recreatingCommands
            var offset = 0
            // Pipelined in chunks, each with a sync point, so that neither side buffers it all.
            while offset < commands.count {
                let chunk = commands[offset..<min(offset + 1000, commands.count)]
                offset += chunk.count
                try connection.enterPipeline()
                var sentCommands: [StoreCommand] = []
                for command in chunk {
                    if let refusal = PostgresCommands.refusal(command) {
                        throw PGError(message: refusal, connectionBroken: false)
                    }
                    let count = try PostgresCommands.send(command, connection, &params)
                    sentCommands += repeatElement(command, count: count)
                }
                try connection.sync()
                let deadline = self.deadline()
                try connection.flush(deadline: deadline)
                for command in sentCommands {
                    while let result = try connection.nextResult(deadline: deadline) {
                        if var error = result.error {
                            error.message = "\(command.summary): \(error.message)"
                            throw error
                        }
                    }
                }
                while let result = try connection.nextResult(deadline: deadline) {
                    if result.status == PGRES_PIPELINE_SYNC { break }
                }
                try connection.exitPipeline()
            }
            params.removeAll()
            params.int64(Int64(clamping: snapshot.maxAcceptanceID))
            try connection.execute(
                "UPDATE pushgate_meta SET value = greatest(value, $1::bigint) WHERE key = '\(PostgresSchema.maxAcceptanceIDKey)'",
                params,
                deadline: deadline()
            )
            try connection.execute("COMMIT", deadline: deadline())
            committedMaxAcceptanceID = snapshot.maxAcceptanceID
        } catch {
            // Closing the connection rolls the transaction back, wherever the pipeline stood.
            disconnect()
            throw StoreError(.database, "store copy into PostgreSQL (\(target)) failed: \(error.message)")
        }
    }
}
