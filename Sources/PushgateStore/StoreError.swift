public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// More commands are waiting than the store accepts; retry later (maps to 503).
        case overloaded
        /// The storage cannot take a commit now (disk full, I/O error): nothing of the commit was
        /// kept, and the same commands may succeed once the storage recovers (maps to 503 with
        /// `Retry-After`, and makes the store unhealthy until a commit succeeds).
        case unavailable
        /// The database could not be opened, migrated or read, or it refused the commands for
        /// their own content (a constraint): retrying the same commands gets the same answer.
        case database
        /// A batch's `fence` failed: another gateway node owns the device now. Nothing of the
        /// batch was kept; the device's state here is stale (retry on its owner).
        case fenced
        case closed
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
