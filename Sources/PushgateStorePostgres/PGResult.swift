import CLibPQ

// libpq's PG_DIAG_* field codes are character constants, which Swift does not import.
private let diagnosticSQLState = Int32(UInt8(ascii: "C"))
private let diagnosticMessage = Int32(UInt8(ascii: "M"))
private let diagnosticDetail = Int32(UInt8(ascii: "D"))

/// One result of libpq, cleared when released.
final class PGResult {
    let handle: OpaquePointer

    init(_ handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        PQclear(handle)
    }

    var status: ExecStatusType { PQresultStatus(handle) }
    var rows: Int { Int(PQntuples(handle)) }

    /// The server's error, when this result is one. A query the pipeline skipped after an
    /// earlier error (`PGRES_PIPELINE_ABORTED`) is not one of its own: nil.
    var error: PGError? {
        switch status {
        case PGRES_FATAL_ERROR, PGRES_BAD_RESPONSE, PGRES_NONFATAL_ERROR:
            let state = PQresultErrorField(handle, diagnosticSQLState).map { String(cString: $0) }
            var message =
                PQresultErrorField(handle, diagnosticMessage).map { String(cString: $0) }
                ?? PGConnection.trimmed(PQresultErrorMessage(handle))
            let detail = PQresultErrorField(handle, diagnosticDetail).map { String(cString: $0) }
            if let detail { message += " (\(detail))" }
            // Connection failures (class 08) and a server shutting down (57P0x) end the session.
            let broken = state.map { $0.hasPrefix("08") || $0.hasPrefix("57P") } ?? true
            return PGError(message: message, sqlState: state, detail: detail, connectionBroken: broken)
        default:
            return nil
        }
    }

    func isNull(_ row: Int, _ column: Int) -> Bool {
        PQgetisnull(handle, Int32(row), Int32(column)) == 1
    }

    /// The value's bytes as the server sent them (binary results: network byte order).
    func bytes(_ row: Int, _ column: Int) -> UnsafeRawBufferPointer {
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        let start = UnsafeRawPointer(PQgetvalue(handle, Int32(row), Int32(column)))
        return UnsafeRawBufferPointer(start: start, count: length)
    }

    /// A binary `bigint`, `integer` or `smallint`.
    func integer(_ row: Int, _ column: Int) -> Int64 {
        let value = bytes(row, column)
        var result: Int64 = 0
        for byte in value { result = result << 8 | Int64(byte) }
        // Sign-extend the narrower integer types.
        let width = value.count * 8
        if width > 0, width < 64 { result = (result << (64 - width)) >> (64 - width) }
        return result
    }

    func optionalInteger(_ row: Int, _ column: Int) -> Int64? {
        isNull(row, column) ? nil : integer(row, column)
    }

    func boolean(_ row: Int, _ column: Int) -> Bool {
        bytes(row, column).first.map { $0 != 0 } ?? false
    }

    func text(_ row: Int, _ column: Int) -> String {
        String(decoding: bytes(row, column), as: UTF8.self)
    }

    func optionalText(_ row: Int, _ column: Int) -> String? {
        isNull(row, column) ? nil : text(row, column)
    }

    func byteArray(_ row: Int, _ column: Int) -> [UInt8] {
        Array(bytes(row, column))
    }

    func optionalByteArray(_ row: Int, _ column: Int) -> [UInt8]? {
        isNull(row, column) ? nil : byteArray(row, column)
    }

    /// A text-format value (outside binary results), for one-off queries.
    func value(_ row: Int = 0, _ column: Int = 0) -> String? {
        isNull(row, column) ? nil : String(cString: PQgetvalue(handle, Int32(row), Int32(column)))
    }
}
