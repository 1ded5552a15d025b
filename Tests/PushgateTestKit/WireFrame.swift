import NIOCore

/// One HTTP/2 frame as it went over the wire.
public struct WireFrame: Equatable, Sendable, CustomStringConvertible {
    public enum Kind: UInt8 {
        case data = 0
        case headers = 1
        case rstStream = 3
        case settings = 4
        case ping = 6
        case goAway = 7
        case windowUpdate = 8
    }

    public var type: UInt8
    public var flags: UInt8
    public var streamID: UInt32
    public var payload: [UInt8]

    public init(type: UInt8, flags: UInt8, streamID: UInt32, payload: [UInt8]) {
        self.type = type
        self.flags = flags
        self.streamID = streamID
        self.payload = payload
    }

    public var kind: Kind? { Kind(rawValue: type) }
    public var endStream: Bool { flags & 0x1 != 0 }
    /// SETTINGS and PING: this frame acknowledges the peer's.
    public var ack: Bool { flags & 0x1 != 0 }

    /// RST_STREAM's error code.
    public var resetErrorCode: UInt32? {
        guard kind == .rstStream, payload.count == 4 else { return nil }
        return ByteBuffer(bytes: payload).getInteger(at: 0, as: UInt32.self)
    }

    /// GOAWAY's last stream ID, error code and debug data.
    public var goAway: (lastStreamID: UInt32, errorCode: UInt32, debugData: String)? {
        guard kind == .goAway, payload.count >= 8 else { return nil }
        var buffer = ByteBuffer(bytes: payload)
        let last = buffer.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
        let code = buffer.readInteger(as: UInt32.self)!
        return (last, code, buffer.readString(length: buffer.readableBytes)!)
    }

    /// SETTINGS entries, identifier to value.
    public var settings: [UInt16: UInt32] {
        guard kind == .settings else { return [:] }
        var buffer = ByteBuffer(bytes: payload)
        var entries: [UInt16: UInt32] = [:]
        while let id = buffer.readInteger(as: UInt16.self), let value = buffer.readInteger(as: UInt32.self) {
            entries[id] = value
        }
        return entries
    }

    public var description: String {
        "\(kind.map { "\($0)" } ?? "type \(type)") flags=\(flags) stream=\(streamID) \(payload.count) bytes"
    }

    /// The frame's bytes.
    public var bytes: [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(truncatingIfNeeded: payload.count >> 16))
        buffer.writeInteger(UInt16(truncatingIfNeeded: payload.count))
        buffer.writeInteger(type)
        buffer.writeInteger(flags)
        buffer.writeInteger(streamID & 0x7FFF_FFFF)
        buffer.writeBytes(payload)
        return Array(buffer.readableBytesView)
    }

    /// Splits bytes into frames; they must end on a frame boundary.
    public static func parse(_ bytes: ByteBuffer) -> [WireFrame] {
        var bytes = bytes
        let frames = take(from: &bytes)
        precondition(bytes.readableBytes == 0, "bytes left after the last whole frame")
        return frames
    }

    /// Takes the whole frames from the front of `bytes`, leaving a partial one where it is.
    public static func take(from bytes: inout ByteBuffer) -> [WireFrame] {
        var frames: [WireFrame] = []
        while bytes.readableBytes >= 9 {
            let start = bytes.readerIndex
            let length =
                Int(bytes.getInteger(at: start, as: UInt16.self)!) << 8
                | Int(bytes.getInteger(at: start + 2, as: UInt8.self)!)
            guard bytes.readableBytes >= 9 + length else { break }
            let type = bytes.getInteger(at: start + 3, as: UInt8.self)!
            let flags = bytes.getInteger(at: start + 4, as: UInt8.self)!
            let streamID = bytes.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF
            frames.append(
                WireFrame(
                    type: type,
                    flags: flags,
                    streamID: streamID,
                    payload: bytes.getBytes(at: start + 9, length: length)!
                )
            )
            bytes.moveReaderIndex(forwardBy: 9 + length)
        }
        return frames
    }
}
