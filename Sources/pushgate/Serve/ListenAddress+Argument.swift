import ArgumentParser
import PushgateTransport

/// `--listen` and `--tls-listen`.
extension ListenAddress: ExpressibleByArgument {
    public init?(argument: String) { self.init(argument) }
}
