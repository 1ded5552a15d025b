import ArgumentParser
import PushgateModel

@main
struct Pushgate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushgate",
        abstract: "A self-hosted push-notification gateway that speaks the APNs provider API.",
        version: PushgateVersion.current,
        subcommands: [
            ServeCommand.self, ConfigCommand.self, BackupCommand.self, RestoreCommand.self, StoreToolCommand.self,
            AgentCommand.self,
            SendCommand.self, BenchCommand.self,
        ]
    )
}
