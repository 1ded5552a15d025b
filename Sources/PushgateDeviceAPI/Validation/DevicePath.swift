/// What a request under `/v1/devices/{id}` asks of the device.
enum DeviceAction: Equatable {
    case device, registrations, subscriptions
    case registration(String)
    /// A Web Push subscription, by its endpoint's token.
    case subscription(String)
    case ack, keepalive, state, events, fetchResults, unknown

    /// The methods served for it; none for an unknown path.
    var methods: [String] {
        switch self {
        case .device, .registration, .subscription: ["DELETE"]
        case .registrations, .subscriptions, .ack, .keepalive, .fetchResults: ["POST"]
        case .state: ["PUT"]
        case .events: ["GET"]
        case .unknown: []
        }
    }
}

/// The path after `/v1/devices/`: the device id, then what is asked of it. Parsed without
/// splitting the path into arrays of strings: acks come with every delivered push.
enum DevicePath {
    static func parse(_ rest: Substring) -> (deviceID: String, action: DeviceAction) {
        guard let slash = rest.firstIndex(of: "/") else { return (String(rest), .device) }
        let deviceID = String(rest[..<slash])
        let tail = rest[rest.index(after: slash)...]
        switch tail {
        case "registrations": return (deviceID, .registrations)
        case "subscriptions": return (deviceID, .subscriptions)
        case "ack": return (deviceID, .ack)
        case "keepalive": return (deviceID, .keepalive)
        case "state": return (deviceID, .state)
        case "events": return (deviceID, .events)
        case "fetch-results": return (deviceID, .fetchResults)
        default:
            let kinds: [(prefix: String, action: (String) -> DeviceAction)] = [
                ("registrations/", DeviceAction.registration), ("subscriptions/", DeviceAction.subscription),
            ]
            for (prefix, action) in kinds where tail.hasPrefix(prefix) {
                let token = tail.dropFirst(prefix.count)
                // Hex in either case, as the provider path takes it (tokens are stored lowercase).
                if !token.contains("/") { return (deviceID, action(token.lowercased())) }
            }
            return (deviceID, .unknown)
        }
    }
}
