import NIOCore

/// Parses a `text/event-stream` body (server-sent events) as it arrives, chunk by chunk: for
/// the agent, the bench and the tests reading device event streams.
public struct EventStreamParser: Sendable {
    public struct Event: Equatable, Sendable {
        public init(id: String?, type: String, data: String) {
            self.id = id
            self.type = type
            self.data = data
        }

        public var id: String?
        /// `event:`; "message" when absent.
        public var type: String
        /// The `data:` lines joined with newlines.
        public var data: String
    }

    private var line: [UInt8] = []
    private var id: String?
    private var type = ""
    private var data: [String] = []
    private var lastWasCR = false

    public init() {}

    /// Feeds bytes; returns the events they complete.
    public mutating func feed(_ buffer: ByteBuffer) -> [Event] {
        var events: [Event] = []
        for byte in buffer.readableBytesView {
            if byte == 0x0A, lastWasCR {
                lastWasCR = false
                continue
            }
            lastWasCR = byte == 0x0D
            if byte == 0x0A || byte == 0x0D {
                if let event = endLine() { events.append(event) }
            } else {
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() -> Event? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                id = nil
                type = ""
                data = []
            }
            guard !data.isEmpty else { return nil }
            return Event(id: id, type: type.isEmpty ? "message" : type, data: data.joined(separator: "\n"))
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
        case "id": id = String(value)
        case "event": type = String(value)
        case "data": data.append(String(value))
        default: break
        }
        return nil
    }
}
