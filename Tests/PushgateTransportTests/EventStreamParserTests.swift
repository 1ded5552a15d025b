import NIOCore
import PushgateTransport
import Testing

@Suite("EventStreamParser")
struct EventStreamParserTests {
    typealias Event = EventStreamParser.Event

    /// Feeds `text` cut at every offset in `cuts`, and returns every event.
    static func parse(_ text: String, cuts: [Int] = []) -> [Event] {
        var parser = EventStreamParser()
        let bytes = Array(text.utf8)
        var events: [Event] = []
        var start = 0
        for cut in cuts.sorted() + [bytes.count] where cut >= start {
            events += parser.feed(ByteBuffer(bytes: bytes[start..<cut]))
            start = cut
        }
        return events
    }

    static let stream =
        "id: 1\nevent: notification\ndata: {\"a\":1}\n\n: heartbeat\n\nid: 2\r\ndata: x\r\ndata: y\r\n\r\nevent:bare\rdata:z\r\rdata: no id\n\n"
    static let expected = [
        Event(id: "1", type: "notification", data: "{\"a\":1}"),
        Event(id: "2", type: "message", data: "x\ny"),
        // The last event id carries over, as an EventSource's lastEventId does.
        Event(id: "2", type: "bare", data: "z"),
        Event(id: "2", type: "message", data: "no id"),
    ]

    @Test("fields, comments, multi-line data, and LF, CRLF and CR line ends")
    func whole() {
        #expect(Self.parse(Self.stream) == Self.expected)
    }

    @Test("the same events whatever the chunks: one byte at a time, and cut at every offset")
    func chunked() {
        let count = Self.stream.utf8.count
        #expect(Self.parse(Self.stream, cuts: Array(1..<count)) == Self.expected)
        for cut in 1..<count {
            #expect(Self.parse(Self.stream, cuts: [cut]) == Self.expected, "cut at \(cut)")
        }
    }

    @Test("an event without a blank line after it is not complete yet; a CR then LF across chunks is one line end")
    func incomplete() {
        var parser = EventStreamParser()
        #expect(parser.feed(ByteBuffer(string: "data: a\r")).isEmpty)
        #expect(parser.feed(ByteBuffer(string: "\ndata: b\r")).isEmpty)
        #expect(parser.feed(ByteBuffer(string: "\n\r\n")) == [Event(id: nil, type: "message", data: "a\nb")])
        #expect(parser.feed(ByteBuffer(string: "id: 3\n\n")).isEmpty)  // no data: no event
    }

    @Test("retry: as an EventSource reads it: the last one with digits only; anything else is ignored")
    func retry() {
        var parser = EventStreamParser()
        #expect(parser.retryMillis == nil)
        let events = parser.feed(
            ByteBuffer(string: "retry: 1000\nevent: shutdown\ndata: {\"reason\":\"Shutdown\",\"retryMs\":1000}\n\n")
        )
        #expect(events == [Event(id: nil, type: "shutdown", data: "{\"reason\":\"Shutdown\",\"retryMs\":1000}")])
        #expect(parser.retryMillis == 1000)
        _ = parser.feed(ByteBuffer(string: "retry: soon\nretry: -5\nretry:\nretry: 1e3\n\n"))
        #expect(parser.retryMillis == 1000)
        _ = parser.feed(ByteBuffer(string: "retry:250\n\n"))
        #expect(parser.retryMillis == 250)
    }

    @Test(
        "the last event id carries over until an id: field changes it; an empty id: clears it; an id: with NUL is ignored"
    )
    func lastEventID() {
        let events = Self.parse(
            "data: a\n\nid: 7\ndata: b\n\ndata: c\n\nid: 8\u{0}9\ndata: d\n\nid\ndata: e\n\nid: 9\n\ndata: f\n\n"
        )
        #expect(
            events == [
                Event(id: nil, type: "message", data: "a"),
                Event(id: "7", type: "message", data: "b"),
                Event(id: "7", type: "message", data: "c"),
                Event(id: "7", type: "message", data: "d"),
                Event(id: "", type: "message", data: "e"),
                // An id: in a block with no data still sets it.
                Event(id: "9", type: "message", data: "f"),
            ]
        )
    }

    @Test("one leading byte order mark is dropped, also when split across chunks; a second one, or one later, is text")
    func byteOrderMark() {
        let bom = "\u{FEFF}"
        let expected = [Event(id: nil, type: "message", data: "x")]
        let text = bom + "data: x\n\n"
        #expect(Self.parse(text) == expected)
        for cut in 1...3 { #expect(Self.parse(text, cuts: [cut]) == expected, "cut at \(cut)") }
        #expect(Self.parse(text, cuts: [1, 2, 3]) == expected)
        // A second mark starts the first line: a field named "\u{FEFF}data", which is ignored.
        #expect(Self.parse(bom + bom + "data: x\n\n").isEmpty)
        #expect(Self.parse("data: \(bom)x\n\n") == [Event(id: nil, type: "message", data: "\(bom)x")])
        // Bytes that begin like a mark and are not one stay the line's: here the first field's
        // name becomes "\u{FFFD}data", so no event (were they dropped, "y" would be one).
        var parser = EventStreamParser()
        #expect(parser.feed(ByteBuffer(bytes: [0xEF, 0xBB])).isEmpty)
        #expect(parser.feed(ByteBuffer(string: "data: y\n\n")).isEmpty)
        #expect(parser.feed(ByteBuffer(string: "data: z\n\n")) == [Event(id: nil, type: "message", data: "z")])
    }
}
