import ArgumentParser

/// `HOST:PORT`, with IPv6 hosts in brackets (`[::1]:2197`).
struct ListenAddress: ExpressibleByArgument, Equatable, CustomStringConvertible {
    var host: String
    var port: Int

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    init?(argument: String) {
        let hostPart: Substring
        let portPart: Substring
        if argument.hasPrefix("[") {
            guard let close = argument.firstIndex(of: "]"),
                  argument[argument.index(after: close)...].hasPrefix(":")
            else { return nil }
            hostPart = argument[argument.index(after: argument.startIndex)..<close]
            portPart = argument[argument.index(close, offsetBy: 2)...]
        } else {
            guard let colon = argument.lastIndex(of: ":") else { return nil }
            hostPart = argument[..<colon]
            portPart = argument[argument.index(after: colon)...]
            // An unbracketed IPv6 literal would be ambiguous.
            if hostPart.contains(":") { return nil }
        }
        guard !hostPart.isEmpty, let port = Int(portPart), (0...65535).contains(port) else { return nil }
        self.host = String(hostPart)
        self.port = port
    }

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    static var defaultValueDescription: String { "HOST:PORT" }
}
