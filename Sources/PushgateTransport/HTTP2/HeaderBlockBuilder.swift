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

    private static func statusText(_ status: Int) -> String {
        switch status {
        case 200: return "200"
        case 201: return "201"
        case 204: return "204"
        case 400: return "400"
        case 403: return "403"
        case 404: return "404"
        case 410: return "410"
        default: return String(status)
        }
    }
}

extension HTTPHeaders {
    var totalByteCount: Int {
        var total = 0
        for (name, value) in self { total += name.utf8.count + value.utf8.count }
        return total
    }
}
