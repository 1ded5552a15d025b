import PushgateModel
import Testing

/// Words the contract publishes: in the `pushgate-disposition` header, an event's `delivery`
/// field, and metric labels (PRODUCT.md sections 2, 3, 4 and 6). Renaming a case must not rename
/// what clients and dashboards read.
@Suite("Wire words")
struct WireWordsTests {
    @Test("dispositions")
    func dispositions() {
        #expect(Disposition.allCases.map(\.rawValue) == ["delivered", "held", "stored", "coalesced", "discarded"])
    }

    @Test("delivery kinds")
    func deliveryKinds() {
        #expect(
            DeliveryKind.allCases.map(\.rawValue) == [
                "immediate", "stored", "piggyback", "keepalive", "budget", "online",
            ]
        )
    }

    @Test("drop and discard reasons, as metric labels")
    func reasons() {
        #expect(
            DropReason.allCases.map(\.rawValue) == [
                "expired", "overflow", "coalesced", "app_terminated", "unregistered",
            ]
        )
        #expect(DiscardReason.allCases.map(\.rawValue) == ["app_terminated", "undeliverable_now", "expired"])
    }

    @Test("power and app states, as the state route takes them")
    func states() {
        #expect(DevicePower.allCases.map(\.rawValue) == ["awake", "idle", "lowPower"])
        #expect(AppState.allCases.map(\.rawValue) == ["foreground", "background", "terminated"])
    }
}
