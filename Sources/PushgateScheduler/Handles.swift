/// A device of one scheduler: its dense slot plus the slot's generation. Slots are reused after
/// `removeDevice`; the generation makes a handle kept past that point unknown rather than a handle
/// to whichever device got the slot next.
public struct DeviceHandle: Hashable, Sendable, CustomStringConvertible {
    public let slot: UInt32
    public let generation: UInt32

    init(slot: UInt32, generation: UInt32) {
        self.slot = slot
        self.generation = generation
    }

    public var description: String { "device \(slot).\(generation)" }
}

/// An app (registration) of one scheduler; slot and generation as for `DeviceHandle`.
public struct AppHandle: Hashable, Sendable, CustomStringConvertible {
    public let slot: UInt32
    public let generation: UInt32

    init(slot: UInt32, generation: UInt32) {
        self.slot = slot
        self.generation = generation
    }

    public var description: String { "app \(slot).\(generation)" }
}
