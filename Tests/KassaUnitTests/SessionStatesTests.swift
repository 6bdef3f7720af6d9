import KassaCore
import Testing

/// The state table (README, `GET /v1/session-states`) held against the machine itself.
@Suite("Session states: the table and the machine agree")
struct SessionStatesTests {
    typealias T = PaymentSessionMachineTests
    typealias Phase = PaymentSessionMachine.Phase

    static func fetched() -> PaymentSessionMachine {
        var m = PaymentSessionMachine(sessionURL: T.session)
        _ = m.start()
        _ = m.received(T.output([T.op("prepare-payment", next: true), T.op("abort-payment")]), for: m.callInFlight!)
        _ = m.received(T.idle, for: m.callInFlight!)
        return m
    }

    /// A machine whose attempt got `answer` upstream (a card attempt, so its calls are card calls).
    static func attempting(_ answer: PaymentOutput) -> PaymentSessionMachine {
        var m = fetched()
        _ = try? m.command(.attempt(.creditCard(paymentToken: "tok"))).get()
        _ = m.received(T.output([T.op("abort-payment")], methods: ["CreditCard": [T.op("start-payment-attempt")]]), for: m.callInFlight!)
        _ = m.received(answer, for: m.callInFlight!)
        return m
    }

    static let top = [T.op("abort-payment"), T.op("customize-payment")]

    /// One machine for each state, in its plainest case.
    static func machine(in phase: Phase) -> PaymentSessionMachine {
        switch phase {
        case .starting:
            var m = PaymentSessionMachine(sessionURL: T.session)
            _ = m.start()
            return m
        case .awaitingInstrument:
            return fetched()
        case .attempting:
            return attempting(T.output(top, methods: ["CreditCard": [T.op("get-payment", "GET")]]))
        case .threeDSecure:
            let redirect: JSONValue = ["rel": "sca-redirect", "method": "POST", "href": "https://acs.example/c",
                                       "expects": [["name": "creq", "type": "string", "value": "q"]]]
            return attempting(T.output(top, methods: ["CreditCard": [T.op("complete-authentication", tasks: [redirect])]]))
        case .paymentMenu:
            var m = fetched()
            _ = try? m.command(.fallback(restrictTo: nil)).get()
            _ = m.received(T.output(top + [T.op("view-payment", "GET")], methods: ["Swish": [T.op("expand-method")]]), for: m.callInFlight!)
            return m
        case .failed:
            var m = fetched()
            _ = try? m.command(.attempt(.swish(msisdn: "+46739000001"))).get()
            _ = m.failed(m.callInFlight!, reason: "network")
            return m
        case .completed, .canceled, .ended:
            let href = phase == .completed ? T.complete : phase == .canceled ? T.cancel : "https://elsewhere.example/"
            var op = T.op("redirect-payer", "GET")
            if case .object(var o) = op { o["href"] = .string(href); op = .object(o) }
            return attempting(T.output([op]))
        }
    }

    static func command(_ type: CommandType) -> PaymentSessionMachine.Command {
        switch type {
        case .attempt: return .attempt(.swish(msisdn: "+46739000001"))
        case .abort: return .abort
        case .retry: return .retry
        case .fallback: return .fallback(restrictTo: nil)
        case .threeDSecure: return .threeDSecureResult(cres: "c")
        case .threeDSecureMethod: return .threeDSecureMethodResult(completed: true)
        case .wallet: return .walletResult(payload: "p")
        case .appLaunchFailed: return .appLaunchFailed
        case .ping: return .retry
        }
    }

    @Test("every state's fixture is in that state, and the table lists every state once")
    func fixtures() {
        #expect(SessionStates.table.map(\.phase) == Phase.allCases)
        for phase in Phase.allCases {
            #expect(Self.machine(in: phase).phase == phase, "\(phase)")
        }
    }

    @Test("in each state a command the table lists without a condition is taken, and leads where the table says; any other is refused")
    func tableMatchesMachine() {
        for phase in Phase.allCases {
            for type in CommandType.allCases where type != .ping {
                var m = Self.machine(in: phase)
                let result = m.command(Self.command(type))
                let listed = SessionStates.transition(type, in: phase)
                switch result {
                case .success:
                    #expect(listed != nil, "\(phase) takes \(type), which the table does not list")
                    if let listed { #expect(listed.leadsTo.contains(m.phase) || m.phase == phase, "\(phase) + \(type) → \(m.phase)") }
                case .failure(let problem):
                    if listed != nil && listed?.when == nil {
                        Issue.record("\(phase) refuses \(type), which the table lists unconditionally: \(problem.detail ?? "")")
                    } else {
                        #expect(problem.status == 409, "\(phase) + \(type): \(problem.status)")
                    }
                }
            }
        }
    }

    @Test("the conditional commands are taken when their condition holds")
    func conditions() throws {
        // 3dsMethod while Run3DSecureMethod is open.
        let method: JSONValue = ["rel": "sca-method-request", "method": "POST", "href": "https://acs.example/m",
                                 "expects": [["name": "threeDSMethodData", "type": "string", "value": "d"]]]
        var m = Self.attempting(T.output(Self.top, methods: ["CreditCard": [T.op("create-authentication", tasks: [method],
                                                               expects: [["name": "NotificationUrl", "type": "string", "value": "https://n.example"]])]]))
        #expect(m.phase == .attempting)
        #expect((try? m.command(.threeDSecureMethodResult(completed: true)).get()) != nil)
        // wallet while ShowWallet is open.
        let wallet: JSONValue = ["rel": "wallet-sdk", "method": "GET", "href": "", "expects": [["name": "TotalAmount", "type": "string", "value": "15.00"]]]
        m = PaymentSessionMachine(sessionURL: T.session, setup: .init(device: ClientDevice(platform: .ios, wallets: ["ApplePay"])))
        _ = m.start()
        _ = m.received(T.output(Self.top, methods: ["ApplePay": [T.op("start-payment-attempt")]]), for: m.callInFlight!)
        _ = try m.command(.attempt(.applePay)).get()
        _ = m.received(T.output(Self.top, methods: ["ApplePay": [T.op("attempt-payload", tasks: [wallet]), T.op("fail-payment-attempt")]]),
                       for: m.callInFlight!)
        #expect(m.phase == .attempting)
        #expect((try? m.command(.walletResult(payload: "p")).get()) != nil)
        // appLaunchFailed after LaunchClientApp.
        let launch: JSONValue = ["rel": "launch-client-app", "method": "GET", "href": "swish://x"]
        m = Self.attempting(T.output(Self.top, methods: ["CreditCard": [T.op("get-payment", "GET", tasks: [launch]), T.op("fail-payment-attempt")]]))
        #expect((try? m.command(.appLaunchFailed).get()) != nil)
        // attempt and fallback after a refusal.
        m = Self.fetched()
        _ = try m.command(.attempt(.swish(msisdn: "+46739000001"))).get()
        _ = m.failed(m.callInFlight!, reason: "refused", status: 400)
        #expect(m.phase == .failed)
        var other = m
        #expect((try? m.command(.attempt(.swish(msisdn: "+46739000001"))).get()) != nil)
        #expect((try? other.command(.fallback(restrictTo: nil)).get()) != nil)
        // attempt in starting: a restored session whose client had the instruments.
        m = PaymentSessionMachine(restoring: T.session, phase: .awaitingInstrument, history: ["PaymentSessionFetched"])
        _ = m.start()
        #expect(m.phase == .starting)
        #expect((try? m.command(.attempt(.swish(msisdn: "+46739000001"))).get()) != nil)
    }

    @Test("the README prints the table as the code has it")
    func readme() throws {
        let readme = try String(contentsOfFile: #filePath.replacingOccurrences(of: "Tests/KassaUnitTests/SessionStatesTests.swift", with: "README.md"),
                                encoding: .utf8)
        #expect(readme.contains(SessionStates.markdown), "README.md should hold:\n\(SessionStates.markdown)")
    }
}
