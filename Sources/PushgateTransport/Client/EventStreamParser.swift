import NIOCore

/// Parses a `text/event-stream` body (server-sent events) as it arrives, chunk by chunk: for
/// the agent, the bench and the tests reading device event streams. It reads as the HTML
/// specification's EventSource does (checked against a decoder written from it, in the
/// event-stream fuzz target): the last event id carries over to later events until an `id:`
/// field changes it, an `id:` containing NUL is ignored, and one leading byte order mark is
/// dropped.
public struct EventStreamParser: Sendable {
    public struct Event: Equatable, Sendable {
        public init(id: String?, type: String, data: String) {
            self.id = id
            self.type = type
            self.data = data
        }

        /// The last event id when the event was dispatched: set by this event's `id:` field or
        /// an earlier one's; nil if no event has set one yet.
        public var id: String?
        /// `event:`; "message" when absent.
        public var type: String
        /// The `data:` lines joined with newlines.
        public var data: String
    }

    /// The stream's last `retry:` field: how long the server asks a client to wait before it
    /// reconnects, in milliseconds.
    public private(set) var retryMillis: Int?

    private var line: [UInt8] = []
    private var lastEventID: String?
    /// How many bytes of a leading byte order mark (EF BB BF) have been seen, until the
    /// stream's first bytes have shown whether it has one; then nil.
    private var byteOrderMarkSeen: Int? = 0
    private var type = ""
    private var data: [String] = []
    private var lastWasCR = false

    public init() {}

    /// Feeds bytes; returns the events they complete.
    public mutating func feed(_ buffer: ByteBuffer) -> [Event] {
        var events: [Event] = []
        buffer.withUnsafeReadableBytes { bytes in
            // Whole runs of line bytes are copied at once; only line ends stop the scan.
            var index = 0
            while let seen = byteOrderMarkSeen, index < bytes.count {
                if bytes[index] == Self.byteOrderMark[seen] {
                    index += 1
                    byteOrderMarkSeen = seen + 1 == Self.byteOrderMark.count ? nil : seen + 1
                } else {
                    // Not a byte order mark: what matched of one is the line's first bytes.
                    line.append(contentsOf: Self.byteOrderMark[..<seen])
                    byteOrderMarkSeen = nil
                }
            }
            var start = index
            while index < bytes.count {
                let byte = bytes[index]
                if lastWasCR {
                    lastWasCR = false
                    if byte == 0x0A {  // the LF of a CRLF
                        index += 1
                        start = index
                        continue
                    }
                }
                if byte == 0x0A || byte == 0x0D {
                    line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
                    if let event = endLine() { events.append(event) }
                    lastWasCR = byte == 0x0D
                    start = index + 1
                }
                index += 1
            }
            line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<bytes.count]))
        }
        return events
    }

    private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    private mutating func endLine() -> Event? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                type = ""
                data = []
            }
            guard !data.isEmpty else { return nil }
            return Event(
                id: lastEventID,
                type: type.isEmpty ? "message" : type,
                data: data.count == 1 ? data[0] : data.joined(separator: "\n")
            )
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = text[...]
            value = ""
        }
        switch field {
        case "id" where !value.utf8.contains(0): lastEventID = String(value)
        case "event": type = String(value)
        case "data": data.append(String(value))
        // As an EventSource reads it: digits only, anything else ignored.
        case "retry" where !value.isEmpty && value.allSatisfy(\.isASCII) && value.allSatisfy(\.isNumber):
            retryMillis = Int(value)
        default: break
        }
        return nil
    }
}
