/// What happened to an accepted push: the `pushgate-disposition` header of its 200.
public enum Disposition: String, Sendable, Hashable, CaseIterable {
    /// Committed and written (or about to be) to the device's open event stream.
    case delivered
    /// Committed; the scheduler holds it (silent budget spent, priority 5 on an idle device,
    /// priority 1, or a silent push for an offline device) until a wake event or its budget.
    case held
    /// Committed; the device is offline and gets it when it reconnects.
    case stored
    /// Committed, replacing a held or stored push with the same `apns-collapse-id`.
    case coalesced
    /// Not kept (see ``DiscardReason``).
    case discarded
}

/// Why an accepted push was not kept at all.
public enum DiscardReason: String, Sendable, Hashable, CaseIterable {
    /// A silent push for an app in state `terminated`.
    case appTerminated = "app_terminated"
    /// `apns-expiration: 0` and the push could not be delivered at once.
    case undeliverableNow = "undeliverable_now"
    /// Its expiration was not after the time it was accepted.
    case expired
}

/// Why a kept notification was dropped undelivered (PRODUCT.md section 4); `rawValue` is the
/// metric label.
public enum DropReason: String, Sendable, Hashable, CaseIterable {
    case expired
    /// Over the app's limit of held silent pushes: the oldest goes.
    case overflow
    /// Replaced by a newer push with the same `apns-collapse-id`.
    case coalesced
    case appTerminated = "app_terminated"
    /// Its registration or device was removed.
    case unregistered
}

/// How a notification reached its device: the `delivery` field of its event, and a metric
/// label. A piggybacked notification also names its carrier, the priority-10 push it rode on.
public enum DeliveryKind: String, Sendable, Hashable, CaseIterable {
    /// Written while the device was connected when the push was accepted.
    case immediate
    /// Kept while the device was offline and sent when it came back.
    case stored
    /// Held, and sent along with a priority-10 push (a wake event).
    case piggyback
    /// Held, and released by the device's keep-alive (in its response).
    case keepalive
    /// Held, and released by the scheduler's own timing: a refilled silent budget, or a
    /// priority-5 push whose maximum deferral ran out.
    case budget
    /// Held, and released when the device came online (its stream opened) or reported `awake`.
    case online
}

/// Which silent budget was empty when a silent push had to be held for want of a token; a metric
/// label.
public enum BudgetScope: String, Sendable, Hashable, CaseIterable {
    /// The app's own bucket (a registration's).
    case app
    /// The device's bucket, shared by all its apps.
    case device
}

/// The wake event a held push rode on when it was released without taking budget; a metric
/// label (`pushgate_piggybacked_total{carrier}`).
public enum WakeKind: String, Sendable, Hashable, CaseIterable {
    /// A priority-10 push (delivery `piggyback`).
    case regular
    /// The device's keep-alive (delivery `keepalive`).
    case keepalive
    /// The device's stream opened, or it reported `awake` (delivery `online`).
    case online

    /// The wake event behind a release of this delivery kind; nil for kinds that are not one.
    public init?(_ delivery: DeliveryKind) {
        switch delivery {
        case .piggyback: self = .regular
        case .keepalive: self = .keepalive
        case .online: self = .online
        case .immediate, .stored, .budget: return nil
        }
    }
}
