import ArgumentParser
import KassaCore

@main
struct Kassa: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kassa",
        abstract: "Kassa: a payment session gateway for Swedbank Pay.",
        version: KassaVersion.string,
        subcommands: [Serve.self, Sim.self, Events.self, Load.self, Bench.self]
    )
}
