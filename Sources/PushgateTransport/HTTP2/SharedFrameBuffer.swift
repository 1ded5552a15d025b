import CNGHTTP2
import Glibc
import NIOPosix

/// One outbound frame buffer shared by the nghttp2 sessions of an event-loop thread.
///
/// nghttp2 allocates a 16 KiB buffer per session and serializes each outgoing frame into it, but
/// a frame lives there only from the moment `mem_send` packs it until we copy it out, right
/// after `mem_send` returns. Sessions on one thread take turns, so they can share one buffer:
/// an idle device connection then costs about 16 KiB less (most of its resident memory).
///
/// Sharing is opt-in per session through nghttp2's allocator hooks (`SharedFrameBufferLease`),
/// and only on NIO event-loop threads, where a channel (and its session) never changes thread.
final class SharedFrameBuffer: @unchecked Sendable {  // confined to its thread (see `current`)
    /// nghttp2's NGHTTP2_FRAMEBUF_CHUNKLEN: frame header, pad length and a 16 KiB payload. If a
    /// future libnghttp2 changes it, no allocation matches and sessions keep their own buffer.
    static let chunkLength = 9 + 1 + 16_384

    let memory: UnsafeMutableRawPointer
    /// A session is between packing a frame and our copying it out: another session on this
    /// thread must not serialize now.
    var busy = false

    private init() {
        memory = UnsafeMutableRawPointer.allocate(byteCount: Self.chunkLength, alignment: 16)
    }

    deinit {
        memory.deallocate()
    }

    private static let perThread = ThreadSpecificVariable<SharedFrameBuffer>()

    /// The buffer of the calling NIO event-loop thread, or nil on any other thread (e.g. an
    /// `EmbeddedEventLoop` in tests, which may run on whatever thread drives it).
    static var current: SharedFrameBuffer? {
        guard MultiThreadedEventLoopGroup.currentEventLoop != nil else { return nil }
        if let buffer = perThread.currentValue { return buffer }
        let buffer = SharedFrameBuffer()
        perThread.currentValue = buffer
        return buffer
    }
}

/// One session's use of a `SharedFrameBuffer`, passed to nghttp2 as its allocator's user data:
/// the session's first frame-buffer-sized allocation (its frame buffer, made while the session
/// is created) gets the shared memory; everything else is ordinary heap memory.
struct SharedFrameBufferLease {
    let shared: UnsafeMutableRawPointer
    var taken = false

    /// nghttp2's allocator functions; `mem_user_data` points at the session's lease.
    static func allocator(for lease: UnsafeMutablePointer<SharedFrameBufferLease>) -> nghttp2_mem {
        nghttp2_mem(
            mem_user_data: UnsafeMutableRawPointer(lease),
            malloc: { size, userData in
                SharedFrameBufferLease.allocate(size, userData)
            },
            free: { pointer, userData in
                guard let pointer else { return }
                let lease = userData!.assumingMemoryBound(to: SharedFrameBufferLease.self)
                if pointer == lease.pointee.shared {
                    lease.pointee.taken = false
                } else {
                    Glibc.free(pointer)
                }
            },
            calloc: { count, size, _ in
                Glibc.calloc(count, size)
            },
            realloc: { pointer, size, userData in
                guard let pointer else { return SharedFrameBufferLease.allocate(size, userData) }
                let lease = userData!.assumingMemoryBound(to: SharedFrameBufferLease.self)
                guard pointer == lease.pointee.shared else { return Glibc.realloc(pointer, size) }
                // Growing the frame buffer (not done by the callbacks we install): move it to
                // the session's own memory.
                guard let moved = Glibc.malloc(size) else { return nil }
                moved.copyMemory(from: pointer, byteCount: min(size, SharedFrameBuffer.chunkLength))
                lease.pointee.taken = false
                return moved
            }
        )
    }

    private static func allocate(_ size: Int, _ userData: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        let lease = userData!.assumingMemoryBound(to: SharedFrameBufferLease.self)
        if size == SharedFrameBuffer.chunkLength, !lease.pointee.taken {
            lease.pointee.taken = true
            return lease.pointee.shared
        }
        return Glibc.malloc(size)
    }
}
