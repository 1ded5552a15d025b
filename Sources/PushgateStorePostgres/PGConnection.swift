import CLibPQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What libpq or the server said when something failed: the server's primary message and
/// SQLSTATE when the server answered, libpq's message otherwise.
struct PGError: Error {
    var message: String
    /// Five characters (`23505`), when the server sent one.
    var sqlState: String?
    /// The server's DETAIL, when it sent one (also in `message`).
    var detail: String?
    /// The connection cannot be used again: it failed, timed out, or was left with results
    /// unread. Whoever holds it must close it and connect again.
    var connectionBroken: Bool
    /// No answer came within the deadline.
    var timedOut = false

    /// The SQLSTATE's class (`23` for integrity constraints), when there is one.
    var sqlClass: Substring? { sqlState.map { $0.prefix(2) } }
}

/// One libpq connection, non-blocking underneath so that every wait has a deadline: a database
/// that stops answering (a cut network, a stuck server) fails the call instead of holding the
/// caller forever. Used by one thread at a time (the store's writer).
///
/// Queries go in pipeline mode: `send...` queues a query, `sync()` ends the pipeline's segment,
/// `flush` sends everything, and `nextResult` reads the answers in order, so that a whole group
/// of statements costs one round trip.
final class PGConnection {
    private let handle: OpaquePointer

    /// `url` is passed to libpq as it is (a `postgresql://` URI or a `key=value` string), so it
    /// means what it means to `psql`, with libpq's `PG*` environment variables and `.pgpass`
    /// filling what it leaves out. `defaults` come before it: the URL (or the environment)
    /// overrides them.
    init(url: String, defaults: [(String, String)]) throws(PGError) {
        // libpq's parse errors quote the fragment they could not read, which may be the password
        // (`invalid percent-encoded token: "..."`): parsed first, and said without it.
        var parseError: UnsafeMutablePointer<CChar>?
        if let options = PQconninfoParse(url, &parseError) {
            PQconninfoFree(options)
        } else {
            let message = parseError.map { Self.withoutQuotedParts(Self.trimmed($0)) } ?? "out of memory"
            if let parseError { PQfreemem(parseError) }
            throw PGError(
                message:
                    "libpq cannot read the database URL: \(message) (quoted parts not shown: they may hold the password)",
                connectionBroken: true
            )
        }
        let keywords = defaults.map(\.0) + ["dbname"]
        let values = defaults.map(\.1) + [url]
        let connection: OpaquePointer? = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let connection else {
            throw PGError(message: "libpq could not allocate a connection", connectionBroken: true)
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PGError(message: message, connectionBroken: true)
        }
        // The server's notices and warnings (a table that already exists, a shutdown in progress)
        // would go to stderr past the gateway's log format; what matters of them comes back as
        // the errors the store reports.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        guard PQsetnonblocking(connection, 1) == 0 else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PGError(message: message, connectionBroken: true)
        }
        handle = connection
    }

    deinit {
        PQfinish(handle)
    }

    /// Where the connection went, for messages and logs: never the password.
    var target: String {
        let host = PQhost(handle).map { String(cString: $0) } ?? "?"
        let port = PQport(handle).map { String(cString: $0) } ?? "?"
        let database = PQdb(handle).map { String(cString: $0) } ?? "?"
        let user = PQuser(handle).map { String(cString: $0) } ?? "?"
        let place = host.hasPrefix("/") ? "\(host)/.s.PGSQL.\(port)" : "\(host):\(port)"
        return "database \(database) at \(place) as \(user)"
    }

    /// The server process serving this connection.
    var backendPID: Int32 { PQbackendPID(handle) }

    var isIdleOutsideTransaction: Bool { PQtransactionStatus(handle) == PQTRANS_IDLE }

    // MARK: - Pipeline

    func enterPipeline() throws(PGError) {
        if PQenterPipelineMode(handle) != 1 { throw clientError("cannot enter pipeline mode") }
    }

    func exitPipeline() throws(PGError) {
        if PQexitPipelineMode(handle) != 1 { throw clientError("cannot leave pipeline mode") }
    }

    /// Queues a statement prepared earlier with `sendPrepare`.
    func sendPrepared(_ name: String, _ params: borrowing PGParams, binaryResults: Bool = false) throws(PGError) {
        let sent = params.withPointers { count, values, lengths, formats in
            PQsendQueryPrepared(handle, name, count, values, lengths, formats, binaryResults ? 1 : 0)
        }
        if sent != 1 { throw clientError("cannot send the statement \(name)") }
    }

    /// Queues one statement with its parameters (no preparation).
    func sendQuery(_ sql: String, _ params: borrowing PGParams, binaryResults: Bool = false) throws(PGError) {
        let sent = params.withPointers { count, values, lengths, formats in
            PQsendQueryParams(handle, sql, count, nil, values, lengths, formats, binaryResults ? 1 : 0)
        }
        if sent != 1 { throw clientError("cannot send a statement") }
    }

    /// Queues the preparation of `sql` as `name`; parameter types come from the SQL (casts).
    func sendPrepare(_ name: String, _ sql: String) throws(PGError) {
        if PQsendPrepare(handle, name, sql, 0, nil) != 1 { throw clientError("cannot prepare \(name)") }
    }

    /// Ends the pipeline's segment: the server answers it, and an error skips the rest of the
    /// segment only.
    func sync() throws(PGError) {
        if PQpipelineSync(handle) != 1 { throw clientError("cannot end the pipeline") }
    }

    /// Asks the server to send what it has answered so far without waiting for the sync.
    func flushRequest() throws(PGError) {
        if PQsendFlushRequest(handle) != 1 { throw clientError("cannot ask for a flush") }
    }

    /// Sends everything queued, reading what arrives meanwhile (a server blocked on a full
    /// socket would otherwise never read the rest).
    func flush(deadline: UInt64) throws(PGError) {
        while true {
            let pending = PQflush(handle)
            if pending == 0 { return }
            if pending < 0 { throw brokenError("cannot send to the server") }
            try wait(forWrite: true, deadline: deadline)
            if PQconsumeInput(handle) != 1 { throw brokenError("cannot read from the server") }
        }
    }

    /// The next result, waiting for it until `deadline`; nil between the results of two queries
    /// (libpq's separator). A sync point comes as a result with status `PGRES_PIPELINE_SYNC`.
    func nextResult(deadline: UInt64) throws(PGError) -> PGResult? {
        while PQisBusy(handle) == 1 {
            try wait(forWrite: false, deadline: deadline)
            if PQconsumeInput(handle) != 1 { throw brokenError("cannot read from the server") }
        }
        return PQgetResult(handle).map(PGResult.init)
    }

    /// Reads every result up to the pipeline's next sync point; returns the first error among
    /// them.
    func readThroughSync(deadline: UInt64) throws(PGError) -> PGError? {
        var failure: PGError?
        while true {
            guard let result = try nextResult(deadline: deadline) else { continue }
            if result.status == PGRES_PIPELINE_SYNC { return failure }
            if failure == nil { failure = result.error }
        }
    }

    // MARK: - One statement at a time (outside pipeline mode)

    /// Runs `sql` (one statement with parameters, or with none several separated by `;`) and
    /// returns its last result; throws the server's error.
    @discardableResult
    func execute(
        _ sql: String,
        _ params: borrowing PGParams = PGParams(),
        binaryResults: Bool = false,
        deadline: UInt64
    ) throws(PGError) -> PGResult? {
        if params.count == 0, !binaryResults {
            if PQsendQuery(handle, sql) != 1 { throw clientError("cannot send a statement") }
        } else {
            try sendQuery(sql, params, binaryResults: binaryResults)
        }
        try flush(deadline: deadline)
        var last: PGResult?
        var failure: PGError?
        while let result = try nextResult(deadline: deadline) {
            if let error = result.error, failure == nil { failure = error }
            last = result
        }
        if let failure { throw failure }
        return last
    }

    // MARK: - Waiting

    private func wait(forWrite: Bool, deadline: UInt64) throws(PGError) {
        let socket = PQsocket(handle)
        if socket < 0 { throw brokenError("the connection has no socket") }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN) | (forWrite ? Int16(POLLOUT) : 0), revents: 0)
        while true {
            let now = monotonicNanoseconds()
            if now >= deadline {
                throw PGError(
                    message: "no answer from the server within the time allowed",
                    connectionBroken: true,
                    timedOut: true
                )
            }
            let milliseconds = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0, errno != EINTR { throw brokenError("poll failed (errno \(errno))") }
        }
    }

    private func clientError(_ what: String) -> PGError {
        let detail = Self.trimmed(PQerrorMessage(handle))
        return PGError(
            message: detail.isEmpty ? what : "\(what): \(detail)",
            connectionBroken: PQstatus(handle) != CONNECTION_OK
        )
    }

    private func brokenError(_ what: String) -> PGError {
        let detail = Self.trimmed(PQerrorMessage(handle))
        return PGError(message: detail.isEmpty ? what : "\(what): \(detail)", connectionBroken: true)
    }

    /// `message` with every double-quoted part replaced by `"…"`.
    static func withoutQuotedParts(_ message: String) -> String {
        var result = ""
        var quoted = false
        for character in message {
            if character == "\"" {
                result += quoted ? "…\"" : "\""
                quoted.toggle()
            } else if !quoted {
                result.append(character)
            }
        }
        return result
    }

    /// libpq's message on one line: its lines (some indented with a tab) joined with spaces.
    static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(cString: message).split(separator: "\n")
            .map { String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
            .filter { !$0.isEmpty }
            .joined(separator: " ")
    }
}

/// C strings for the duration of `body`, with a NULL after the last.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for pointer in pointers { free(pointer) } }
    return pointers.withUnsafeBufferPointer { buffer in
        buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { body($0) }
    }
}

/// Nanoseconds on a clock that never steps back (deadlines).
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
