import PushgateModel

// Rules 12 to 15: the payload, its push type and a background push's rules.
extension ProviderRequestValidator {
    private static func badPayload(_ detail: String) -> Result<(PushType, PushPriority), Refusal> {
        .failure(Refusal(.badPayload, detail))
    }

    /// Rules 12-15, on the raw bytes. `declaredType` is the header's type or the topic's.
    static func checkPayload(
        _ bytes: UnsafeRawBufferPointer,
        declaredType: PushType?,
        explicitPriority: PushPriority?,
        defaultPriority: PushPriority
    ) -> Result<(PushType, PushPriority), Refusal> {
        // 12. JSON.
        let facts: APSFacts
        switch PayloadScanner.scan(bytes) {
        case .success(let f): facts = f
        case .failure(let error): return badPayload("the payload is not a valid JSON object: \(error)")
        }

        // 13. aps, if present, is an object.
        if let kind = facts.aps, kind != .object {
            return badPayload("\"aps\" must be a JSON object, got \(kind.article)")
        }

        let contentAvailableIsOne: Bool =
            facts.contentAvailable.map { token in
                token.kind == .number && token.end - token.start == 1 && bytes[token.start] == UInt8(ascii: "1")
            } ?? false

        // 14. The push type.
        let pushType: PushType
        if let declared = declaredType {
            pushType = declared
        } else if facts.aps == nil {
            return badPayload("cannot infer the push type: the payload has no \"aps\"; send apns-push-type")
        } else if facts.isUserVisible {
            pushType = .alert
        } else if contentAvailableIsOne {
            pushType = .background
        } else if let token = facts.contentAvailable {
            return badPayload(
                "cannot infer the push type: \"aps\" has no alert, badge or sound, and content-available is \(Detail.token(bytes, token)), not the integer 1; send apns-push-type"
            )
        } else {
            return badPayload(
                "cannot infer the push type: \"aps\" has none of alert, badge, sound or content-available: 1; send apns-push-type"
            )
        }

        // 15. Background rules.
        guard pushType == .background else {
            return .success((pushType, explicitPriority ?? defaultPriority))
        }
        guard facts.aps != nil else {
            return badPayload("a background push needs \"aps\": {\"content-available\": 1}; the payload has no \"aps\"")
        }
        guard let token = facts.contentAvailable else {
            return badPayload("a background push needs \"content-available\": 1 in \"aps\"; it is missing")
        }
        guard contentAvailableIsOne else {
            return badPayload(
                "a background push needs \"content-available\" to be exactly the integer 1, got \(Detail.token(bytes, token))"
            )
        }
        if facts.isUserVisible {
            var keys: [String] = []
            if facts.hasAlert { keys.append("alert") }
            if facts.hasBadge { keys.append("badge") }
            if facts.hasSound { keys.append("sound") }
            return badPayload(
                "a background push must not carry alert, badge or sound; \"aps\" has \(keys.joined(separator: ", ")) (send apns-push-type alert instead)"
            )
        }
        if let priority = explicitPriority {
            guard priority != .high else {
                return .failure(Refusal(.badPriority, "background pushes must use apns-priority 5 or 1, got 10"))
            }
            return .success((.background, priority))
        }
        return .success((.background, defaultPriority == .high ? .normal : defaultPriority))
    }
}
