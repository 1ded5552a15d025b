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

    static let stream = "id: 1\nevent: notification\ndata: {\"a\":1}\n\n: heartbeat\n\nid: 2\r\ndata: x\r\ndata: y\r\n\r\nevent:bare\rdata:z\r\rdata: no id\n\n"
    static let expected = [
        Event(id: "1", type: "notification", data: "{\"a\":1}"),
        Event(id: "2", type: "message", data: "x\ny"),
        Event(id: nil, type: "bare", data: "z"),
        Event(id: nil, type: "message", data: "no id"),
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
        let events = parser.feed(ByteBuffer(string: "retry: 1000\nevent: shutdown\ndata: {\"reason\":\"Shutdown\",\"retryMs\":1000}\n\n"))
        #expect(events == [Event(id: nil, type: "shutdown", data: "{\"reason\":\"Shutdown\",\"retryMs\":1000}")])
        #expect(parser.retryMillis == 1000)
        _ = parser.feed(ByteBuffer(string: "retry: soon\nretry: -5\nretry:\nretry: 1e3\n\n"))
        #expect(parser.retryMillis == 1000)
        _ = parser.feed(ByteBuffer(string: "retry:250\n\n"))
        #expect(parser.retryMillis == 250)
    }
}
