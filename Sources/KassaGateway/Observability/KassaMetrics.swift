import CoreMetrics
import Foundation
import KassaCore
import KassaStore
import Metrics
import Prometheus
import Synchronization

/// Kassa's metrics: recorded through the swift-metrics API, kept in a
/// swift-prometheus registry per node, served at `/metrics`. Every metric is
/// declared in `catalogue` with its help text (promtool requires one) and its
/// labels, which are all bounded: never a session id.
public final class KassaMetrics: Sendable {
    public enum Kind: Sendable { case counter, gauge, histogram(seconds: Bool) }

    public struct Metric: Sendable {
        public let name: String
        public let kind: Kind
        public let help: String
        public let labels: [String]
        /// A duration histogram's bucket bounds in seconds; nil: the common ones (`Factory.durationBuckets`).
        public let buckets: [Double]?

        init(name: String, kind: Kind, help: String, labels: [String], buckets: [Double]? = nil) {
            (self.name, self.kind, self.help, self.labels, self.buckets) = (name, kind, help, labels, buckets)
        }
    }

    /// A push's target is a p99 of a few ms: its histograms' buckets are finer there.
    static let pushBuckets: [Double] = [0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01,
                                        0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// Every metric the gateway exports.
    public static let catalogue: [Metric] = [
        Metric(name: "kassa_http_requests_total", kind: .counter, help: "HTTP requests answered, by route and status.", labels: ["route", "status"]),
        Metric(name: "kassa_http_request_duration_seconds", kind: .histogram(seconds: true), help: "Time to answer an HTTP request, by route.", labels: ["route"]),
        Metric(name: "kassa_websocket_connections", kind: .gauge, help: "WebSockets open now.", labels: []),
        Metric(name: "kassa_websocket_opened_total", kind: .counter, help: "WebSockets opened.", labels: []),
        Metric(name: "kassa_websocket_closed_total", kind: .counter, help: "WebSockets closed, by close code.", labels: ["code"]),
        Metric(name: "kassa_sessions", kind: .gauge, help: "PaymentSessions held by this node, by state.", labels: ["state"]),
        Metric(name: "kassa_pushes_total", kind: .counter, help: "Events pushed to session streams, by type.", labels: ["type"]),
        Metric(name: "kassa_push_latency_seconds", kind: .histogram(seconds: true), help: "From a session's state change to its frame written to the client.", labels: [],
               buckets: pushBuckets),
        // The first part of that latency, once a push: a slow push is the disk's when this is slow too, else the edge's or the CPU's.
        Metric(name: "kassa_push_commit_wait_seconds", kind: .histogram(seconds: true),
               help: "From a session's state change to its push committed to the event log and handed to the edge.", labels: [],
               buckets: pushBuckets),
        Metric(name: "kassa_upstream_requests_total", kind: .counter, help: "Calls to Swedbank Pay, by operation and status (error: no response).", labels: ["operation", "status"]),
        Metric(name: "kassa_upstream_request_duration_seconds", kind: .histogram(seconds: true), help: "Time of a call to Swedbank Pay, by operation.", labels: ["operation"]),
        Metric(name: "kassa_upstream_retries_total", kind: .counter, help: "Upstream calls retried, by operation.", labels: ["operation"]),
        Metric(name: "kassa_upstream_waiting", kind: .gauge, help: "Upstream calls waiting now for a connection (all --upstream-connections busy).", labels: []),
        Metric(name: "kassa_upstream_waits_total", kind: .counter, help: "Upstream calls that had to wait for a connection.", labels: []),
        Metric(name: "kassa_upstream_circuit_open", kind: .gauge, help: "1 while the circuit breaker for an upstream origin is open.", labels: ["origin"]),
        Metric(name: "kassa_eventlog_batch_size", kind: .histogram(seconds: false), help: "Events per event-log transaction.", labels: []),
        Metric(name: "kassa_eventlog_write_seconds", kind: .histogram(seconds: true), help: "Time to commit one event-log transaction.", labels: []),
        Metric(name: "kassa_eventlog_wal_restart_seconds", kind: .histogram(seconds: true),
               help: "Time the event log's commits were held while the WAL's last frames were copied back, so that the next commit starts it over.", labels: []),
        Metric(name: "kassa_eventlog_queue_depth", kind: .gauge, help: "Events queued for the event log, not yet committed.", labels: []),
        Metric(name: "kassa_eventlog_write_errors_total", kind: .counter, help: "Event-log transactions that failed (kept and retried).", labels: []),
        Metric(name: "kassa_auth_failures_total", kind: .counter, help: "Credentials refused (401), on every door.", labels: []),
        Metric(name: "kassa_client_tokens_refused_total", kind: .counter, help: "Client tokens refused, by reason (missing, invalid, expired).", labels: ["reason"]),
        Metric(name: "kassa_cors_refused_total", kind: .counter, help: "Browser requests and stream upgrades refused for their Origin.", labels: []),
        Metric(name: "kassa_rate_limited_total", kind: .counter, help: "Requests and upgrades answered 429, by reason (address, key, auth-address, auth-credential).", labels: ["reason"]),
        Metric(name: "kassa_connections_refused_total", kind: .counter, help: "Connections closed on arrival by the per-address caps.", labels: []),
        Metric(name: "kassa_half_open_evicted_total", kind: .counter, help: "Half-open connections closed to make room at the half-open cap.", labels: []),
        Metric(name: "kassa_slow_consumer_closes_total", kind: .counter, help: "WebSockets closed because their outbound queue passed its bound.", labels: []),
        Metric(name: "kassa_problems_total", kind: .counter, help: "Problems answered or pushed, by type.", labels: ["type"]),
        Metric(name: "kassa_process_resident_memory_bytes", kind: .gauge, help: "Resident memory of the process.", labels: []),
        Metric(name: "kassa_process_open_fds", kind: .gauge, help: "Open file descriptors of the process.", labels: []),
        Metric(name: "kassa_sqlite_memory_bytes", kind: .gauge, help: "Memory SQLite holds (its page caches, each bounded), part of the resident memory.", labels: []),
        Metric(name: "kassa_thread_cpu_seconds_total", kind: .counter,
               help: "CPU time of the process's threads, by thread (Kassa's by name, swift-pool: Swift's concurrency pool, other).", labels: ["thread"]),
        // A push waits for the writer and then the edge: a wait of theirs for a CPU is the push's wait.
        Metric(name: "kassa_thread_cpu_wait_seconds_total", kind: .counter,
               help: "Time the process's threads were runnable but waited for a CPU (a busy core, or CPU the host took), by thread.", labels: ["thread"]),
        // A read past a millisecond came from the disk; the event log's are inside a commit, so its pushes waited for them.
        Metric(name: "kassa_sqlite_read_seconds", kind: .histogram(seconds: true),
               help: "Time of one read of the database's file or its WAL, by the thread that made it (eventlog: the event log's writer, inside a commit; checkpoint; other).",
               labels: ["reader"], buckets: sqliteReadBuckets),
    ]

    /// From the kernel's page cache a read takes microseconds, from this kind of disk milliseconds.
    static let sqliteReadBuckets: [Double] = [0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

    public let registry = PrometheusCollectorRegistry()
    let factory: Factory
    private let sessionStates = Mutex<[String: Int]>([:])
    /// Handles by metric and label values, made once: recording on a hot path then skips building a
    /// descriptor and looking the series up in the registry.
    private let handles = Mutex<[HandleKey: any AnyObject & Sendable]>([:])

    /// A metric's name and its label values (no metric has more than two labels).
    private struct HandleKey: Hashable {
        let label: String
        let first: String?
        let second: String?
    }

    private struct HTTPSeriesKey: Hashable {
        let route: String
        let status: Int
    }
    private struct HTTPSeries: Sendable {
        let requests: CoreMetrics.Counter
        let duration: CoreMetrics.Timer
    }
    private let httpHandles = Mutex<[HTTPSeriesKey: HTTPSeries]>([:])

    /// A label's name and value.
    private typealias Dimension = (String, String)

    /// The handle of a series, made the first time. The labels come as at most two values, not an
    /// array: a lookup on a hot path (five upstream exchanges and four phases a flow) builds none.
    private func handle<Handle: AnyObject & Sendable>(_ label: String, _ first: Dimension?, _ second: Dimension?,
                                                     make: (String, [Dimension]) -> Handle) -> Handle {
        let key = HandleKey(label: label, first: first?.1, second: second?.1)
        return handles.withLock { handles in
            if let cached = handles[key] as? Handle { return cached }
            let made = make(label, [first, second].compactMap { $0 })
            handles[key] = made
            return made
        }
    }

    private func counter(_ label: String, _ first: Dimension? = nil, _ second: Dimension? = nil) -> CoreMetrics.Counter {
        handle(label, first, second) { CoreMetrics.Counter(label: $0, dimensions: $1, factory: factory) }
    }
    private func secondsCounter(_ label: String, _ first: Dimension) -> CoreMetrics.FloatingPointCounter {
        handle(label, first, nil) { CoreMetrics.FloatingPointCounter(label: $0, dimensions: $1, factory: factory) }
    }
    private func gauge(_ label: String, _ first: Dimension? = nil) -> CoreMetrics.Gauge {
        handle(label, first, nil) { CoreMetrics.Gauge(label: $0, dimensions: $1, factory: factory) }
    }
    private func timer(_ label: String, _ first: Dimension? = nil) -> CoreMetrics.Timer {
        handle(label, first, nil) { CoreMetrics.Timer(label: $0, dimensions: $1, factory: factory) }
    }
    private func recorder(_ label: String) -> CoreMetrics.Recorder {
        handle(label, nil, nil) { CoreMetrics.Recorder(label: $0, dimensions: $1, factory: factory) }
    }

    public init() {
        factory = Factory(registry: registry)
        // Every metric appears in the first scrape, so dashboards and alerts never see "no data".
        for metric in Self.catalogue where metric.labels.isEmpty {
            switch metric.kind {
            case .counter: counter(metric.name).increment(by: 0)
            case .gauge: gauge(metric.name).record(0)
            case .histogram: break
            }
        }
    }

    /// Series with labels that must exist before anything happens (alerts and panels read them).
    func prepare(upstreamOrigin: String) {
        circuit(origin: upstreamOrigin, open: false)
        for operation in Self.operations.sorted() {
            counter("kassa_upstream_retries_total", ("operation", operation)).increment(by: 0)
        }
        counter("kassa_auth_failures_total").increment(by: 0)
        counter("kassa_cors_refused_total").increment(by: 0)
        // Exported before the first restart (minutes into a busy day, never on a quiet one).
        _ = timer("kassa_eventlog_wal_restart_seconds")
        for reason in ["missing", "invalid", "expired"] {
            counter("kassa_client_tokens_refused_total", ("reason", reason)).increment(by: 0)
        }
        for reason in ["address", "key", "auth-address", "auth-credential"] {
            counter("kassa_rate_limited_total", ("reason", reason)).increment(by: 0)
        }
    }

    // MARK: Recording

    func httpRequest(route: String, status: Int, seconds: Double) {
        let series = httpSeries(route: route, status: status)
        series.requests.increment()
        series.duration.recordNanoseconds(Int64(seconds * 1e9))
    }

    /// A route's and status's two handles under one key of a name and a number: every request
    /// records here (on the edge thread for the answers it gives itself), and `handle` would make
    /// the status's text and hash each metric's name and label values, twice a request.
    private func httpSeries(route: String, status: Int) -> HTTPSeries {
        let key = HTTPSeriesKey(route: route, status: status)
        return httpHandles.withLock { series in
            if let known = series[key] { return known }
            // `counter` and `timer` take `handles`' lock inside this one; nothing takes them the other way round.
            let made = HTTPSeries(requests: counter("kassa_http_requests_total", ("route", route), ("status", String(status))),
                                  duration: timer("kassa_http_request_duration_seconds", ("route", route)))
            series[key] = made
            return made
        }
    }

    func webSocketOpened(open: Int) {
        counter("kassa_websocket_opened_total").increment()
        gauge("kassa_websocket_connections").record(open)
    }

    static let closeCodes: Set<UInt16> = [1000, 1001, 1002, 1003, 1006, 1007, 1008, 1009, 1011, 4008]

    func webSocketClosed(code: UInt16?, open: Int) {
        let label = code.map { Self.closeCodes.contains($0) ? String($0) : "other" } ?? "none"
        counter("kassa_websocket_closed_total", ("code", label)).increment()
        gauge("kassa_websocket_connections").record(open)
        if code == 4008 { counter("kassa_slow_consumer_closes_total").increment() }
    }

    /// `to` nil: the session left this node's memory.
    func sessionState(from: String?, to: String?) {
        // The two counts only: returning the table would copy it on the next change.
        let (left, entered) = sessionStates.withLock { states -> (Int?, Int?) in
            if let from { states[from, default: 0] -= 1 }
            if let to { states[to, default: 0] += 1 }
            return (from.flatMap { states[$0] }, to.flatMap { states[$0] })
        }
        if let from, let left { gauge("kassa_sessions", ("state", from)).record(left) }
        if let to, let entered { gauge("kassa_sessions", ("state", to)).record(entered) }
    }

    func pushed(type: String) {
        counter("kassa_pushes_total", ("type", PushType(rawValue: type) != nil ? type : "other")).increment()
    }

    func pushWritten(after latency: Duration) {
        timer("kassa_push_latency_seconds").record(duration: latency)
    }

    func pushCommitted(after wait: Duration) {
        timer("kassa_push_commit_wait_seconds").record(duration: wait)
    }

    func upstream(operation: String, status: Int?, seconds: Double) {
        let op = Self.boundedOperation(operation)
        counter("kassa_upstream_requests_total", ("operation", op), ("status", status.map(String.init) ?? "error")).increment()
        timer("kassa_upstream_request_duration_seconds", ("operation", op))
            .recordNanoseconds(Int64(seconds * 1e9))
    }

    /// Beacons posted to event-logging: sent (204), refused (another status), failed (no answer).
    func beacon(outcome: String) { counter("kassa_beacons_total", ("outcome", outcome)).increment() }

    func upstreamRetry(operation: String) {
        counter("kassa_upstream_retries_total", ("operation", Self.boundedOperation(operation))).increment()
    }

    func circuit(origin: String, open: Bool) {
        gauge("kassa_upstream_circuit_open", ("origin", origin)).record(open ? 1 : 0)
    }

    func eventLogBatch(count: Int, seconds: Double) {
        recorder("kassa_eventlog_batch_size").record(count)
        timer("kassa_eventlog_write_seconds").recordNanoseconds(Int64(seconds * 1e9))
    }

    func eventLogWriteError() { counter("kassa_eventlog_write_errors_total").increment() }

    /// The read-time series of each kind of reader, made once (reads are timed as they happen).
    func sqliteReadTimers() -> [FileReader: CoreMetrics.Timer] {
        Dictionary(uniqueKeysWithValues: FileReader.allCases.map { ($0, timer("kassa_sqlite_read_seconds", ("reader", $0.rawValue))) })
    }

    func eventLogWALRestart(seconds: Double) {
        timer("kassa_eventlog_wal_restart_seconds").recordNanoseconds(Int64(seconds * 1e9))
    }

    /// A credential refused (401), on any door.
    func authenticationFailed() { counter("kassa_auth_failures_total").increment() }

    /// A client token refused: `missing`, `invalid` (wrong, or another session's), `expired`.
    func clientTokenRefused(reason: String) { counter("kassa_client_tokens_refused_total", ("reason", reason)).increment() }

    /// A browser request or stream upgrade from an origin not in `--cors-origins`.
    func corsRefused() { counter("kassa_cors_refused_total").increment() }

    /// A 429: `address`, `key` (request rate), `auth-address`, `auth-credential` (failed authentications).
    func rateLimited(reason: String) { counter("kassa_rate_limited_total", ("reason", reason)).increment() }

    /// Problem types are bounded: Kassa's own, the Merchant Backend's, and Swedbank Pay's; anything else is "other".
    func problem(type: String) {
        let known = type.hasPrefix(Problem.kassaPrefix) || type.hasPrefix("https://api.payex.com/psp/errordetail/")
            || SdkProblemType(rawValue: type) != nil
        counter("kassa_problems_total", ("type", known && type.count <= 120 ? type : "other")).increment()
    }

    /// Operation labels are bounded: the PaymentSession rels, the Merchant API's upstream calls, and readiness.
    static let operations = Set(OperationRel.allCases.map(\.rawValue)).union(
        ["initiate-consumer-session", "create-paymentorder", "update-paymentorder-setinstrument", "set-instrument", "abort", "readiness"])

    static func boundedOperation(_ operation: String) -> String { operations.contains(operation) ? operation : "other" }

    // MARK: Scrape

    /// The edge's and the upstream client's own counts, last seen by a scrape: counters advance by
    /// what changed since.
    private let countsSeen = Mutex<(refused: Int, evicted: Int, waited: Int)>((0, 0, 0))
    /// Each thread's times, by thread id, last seen by a scrape: its group's counters advance by
    /// what it added since. Swift's pool lets idle threads end and starts new ones, so a group's
    /// sum is no counter.
    private let threadTimesSeen = Mutex<[Int: ThreadTimes]>([:])

    /// The upstream client's counts: calls waiting for a connection now, and all that have waited.
    struct UpstreamWaits { var now = 0, total = 0 }

    /// The Prometheus text exposition, with the process figures read now.
    func scrape(eventLogQueue: Int, sqliteMemory: Int64, refusedConnections: Int = 0, evictedHalfOpen: Int = 0,
                upstreamWaits: UpstreamWaits = UpstreamWaits()) -> String {
        let (refused, evicted, waited) = countsSeen.withLock { seen in
            defer { seen = (max(seen.refused, refusedConnections), max(seen.evicted, evictedHalfOpen), max(seen.waited, upstreamWaits.total)) }
            return (max(0, refusedConnections - seen.refused), max(0, evictedHalfOpen - seen.evicted), max(0, upstreamWaits.total - seen.waited))
        }
        counter("kassa_connections_refused_total").increment(by: Int64(refused))
        counter("kassa_half_open_evicted_total").increment(by: Int64(evicted))
        counter("kassa_upstream_waits_total").increment(by: Int64(waited))
        gauge("kassa_upstream_waiting").record(upstreamWaits.now)
        gauge("kassa_eventlog_queue_depth").record(eventLogQueue)
        gauge("kassa_sqlite_memory_bytes").record(sqliteMemory)
        gauge("kassa_process_resident_memory_bytes").record(Self.residentBytes())
        gauge("kassa_process_open_fds").record(Self.openFileDescriptors())
        recordThreadTimes(ThreadTimes.current)
        return registry.emitToString()
    }

    /// Advances each thread group's counters by what its threads added since the last scrape.
    /// `read` runs under the lock: two scrapes at once must not compare an older reading with a
    /// newer one, which would read as threads started anew.
    func recordThreadTimes(_ read: () -> [Int: (group: String, times: ThreadTimes)]) {
        let added = threadTimesSeen.withLock { seen -> [String: ThreadTimes] in
            let now = read()
            var added: [String: ThreadTimes] = [:]
            for (tid, thread) in now {
                let more = thread.times.added(since: seen[tid] ?? ThreadTimes())
                added[thread.group, default: ThreadTimes()].onCPUNanoseconds += more.onCPUNanoseconds
                added[thread.group, default: ThreadTimes()].waitingNanoseconds += more.waitingNanoseconds
            }
            seen = now.mapValues(\.times)
            return added
        }
        for (group, times) in added {
            secondsCounter("kassa_thread_cpu_seconds_total", ("thread", group)).increment(by: Double(times.onCPUNanoseconds) / 1e9)
            secondsCounter("kassa_thread_cpu_wait_seconds_total", ("thread", group)).increment(by: Double(times.waitingNanoseconds) / 1e9)
        }
    }

    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func openFileDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    /// Routes swift-metrics handlers to the registry with the catalogue's help texts and buckets.
    struct Factory: MetricsFactory {
        let registry: PrometheusCollectorRegistry
        static let help: [String: String] = Dictionary(uniqueKeysWithValues: catalogue.map { ($0.name, $0.help) })
        static let durationBuckets = durations([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
        /// The metrics that declare buckets of their own.
        static let bucketsByName: [String: [Duration]] = Dictionary(uniqueKeysWithValues: catalogue.compactMap { metric in
            metric.buckets.map { (metric.name, durations($0)) }
        })
        static func durations(_ seconds: [Double]) -> [Duration] { seconds.map { Duration.nanoseconds(Int64($0 * 1e9)) } }
        static let sizeBuckets: [Double] = [1, 5, 10, 50, 100, 250, 500, 1000]

        func descriptor(_ label: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: label, unitName: "", helpText: Self.help[label] ?? "Kassa metric \(label).")
        }

        func makeCounter(label: String, dimensions: [(String, String)]) -> CounterHandler {
            registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
        }
        func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> FloatingPointCounterHandler {
            registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
        }
        func makeMeter(label: String, dimensions: [(String, String)]) -> MeterHandler {
            registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
        }
        func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> RecorderHandler {
            if aggregate { return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: Self.sizeBuckets) }
            return registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
        }
        func makeTimer(label: String, dimensions: [(String, String)]) -> TimerHandler {
            registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions,
                                           buckets: Self.bucketsByName[label] ?? Self.durationBuckets)
        }
        func destroyCounter(_ handler: CounterHandler) {}
        func destroyFloatingPointCounter(_ handler: FloatingPointCounterHandler) {}
        func destroyMeter(_ handler: MeterHandler) {}
        func destroyRecorder(_ handler: RecorderHandler) {}
        func destroyTimer(_ handler: TimerHandler) {}
    }
}
