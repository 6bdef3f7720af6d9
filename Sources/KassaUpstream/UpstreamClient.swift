import CCurl
import Foundation
import KassaCore
import Synchronization

/// An HTTP client on the libcurl multi interface, serviced by one thread of
/// its own; callers `await` without blocking their thread.
///
/// ```swift
/// let client = UpstreamClient()
/// let response = try await client.send(UpstreamRequest(url: "http://127.0.0.1:8080/healthz"))
/// ```
public final class UpstreamClient: Sendable {
    /// Largest response body accepted.
    public let maxResponseBytes: Int

    private let engine: CurlEngine

    /// `maxConnections` bounds the exchanges in flight at once, and as many connections are kept
    /// for reuse: an exchange beyond it waits for one to finish rather than opening (and later
    /// closing) a connection of its own. A kept connection idle for more than `keptIdleSeconds`
    /// is not used again (see `defaultKeptIdleSeconds`).
    public init(maxResponseBytes: Int = 8 << 20, maxConnections: Int = 64, keptIdleSeconds: Int = UpstreamClient.defaultKeptIdleSeconds) {
        self.maxResponseBytes = maxResponseBytes
        self.engine = CurlEngine(maxConnections: maxConnections, keptIdleSeconds: keptIdleSeconds)
    }

    /// Servers and load balancers close a connection idle for a minute or so (60 s is the usual
    /// default); libcurl would reuse one idle for up to 118 s. A request that meets the far side
    /// closing is sent again by libcurl on a new connection (see `keepOrFree`), but each such race
    /// costs a round trip, so a connection idle this long is closed by Kassa instead of used.
    public static let defaultKeptIdleSeconds = 50

    /// Stops the curl thread; exchanges still running fail as cancelled.
    public func shutdown() { engine.shutdown() }

    /// Exchanges waiting for a connection now (all `maxConnections` busy).
    public var waitingNow: Int { engine.waitingNow.load(ordering: .relaxed) }
    /// Exchanges that have had to wait for a connection, since the start.
    public var waitedTotal: Int { engine.waitedTotal.load(ordering: .relaxed) }

    public func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse {
        if Task.isCancelled { throw .cancelled }
        let transfer = Transfer(request: request, maxResponseBytes: maxResponseBytes)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Result<UpstreamResponse, UpstreamError>, Never>) in
                transfer.continuation = c
                engine.submit(transfer)
            }
        } onCancel: {
            engine.cancel(transfer.id)
        }
        return try result.get()
    }

    /// Sends `request` and hands its outcome to `completion` on the curl thread (on the caller's,
    /// at once, when the client has stopped), so `completion` must be quick and never block. For
    /// exchanges nobody waits for (beacons): they need no task, and no hop to the Swift pool.
    public func send(_ request: UpstreamRequest, completion: @escaping @Sendable (Result<UpstreamResponse, UpstreamError>) -> Void) {
        let transfer = Transfer(request: request, maxResponseBytes: maxResponseBytes)
        transfer.completion = completion
        engine.submit(transfer)
    }
}

/// One exchange in flight; touched by the curl thread only once submitted.
final class Transfer: @unchecked Sendable {
    private static let nextID = Atomic<UInt64>(1)

    let id: UInt64
    let request: UpstreamRequest
    let maxResponseBytes: Int
    var continuation: CheckedContinuation<Result<UpstreamResponse, UpstreamError>, Never>?
    var completion: (@Sendable (Result<UpstreamResponse, UpstreamError>) -> Void)?
    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    var status = 0
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    var tooLarge = false
    var started = ContinuousClock.now
    /// The request's whole time runs from here, waiting for a connection included.
    let deadline: ContinuousClock.Instant

    init(request: UpstreamRequest, maxResponseBytes: Int) {
        self.id = Transfer.nextID.add(1, ordering: .relaxed).oldValue
        self.request = request
        self.maxResponseBytes = maxResponseBytes
        self.deadline = .now + .milliseconds(request.totalTimeoutMs)
    }

    func finish(_ result: Result<UpstreamResponse, UpstreamError>) {
        continuation?.resume(returning: result)
        continuation = nil
        completion?(result)
        completion = nil
    }
}

private let curlGlobalInit: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()

/// The multi handle and its thread. The thread waits on an epoll set of the sockets libcurl asks
/// it to watch and acts on the ready ones only (`curl_multi_socket_action`). `curl_multi_perform`
/// walked every exchange in flight on each pass, with a `poll` for each: against an upstream
/// answering in 100 ms (hundreds in flight) that made an exchange cost half as much again.
final class CurlEngine: @unchecked Sendable {
    private enum Op {
        case add(Transfer)
        case cancel(UInt64)
    }

    private let multi: UnsafeMutableRawPointer
    private let epoll: Int32
    /// An eventfd in the epoll set: written by the first operation queued, so the loop wakes.
    private let wakeUp: Int32
    /// Curl-thread confined: when libcurl next wants `curl_multi_socket_action` for its timers.
    fileprivate var timerDeadline: ContinuousClock.Instant?
    /// Curl-thread confined: the sockets in the epoll set, what for, and whether libcurl has let go
    /// of them (a kept connection between calls).
    private var watched: [curl_socket_t: (events: UInt32, idle: Bool)] = [:]
    private let pending = Mutex<(ops: [Op], running: Bool)>(([], true))
    /// Curl-thread confined: exchanges in flight by id.
    private var active: [UInt64: Transfer] = [:]
    private var cancelledEarly: Set<UInt64> = []
    /// Curl-thread confined: easy handles of finished exchanges, kept for the next (building and
    /// freeing one per exchange cost more than the answer of a fast upstream) with the options
    /// every exchange shares, set once (`configure`); `start` sets all that a request decides.
    /// `curl_easy_reset` between exchanges set the shared ones again, with a copy of each string
    /// (the protocols, four CA paths): a tenth of the curl thread's allocations.
    private var spareHandles: [(easy: UnsafeMutableRawPointer, caCertificatePath: String?)] = []
    private let maxConnections: Int
    /// Curl-thread confined: exchanges that came while `maxConnections` were in flight, oldest
    /// first from `waitingHead`. Queued here rather than in libcurl (CURLMOPT_MAX_TOTAL_CONNECTIONS),
    /// whose queue keeps no deadline: there a call waited past its own for a connection.
    private var waiting: [Transfer] = []
    private var waitingHead = 0
    /// The earliest deadline among the waiting, when they were last looked over.
    private var nextWaitingDeadline: ContinuousClock.Instant?
    let waitingNow = Atomic<Int>(0)
    let waitedTotal = Atomic<Int>(0)

    /// Idle seconds past which a kept connection is not reused (CURLOPT_MAXAGE_CONN).
    private let keptIdleSeconds: Int

    init(maxConnections: Int, keptIdleSeconds: Int) {
        _ = curlGlobalInit
        multi = curl_multi_init()
        self.maxConnections = max(1, maxConnections)
        self.keptIdleSeconds = max(1, keptIdleSeconds)
        // As many kept as may be in flight: with fewer kept, every exchange past the kept number
        // at a busy moment opened a connection (a TCP and TLS handshake) and closed one after it.
        _ = kassa_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, self.maxConnections)
        epoll = kassa_epoll_create()
        wakeUp = kassa_eventfd_create()
        precondition(epoll >= 0 && wakeUp >= 0, "the curl thread's epoll set or eventfd could not be made")
        _ = kassa_epoll_set(epoll, kassa_epoll_add, wakeUp, kassa_epoll_in)
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = kassa_multi_setopt_socketfn(multi, curlSocketChanged)
        _ = kassa_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        _ = kassa_multi_setopt_timerfn(multi, curlTimerChanged)
        _ = kassa_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        Thread.named("kassa-curl", scheduling: .batch) { [self] in loop() }.start()
    }

    /// The loop's thread holds the engine until it stops, so this runs after `shutdown` and the
    /// loop's return, when nobody can queue anything more.
    deinit {
        close(epoll)
        close(wakeUp)
    }

    private func wakeLoop() {
        var one: UInt64 = 1
        _ = write(wakeUp, &one, 8)
    }

    /// libcurl's wish for `socket`: watch it for reading, writing or both, or no longer.
    /// A kept connection's socket stays in the set while idle, watched for reading only: its next
    /// call costs one `epoll_ctl`, where removing it and adding it back cost two. An idle socket
    /// that turns readable (the upstream closed it) is taken out then.
    fileprivate func watch(_ socket: curl_socket_t, what: Int32) {
        let current = watched[socket]
        if what == CURL_POLL_REMOVE {
            if current?.events == kassa_epoll_in {
                watched[socket]?.idle = true
            } else {
                unwatch(socket)
            }
            return
        }
        var events: UInt32 = 0
        if what & CURL_POLL_IN != 0 { events |= kassa_epoll_in }
        if what & CURL_POLL_OUT != 0 { events |= kassa_epoll_out }
        watched[socket] = (events, false)
        if let current, !current.idle, current.events == events { return }
        // An idle entry is changed, not trusted: a socket libcurl closed itself after letting it go
        // (its resolver's) left the set, and its number may be a new socket's now.
        if current == nil || kassa_epoll_set(epoll, kassa_epoll_mod, socket, events) != 0 {
            if kassa_epoll_set(epoll, kassa_epoll_add, socket, events) != 0 {
                _ = kassa_epoll_set(epoll, kassa_epoll_mod, socket, events)
            }
        }
    }

    /// libcurl closes a connection's `socket`: out of the epoll set first (a descriptor a child
    /// process inherited would keep it there after the close).
    fileprivate func closing(_ socket: curl_socket_t) {
        unwatch(socket)
        close(socket)
    }

    /// Out of the epoll set, if it is in it.
    private func unwatch(_ socket: curl_socket_t) {
        if watched.removeValue(forKey: socket) != nil {
            _ = kassa_epoll_set(epoll, kassa_epoll_del, socket, 0)
        }
    }

    func submit(_ transfer: Transfer) {
        let accepted = pending.withLock { state -> Bool? in
            guard state.running else { return nil }
            state.ops.append(.add(transfer))
            return state.ops.count == 1
        }
        guard let wake = accepted else { return transfer.finish(.failure(.cancelled)) }
        if wake { wakeLoop() }
    }

    func cancel(_ id: UInt64) {
        let wake = pending.withLock { state -> Bool in
            state.ops.append(.cancel(id))
            return state.ops.count == 1
        }
        if wake { wakeLoop() }
    }

    func shutdown() {
        pending.withLock { $0.running = false }
        wakeLoop()
    }

    /// One wake-up (a system call) per batch of operations: the first one queued wakes the loop,
    /// which takes every operation queued by then; a wake-up stays pending until the next wait.
    private func loop() {
        var stillRunning: Int32 = 0
        // The queue and this loop trade buffers, so neither side allocates one per pass.
        var ops: [Op] = []
        let capacity: Int32 = 64
        var readyFDs = [Int32](repeating: 0, count: Int(capacity))
        var readyEvents = [UInt32](repeating: 0, count: Int(capacity))
        var ready: Int32 = 0
        while true {
            ops.removeAll(keepingCapacity: true)
            let running = pending.withLock { state -> Bool in
                swap(&state.ops, &ops)
                return state.running
            }
            for op in ops {
                switch op {
                case .add(let transfer):
                    if cancelledEarly.remove(transfer.id) != nil || !running {
                        transfer.finish(.failure(.cancelled))
                    } else if active.count < maxConnections && waitingHead == waiting.count {
                        start(transfer)
                    } else {
                        wait(transfer)
                    }
                case .cancel(let id):
                    if let transfer = active.removeValue(forKey: id) {
                        release(transfer, mayHaveResent: true)
                        transfer.finish(.failure(.cancelled))
                    } else if let index = waiting[waitingHead...].firstIndex(where: { $0.id == id }) {
                        // Counted out before the caller hears of it, so it never reads a stale count.
                        waitingNow.subtract(1, ordering: .relaxed)
                        waiting.remove(at: index).finish(.failure(.cancelled))
                    } else {
                        cancelledEarly.insert(id)
                    }
                }
            }
            if !running {
                for transfer in active.values {
                    release(transfer, mayHaveResent: true)
                    transfer.finish(.failure(.cancelled))
                }
                active.removeAll()
                for transfer in waiting[waitingHead...] { transfer.finish(.failure(.cancelled)) }
                waiting.removeAll()
                for spare in spareHandles { curl_easy_cleanup(spare.easy) }
                spareHandles.removeAll()
                curl_multi_cleanup(multi)
                return
            }
            for i in 0..<Int(ready) where readyFDs[i] != wakeUp {
                let events = readyEvents[i]
                if watched[readyFDs[i]]?.idle == true {
                    unwatch(readyFDs[i])
                    continue
                }
                var action: Int32 = 0
                if events & (kassa_epoll_in | kassa_epoll_hup) != 0 { action |= CURL_CSELECT_IN }
                if events & kassa_epoll_out != 0 { action |= CURL_CSELECT_OUT }
                if events & kassa_epoll_err != 0 { action |= CURL_CSELECT_ERR }
                curl_multi_socket_action(multi, readyFDs[i], action, &stillRunning)
            }
            if let deadline = timerDeadline, deadline <= .now {
                // libcurl calls the timer function again during this call if a timer is left.
                timerDeadline = nil
                curl_multi_socket_action(multi, kassa_curl_socket_timeout, 0, &stillRunning)
            }
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                var privatePointer: UnsafeMutableRawPointer?
                _ = kassa_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &privatePointer)
                let code = kassa_msg_result(message)
                guard let privatePointer else { continue }
                let id = UInt64(UInt(bitPattern: privatePointer))
                guard let transfer = active.removeValue(forKey: id) else { continue }
                complete(transfer, code: code)
            }
            var waitMs = startWaiting()
            if let deadline = timerDeadline {
                waitMs = min(waitMs, milliseconds(until: deadline, from: .now))
            }
            ready = kassa_epoll_wait(epoll, &readyFDs, &readyEvents, capacity, waitMs)
            if ready < 0 { ready = 0 }  // EINTR: go round again
            // The wake-up is read before the queue is taken at the top: read after, it could
            // swallow the wake-up of an operation queued in between, left waiting a second.
            if readyFDs.prefix(Int(ready)).contains(wakeUp) {
                var count: UInt64 = 0
                _ = read(wakeUp, &count, 8)
            }
        }
    }

    private func wait(_ transfer: Transfer) {
        if waitingHead > 0 && waitingHead * 2 >= waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        waiting.append(transfer)
        nextWaitingDeadline = min(nextWaitingDeadline ?? transfer.deadline, transfer.deadline)
        waitingNow.add(1, ordering: .relaxed)
        waitedTotal.add(1, ordering: .relaxed)
    }

    /// Starts the waiting exchanges that have a connection free now, in order, and fails those
    /// past their deadline. Returns how long the loop may sleep: until the next waiting deadline,
    /// at most a second.
    private func startWaiting() -> Int32 {
        guard waitingHead < waiting.count else { return 1000 }
        while active.count < maxConnections && waitingHead < waiting.count {
            let transfer = waiting[waitingHead]
            waitingHead += 1
            waitingNow.subtract(1, ordering: .relaxed)
            start(transfer)
        }
        let now = ContinuousClock.now
        if let next = nextWaitingDeadline, next <= now {
            let expired = waiting[waitingHead...].filter { $0.deadline <= now }
            waiting = waiting[waitingHead...].filter { $0.deadline > now }
            waitingHead = 0
            nextWaitingDeadline = waiting.map(\.deadline).min()
            waitingNow.subtract(expired.count, ordering: .relaxed)
            for transfer in expired { transfer.finish(.failure(.timeout)) }
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
            nextWaitingDeadline = nil
        }
        guard let next = nextWaitingDeadline else { return 1000 }
        return max(1, milliseconds(until: next, from: now))
    }

    /// Milliseconds from `now` to `deadline`, rounded up (so it has passed when the loop looks
    /// again), 0 if it has passed, at most a second.
    private func milliseconds(until deadline: ContinuousClock.Instant, from now: ContinuousClock.Instant) -> Int32 {
        Int32(min(1000, max(0, now.duration(to: deadline).inMilliseconds.rounded(.up))))
    }

    private func start(_ transfer: Transfer) {
        let request = transfer.request
        var easy: UnsafeMutableRawPointer?
        if let spare = spareHandles.popLast() {
            // Kept for the same CA file (one configuration has one): otherwise made anew.
            if spare.caCertificatePath == request.caCertificatePath { easy = spare.easy } else { curl_easy_cleanup(spare.easy) }
        }
        if easy == nil, let made = curl_easy_init() {
            configure(made, caCertificatePath: request.caCertificatePath)
            easy = made
        }
        guard let easy else {
            transfer.finish(.failure(.transport(code: -1, message: "curl_easy_init failed")))
            return
        }
        transfer.easy = easy
        transfer.started = .now
        _ = kassa_easy_setopt_str(easy, CURLOPT_URL, request.url)
        _ = kassa_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, request.connectTimeoutMs)
        // What is left of the request's time (all of it, unless it waited for a connection).
        let left = transfer.started.duration(to: transfer.deadline).inMilliseconds
        _ = kassa_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(left)))
        _ = kassa_easy_setopt_ptr(easy, CURLOPT_PRIVATE, UnsafeMutableRawPointer(bitPattern: UInt(transfer.id)))
        let me = Unmanaged.passUnretained(transfer).toOpaque()
        _ = kassa_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
        _ = kassa_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me)

        // The method from a plain GET (which also ends the last exchange's HEAD or upload), the
        // last one's custom method gone.
        let method = request.method.uppercased()
        _ = kassa_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        switch method {
        case "GET": _ = kassa_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, nil)
        case "HEAD": _ = kassa_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, nil); _ = kassa_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        default: _ = kassa_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method)
        }
        // A POST, PUT or PATCH always states its length, even when empty. A GET or HEAD sends none:
        // curl would turn it into a POST.
        let body = method == "GET" || method == "HEAD" ? nil : request.body ?? (["POST", "PUT", "PATCH"].contains(method) ? [] : nil)
        if let body {
            _ = kassa_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            body.withUnsafeBytes { raw in
                _ = kassa_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
            }
        }
        let list: UnsafeMutablePointer<curl_slist>
        do {
            list = try HeaderList.make(request.headers)
        } catch {
            keepOrFree(easy, request.caCertificatePath)
            transfer.finish(.failure(.invalidRequest("header \(error.name) holds a line break")))
            return
        }
        transfer.headerList = list
        _ = kassa_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))

        active[transfer.id] = transfer
        curl_multi_add_handle(multi, easy)
    }

    /// `mayHaveResent`: the exchange may have had libcurl send its request again (see `keepOrFree`).
    private func release(_ transfer: Transfer, mayHaveResent: Bool) {
        if let easy = transfer.easy {
            curl_multi_remove_handle(multi, easy)
            keepOrFree(easy, transfer.request.caCertificatePath, reset: mayHaveResent)
            transfer.easy = nil
        }
        HeaderList.free(transfer.headerList)
        transfer.headerList = nil
    }

    /// The options every exchange shares, set once on a new handle.
    private func configure(_ easy: UnsafeMutableRawPointer, caCertificatePath: String?) {
        _ = kassa_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = kassa_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        _ = kassa_easy_setopt_long(easy, CURLOPT_MAXAGE_CONN, keptIdleSeconds)
        _ = kassa_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        if let caCertificatePath { _ = kassa_easy_setopt_str(easy, CURLOPT_CAINFO, caCertificatePath) }
        _ = kassa_easy_setopt_datafn(easy, CURLOPT_WRITEFUNCTION, curlWriteBody)
        _ = kassa_easy_setopt_datafn(easy, CURLOPT_HEADERFUNCTION, curlWriteHeader)
        _ = kassa_easy_setopt_closesocketfn(easy, curlClosesSocket)
        _ = kassa_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A finished handle lets go of what its exchange gave it (the body's copy, the header list,
    /// the transfer it wrote to) and is kept while there are fewer spares than connections.
    /// `reset`: the handle is reset and configured again first. libcurl sends a request again on a
    /// new connection when a kept one dies unanswered (the upstream closed it as the request came),
    /// but only five times per handle until `curl_easy_reset`: a handle kept for good without one
    /// failed every such race after its fifth. A resend always opens a connection, and an exchange
    /// on a kept connection opens none, so only the few exchanges that opened one pay for a reset.
    private func keepOrFree(_ easy: UnsafeMutableRawPointer, _ caCertificatePath: String?, reset: Bool = false) {
        guard spareHandles.count < maxConnections else { return curl_easy_cleanup(easy) }
        if reset {
            curl_easy_reset(easy)
            configure(easy, caCertificatePath: caCertificatePath)
        } else {
            _ = kassa_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, -1)
            _ = kassa_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, nil)
            _ = kassa_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, nil)
            _ = kassa_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, nil)
            _ = kassa_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, nil)
        }
        spareHandles.append((easy, caCertificatePath))
    }

    private func complete(_ transfer: Transfer, code: CURLcode) {
        guard let easy = transfer.easy else { return }
        var status = 0
        _ = kassa_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var connects = 0
        _ = kassa_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        let message = String(cString: curl_easy_strerror(code))
        release(transfer, mayHaveResent: connects > 0)
        let duration = transfer.started.duration(to: .now)
        let seconds = duration.inSeconds

        switch code {
        case CURLE_OK:
            transfer.finish(.success(UpstreamResponse(status: status, headers: transfer.headers, body: transfer.body,
                                                      duration: seconds, reusedConnection: connects == 0)))
        case CURLE_OPERATION_TIMEDOUT:
            transfer.finish(.failure(.timeout))
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            transfer.finish(.failure(.connectFailed(message)))
        case CURLE_WRITE_ERROR where transfer.tooLarge:
            transfer.finish(.failure(.responseTooLarge(limit: transfer.maxResponseBytes)))
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            transfer.finish(.failure(.connectionLost(message)))
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            transfer.finish(.failure(.invalidRequest(message)))
        default:
            transfer.finish(.failure(.transport(code: Int(code.rawValue), message: message)))
        }
    }
}

/// CURLMOPT_SOCKETFUNCTION.
private func curlSocketChanged(_ easy: UnsafeMutableRawPointer?, _ socket: curl_socket_t, _ what: Int32,
                               _ user: UnsafeMutableRawPointer?, _ socketp: UnsafeMutableRawPointer?) -> Int32 {
    guard let user else { return 0 }
    Unmanaged<CurlEngine>.fromOpaque(user).takeUnretainedValue().watch(socket, what: what)
    return 0
}

/// CURLOPT_CLOSESOCKETFUNCTION: libcurl closes its connections' sockets here, the kept ones'
/// included (those it no longer names to the socket function).
private func curlClosesSocket(_ user: UnsafeMutableRawPointer?, _ socket: curl_socket_t) -> Int32 {
    guard let user else { return close(socket) }
    Unmanaged<CurlEngine>.fromOpaque(user).takeUnretainedValue().closing(socket)
    return 0
}

/// CURLMOPT_TIMERFUNCTION: call back in `milliseconds` (0: at once), or never (-1).
private func curlTimerChanged(_ multi: UnsafeMutableRawPointer?, _ milliseconds: Int, _ user: UnsafeMutableRawPointer?) -> Int32 {
    guard let user else { return 0 }
    let engine = Unmanaged<CurlEngine>.fromOpaque(user).takeUnretainedValue()
    engine.timerDeadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
    return 0
}

private func curlWriteBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ user: UnsafeMutableRawPointer?) -> Int {
    guard let user else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
    let n = size * count
    if transfer.body.count + n > transfer.maxResponseBytes {
        transfer.tooLarge = true
        return 0
    }
    if let data, n > 0 {
        transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
    }
    return n
}

private func curlWriteHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ user: UnsafeMutableRawPointer?) -> Int {
    guard let user, let data else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
    let n = size * count
    let line = UnsafeRawBufferPointer(start: data, count: n)
    if line.starts(with: "HTTP/".utf8) {
        // A new status line (after 100 Continue or a redirect) starts a new header set.
        transfer.headers.removeAll()
    } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
        // Bytes, not Foundation's trimming: this runs for every header of every upstream answer.
        let name = String(decoding: trimmed(line[..<colon]), as: UTF8.self).lowercased()
        let value = String(decoding: trimmed(line[(colon + 1)...]), as: UTF8.self)
        transfer.headers.append((name, value))
    }
    return n
}

/// Without leading and trailing spaces, tabs, CR and LF.
private func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
    func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
    guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
        return bytes[bytes.startIndex..<bytes.startIndex]
    }
    return bytes[first...last]
}

/// A request's header lines as libcurl's list, in one allocation: the nodes, then the
/// NUL-terminated lines they point at. `curl_slist_append` made two allocations a line (its node
/// and a copy of the text), besides the line's own string: ≈ 3 % of a flow's allocations. libcurl
/// reads the list during the transfer and never changes or frees it.
enum HeaderList {
    /// A header that would end its line early or begin another: a line break in its name or
    /// value, or a colon in its name.
    struct Refused: Error { var name: String }

    /// The lines of `headers`, then "Expect:" (no 100-continue round trip for larger bodies).
    /// Each header is checked as it is copied.
    static func make(_ headers: [(String, String)]) throws(Refused) -> UnsafeMutablePointer<curl_slist> {
        let expect = "Expect:"
        let count = headers.count + 1
        let nodeBytes = count * MemoryLayout<curl_slist>.stride
        var textBytes = expect.utf8.count + 1
        for (name, value) in headers { textBytes += name.utf8.count + 2 + value.utf8.count + 1 }
        let raw = UnsafeMutableRawPointer.allocate(byteCount: nodeBytes + textBytes, alignment: MemoryLayout<curl_slist>.alignment)
        let nodes = raw.bindMemory(to: curl_slist.self, capacity: count)
        var text = (raw + nodeBytes).bindMemory(to: CChar.self, capacity: textBytes)
        /// Copies `part`; false when it holds a line break or `refused`.
        func write(_ part: String, refusing refused: UInt8 = 0x0A) -> Bool {
            var part = part
            return part.withUTF8 { bytes in
                var clean = true
                for k in bytes.indices {
                    let byte = bytes[k]
                    if byte == 0x0D || byte == 0x0A || byte == refused { clean = false }
                    text[k] = CChar(bitPattern: byte)
                }
                text += bytes.count
                return clean
            }
        }
        for k in 0..<count {
            let line = text
            if k < headers.count {
                let clean = write(headers[k].0, refusing: UInt8(ascii: ":")) && write(": ") && write(headers[k].1)
                guard clean else {
                    raw.deallocate()
                    throw Refused(name: headers[k].0)
                }
            } else {
                _ = write(expect)
            }
            text.pointee = 0
            text += 1
            (nodes + k).initialize(to: curl_slist(data: line, next: k + 1 < count ? nodes + k + 1 : nil))
        }
        return nodes
    }

    static func free(_ list: UnsafeMutablePointer<curl_slist>?) {
        UnsafeMutableRawPointer(list)?.deallocate()
    }
}

