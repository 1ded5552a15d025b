import CNGHTTP2
import NIOHTTP1

typealias HTTPFieldList = HTTPHeaders

/// Builds `nghttp2_nv` arrays in temporary (stack) memory for one submission.
///
/// nghttp2 copies names and values during `nghttp2_submit_*`, so the memory is only needed for
/// the call. Temporary allocation keeps submission free of heap allocations and costs an idle
/// connection nothing, where a scratch buffer per session would cost every connection ~1.6 KiB.
enum HeaderBlockBuilder {
    static func withResponse<R>(
        status: Int,
        headers: HTTPFieldList,
        _ body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        let statusText = HeaderBlockBuilder.statusText(status)
        return build(count: headers.count + 1, byteCount: headers.totalByteCount + 7 + statusText.utf8.count) { add in
            add(":status", statusText)
            for (name, value) in headers { add(name, value) }
        } body: {
            body($0, $1)
        }
    }

    static func withFields<R>(_ headers: HTTPFieldList, _ body: (UnsafePointer<nghttp2_nv>, Int) -> R) -> R {
        build(count: headers.count, byteCount: headers.totalByteCount) { add in
            for (name, value) in headers { add(name, value) }
        } body: {
            body($0, $1)
        }
    }

    private static func build<R>(
        count: Int,
        byteCount: Int,
        fill: ((String, String) -> Void) -> Void,
        body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        withUnsafeTemporaryAllocation(byteCount: max(byteCount, 1), alignment: 1) { bytes in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(count, 1)) { fields in
                populate(bytes, fields, fill: fill, body: body)
            }
        }
    }

    private static func populate<R>(
        _ bytes: UnsafeMutableRawBufferPointer,
        _ fields: UnsafeMutableBufferPointer<nghttp2_nv>,
        fill: ((String, String) -> Void) -> Void,
        body: (UnsafePointer<nghttp2_nv>, Int) -> R
    ) -> R {
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
