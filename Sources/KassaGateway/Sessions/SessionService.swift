import Foundation
import KassaCore
import KassaEdge
import KassaStore
import Logging
import Synchronization
import Tracing

/// What a `SessionActor` needs from outside: upstream calls, the event log, the
/// connections it pushes to, and the node's bookkeeping. Narrow on purpose: the actor
/// knows nothing of routes, handlers or other sessions.
protocol SessionEnvironment: AnyObject, Sendable {
    /// One upstream call, with the retry policy applied; and the call's span, which its outcome's work goes below.
    func perform(_ call: SessionCall, sessionID: String, traceID: String, beacon: SwedbankPayClient.BeaconTarget?,
                 parent: ServiceContext) async -> (outcome: SessionCallOutcome, span: ServiceContext)
    /// Reports what Kassa did in the client's place to Swedbank Pay's event-logging, best effort.
    func beacon(_ event: ClientEvent, to target: SwedbankPayClient.BeaconTarget)
    /// An event-logging href the session's beacons may go to; nil when it is off the allowed upstream.
    func eventLogging(_ href: String) -> SwedbankPayClient.EventLoggingHref?
    /// Appends to the event log (written in the next batch).
    func record(_ event: LogEvent)
    func update(_ change: EventLog.SessionUpdate)
    /// Runs `action` once everything recorded so far is committed (on the event log's writer
    /// thread, in the order given; see `EventLog.afterCommit`).
    func afterCommit(_ action: @escaping @Sendable (Bool) -> Void)
    /// Queues a frame for a stream's connection.
    func send(_ frame: [UInt8], to connection: UInt64, stamp: ContinuousClock.Instant?)
    func phaseChanged(id: String, traceID: String, root: ServiceContext, from: PaymentSessionMachine.Phase?, to: PaymentSessionMachine.Phase)
    func pushed(type: String, problemType: String?)
    /// A push was committed and handed to the edge `wait` after it was made.
    func pushCommitted(after wait: Duration)
    /// The session as the store has it, for an actor that was dropped from memory after it was found.
    func readBack(_ id: String) -> SessionActor?
    func nowMs() -> Int64
    /// When a push is made: the event log's millisecond, and the frame's `at` (to the microsecond
    /// with `pushStampsInMicroseconds`).
    func pushTime() -> (ms: Int64, at: String)
    var telemetry: Telemetry { get }
}

/// The sessions this node holds: creating them, finding them in memory or reading them
/// back from the store, adopting another node's, recovering after a restart, and letting
/// them leave memory. Also carries out each session stream's ordered inbox.
final class SessionService: SessionEnvironment {
    let configuration: GatewayConfiguration
    let store: Store
    let registry = SessionRegistry()
    let tokenKeys: TokenKeys
    let swedbankPay: SwedbankPayClient
    let metrics: KassaMetrics
    let clock: any WallClock
    let telemetry: Telemetry
    let logger: Logger
    private let edgeReference = Mutex<EdgeServer?>(nil)
    /// Session streams by connection, each with its ordered inbox.
    let streamInboxes = Mutex<[UInt64: StreamInbox]>([:])

    init(configuration: GatewayConfiguration, store: Store, tokenKeys: TokenKeys, swedbankPay: SwedbankPayClient,
         metrics: KassaMetrics, clock: any WallClock, telemetry: Telemetry, logger: Logger) {
        self.configuration = configuration
        self.telemetry = telemetry
        self.clock = clock
        self.store = store
        self.tokenKeys = tokenKeys
        self.swedbankPay = swedbankPay
        self.metrics = metrics
        self.logger = logger
    }

    func attach(_ edge: EdgeServer) { edgeReference.withLock { $0 = edge } }
    var edge: EdgeServer? { edgeReference.withLock { $0 } }

    /// The session if this node holds it in memory (no store access).
    func held(_ id: String) -> SessionActor? { registry.session(id) }
    var count: Int { registry.count }

    // MARK: Create

    /// A new session for a view-paymentsession `href`; returns it with its client token.
    /// `id` comes from `newID()`, made before the payment order so its events carry it too.
    /// `root`: the span of the request that creates it, the root of the session's spans.
    func create(id: String, href: String, payeeReference: String?, paymentOrderID: String?, device: ClientDevice?,
                publicBase: String?, traceID: String, root: ServiceContext) async throws -> (SessionActor, String) {
        let (record, token) = newRecord(id: id, href: href, payeeReference: payeeReference, paymentOrderID: paymentOrderID,
                                        device: device, publicBase: publicBase, traceID: traceID, root: root)
        try await store.insertSession(record)
        return (started(record, href: href, device: device, traceID: traceID, root: root), token)
    }

    // The steps before and after the row's insert are plain functions, as in `SwedbankPayClient.send`.

    /// A new session's row and its client token.
    @inline(never)
    private func newRecord(id: String, href: String, payeeReference: String?, paymentOrderID: String?, device: ClientDevice?,
                           publicBase: String?, traceID: String, root: ServiceContext) -> (Store.SessionRecord, String) {
        let now = nowMs()
        let token = SessionToken.issue(sessionID: id, href: href, expiresAt: tokenExpiry(createdAtMs: now),
                                       device: device, publicBase: publicBase, keys: tokenKeys)
        let record = Store.SessionRecord(id: id, clientTokenSHA256: Hashing.sha256Hex(token), viewHref: sealed(href: href, id: id),
                                         payeeReference: payeeReference,
                                         paymentOrderID: paymentOrderID, phase: PaymentSessionMachine.Phase.starting.rawValue,
                                         createdAtMs: now, updatedAtMs: now, traceID: traceID,
                                         clientDeviceSealed: sealed(device), publicBaseURL: publicBase,
                                         rootSpanID: telemetry.ids(root)?.spanID)
        return (record, token)
    }

    /// The stored session's actor, registered, its creation logged.
    @inline(never)
    private func started(_ record: Store.SessionRecord, href: String, device: ClientDevice?, traceID: String,
                         root: ServiceContext) -> SessionActor {
        let id = record.id
        let machine = PaymentSessionMachine(sessionURL: href, setup: setup(id: id, device: device, publicBase: record.publicBaseURL))
        let actor = SessionActor(id: id, clientTokenSHA256: record.clientTokenSHA256, traceID: traceID, root: root, machine: machine,
                                 history: [], environment: self)
        registry.add(actor)
        // Only the platform is logged: the rest describes the payer's device.
        self.record(LogEvent(atMs: record.createdAtMs, sessionID: id, kind: "session.created", summary: "session created", traceID: traceID,
                        data: ["payeeReference": record.payeeReference.map { .string($0) } ?? .null,
                               "paymentOrder": record.paymentOrderID.map { .string($0) } ?? .null,
                               "platform": .string(machine.device.platform.rawValue),
                               "clientDevice": .bool(device != nil),
                               "viewPaymentSession": .string(href)]))
        return actor
    }

    /// 32 hex digits: the creation time in milliseconds (10 digits), then 88 random bits.
    /// Time-ordered ids keep the event log's session index appending where the active
    /// sessions are, instead of touching pages all over it (see bench/RESULTS.md).
    func newID() -> String { Self.newSessionID(nowMs: nowMs()) }

    static func newSessionID(nowMs: Int64) -> String { Secrets.timeOrderedHex(nowMs: nowMs, randomBytes: 11) }

    // MARK: Find

    /// A session held here, or one this node stored before (after a restart or eviction).
    /// Reads the store: never call it on the edge's service thread.
    func session(_ id: String) -> SessionActor? {
        if let actor = registry.session(id) { return actor }
        guard PaymentURLHelper.isSafeID(id), let record = try? store.session(id: id) else { return nil }
        let restored = restore(record)
        let actor = registry.add(restored)
        if actor === restored, restored.initialPhaseIsTerminal {
            // Read back only to be shown: it leaves memory again like any ended session.
            registry.ended(id, dueMs: nowMs() + Int64(configuration.endedSessionMemorySeconds * 1000))
        } else if actor === restored {
            self.record(LogEvent(atMs: nowMs(), sessionID: id, kind: "session.restored",
                            summary: "read back from the store in \(record.phase); re-read upstream when next used", traceID: actor.traceID))
        }
        return actor
    }

    /// `href`: the record's view-paymentsession, when the caller has already opened it.
    /// `how`: why it is read back (`read back`, `recovered`), as its spans say.
    private func restore(_ record: Store.SessionRecord, href: String? = nil, how: String = "read back") -> SessionActor {
        let logged = (try? store.eventLog.pushedEvents(sessionID: record.id, afterSeq: 0)) ?? []
        let history = logged.map {
            SequencedPush(seq: $0.seq ?? 0, type: $0.summary, at: Timestamp.iso8601(ms: $0.atMs), data: $0.data ?? .object([:]), session: record.id)
        }
        let phase = PaymentSessionMachine.Phase(rawValue: record.phase) ?? .starting
        let machine = PaymentSessionMachine(restoring: href ?? storedHref(record), phase: phase, history: logged.map(\.summary),
                                            setup: setup(id: record.id, device: storedDevice(record), publicBase: record.publicBaseURL))
        let traceID = record.traceID ?? TraceContext.newTraceID()
        return SessionActor(id: record.id, clientTokenSHA256: record.clientTokenSHA256,
                            traceID: traceID, root: continuedRoot(record.id, traceID: traceID, rootSpanID: record.rootSpanID, how: how),
                            machine: machine, history: history, endedAtMs: record.updatedAtMs, environment: self)
    }

    /// The root of a session's later spans once it was read back from the store: a span in its
    /// trace, below the request that created it, saying how it came back.
    private func continuedRoot(_ id: String, traceID: String, rootSpanID: String?, how: String) -> ServiceContext {
        guard telemetry.isOn else { return .topLevel }
        let span = telemetry.span("session \(how)", parent: telemetry.remoteParent(traceID: traceID, spanID: rootSpanID))
        span.attributes["kassa.session.id"] = id
        span.end()
        return span.context
    }

    static let devicePurpose = "session client device"

    /// A session's fixed setup: its client's device, its notification URL, and the configured timings.
    func setup(id: String, device: ClientDevice?, publicBase: String?) -> PaymentSessionMachine.Setup {
        .init(device: device ?? ClientDevice(), notificationURL: notificationURL(id: id, publicBase: publicBase),
              pollIntervalMs: configuration.sessionPollIntervalMs, methodTimeoutMs: configuration.threeDSMethodTimeoutMs,
              applePayMerchantID: configuration.applePayMerchantID)
    }

    /// Where the issuer posts a session's cRes: `<public base>/v1/sessions/<id>/3ds/notification/<tag>`,
    /// the tag a MAC of the id, so only the URL Kassa gave upstream is taken. Nil without a public base.
    func notificationURL(id: String, publicBase: String?) -> String? {
        guard let base = publicBase, !base.isEmpty else { return nil }
        return base + "/v1/sessions/\(id)/3ds/notification/" + tokenKeys.tag(Self.notificationPurpose + id)
    }

    static let notificationPurpose = "3-D Secure notification for session "

    /// A client's device as the session row keeps it: sealed, since it can single out a person.
    func sealed(_ device: ClientDevice?) -> String? {
        device.map { tokenKeys.seal($0.json.bytes, purpose: Self.devicePurpose) }
    }

    /// A session's upstream URL as its row keeps it: sealed, since its path is the
    /// PaymentSession's bearer token upstream. Bound to the session's id.
    func sealed(href: String, id: String) -> String {
        tokenKeys.seal(Array(href.utf8), purpose: Self.hrefPurpose + id)
    }

    static let hrefPurpose = "session upstream href "

    /// The upstream URL of a stored session (rows written before it was sealed hold it plain).
    func storedHref(_ record: Store.SessionRecord) -> String {
        if record.viewHref.hasPrefix("http") { return record.viewHref }
        return tokenKeys.open(record.viewHref, purpose: Self.hrefPurpose + record.id).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// When the client token of a session created at `createdAtMs` expires, in seconds since 1970.
    func tokenExpiry(createdAtMs: Int64) -> Int64 {
        (createdAtMs + 999) / 1000 + Int64(configuration.clientTokenMaxAgeSeconds)
    }

    /// A new client token for a stored session, with the expiry its first one had: what an
    /// idempotent replay of its creation answers (the first token is never stored).
    func reissuedToken(sessionID id: String) -> String? {
        guard let record = try? store.session(id: id) else { return nil }
        let href = storedHref(record)
        guard !href.isEmpty else { return nil }
        return SessionToken.issue(sessionID: id, href: href, expiresAt: tokenExpiry(createdAtMs: record.createdAtMs), device: record.clientDeviceSealed == nil ? nil : storedDevice(record),
                                  publicBase: record.publicBaseURL, keys: tokenKeys)
    }

    /// The device a stored session was created with; the defaults if it had none
    /// (or its key was rotated away).
    func storedDevice(_ record: Store.SessionRecord) -> ClientDevice {
        guard let sealed = record.clientDeviceSealed, let plain = tokenKeys.open(sealed, purpose: Self.devicePurpose),
              let json = try? JSONValue.parse(plain), let device = try? ClientDevice.parse(json).get() else { return ClientDevice() }
        return device
    }

    /// A session this node has never held, vouched for by its client token (sealed with the
    /// cluster secret): another node created it. It is picked up from upstream, which is the
    /// source of truth, and its pushes continue after `since`, the last seq the client saw.
    func adopt(_ id: String, token: String?, since: Int64) -> SessionActor? {
        let now = nowMs()
        guard let token, let claim = SessionToken.open(token, keys: tokenKeys), claim.sessionID == id, claim.expiresAt > now / 1000,
              PaymentURLHelper.isSafeID(id), swedbankPay.isAllowed(claim.href) else { return nil }
        // A new trace: the creating node's is not known here.
        let adopted = telemetry.span("session adopted", parent: .topLevel)
        adopted.attributes["kassa.session.id"] = id
        adopted.end()
        let root = adopted.context
        let traceID = telemetry.ids(root)?.traceID ?? TraceContext.newTraceID()
        let record = Store.SessionRecord(id: id, clientTokenSHA256: Hashing.sha256Hex(token), viewHref: sealed(href: claim.href, id: id),
                                         payeeReference: nil,
                                         paymentOrderID: nil, phase: PaymentSessionMachine.Phase.starting.rawValue,
                                         createdAtMs: now, updatedAtMs: now, traceID: traceID,
                                         clientDeviceSealed: sealed(claim.device), publicBaseURL: claim.publicBase,
                                         rootSpanID: telemetry.ids(root)?.spanID)
        do { try store.insertSessionNow(record) } catch { return registry.session(id) }
        let machine = PaymentSessionMachine(restoring: claim.href, phase: .starting,
                                            history: since > 0 ? ["PaymentSessionFetched"] : [],
                                            setup: setup(id: id, device: claim.device, publicBase: claim.publicBase))
        let candidate = SessionActor(id: id, clientTokenSHA256: record.clientTokenSHA256, traceID: traceID, root: root, machine: machine,
                                     history: [], seqBase: since, environment: self)
        let actor = registry.add(candidate)
        guard actor === candidate else { return actor }
        self.record(LogEvent(atMs: now, sessionID: id, kind: "session.adopted",
                        summary: "picked up from another node, continuing after seq \(since)", traceID: traceID))
        let metadata: Logger.Metadata = ["session_id": "\(id)", "trace_id": "\(traceID)", "since": "\(since)"]
        logger.info("session adopted", metadata: metadata.merging(telemetry.logMetadata(root)) { $1 })
        Task { await actor.start() }
        return actor
    }

    /// Picks up the sessions a previous run left unfinished and re-reads them upstream.
    func recover() {
        _ = try? store.sealPlainViewHrefs { href, id in sealed(href: href, id: id) }
        guard let records = try? store.unfinishedSessions() else { return }
        for record in records where registry.session(record.id) == nil {
            let href = storedHref(record)
            guard swedbankPay.isAllowed(href) else {
                // Its URL is on no allowed upstream origin (the configuration changed, or it never
                // was): calling it again after every restart would only fail, so the session ends here.
                store.eventLog.update(.init(id: record.id, phase: PaymentSessionMachine.Phase.ended.rawValue, atMs: nowMs()))
                self.record(LogEvent(atMs: nowMs(), sessionID: record.id, kind: "session.abandoned", level: .warning,
                                     summary: "not picked up after restart: its upstream URL is on no allowed upstream origin"))
                continue
            }
            let actor = restore(record, href: href, how: "recovered")
            registry.add(actor)
            self.record(LogEvent(atMs: nowMs(), sessionID: record.id, kind: "session.recovered",
                                 summary: "picked up after restart in \(record.phase)"))
            Task { await actor.start() }
        }
    }

    // MARK: Client tokens

    /// Nil when `token` is this session's client token; else the problem saying what is wrong with it.
    /// A token lapses a while after its session ended, and at the latest `clientTokenMaxAgeSeconds`
    /// after it was made.
    func tokenRefusal(_ token: String?, _ actor: SessionActor?) -> Problem? {
        let now = nowMs()
        let nowSeconds = now / 1000
        if let actor, SessionRegistry.tokenMatches(token, actor, keys: tokenKeys, nowSeconds: nowSeconds) {
            let endedAt = actor.endedAtMs.load(ordering: .relaxed)
            let lapsesAt = endedAt + Int64(configuration.clientTokenAfterEndSeconds) * 1000
            guard endedAt > 0, now >= lapsesAt else { return nil }
            metrics.clientTokenRefused(reason: "expired")
            return Self.tokenExpired("this client token expired at \(Timestamp.iso8601(ms: lapsesAt)), "
                                     + "\(configuration.clientTokenAfterEndSeconds) s after its session ended; the outcome is final")
        }
        if let token, let header = SessionToken.header(token), header.expiresAt <= nowSeconds {
            metrics.clientTokenRefused(reason: "expired")
            return Self.tokenExpired("this client token expired at \(Timestamp.iso8601(ms: header.expiresAt * 1000)), "
                                     + "\(configuration.clientTokenMaxAgeSeconds) s after its session was created; create a new session")
        }
        metrics.clientTokenRefused(reason: token == nil ? "missing" : "invalid")
        return .unauthorized("this session's client token is required (Authorization: Bearer, or ?token=)")
    }

    /// A 401 a client can tell from a wrong token: retrying cannot help, only a new session.
    static func tokenExpired(_ detail: String) -> Problem {
        .kassa("token-expired", "Unauthorized", 401, detail: detail)
    }

    // MARK: Leaving memory

    /// Drops ended sessions that are due and, with `waiting`, sessions the payer has left
    /// waiting too long (see `GatewayConfiguration`); their rows and events stay in the store.
    func evict(nowMs: Int64, waiting: Bool) async {
        var gone = registry.evictEnded(nowMs: nowMs)
        if waiting { gone += registry.evictQuiet(quietBeforeMs: nowMs - Int64(configuration.waitingSessionMemorySeconds * 1000)) }
        for actor in gone { metrics.sessionState(from: await actor.phase.rawValue, to: nil) }
    }

    // MARK: SessionEnvironment

    func perform(_ call: SessionCall, sessionID: String, traceID: String, beacon: SwedbankPayClient.BeaconTarget?,
                 parent: ServiceContext) async -> (outcome: SessionCallOutcome, span: ServiceContext) {
        await swedbankPay.perform(call, sessionID: sessionID, traceID: traceID, beacon: beacon, parent: parent)
    }

    func beacon(_ event: ClientEvent, to target: SwedbankPayClient.BeaconTarget) { swedbankPay.postBeacon(event, to: target) }
    func eventLogging(_ href: String) -> SwedbankPayClient.EventLoggingHref? { swedbankPay.eventLogging(href) }

    func record(_ event: LogEvent) { store.eventLog.append(event) }

    func update(_ change: EventLog.SessionUpdate) { store.eventLog.update(change) }

    func afterCommit(_ action: @escaping @Sendable (Bool) -> Void) { store.eventLog.afterCommit(action) }

    func send(_ frame: [UInt8], to connection: UInt64, stamp: ContinuousClock.Instant?) {
        edge?.send(connection, bytes: frame, stamp: stamp)
    }

    func phaseChanged(id: String, traceID: String, root: ServiceContext, from: PaymentSessionMachine.Phase?, to phase: PaymentSessionMachine.Phase) {
        metrics.sessionState(from: from?.rawValue, to: phase.rawValue)
        let now = nowMs()
        store.eventLog.update(.init(id: id, phase: phase.rawValue, atMs: now))
        if phase.isTerminal { registry.ended(id, dueMs: now + Int64(configuration.endedSessionMemorySeconds * 1000)) }
        // A session's end or failure is an info line; the phases on the way are debug lines, like
        // the access log's (each is a `state.transition` event in the log support reads): three
        // info lines a payment were most of the standard output at load.
        let level: Logger.Level = phase.isTerminal || phase == .failed ? .info : .debug
        if let from, logger.logLevel <= level {
            let metadata: Logger.Metadata = ["session_id": "\(id)", "trace_id": "\(traceID)", "from": "\(from.rawValue)", "to": "\(phase.rawValue)"]
            logger.log(level: level, "session \(phase.rawValue)", metadata: metadata.merging(telemetry.logMetadata(root)) { $1 })
        }
    }

    func pushCommitted(after wait: Duration) { metrics.pushCommitted(after: wait) }

    func pushed(type: String, problemType: String?) {
        metrics.pushed(type: type)
        if let problemType { metrics.problem(type: problemType) }
    }

    func readBack(_ id: String) -> SessionActor? { session(id) }

    func nowMs() -> Int64 { clock.nowMs() }
    func pushTime() -> (ms: Int64, at: String) {
        guard configuration.pushStampsInMicroseconds else {
            let ms = clock.nowMs()
            return (ms, Timestamp.iso8601(ms: ms))
        }
        let us = clock.nowUs()
        return (Timestamp.milliseconds(fromMicroseconds: us), Timestamp.iso8601(us: us))
    }
}

/// The event log's event (swift-log has a type of the same name).
typealias LogEvent = KassaCore.LogEvent
