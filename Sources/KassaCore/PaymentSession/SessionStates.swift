/// Every session state, the commands it takes and what each leads to: the one table that
/// the README prints and `GET /v1/session-states` serves. A test holds it against the
/// machine: a command missing from a state's row is refused there (409
/// `command-not-allowed`), and one listed without a condition is taken.
public enum SessionStates {
    public typealias Phase = PaymentSessionMachine.Phase

    public struct Transition: Sendable {
        public let command: CommandType
        /// The states the command can lead to.
        public let leadsTo: [Phase]
        /// When the command is taken only in some cases of the state.
        public let when: String?

        init(_ command: CommandType, _ leadsTo: [Phase], when: String? = nil) {
            self.command = command
            self.leadsTo = leadsTo
            self.when = when
        }
    }

    public struct Row: Sendable {
        public let phase: Phase
        public let meaning: String
        public let transitions: [Transition]
    }

    public static let table: [Row] = [
        Row(phase: .starting, meaning: "reading the session upstream, after creation or a restart", transitions: [
            Transition(.abort, [.canceled]),
            Transition(.attempt, [.attempting, .paymentMenu], when: "a restored session whose client already has the instruments"),
        ]),
        Row(phase: .awaitingInstrument, meaning: "PaymentSessionFetched was pushed; the payer chooses", transitions: [
            Transition(.attempt, [.attempting, .paymentMenu]),
            Transition(.fallback, [.paymentMenu]),
            Transition(.abort, [.canceled]),
        ]),
        Row(phase: .attempting, meaning: "an attempt runs upstream: Swish, a card, a wallet", transitions: [
            Transition(.abort, [.canceled]),
            Transition(.threeDSecureMethod, [.attempting, .threeDSecure], when: "Run3DSecureMethod is open"),
            Transition(.wallet, [.attempting, .awaitingInstrument], when: "ShowWallet is open"),
            Transition(.appLaunchFailed, [.awaitingInstrument], when: "after LaunchClientApp"),
        ]),
        Row(phase: .threeDSecure, meaning: "Show3DSecure was pushed: the challenge is open", transitions: [
            Transition(.threeDSecure, [.attempting, .failed]),
            Transition(.abort, [.canceled]),
        ]),
        Row(phase: .paymentMenu, meaning: "the payment menu (view-payment) is customized or shown", transitions: [
            Transition(.attempt, [.attempting, .paymentMenu]),
            Transition(.fallback, [.paymentMenu]),
            Transition(.abort, [.canceled]),
        ]),
        Row(phase: .failed, meaning: "SdkProblemOccurred with retryable: a call failed", transitions: [
            Transition(.retry, [.starting, .attempting, .threeDSecure, .paymentMenu]),
            Transition(.attempt, [.attempting, .paymentMenu], when: "Swedbank Pay refused the call (4xx): nothing took effect"),
            Transition(.fallback, [.paymentMenu], when: "Swedbank Pay refused the call (4xx): nothing took effect"),
            Transition(.abort, [.canceled]),
        ]),
        Row(phase: .completed, meaning: "PaymentSessionComplete: the end", transitions: []),
        Row(phase: .canceled, meaning: "PaymentSessionCanceled: the end", transitions: []),
        Row(phase: .ended, meaning: "PaymentSessionEndReached: nothing can act on the session", transitions: []),
    ]

    public static func transition(_ command: CommandType, in phase: Phase) -> Transition? {
        table.first { $0.phase == phase }?.transitions.first { $0.command == command }
    }

    /// The table as JSON: `{"states": [{"state", "meaning", "commands": [{"command", "leadsTo", "when"}]}]}`.
    public static var json: JSONValue {
        ["states": .array(table.map { row in
            ["state": .string(row.phase.rawValue), "meaning": .string(row.meaning), "terminal": .bool(row.phase.isTerminal),
             "commands": .array(row.transitions.map { t in
                 ["command": .string(t.command.rawValue), "leadsTo": .array(t.leadsTo.map { .string($0.rawValue) }),
                  "when": t.when.map { .string($0) } ?? .null]
             })]
        })]
    }

    /// The table as the README prints it.
    public static var markdown: String {
        var lines = ["| state | meaning | commands taken → states they lead to |", "| --- | --- | --- |"]
        for row in table {
            let commands = row.transitions.map { t in
                "`\(t.command.rawValue)` → " + t.leadsTo.map { "`\($0.rawValue)`" }.joined(separator: ", ") + (t.when.map { " (when \($0))" } ?? "")
            }
            lines.append("| `\(row.phase.rawValue)` | \(row.meaning) | \(commands.isEmpty ? "none" : commands.joined(separator: "; ")) |")
        }
        return lines.joined(separator: "\n")
    }
}
