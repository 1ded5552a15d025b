/// Minimal JSON text for small, flat, string-valued objects (error bodies, JWT headers, agent output), without Foundation.
public enum JSONText {
    public static func object(_ fields: KeyValuePairs<String, String>) -> String {
        var out = "{"
        var first = true
        for (key, value) in fields {
            if !first { out += "," }
            first = false
            out += quote(key) + ":" + quote(value)
        }
        return out + "}"
    }

    public static func quote(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
