import PushgateModel
import Testing

/// `Push` keeps its fields behind one shared reference (copied on write): it must still behave
/// as a value.
@Suite("Push is a value")
struct PushValueTests {
    static let original = Push(
        deviceToken: String(repeating: "ab", count: 32),
        apnsID: "123e4567-e89b-12d3-a456-4266554400a0",
        topic: "com.example.app",
        pushType: .alert,
        priority: .high,
        collapseID: "score",
        payload: Array(#"{"aps":{}}"#.utf8)
    )

    @Test("changing a copy, field by field, leaves the original and the other copies as they were")
    func copiesAreIndependent() {
        let original = Self.original
        var copy = original
        let untouched = copy
        copy.deviceToken = String(repeating: "cd", count: 32)
        copy.apnsID = "00000000-0000-4000-8000-000000000000"
        copy.topic = "com.example.other"
        copy.pushType = .background
        copy.priority = .low
        copy.collapseID = nil
        copy.payload = Array("{}".utf8)
        #expect(original == Self.original && untouched == Self.original)
        #expect(original.deviceToken == String(repeating: "ab", count: 32) && original.topic == "com.example.app")
        #expect(original.pushType == .alert && original.priority == .high && original.collapseID == "score")
        #expect(original.payload == Array(#"{"aps":{}}"#.utf8))
        #expect(copy != original)
        #expect(copy.topic == "com.example.other" && copy.collapseID == nil && copy.payload == Array("{}".utf8))
    }

    @Test("equality compares the fields, not the storage")
    func equalityIsByValue() {
        var rebuilt = Push(
            deviceToken: Self.original.deviceToken,
            apnsID: Self.original.apnsID,
            topic: Self.original.topic,
            pushType: Self.original.pushType,
            priority: Self.original.priority,
            collapseID: Self.original.collapseID,
            payload: Self.original.payload
        )
        #expect(rebuilt == Self.original)
        rebuilt.priority = .low
        #expect(rebuilt != Self.original)
    }
}
