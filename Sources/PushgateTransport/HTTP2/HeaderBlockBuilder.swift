import CNGHTTP2
import NIOHTTP1

typealias HTTPFieldList = HTTPHeaders

/// Builds `nghttp2_nv` arrays in scratch memory that is reused for every submission.
///
/// nghttp2 copies names and values during `nghttp2_submit_*`, so the memory can be rewritten as soon
/// as the call returns; reusing it keeps header submission free of allocations.
struct HeaderBlockBuilder {
    private var bytes: UnsafeMutableRawBufferPointer = .allocate(byteCount: 1024, alignment: 1)
    private var fields: UnsafeMutableBufferPointer<nghttp2_nv> = .allocate(capacity: 16)

    mutating func deallocate() {
        bytes.deallocate()
        fields.deallocate()
    }

    mutating func withResponse<R>(
        status: Int,
        headers: HTTPFieldList,
        _ body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        let statusText = HeaderBlockBuilder.statusText(status)
        return build(count: headers.count + 1, byteCount: headers.totalByteCount + 7 + statusText.utf8.count) { add in
            add(":status", statusText)
            for (name, value) in headers { add(name, value) }
        } body: { body($0, $1) }
    }

    mutating func withFields<R>(_ headers: HTTPFieldList, _ body: (UnsafePointer<nghttp2_nv>, Int) -> R) -> R {
        build(count: headers.count, byteCount: headers.totalByteCount) { add in
            for (name, value) in headers { add(name, value) }
        } body: { body($0, $1) }
    }

    private mutating func build<R>(
        count: Int,
        byteCount: Int,
        fill: ((String, String) -> Void) -> Void,
        body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        if bytes.count < byteCount {
            bytes.deallocate()
            bytes = .allocate(byteCount: max(byteCount, bytes.count * 2), alignment: 1)
        }
        if fields.count < count {
            fields.deallocate()
            fields = .allocate(capacity: max(count, fields.count * 2))
        }
        let base = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var offset = 0
        var index = 0
        let fieldsBase = fields.baseAddress!
        fill { name, value in
            let nameStart = base + offset
            offset += HeaderBlockBuilder.copyLowercased(name, to: nameStart)
            let valueStart = base + offset
            offset += HeaderBlockBuilder.copy(value, to: valueStart)
            fieldsBase[index] = nghttp2_nv(
                name: nameStart,
                value: valueStart,
                namelen: name.utf8.count,
                valuelen: value.utf8.count,
                flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
            )
            index += 1
        }
        return body(fieldsBase, index)
    }

    private static func copy(_ string: String, to destination: UnsafeMutablePointer<UInt8>) -> Int {
        var string = string
        return string.withUTF8 { utf8 in
            destination.update(from: utf8.baseAddress!, count: utf8.count)
            return utf8.count
        }
    }

    /// HTTP/2 requires lowercase field names; callers may use HTTP/1-style capitals.
    private static func copyLowercased(_ string: String, to destination: UnsafeMutablePointer<UInt8>) -> Int {
        var string = string
        return string.withUTF8 { utf8 in
            for (i, byte) in utf8.enumerated() {
                destination[i] = (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
            }
            return utf8.count
        }
    }

    private static let commonStatus: [Int: String] = [
        200: "200", 201: "201", 204: "204", 400: "400", 401: "401", 403: "403", 404: "404",
        405: "405", 410: "410", 413: "413", 429: "429", 500: "500", 503: "503", 505: "505",
    ]

    private static func statusText(_ status: Int) -> String { commonStatus[status] ?? String(status) }
}

extension HTTPHeaders {
    var totalByteCount: Int {
        var total = 0
        for (name, value) in self { total += name.utf8.count + value.utf8.count }
        return total
    }
}
