import CLibPQ

/// Parameters of one statement, laid out in one buffer: binary format (network byte order for
/// integers, UTF-8 for text, raw bytes for `bytea`) but for arrays, sent as text (`{1,2,3}`).
/// libpq copies them into its output buffer when the statement is queued, so one value can be
/// reused statement after statement (`removeAll`) without allocating.
struct PGParams: ~Copyable {
    private var storage: [UInt8] = []
    private var starts: [Int] = []
    private var lengths: [Int32] = []
    private var formats: [Int32] = []

    init() {}

    var count: Int { starts.count }

    mutating func removeAll() {
        storage.removeAll(keepingCapacity: true)
        starts.removeAll(keepingCapacity: true)
        lengths.removeAll(keepingCapacity: true)
        formats.removeAll(keepingCapacity: true)
    }

    mutating func int64(_ value: Int64) { integer(value) }
    mutating func int32(_ value: Int32) { integer(value) }
    mutating func int16(_ value: Int16) { integer(value) }

    /// Binary format: the value big-endian, as wide as its type (int8, int4, int2).
    private mutating func integer(_ value: some FixedWidthInteger) {
        begin(format: 1)
        withUnsafeBytes(of: value.bigEndian) { storage.append(contentsOf: $0) }
        end()
    }

    mutating func bool(_ value: Bool) {
        begin(format: 1)
        storage.append(value ? 1 : 0)
        end()
    }

    mutating func text(_ value: String) {
        begin(format: 1)
        storage.append(contentsOf: value.utf8)
        end()
    }

    mutating func optionalText(_ value: String?) {
        if let value { text(value) } else { null() }
    }

    mutating func optionalInt64(_ value: Int64?) {
        if let value { int64(value) } else { null() }
    }

    mutating func bytes(_ value: [UInt8]) {
        begin(format: 1)
        storage.append(contentsOf: value)
        end()
    }

    mutating func optionalBytes(_ value: [UInt8]?) {
        if let value { bytes(value) } else { null() }
    }

    /// A `bigint[]` in text form.
    mutating func int64Array(_ values: some Sequence<Int64>) {
        begin(format: 0)
        storage.append(UInt8(ascii: "{"))
        var first = true
        for value in values {
            if !first { storage.append(UInt8(ascii: ",")) }
            first = false
            appendDecimal(value)
        }
        storage.append(UInt8(ascii: "}"))
        end()
    }

    /// A `text[]` in text form.
    mutating func textArray(_ values: some Sequence<String>) {
        begin(format: 0)
        storage.append(UInt8(ascii: "{"))
        var first = true
        for value in values {
            if !first { storage.append(UInt8(ascii: ",")) }
            first = false
            storage.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { storage.append(UInt8(ascii: "\\")) }
                storage.append(byte)
            }
            storage.append(UInt8(ascii: "\""))
        }
        storage.append(UInt8(ascii: "}"))
        end()
    }

    mutating func null() {
        starts.append(-1)
        lengths.append(0)
        formats.append(1)
    }

    private mutating func begin(format: Int32) {
        starts.append(storage.count)
        formats.append(format)
    }

    /// Every value ends in a NUL byte (not counted in its length): libpq reads text-format
    /// values as C strings.
    private mutating func end() {
        lengths.append(Int32(storage.count - starts[starts.count - 1]))
        storage.append(0)
    }

    private mutating func appendDecimal(_ value: Int64) {
        if value < 0 { storage.append(UInt8(ascii: "-")) }
        let start = storage.count
        var magnitude = value.magnitude
        repeat {
            storage.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        storage[start...].reverse()
    }

    func withPointers<R>(
        _ body: (
            Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?
        ) -> R
    ) -> R {
        let count = starts.count
        if count == 0 { return body(0, nil, nil, nil) }
        return storage.withUnsafeBufferPointer { buffer in
            withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: count) { values in
                let base = UnsafeRawPointer(buffer.baseAddress!)
                for index in 0..<count {
                    let start = starts[index]
                    values[index] = start < 0 ? nil : (base + start).assumingMemoryBound(to: CChar.self)
                }
                return lengths.withUnsafeBufferPointer { lengths in
                    formats.withUnsafeBufferPointer { formats in
                        body(Int32(count), UnsafePointer(values.baseAddress!), lengths.baseAddress, formats.baseAddress)
                    }
                }
            }
        }
    }
}
