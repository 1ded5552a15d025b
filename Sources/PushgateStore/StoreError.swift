public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// More commands are waiting than the store accepts; retry later (maps to 503).
        case overloaded
        /// The database could not be opened, migrated, read or written.
        case database
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
