import Foundation
import KassaCore
import KassaStore
import Synchronization
import Tracing

/// One pushed event with its place in the session's stream, kept as the frame's
/// JSON text: serialised once for every subscriber and replay, and a fraction of the
/// memory of the parsed tree.
struct SequencedPush: Sendable {
    var seq: Int64
    var text: [UInt8]
    /// When the state change happened (pushes made in this process only): push latency starts here.
    var madeAt: ContinuousClock.Instant? = nil

    /// `at`: as `SessionEnvironment.pushTime` gives it for a live push, the event log's millisecond for a replay.
    init(seq: Int64, type: String, at: String, data: JSONValue, session: String, madeAt: ContinuousClock.Instant? = nil) {
        self.seq = seq
        self.madeAt = madeAt
        text = StreamEvent(seq: seq, session: session, type: type, at: at, data: data).json.bytes
    }
}

/// Runs one PaymentSession: feeds the machine, performs its effects, numbers
/// and stores its pushes, and sends them to the session's subscribers only
/// once they are committed, so a client never holds an event a crash could lose.
actor SessionActor {
    let id: String
    let clientTokenSHA256: String
    /// The W3C trace id of the request that created the session; every call and event carries it.
    let traceID: String
    /// The span every span of the session goes below: the creating request's, or one saying how the
    /// session came back from the store. `.topLevel` with tracing off.
    let root: ServiceContext
    /// What polls upstream go below: the latest command's span (the root before any), so a payment
    /// the payer completed in another app shows below the command that started it.
    private var pollParent: ServiceContext
    /// Push spans not yet ended, by seq: each ends once its frame is handed to the edge.
    private var pushSpans: [Int64: any Span] = [:]
    /// Everything outside the session; the service that holds this actor, so not retained.
    private unowned let environment: any SessionEnvironment
    private var machine: PaymentSessionMachine
    private var pushes: [SequencedPush] = []
    private var seq: Int64
    /// Pushes up to this seq are handed to the event log, to go to their subscribers once committed.
    private var handedUpTo: Int64
    /// Pushes up to this seq are committed and given to the edge: what a snapshot reports. Advanced on
    /// the event log's writer thread, in order, just before the frames go.
    private nonisolated let sentUpTo: Atomic<Int64>
    private var subscribers: Set<UInt64> = []
    private var lastPhase: PaymentSessionMachine.Phase
    /// Restored sessions that had already ended are never started again.
    nonisolated let initialPhaseIsTerminal: Bool
    /// Since when (ms) the session has waited for the payer's choice with nothing in flight;
    /// 0 while it is busy or ended, `Self.leftMemory` once the registry has dropped it. Read
    /// and claimed by the registry's sweep without entering the actor.
    nonisolated let quietSinceMs = Atomic<Int64>(0)
    static let leftMemory: Int64 = -1
    /// When (ms) the session reached an end state, 0 while it runs: its client token lapses some time
    /// after. Read by token checks on the edge's thread without entering the actor.
    nonisolated let endedAtMs = Atomic<Int64>(0)

    /// `seqBase`: for a session picked up from another node, the last seq its client saw.
    init(id: String, clientTokenSHA256: String, traceID: String, root: ServiceContext, machine: PaymentSessionMachine,
         history: [SequencedPush], seqBase: Int64 = 0, endedAtMs: Int64 = 0, environment: any SessionEnvironment) {
        self.id = id
        self.root = root
        self.pollParent = root
        self.endedAtMs.store(machine.phase.isTerminal ? endedAtMs : 0, ordering: .relaxed)
        self.traceID = traceID
        self.clientTokenSHA256 = clientTokenSHA256
        self.machine = machine
        self.environment = environment
        self.pushes = history
        self.seq = max(history.last?.seq ?? 0, seqBase)
        self.handedUpTo = seq
        self.sentUpTo = Atomic(seq)
        self.lastPhase = machine.phase
        self.initialPhaseIsTerminal = machine.phase.isTerminal
        environment.phaseChanged(id: id, traceID: traceID, root: root, from: nil, to: machine.phase)
    }

    var phase: PaymentSessionMachine.Phase { machine.phase }

    private var started = false

    /// Starts driving the session upstream; later calls do nothing.
    func start() {
        guard !started, !initialPhaseIsTerminal else { return }
        started = true
        run(machine.start(), cause: root)
    }

    /// A client command; the problem says why it was refused.
    func command(_ command: PaymentSessionMachine.Command, source: String) async -> Problem? {
        guard wake() else {
            // Dropped from memory after the caller found it: the session read back from the store takes the command.
            guard let restored = environment.readBack(id) else { return .notFound("no session \(id)") }
            return await restored.command(command, source: source)
        }
        return take(command, source: source)
    }

    // `take` and `attach` are plain functions, as `run` is: the async entry points only hand over
    // to another actor when this one has left memory.

    /// A command on this session, awake.
    @inline(never)
    private func take(_ command: PaymentSessionMachine.Command, source: String) -> Problem? {
        start()
        let span = commandSpan(command, source: source)
        defer { span.end() }
        pollParent = span.context
        environment.record(LogEvent(atMs: environment.nowMs(), sessionID: id, kind: "client.command",
                                               summary: "\(source): \(Self.name(command))", traceID: traceID,
                                               data: ["command": .string(Self.name(command)), "source": .string(source)]))
        if case .attempt(.swish(let msisdn?)) = command {
            environment.update(.init(id: id, msisdnSuffix: String(msisdn.suffix(4))))
        }
        let result = machine.command(command)
        if let target = beaconTarget {
            let accepted: Bool = if case .success = result { true } else { false }
            environment.beacon(ClientEvent(.sdkMethodInvoked, atMs: environment.nowMs(), methodName: Self.name(command),
                                           succeeded: accepted), to: target)
        }
        switch result {
        case .success(let effects):
            run(effects, cause: span.context)
            return nil
        case .failure(let problem):
            if environment.telemetry.isOn { span.failed(problem.type) }
            environment.record(LogEvent(atMs: environment.nowMs(), sessionID: id, kind: "problem", level: .warning,
                                                   summary: "command refused: \(problem.detail ?? problem.title)", traceID: traceID,
                                                   data: ["problem": problem.json]))
            return problem
        }
    }

    /// A command's span, below the session's root. A command sent over HTTP also links to that request's span.
    private func commandSpan(_ command: PaymentSessionMachine.Command, source: String) -> any Span {
        let telemetry = environment.telemetry
        let span = telemetry.span("command \(Self.name(command))", kind: .server, parent: root)
        guard telemetry.isOn else { return span }
        span.updateAttributes { a in
            a["kassa.session.id"] = id
            a["kassa.command.name"] = Self.name(command)
            a["kassa.command.source"] = source
        }
        if let request = ServiceContext.current, telemetry.ids(request) != nil { span.addLink(SpanLink(context: request, attributes: [:])) }
        return span
    }

    static func name(_ command: PaymentSessionMachine.Command) -> String {
        switch command {
        case .attempt(let i): return "attempt \(i.paymentMethod)"
        case .abort: return "abort"
        case .retry: return "retry"
        case .fallback: return "fallback"
        case .threeDSecureResult: return "3ds"
        case .threeDSecureLoadFailed: return "3ds load failed"
        case .threeDSecureMethodResult(let completed): return "3ds method \(completed ? "completed" : "failed")"
        case .instrumentMode(let method): return "instrument mode \(method)"
        case .walletResult(let payload): return payload == nil ? "wallet canceled" : "wallet payload"
        case .appLaunchFailed: return "app launch failed"
        }
    }

    /// Registers a subscriber and sends it the frames it missed after `since`.
    /// Later pushes reach it live; between the two there is no gap and no repeat.
    /// The missed frames are queued for the connection here, inside the actor,
    /// so no live push can overtake them.
    func subscribe(_ connection: UInt64, since: Int64) async {
        guard wake() else {
            await environment.readBack(id)?.subscribe(connection, since: since)
            return
        }
        attach(connection, since: since)
    }

    /// A subscriber of this session, awake.
    @inline(never)
    private func attach(_ connection: UInt64, since: Int64) {
        if !started, pushes.isEmpty, since > seq {
            // Created here but driven by another node until now (it failed): the client has
            // seen up to `since` there. Continue after it, as a node picking the session up does.
            seq = since
            handedUpTo = since
            sentUpTo.store(since, ordering: .releasing)
            machine = PaymentSessionMachine(restoring: machine.sessionURL, phase: .starting, history: ["PaymentSessionFetched"],
                                            setup: machine.setup)
        }
        start()
        subscribers.insert(connection)
        // What is already with the edge goes at once. The rest is still on its way to the disk: the
        // frames handed on before this connection came do not include it, so its own share follows
        // them through the event log, in order, once committed.
        let sent = sentUpTo.load(ordering: .acquiring)
        for push in pushes(after: since, through: sent) {
            environment.send(push.text, to: connection, stamp: nil)
        }
        let from = max(since, sent)
        guard handedUpTo > from else { return }
        let missed = pushes(after: from, through: handedUpTo)
        environment.afterCommit { [environment] _ in
            for push in missed { environment.send(push.text, to: connection, stamp: nil) }
        }
    }

    func unsubscribe(_ connection: UInt64) { subscribers.remove(connection) }

    /// The pushes numbered after `after` up to and including `through`, in order.
    private func pushes(after: Int64, through: Int64) -> [SequencedPush] {
        pushes.filter { $0.seq > after && $0.seq <= through }
    }

    func snapshot() -> JSONValue {
        start()
        return snapshotNow()
    }

    private func snapshotNow() -> JSONValue {
        ["id": .string(id), "state": .string(machine.phase.rawValue), "seq": .number(Double(sentUpTo.load(ordering: .acquiring))),
         "availableInstruments": .array(machine.availableInstruments), "lastProblem": machine.lastProblem ?? .null]
    }

    // MARK: Effects

    /// The session's event-logging href: top level, never a `next` candidate, and kept once seen
    /// (the answer that ends the session may no longer list it, yet the end is reported too).
    /// Checked against the allowed upstream when it is first seen or changes; one off it is not
    /// kept (no beacon goes there), so it is checked again with the next answer that lists it.
    private var eventLoggingHref: SwedbankPayClient.EventLoggingHref?

    private var beaconTarget: SwedbankPayClient.BeaconTarget? {
        eventLoggingHref.map { .init(href: $0, device: machine.device) }
    }

    /// `cause`: the span of what led to these effects (the session's start, a command, an upstream
    /// call's outcome); the spans of the effects go below it. Not `async`: a step has no suspension
    /// point, so no other call on the actor comes between its effects, and its locals stay on the
    /// thread's stack rather than in the task's slabs (each past the first is a `malloc`).
    private func run(_ effects: [PaymentSessionMachine.Effect], cause: ServiceContext) {
        if let op = machine.output?.operations.first(where: { $0.rel == OperationRel.eventLogging.rawValue }), op.href != eventLoggingHref?.href {
            eventLoggingHref = environment.eventLogging(op.href)
        }
        var fresh = false
        for effect in effects {
            switch effect {
            case .push(let event):
                seq += 1
                let (atMs, at) = environment.pushTime()
                let push = SequencedPush(seq: seq, type: event.type.rawValue, at: at, data: event.data, session: id, madeAt: .now)
                let problemType = event.type.isProblem ? event.data["problem"]?["type"]?.stringValue : nil
                environment.pushed(type: event.type.rawValue, problemType: problemType)
                pushes.append(push)
                if environment.telemetry.isOn {
                    pushSpans[push.seq] = pushSpan(type: event.type.rawValue, seq: push.seq, problemType: problemType, cause: cause)
                }
                environment.record(LogEvent(atMs: atMs, sessionID: id, seq: push.seq, kind: "push.sent",
                                                       level: event.type.isProblem ? .warning : .info,
                                                       summary: event.type.rawValue, traceID: traceID, data: event.data))
                if let problemType { environment.update(.init(id: id, lastProblemType: problemType)) }
                if let target = beaconTarget {
                    environment.beacon(ClientEvent(.sdkCallbackInvoked, atMs: atMs, methodName: event.type.rawValue), to: target)
                    if event.type == .launchClientApp { environment.beacon(ClientEvent(.launchClientApp, atMs: atMs), to: target) }
                }
                fresh = true
            case .call(let call):
                Task { [environment, id, traceID, beaconTarget] in
                    let (outcome, span) = await environment.perform(call, sessionID: id, traceID: traceID, beacon: beaconTarget, parent: cause)
                    await self.deliver(outcome, for: call, cause: span)
                }
            case .schedulePoll(let afterMs, let generation):
                Task {
                    try? await Task.sleep(for: .milliseconds(afterMs))
                    await self.poll(generation)
                }
            }
        }
        recordPhase()
        if fresh { sendWhenCommitted(cause: cause) }
        noteQuiet()
    }

    /// A push's span, a producer's in OpenTelemetry's messaging terms: from the state change until
    /// the edge has the frame, so the commit it waits for is inside it. A problem push is marked failed.
    private func pushSpan(type: String, seq: Int64, problemType: String?, cause: ServiceContext) -> any Span {
        let telemetry = environment.telemetry
        let span = telemetry.span("push \(type)", kind: .producer, parent: cause)
        span.updateAttributes { a in
            a["messaging.system"] = "kassa"
            a["messaging.operation.type"] = "send"
            a["messaging.destination.name"] = "session stream"
            a["messaging.message.id"] = "\(seq)"
            a["kassa.session.id"] = id
            a["kassa.push.type"] = type
            a["kassa.push.seq"] = Int(seq)
        }
        if let problemType { span.failed(problemType) }
        return span
    }

    // MARK: Leaving memory while the payer is away

    /// Marks the session busy unless the registry has already dropped it (then false: the caller
    /// must use the session read back from the store). The compare-and-exchange makes the sweep's
    /// claim and this exclusive: a session is either dropped or woken, never both.
    private func wake() -> Bool {
        var seen = quietSinceMs.load(ordering: .acquiring)
        while seen != Self.leftMemory {
            let (done, now) = quietSinceMs.compareExchange(expected: seen, desired: 0, ordering: .acquiringAndReleasing)
            if done { return true }
            seen = now
        }
        return false
    }

    /// After each step: quiet from now if it waits for the payer with no call in flight, busy otherwise.
    private func noteQuiet() {
        let quiet = machine.callInFlight == nil && (machine.phase == .awaitingInstrument || machine.phase == .failed)
        let seen = quietSinceMs.load(ordering: .acquiring)
        guard seen != Self.leftMemory, quiet == (seen == 0) else { return }
        _ = quietSinceMs.compareExchange(expected: seen, desired: quiet ? environment.nowMs() : 0, ordering: .acquiringAndReleasing)
    }

    private func deliver(_ outcome: SessionCallOutcome, for call: SessionCall, cause: ServiceContext) {
        switch outcome {
        case .output(let output): run(machine.received(output, for: call), cause: cause)
        case .conflict(let problem): run(machine.conflict(call, problem: problem), cause: cause)
        case .refused(let status, let problem, let reason):
            run(machine.failed(call, reason: reason, status: status, upstreamProblem: problem), cause: cause)
        case .failed(let reason): run(machine.failed(call, reason: reason), cause: cause)
        }
    }

    private func poll(_ generation: Int) {
        run(machine.pollDue(generation), cause: pollParent)
    }

    private func recordPhase() {
        let phase = machine.phase
        guard phase != lastPhase else { return }
        let from = lastPhase
        lastPhase = phase
        if phase.isTerminal { endedAtMs.store(environment.nowMs(), ordering: .relaxed) }
        environment.record(LogEvent(atMs: environment.nowMs(), sessionID: id, kind: "state.transition",
                                               summary: "\(from.rawValue) → \(phase.rawValue)", traceID: traceID,
                                               data: ["from": .string(from.rawValue), "to": .string(phase.rawValue)]))
        environment.phaseChanged(id: id, traceID: traceID, root: root, from: from, to: phase)
    }

    /// Hands the pushes not yet handed on to the event log, which gives them to the edge for the
    /// current subscribers as soon as they are committed: on its writer thread, in order, with no
    /// hop back through this actor or the Swift pool.
    private func sendWhenCommitted(cause: ServiceContext) {
        let target = seq
        guard target > handedUpTo else { return }
        let ready = pushes(after: handedUpTo, through: target)
        handedUpTo = target
        let telemetry = environment.telemetry
        let commit = telemetry.span("event-log commit", kind: .client, parent: cause)
        if telemetry.isOn {
            commit.updateAttributes { a in
                a["db.system.name"] = "sqlite"
                a["db.operation.name"] = "COMMIT"
                a["kassa.session.id"] = id
                a["kassa.push.seq"] = Int(target)
            }
        }
        let spans = ready.compactMap { pushSpans.removeValue(forKey: $0.seq) }
        let connections = subscribers
        environment.afterCommit { [environment, self] _ in
            commit.end()
            // Counted as sent before the frames go, so a client that has read a frame and then asks
            // for the snapshot never finds a `seq` behind it.
            self.sentUpTo.store(target, ordering: .releasing)
            let committed = ContinuousClock.now
            for push in ready {
                if let made = push.madeAt { environment.pushCommitted(after: made.duration(to: committed)) }
                for connection in connections { environment.send(push.text, to: connection, stamp: push.madeAt) }
            }
            for span in spans { span.end() }
        }
    }
}
