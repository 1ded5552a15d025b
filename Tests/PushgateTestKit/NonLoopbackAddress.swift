import NIOCore

/// An IPv4 address of this machine that is not loopback, if it has one: a listener there is
/// off loopback, and a peer connecting to it from here is not a loopback peer.
public func nonLoopbackAddress() throws -> String? {
    try System.enumerateDevices().compactMap { device -> String? in
        guard let address = device.address, address.protocol == .inet, let ip = address.ipAddress, !ip.hasPrefix("127.")
        else { return nil }
        return ip
    }.first
}
