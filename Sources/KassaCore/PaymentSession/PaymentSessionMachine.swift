/// One event pushed to the client, before it gets its `seq`.
public struct PushEvent: Sendable, Equatable {
    public var type: PushType
    public var data: JSONValue

    public init(_ type: PushType, _ data: JSONValue = .object([:])) {
        self.type = type
        self.data = data
    }
}

/// An upstream call the session wants made: an operation's href and method.
public struct SessionCall: Sendable, Equatable {
    public var rel: String
    public var method: String
    public var href: String
    public var body: JSONValue?
    /// The payment method whose operations listed it; nil for top-level ones.
    public var paymentMethod: String?

    public init(rel: String, method: String, href: String, body: JSONValue? = nil, paymentMethod: String? = nil) {
        self.rel = rel
        self.method = method
        self.href = href
        self.body = body
        self.paymentMethod = paymentMethod
    }

    /// Only reads are repeated blindly; a POST may have taken effect.
    public var isIdempotent: Bool { method == "GET" }

    /// The card calls the SDKs give 30 s instead of 10 s, and 30 s of retries instead of 20 s
    /// (swedbank-pay-sdk-android mobilesdk/…/paymentsession/api/model/request/util/TimeOutUtil.kt;
    /// swedbank-pay-sdk-ios SwedbankPaySDK/Classes/Api/SwedbankPayAPIEndpointRouter.swift).
    public var takesLonger: Bool {
        switch OperationRel(rawValue: rel) {
        case .createAuthentication?, .completeAuthentication?, .attemptPayload?: return true
        case .startPaymentAttempt?: return paymentMethod == "CreditCard"
        default: return false
        }
    }
}

/// The server-side PaymentSession: a state machine with no I/O. It does what
/// the Mobile SDK does on the device (the SDKs' PaymentSession step handling): fed upstream answers and client commands, it
/// returns the effects to run — upstream calls, pushes, a poll timer.
///
/// ```swift
/// var machine = PaymentSessionMachine(sessionURL: href)
/// var effects = machine.start()                 // [.call(GET href)]
/// effects = machine.received(output, for: call) // e.g. [.call(prepare-payment)]
/// ```
public struct PaymentSessionMachine: Sendable {
    public enum Phase: String, Sendable, CaseIterable {
        case starting, awaitingInstrument, attempting, threeDSecure, paymentMenu, failed, completed, canceled, ended

        public var isTerminal: Bool { self == .completed || self == .canceled || self == .ended }
    }

    public enum Effect: Sendable, Equatable {
        case call(SessionCall)
        case push(PushEvent)
        /// Call `pollDue(generation)` after this many milliseconds.
        case schedulePoll(afterMs: Int, generation: Int)
    }

    public enum Command: Sendable, Equatable {
        case attempt(Instrument)
        case abort
        case retry
        /// The payment menu, optionally restricted to these payment methods.
        case fallback(restrictTo: [String]?)
        /// The payment menu in instrument mode: one payment method only (e.g. an invoice).
        case instrumentMode(paymentMethod: String)
        /// The 3-D Secure challenge's answer (cRes) from the client's web view.
        case threeDSecureResult(cres: String)
        /// The client's web view could not load the challenge; `retry` shows it again.
        case threeDSecureLoadFailed(reason: String)
        /// The hidden frame of the 3-D Secure method step loaded, or failed to.
        case threeDSecureMethodResult(completed: Bool)
        /// The wallet sheet's payment data, or nil when the payer canceled it.
        case walletResult(payload: String?)
        /// The client could not open the app of a LaunchClientApp (e.g. Swish is not installed).
        case appLaunchFailed
    }

    /// What the session is doing, with the data that belongs to it (the phase is its name).
    indirect enum State: Sendable, Equatable {
        case starting
        case awaitingInstrument
        case attempting(Attempt)
        case paymentMenu(MenuRequest)
        /// A call failed after its retries; `retry` takes up the interrupted state again.
        case failed(Failure)
        case completed, canceled, ended

        var phase: Phase {
            switch self {
            case .starting: return .starting
            case .awaitingInstrument: return .awaitingInstrument
            case .attempting(let attempt): return attempt.challengeOpen ? .threeDSecure : .attempting
            case .paymentMenu: return .paymentMenu
            case .failed: return .failed
            case .completed: return .completed
            case .canceled: return .canceled
            case .ended: return .ended
            }
        }
    }

    /// One payment attempt with the instrument the client chose.
    struct Attempt: Sendable, Equatable {
        /// Nil for an attempt taken up after a restart, whose instrument only upstream knows.
        var instrument: Instrument?
        var started = false
        /// A 3-D Secure challenge is shown to the client.
        var challengeOpen = false
        /// The challenge's answer, to post with complete-authentication.
        var cres: String?
        /// fail-payment-attempt is due with this problemType: the app could not be opened
        /// (ClientAppLaunchFailed) or the wallet sheet was canceled (UserCancelled).
        var failure: String?
        /// The wallet sheet's payment data, for attempt-payload.
        var walletPayload: String?
        /// The payment menu's customization was reset for this attempt (once).
        var menuReset = false
    }

    /// The payment menu: a fallback, or a new card entered there.
    struct MenuRequest: Sendable, Equatable {
        var paymentMethod: String?
        var restrictTo: [String]?
        var newCard: Bool?
        var customized = false
        var shown = false
    }

    struct Failure: Sendable, Equatable {
        /// The call that failed; repeated by `retry` when it is a read, or when upstream refused
        /// it (a 4xx: it did not take effect).
        var call: SessionCall?
        var refused = false
        /// A 3-D Secure challenge that could not load: `retry` shows it again.
        var retryShowsChallenge = false
        var interrupted: State
    }

    /// What the client has been told, over the whole session, so that nothing is announced twice.
    struct Announced: Sendable, Equatable {
        var launches: Set<String> = []
        var challenges: Set<String> = []
        var acknowledgedFailures: Set<String> = []
        var wallets: Set<String> = []
        var instruments = false
    }

    public let sessionURL: String
    /// What the session is set up with: fixed for its life, and the same after a restore.
    public struct Setup: Sendable, Equatable {
        /// The client's device: what the upstream bodies say about it, and which wallets are native.
        public var device = ClientDevice()
        /// Where the issuer posts the challenge's cRes: Kassa's own endpoint for this session, so a
        /// browser client need not capture it. Nil: upstream's NotificationUrl, as the SDKs send.
        public var notificationURL: String?
        /// Milliseconds between get-payment polls (the SDKs use 2 s).
        public var pollIntervalMs = 2_000
        /// How long the client may take to run the 3-D Secure method step.
        public var methodTimeoutMs = 10_000
        /// The merchant identifier an Apple Pay sheet is opened with (the iOS SDK takes it from the app).
        public var applePayMerchantID: String?

        public init(device: ClientDevice = ClientDevice(), notificationURL: String? = nil, pollIntervalMs: Int = 2_000,
                    methodTimeoutMs: Int = 10_000, applePayMerchantID: String? = nil) {
            self.device = device
            self.notificationURL = notificationURL
            self.pollIntervalMs = pollIntervalMs
            self.methodTimeoutMs = methodTimeoutMs
            self.applePayMerchantID = applePayMerchantID
        }
    }

    public let setup: Setup
    public var device: ClientDevice { setup.device }
    var notificationURL: String? { setup.notificationURL }
    var pollIntervalMs: Int { setup.pollIntervalMs }
    var methodTimeoutMs: Int { setup.methodTimeoutMs }
    private(set) var state: State = .starting
    public var phase: Phase { state.phase }
    public private(set) var output: PaymentOutput?
    /// The instruments offered, as pushed in PaymentSessionFetched: kept as JSON text (a session
    /// waiting for its payer holds this for minutes; the parsed tree is several times larger).
    public var availableInstruments: [JSONValue] {
        (try? JSONValue.parse(availableInstrumentsText))?.arrayValue ?? []
    }
    private var availableInstrumentsText: [UInt8] = Array("[]".utf8)
    /// The latest output with its prefills, until the instruments are made from it: only when
    /// it is the one the payer is shown (most answers lead to another call instead).
    private var instrumentsSource: PaymentOutput?
    public private(set) var lastProblem: JSONValue?
    public private(set) var callInFlight: SessionCall?

    var announced = Announced()
    /// The client asked to abort; done before anything else once no call is in flight.
    var abortRequested = false
    var pollGeneration = 0
    /// The rel of the call whose 409 made the session read itself again: a second 409 on it fails.
    var conflictedRel: String?
    /// The 3-D Secure method step by its threeDSMethodData: "Y" or "N" from the client, "" when
    /// it timed out (create-authentication then takes upstream's indicator, else "U").
    var methodResults: [String: String] = [:]
    /// The method step the client is running now.
    var pendingMethod: String?
    /// After a restart: the push types of the attempt the client was in (see `init(restoring:)`).
    var restoredAnnouncements: Set<String> = []

    public init(sessionURL: String, setup: Setup = Setup()) {
        self.sessionURL = sessionURL
        self.setup = setup
    }

    /// A machine picking up a stored session from its pushed events: an ended
    /// one stays ended; an unfinished one re-reads the session upstream on
    /// `start()` and does not announce again what the client was already told
    /// (the instruments, an app to launch, an open 3-D Secure challenge).
    public init(restoring sessionURL: String, phase: Phase, history: [String], setup: Setup = Setup()) {
        self.init(sessionURL: sessionURL, setup: setup)
        switch phase {
        case .completed: state = .completed
        case .canceled: state = .canceled
        case .ended: state = .ended
        default: state = .starting
        }
        announced.instruments = history.contains(PushType.paymentSessionFetched.rawValue)
        // What the current attempt announced: everything after its last end.
        let current = history.reversed().prefix { $0 != PushType.sessionProblemOccurred.rawValue && $0 != PushType.paymentSessionFetched.rawValue && $0 != PushType.dismiss3DSecure.rawValue }
        restoredAnnouncements = Set(current)
    }

    // MARK: Inputs

    public mutating func start() -> [Effect] {
        state = .starting
        return [issue(viewSession)]
    }

    /// An upstream call answered with a PaymentOutputModel.
    public mutating func received(_ output: PaymentOutput, for call: SessionCall) -> [Effect] {
        callInFlight = nil
        if call.rel != OperationRel.viewPaymentSession.rawValue { conflictedRel = nil }
        instrumentsSource = output
        // The prefills (saved cards, numbers) only feed the instrument list: not kept twice.
        self.output = output.withoutPrefills
        switch state {
        case .starting: state = .awaitingInstrument
        case .failed(let failure): state = failure.interrupted
        default: break
        }
        return decide()
    }

    /// Any 409: like the SDKs, read the session again, once (swedbank-pay-sdk-ios
    /// SwedbankPaySDK/Classes/SwedbankPayPaymentSession.swift; swedbank-pay-sdk-android
    /// mobilesdk/…/paymentsession/PaymentSession.kt). A refused abort is reported as
    /// AbortPaymentNotAllowed first; a 409 on a read, or a second one on the same call, fails.
    public mutating func conflict(_ call: SessionCall, problem: JSONValue) -> [Effect] {
        callInFlight = nil
        let rel = OperationRel(rawValue: call.rel)
        if rel == .getPayment || rel == .viewPaymentSession || conflictedRel == call.rel {
            return failed(call, reason: "Swedbank Pay answered \(call.rel) with 409", status: 409, upstreamProblem: problem)
        }
        conflictedRel = call.rel
        var effects: [Effect] = []
        if rel == .abortPayment {
            effects.append(.push(PushEvent(.sdkProblemOccurred, ["problem": [
                "type": .string(SdkProblemType.abortPaymentNotAllowed.rawValue), "detail": "the payment can no longer be aborted", "retryable": false]])))
        }
        return effects + [issue(viewSession)]
    }

    /// The call failed: after its retries (network, 5xx, garbage), or refused by upstream with a
    /// 4xx other than 409 (`status`, `upstreamProblem`). The SDKs report both as
    /// PaymentSessionAPIRequestFailed, retryable; `retry` repeats a read or a refused call, and
    /// reads the session instead of repeating a write that may have taken effect.
    public mutating func failed(_ call: SessionCall, reason: String, status: Int? = nil, upstreamProblem: JSONValue? = nil) -> [Effect] {
        callInFlight = nil
        let refused = status.map { (400..<500).contains($0) } ?? false
        var interrupted = Self.resumable(state)
        if refused, call.rel == OperationRel.startPaymentAttempt.rawValue, case .attempting(var attempt) = interrupted {
            attempt.started = false
            interrupted = .attempting(attempt)
        }
        state = .failed(Failure(call: call, refused: refused, interrupted: interrupted))
        var problem: [String: JSONValue] = ["type": .string(SdkProblemType.paymentSessionAPIRequestFailed.rawValue), "detail": .string(reason),
                                            "operation": .string(call.rel), "retryable": true]
        if let status { problem["status"] = .number(Double(status)) }
        if let upstreamProblem, upstreamProblem != .null { problem["upstream"] = upstreamProblem }
        lastProblem = .object(problem)
        return [.push(PushEvent(.sdkProblemOccurred, ["problem": .object(problem), "retryable": true]))]
    }

    public mutating func pollDue(_ generation: Int) -> [Effect] {
        guard generation == pollGeneration, callInFlight == nil, !phase.isTerminal, phase != .failed else { return [] }
        if let pending = pendingMethod {
            // The client did not answer the method step in time: go on without its result.
            methodResults[pending] = ""
            pendingMethod = nil
            return decide()
        }
        if let getPayment = output?.operation(.getPayment) {
            return [issue(SessionCall(rel: getPayment.rel, method: getPayment.method, href: getPayment.href))]
        }
        return [issue(viewSession)]
    }

    /// A client command: the effects, or the problem that refuses it (state unchanged).
    public mutating func command(_ command: Command) -> Result<[Effect], Problem> {
        if phase.isTerminal {
            return .failure(Self.notAllowed("the session has ended (\(phase.rawValue))"))
        }
        switch command {
        case .attempt(let instrument):
            // A restored session may take the attempt while it re-reads the session upstream.
            let resuming = state == .starting && announced.instruments
            guard state == .awaitingInstrument || resuming || afterRefusal || phase == .paymentMenu else {
                return .failure(Self.notAllowed("an attempt can start only when the session awaits an instrument or shows the payment menu (now \(phase.rawValue))"))
            }
            guard resuming || output?.method(instrument.paymentMethod) != nil || wasOffered(instrument.paymentMethod) else {
                return .failure(.kassa("instrument-not-available", "Instrument Not Available", 422,
                                       detail: "\(instrument.paymentMethod) is not offered by this session"))
            }
            if instrument.isNativeWallet, !device.acceptsNativeWallet(instrument.paymentMethod) {
                return .failure(.kassa("instrument-not-available", "Instrument Not Available", 422,
                                       detail: "\(instrument.paymentMethod) needs the wallet of another platform than this client's "
                                           + "(\(device.platform.rawValue)); pay with it in the payment menu (fallback) instead"))
            }
            lastProblem = nil
            announced.wallets.removeAll()  // each attempt opens its own wallet sheet
            if case .newCreditCard(let consent) = instrument {
                // As the SDKs customize for a new card: CreditCard, no restriction list, stored cards hidden.
                state = .paymentMenu(MenuRequest(paymentMethod: "CreditCard", restrictTo: nil, newCard: consent))
            } else {
                state = .attempting(Attempt(instrument: instrument))
            }
            return .success(callInFlight == nil ? decide() : [])
        case .abort:
            guard output?.allOperations.contains(where: { $0.rel == OperationRel.abortPayment.rawValue }) == true || callInFlight != nil else {
                return .failure(Self.notAllowed("the session offers no abort now"))
            }
            abortRequested = true
            return .success(callInFlight == nil ? decide() : [])
        case .retry:
            guard case .failed(let failure) = state else {
                return .failure(Self.notAllowed("there is nothing to retry (now \(phase.rawValue))"))
            }
            lastProblem = nil
            if failure.retryShowsChallenge, case .attempting(var attempt) = failure.interrupted {
                announced.challenges.removeAll()
                attempt.challengeOpen = false
                state = .attempting(attempt)
                return .success(decide())
            }
            state = failure.interrupted
            let call = failure.call.flatMap { $0.isIdempotent || failure.refused ? $0 : nil } ?? viewSession
            return .success([issue(call)])
        case .fallback(let restrictTo):
            guard state == .awaitingInstrument || afterRefusal || phase == .paymentMenu else {
                return .failure(Self.notAllowed("the payment menu can open only when the session awaits an instrument (now \(phase.rawValue))"))
            }
            state = .paymentMenu(MenuRequest(paymentMethod: nil, restrictTo: restrictTo?.isEmpty == true ? nil : restrictTo))
            return .success(callInFlight == nil ? decide() : [])
        case .instrumentMode(let paymentMethod):
            guard state == .awaitingInstrument || afterRefusal || phase == .paymentMenu else {
                return .failure(Self.notAllowed("the payment menu can open only when the session awaits an instrument (now \(phase.rawValue))"))
            }
            guard output?.method(paymentMethod) != nil || wasOffered(paymentMethod) else {
                return .failure(.kassa("instrument-not-available", "Instrument Not Available", 422,
                                       detail: "\(paymentMethod) is not offered by this session"))
            }
            state = .paymentMenu(MenuRequest(paymentMethod: paymentMethod, restrictTo: nil))
            return .success(callInFlight == nil ? decide() : [])
        case .threeDSecureResult(let cres):
            let resuming = state == .starting && restoredAnnouncements.contains(PushType.show3DSecure.rawValue)
            guard phase == .threeDSecure || resuming else { return .failure(Self.notAllowed("no 3-D Secure challenge is open")) }
            guard !cres.isEmpty, cres.count <= 10_000 else { return .failure(.badRequest("cres must be the challenge's answer", parameter: "cres")) }
            var attempt = currentAttempt ?? Attempt(challengeOpen: true)
            attempt.cres = cres
            state = .attempting(attempt)
            return .success(callInFlight == nil ? decide() : [])
        case .threeDSecureLoadFailed(let reason):
            guard phase == .threeDSecure else { return .failure(Self.notAllowed("no 3-D Secure challenge is open")) }
            state = .failed(Failure(call: nil, retryShowsChallenge: true, interrupted: state))
            let problem: JSONValue = ["type": .string(SdkProblemType.paymentSession3DSecureLoadFailed.rawValue), "detail": .string(String(reason.prefix(500))), "retryable": true]
            lastProblem = problem
            return .success([.push(PushEvent(.sdkProblemOccurred, ["problem": problem, "retryable": true]))])
        case .threeDSecureMethodResult(let completed):
            guard let pending = pendingMethod else { return .failure(Self.notAllowed("no 3-D Secure method step is running")) }
            methodResults[pending] = completed ? "Y" : "N"
            pendingMethod = nil
            pollGeneration += 1  // the step's timeout no longer applies
            return .success(callInFlight == nil ? decide() : [])
        case .appLaunchFailed:
            guard phase == .attempting, var attempt = currentAttempt, !announced.launches.isEmpty,
                  output?.operation(.failPaymentAttempt) != nil else {
                return .failure(Self.notAllowed("no app launch is pending"))
            }
            attempt.failure = "ClientAppLaunchFailed"
            state = .attempting(attempt)
            return .success(callInFlight == nil ? decide() : [])
        case .walletResult(let payload):
            guard phase == .attempting, var attempt = currentAttempt, attempt.instrument?.isNativeWallet ?? true,
                  let op = output?.allOperations.first(where: { $0.rel == OperationRel.attemptPayload.rawValue }),
                  announced.wallets.contains(op.href) else {
                return .failure(Self.notAllowed("no wallet sheet is open"))
            }
            if let payload { attempt.walletPayload = payload } else { attempt.failure = "UserCancelled" }
            state = .attempting(attempt)
            return .success(callInFlight == nil ? decide() : [])
        }
    }

    static func notAllowed(_ detail: String) -> Problem {
        .kassa("command-not-allowed", "Command Not Allowed", 409, detail: detail)
    }

    // MARK: The decision order of the SDKs

    /// Reading the session again: where every flow starts and every doubt ends.
    var viewSession: SessionCall { SessionCall(rel: OperationRel.viewPaymentSession.rawValue, method: "GET", href: sessionURL) }

    mutating func issue(_ call: SessionCall) -> Effect {
        callInFlight = call
        return .call(call)
    }

    /// Offered when the instruments were announced (a menu's customization may hide it since).
    func wasOffered(_ paymentMethod: String) -> Bool {
        availableInstruments.contains { $0["type"]?.stringValue == paymentMethod || $0["paymentMethod"]?.stringValue == paymentMethod }
    }

    /// Upstream refused the last call (a 4xx): nothing took effect, so the client may also choose again.
    var afterRefusal: Bool {
        if case .failed(let failure) = state { return failure.refused }
        return false
    }

    var currentAttempt: Attempt? {
        if case .attempting(let attempt) = state { return attempt }
        return nil
    }

    var menuShown: Bool {
        if case .paymentMenu(let menu) = state { return menu.shown }
        return false
    }

    /// What `retry` goes back to: an attempt or the payment menu as they were; otherwise a fresh start.
    static func resumable(_ state: State) -> State {
        switch state {
        case .attempting, .paymentMenu: return state
        case .failed(let failure): return failure.interrupted
        default: return .starting
        }
    }

    mutating func decide() -> [Effect] {
        guard callInFlight == nil, let o = output, !phase.isTerminal else { return [] }
        var effects: [Effect] = []
        if !restoredAnnouncements.isEmpty { adoptRestoredAnnouncements(o) }

        // The client asked to abort: that goes before anything else.
        if abortRequested, let abort = o.allOperations.first(where: { $0.rel == OperationRel.abortPayment.rawValue }) {
            abortRequested = false
            return [issue(call(abort))]
        }
        // The app could not be launched, or the wallet sheet was canceled: tell upstream, which
        // answers with the attempt's problem.
        if var attempt = currentAttempt, let failure = attempt.failure, let fail = o.operation(.failPaymentAttempt) {
            attempt.failure = nil
            state = .attempting(attempt)
            return [issue(call(fail, body: ["problemType": .string(failure), "errorCode": .null]))]
        }
        // 1. A failed attempt: report it once, then acknowledge it.
        if let problem = o.problem, let ack = problem.operation, ack.rel == OperationRel.acknowledgeFailedAttempt.rawValue, !announced.acknowledgedFailures.contains(ack.href) {
            announced.acknowledgedFailures.insert(ack.href)
            lastProblem = problem.json
            state = .awaitingInstrument
            return [.push(PushEvent(.sessionProblemOccurred, ["problem": problem.json])), issue(call(ack))]
        }
        // 2. prepare-payment.
        if let prepare = o.operation(.preparePayment) {
            return [issue(call(prepare, body: prepareBody(culture: o.culture)))]
        }
        // 3. A wallet attempt: the client opens its wallet sheet with the wallet-sdk task's values;
        // the payload goes to attempt-payload (swedbank-pay-sdk-ios SwedbankPayPaymentSession.swift,
        // ApplePay/SwedbankPayAuthorization.swift; swedbank-pay-sdk-android SessionOperationHandler.kt,
        // googlepay/GooglePayService.kt).
        if let payloadOp = o.operation(.attemptPayload),
           let task = payloadOp.tasks.first(where: { $0.rel == OperationRel.walletSDK.rawValue }) {
            let method = payloadOp.paymentMethod ?? currentAttempt?.instrument?.paymentMethod ?? ""
            if var attempt = currentAttempt, let payload = attempt.walletPayload {
                attempt.walletPayload = nil
                state = .attempting(attempt)
                return [issue(call(payloadOp, body: ["paymentMethod": .string(method), "paymentPayload": .string(payload)]))]
            }
            if !announced.wallets.contains(payloadOp.href) {
                announced.wallets.insert(payloadOp.href)
                var data: [String: JSONValue] = ["paymentMethod": .string(method), "request": task.expectedValues]
                if method == "ApplePay" { data["merchantIdentifier"] = setup.applePayMerchantID.map { .string($0) } ?? .null }
                effects.append(.push(PushEvent(.showWallet, .object(data))))
            }
            return effects
        }
        // An attempt the menu's customization stands in the way of (another instrument mode, or a
        // restriction that hides its method): reset the menu first, once, as the SDKs do
        // (swedbank-pay-sdk-ios SwedbankPayPaymentSession.swift; swedbank-pay-sdk-android SessionOperationHandler.kt).
        if var attempt = currentAttempt, let instrument = attempt.instrument, !attempt.started, !attempt.menuReset,
           (o.instrumentModePaymentMethod.map { $0 != instrument.paymentMethod } ?? false) || o.method(instrument.paymentMethod) == nil,
           let customize = o.operation(.customizePayment) {
            attempt.menuReset = true
            state = .attempting(attempt)
            return effects + [issue(call(customize, body: ["paymentMethod": .null, "restrictToPaymentMethods": .null]))]
        }
        // 4. The payment menu (fallback, or a new card): customize, then show view-payment.
        if case .paymentMenu(var menu) = state {
            if !menu.customized, let customize = o.operation(.customizePayment) {
                menu.customized = true
                state = .paymentMenu(menu)
                var body: [String: JSONValue] = ["paymentMethod": menu.paymentMethod.map { .string($0) } ?? .null,
                                                 "restrictToPaymentMethods": menu.restrictTo.map { .array($0.map { .string($0) }) } ?? .null]
                if let consent = menu.newCard {
                    body["hideStoredPaymentOptions"] = true
                    body["showConsentAffirmation"] = .bool(consent)
                }
                return [issue(call(customize, body: .object(body)))]
            }
            if menu.customized, !menu.shown, let view = o.operation(.viewPayment) {
                menu.shown = true
                state = .paymentMenu(menu)
                effects.append(.push(PushEvent(.showPaymentMenu, [
                    "url": .string(view.href),
                    "instrumentMode": menu.newCard == nil ? (menu.paymentMethod.map { .string($0) } ?? .null) : .null,
                    // The client is told what the menu shows: cards only, for a new card.
                    "restrictedToInstruments": (menu.restrictTo ?? (menu.newCard != nil ? ["CreditCard"] : nil))
                        .map { .array($0.map { .string($0) }) } ?? .null])))
            }
        }
        // 5. The chosen instrument's start-payment-attempt.
        if var attempt = currentAttempt, let instrument = attempt.instrument, !attempt.started,
           let start = o.operation(.startPaymentAttempt, method: instrument.paymentMethod) {
            attempt.started = true
            state = .attempting(attempt)
            return effects + [issue(call(start, body: attemptBody(instrument, culture: o.culture)))]
        }
        // 6. An app to launch (Swish local start): tell the client once.
        for op in o.candidates {
            for task in op.tasks where task.rel == OperationRel.launchClientApp.rawValue && !announced.launches.contains(task.href) {
                announced.launches.insert(task.href)
                effects.append(.push(PushEvent(.launchClientApp, ["url": .string(Self.withCallback(task.href, o.paymentUrl))])))
            }
        }
        // 7. The 3-D Secure method step, once per threeDSMethodData: the client runs it in a hidden
        // frame, as the SDKs do in an invisible web view (swedbank-pay-sdk-android
        // mobilesdk/…/paymentsession/SessionOperationHandler.kt, sca/ScaMethodService.kt).
        if let task = o.candidates.flatMap(\.tasks).first(where: { $0.rel == OperationRel.scaMethodRequest.rawValue }),
           let data = Self.methodData(task), methodResults[data] == nil {
            if pendingMethod != data {
                pendingMethod = data
                pollGeneration += 1
                effects.append(.push(PushEvent(.run3DSecureMethod, ["url": .string(task.href), "method": .string(task.method),
                                                                     "form": task.expectedValues, "timeoutMs": .number(Double(methodTimeoutMs))])))
                effects.append(.schedulePoll(afterMs: methodTimeoutMs, generation: pollGeneration))
            }
            return effects
        }
        // 8. create-authentication: the method step's result, else upstream's indicator, else "U";
        // the cRes comes back to Kassa's notification URL when it has one.
        if let create = o.operation(.createAuthentication),
           let notification = notificationURL ?? create.expectation("NotificationUrl")?.value.stringValue {
            let data = create.tasks.first { $0.rel == OperationRel.scaMethodRequest.rawValue }.flatMap(Self.methodData)
            let indicator = data.flatMap { methodResults[$0] }.flatMap { $0.isEmpty ? nil : $0 }
                ?? create.expectation("methodCompletionIndicator")?.value.stringValue ?? "U"
            let body: JSONValue = ["methodCompletionIndicator": .string(indicator), "notificationUrl": .string(notification),
                                   "requestWindowSize": "FULLSCREEN", "client": device.client,
                                   "browser": device.browser(culture: o.culture)]
            return effects + [issue(call(create, body: body))]
        }
        // 9–10. The challenge: show it to the client, then post its answer.
        if let complete = o.operation(.completeAuthentication),
           let redirect = complete.tasks.first(where: { $0.rel == OperationRel.scaRedirect.rawValue }) {
            let creq = redirect.expects.first { $0.name == "creq" }?.value.stringValue ?? redirect.href
            if var attempt = currentAttempt, let cres = attempt.cres {
                attempt.cres = nil
                attempt.challengeOpen = false
                state = .attempting(attempt)
                return effects + [.push(PushEvent(.dismiss3DSecure)),
                                  issue(call(complete, body: ["cRes": .string(cres), "client": device.clientMinimum]))]
            }
            if !announced.challenges.contains(creq) {
                announced.challenges.insert(creq)
                var attempt = currentAttempt ?? Attempt()
                attempt.challengeOpen = true
                state = .attempting(attempt)
                effects.append(.push(PushEvent(.show3DSecure, ["url": .string(redirect.href), "method": .string(redirect.method),
                                                                "form": redirect.expectedValues])))
            }
            return effects
        }
        // 11. redirect-payer ends the flow.
        if let redirect = o.operation(.redirectPayer) {
            if redirect.href == o.completeUrl {
                state = .completed
                return effects + [.push(PushEvent(.paymentSessionComplete))]
            }
            if redirect.href == o.cancelUrl {
                state = .canceled
                return effects + [.push(PushEvent(.paymentSessionCanceled))]
            }
            return effects + endReached("the session ended at an address that is neither completeUrl nor cancelUrl")
        }
        // 12. The chosen instrument's next step on its method.
        if let instrument = currentAttempt?.instrument, o.method(instrument.paymentMethod) == nil {
            return effects + endReached("the session no longer offers \(instrument.paymentMethod)")
        }
        if var attempt = currentAttempt, let instrument = attempt.instrument {
            for rel in [OperationRel.expandMethod, .startPaymentAttempt] {
                if let op = o.operation(rel, method: instrument.paymentMethod) {
                    if rel == .startPaymentAttempt {
                        attempt.started = true
                        state = .attempting(attempt)
                    }
                    return effects + [issue(call(op, body: rel == .expandMethod ? ["paymentMethod": .string(instrument.paymentMethod)]
                                                                                    : attemptBody(instrument, culture: o.culture)))]
                }
            }
        }
        // 13. get-payment: poll it. The payment menu is watched the same way.
        if o.operation(.getPayment) != nil || menuShown {
            pollGeneration += 1
            return effects + [.schedulePoll(afterMs: pollIntervalMs, generation: pollGeneration)]
        }
        // 14. Nothing left to do but let the payer choose.
        let instruments = instrumentsSource.map { AvailableInstruments.from($0, device: device) } ?? []
        availableInstrumentsText = JSONValue.array(instruments).bytes
        instrumentsSource = nil
        if !announced.instruments {
            announced.instruments = true
            state = .awaitingInstrument
            effects.append(.push(PushEvent(.paymentSessionFetched, ["availableInstruments": .array(instruments)])))
        } else if case .attempting(let attempt) = state {
            // An attempt upstream gives nothing more to do for: the SDKs' end state, unless this
            // evaluation showed the client something. A restored attempt, whose instrument only
            // upstream knew, just waits for the payer's choice.
            if attempt.instrument == nil {
                state = .awaitingInstrument
            } else if effects.isEmpty {
                return endReached("Swedbank Pay offers nothing more to do for this attempt")
            }
        }
        return effects
    }

    static func methodData(_ task: PaymentOutput.Task) -> String? {
        task.expectation("threeDSMethodData")?.value.stringValue ?? task.href
    }

    /// PaymentSessionEndReached: nothing can act on the session any more (swedbank-pay-sdk-android
    /// mobilesdk/…/paymentsession/SessionOperationHandler.kt, StepNotFound).
    mutating func endReached(_ detail: String) -> [Effect] {
        state = .ended
        let problem: JSONValue = ["type": .string(SdkProblemType.paymentSessionEndReached.rawValue), "detail": .string(detail), "retryable": false]
        lastProblem = problem
        return [.push(PushEvent(.sdkProblemOccurred, ["problem": problem, "retryable": false]))]
    }

    /// After a restart: treat what the client was already shown as shown.
    mutating func adoptRestoredAnnouncements(_ o: PaymentOutput) {
        for op in o.candidates {
            for task in op.tasks {
                if task.rel == OperationRel.launchClientApp.rawValue && restoredAnnouncements.contains(PushType.launchClientApp.rawValue) {
                    announced.launches.insert(task.href)
                }
                if task.rel == OperationRel.walletSDK.rawValue && restoredAnnouncements.contains(PushType.showWallet.rawValue) {
                    announced.wallets.insert(op.href)
                }
                if task.rel == OperationRel.scaRedirect.rawValue && restoredAnnouncements.contains(PushType.show3DSecure.rawValue) {
                    announced.challenges.insert(task.expects.first { $0.name == "creq" }?.value.stringValue ?? task.href)
                    var attempt = currentAttempt ?? Attempt()
                    attempt.challengeOpen = true
                    state = .attempting(attempt)
                }
            }
            if op.rel == OperationRel.getPayment.rawValue && phase != .threeDSecure { state = .attempting(currentAttempt ?? Attempt()) }
        }
        restoredAnnouncements = []
    }

    func call(_ op: PaymentOutput.Operation, body: JSONValue? = nil) -> SessionCall {
        SessionCall(rel: op.rel, method: op.method, href: op.href, body: op.method == "GET" ? nil : (body ?? .object([:])),
                    paymentMethod: op.paymentMethod)
    }

    /// The launch URL with `callbackurl` set to the payment url when it has none (as the SDKs do).
    static func withCallback(_ href: String, _ paymentUrl: String?) -> String {
        guard let paymentUrl, !href.contains("callbackurl=") else { return href }
        return href + (href.contains("?") ? "&" : "?") + "callbackurl=" + PaymentURLHelper.percentEncode(paymentUrl)
    }

    /// prepare-payment as the SDKs send it (swedbank-pay-sdk-android mobilesdk/…/paymentsession/api/
    /// model/request/util/RequestUtil.kt getIntegrationRequestData), with the client's device.
    func prepareBody(culture: String?) -> JSONValue {
        ["integration": "App", "deviceAcceptedWallets": .string(device.acceptedWallets.joined(separator: ";")),
         "client": device.client, "browser": device.browser(culture: culture),
         "service": ["name": "Kassa", "version": .string(KassaVersion.string)],
         "presentationSdk": ["name": .string(device.presentationSdkName), "version": .string(KassaVersion.string)]]
    }

    /// `culture` is the session's own, as the SDKs send it (swedbank-pay-sdk-ios
    /// SwedbankPaySDK/Classes/SwedbankPayPaymentSession.swift; null when the session has none).
    func attemptBody(_ instrument: Instrument, culture: String?) -> JSONValue {
        var body: [String: JSONValue] = ["culture": culture.map { .string($0) } ?? .null, "client": device.clientWithType]
        switch instrument {
        case .swish(let msisdn?): body["msisdn"] = .string(msisdn)
        case .creditCard(let token): body["paymentToken"] = .string(token)
        default: break
        }
        return .object(body)
    }
}
