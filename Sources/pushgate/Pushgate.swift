import ArgumentParser

@main
struct Pushgate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushgate",
        abstract: "A self-hosted push-notification gateway that speaks the APNs provider API.",
        subcommands: [ServeCommand.self, AgentCommand.self, SendCommand.self, BenchCommand.self]
    )
}
