import ArgumentParser
import Foundation
import KassaCore
import KassaEdge
import KassaGateway
import KassaStore
import Logging
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the gateway: HTTP and WebSocket on one port.",
        discussion: "Every option can also be set by the environment variable named in its help; a flag wins over the variable."
    )

    @Option(help: "Address to listen on, HOST:PORT. (KASSA_LISTEN, default 127.0.0.1:8080)")
    var listen: String?
    @Option(help: "SQLite database file for the event log and sessions. (KASSA_DB, default ./kassa.sqlite)")
    var db: String?
    @Option(name: .customLong("upstream-url"), help: "Swedbank Pay base URL; empty runs the embedded simulator. (KASSA_UPSTREAM_URL)")
    var upstreamURL: String?
    @Option(name: .customLong("upstream-token"), help: "Bearer token for Swedbank Pay. (KASSA_UPSTREAM_TOKEN, default: the simulator's token when embedded)")
    var upstreamToken: String?
    @Option(name: .customLong("api-keys"), help: "Comma-separated Merchant API keys; empty: one is generated and printed at start. (KASSA_API_KEYS)")
    var apiKeys: String?
    @Option(name: .customLong("admin-token"), help: "Token for the support API and admin page; empty: generated and printed at start. (KASSA_ADMIN_TOKEN)")
    var adminToken: String?
    @Option(name: .customLong("allowed-upstream-hosts"), help: "Comma-separated hosts a view-paymentsession href may name. (KASSA_ALLOWED_UPSTREAM_HOSTS, default: the upstream URL's host)")
    var allowedUpstreamHosts: String?
    @Option(name: .customLong("max-body-bytes"), help: "Largest request body; larger ones get 413. (KASSA_MAX_BODY_BYTES, default 1048576)")
    var maxBodyBytes: Int?
    @Option(name: .customLong("max-frame-bytes"), help: "Largest WebSocket message; larger ones close with 1009. (KASSA_MAX_FRAME_BYTES, default 65536)")
    var maxFrameBytes: Int?
    @Option(name: .customLong("max-outbound-bytes"), help: "Bytes queued for one WebSocket before it is closed as a slow consumer (4008). (KASSA_MAX_OUTBOUND_BYTES, default 1048576)")
    var maxOutboundBytes: Int?
    @Option(name: .customLong("ping-interval"), help: "Seconds of WebSocket silence before a ping. (KASSA_PING_INTERVAL, default 20)")
    var pingInterval: Int?
    @Option(name: .customLong("idle-timeout"), help: "Seconds without a pong or frame before a WebSocket is dropped. (KASSA_IDLE_TIMEOUT, default 60)")
    var idleTimeout: Int?
    @Option(name: .customLong("request-timeout"), help: "Seconds a client may take to send one HTTP request. (KASSA_REQUEST_TIMEOUT, default 10)")
    var requestTimeout: Int?
    @Option(name: .customLong("upstream-timeout-ms"), help: "Milliseconds allowed for one upstream exchange. (KASSA_UPSTREAM_TIMEOUT_MS, default 10000)")
    var upstreamTimeoutMs: Int?
    @Option(name: .customLong("upstream-connections"), help: "Upstream calls in flight at once, and as many connections kept for reuse; a call beyond them waits for one to finish. (KASSA_UPSTREAM_CONNECTIONS, default 1024)")
    var upstreamConnections: Int?
    @Option(name: .customLong("shutdown-grace"), help: "Seconds a graceful stop waits for in-flight work. (KASSA_SHUTDOWN_GRACE, default 5)")
    var shutdownGrace: Int?
    @Option(help: "SQLite durability: normal (survives a process crash) or full (also power loss). (KASSA_DURABILITY, default normal)")
    var durability: String?
    @Option(name: .customLong("3ds-method-timeout-ms"), help: "Milliseconds a client may take to run the 3-D Secure method step; then Kassa goes on with upstream's indicator, else U. (KASSA_3DS_METHOD_TIMEOUT_MS, default 10000)")
    var threeDSMethodTimeoutMs: Int?
    @Option(name: .customLong("apple-pay-merchant-id"), help: "Apple Pay merchant identifier (merchant.com.example) iOS clients open the wallet sheet with. (KASSA_APPLE_PAY_MERCHANT_ID)")
    var applePayMerchantID: String?
    @Option(name: .customLong("event-logging"), help: "on: post the SDKs' beacons to each session's event-logging operation (Swedbank Pay's support then sees Kassa payments as SDK payments); off: none. (KASSA_EVENT_LOGGING, default on)")
    var eventLogging: String?
    @Option(name: .customLong("payee-id"), help: "Swedbank Pay payee id set on payment orders that lack one. (KASSA_PAYEE_ID)")
    var payeeID: String?
    @Option(name: .customLong("apple-app-ids"), help: "Comma-separated app ids (TEAMID.bundle.id) for /.well-known/apple-app-site-association. (KASSA_APPLE_APP_IDS)")
    var appleAppIDs: String?
    @Option(name: .customLong("public-url"), help: "The gateway's public base URL, used in payment urls; empty: each request's Host header. (KASSA_PUBLIC_URL)")
    var publicURL: String?
    @Option(name: .customLong("ios-trampoline-url"), help: "The back-link page the iOS payment url helper redirects to. (KASSA_IOS_TRAMPOLINE_URL, default Swedbank Pay's)")
    var iosTrampolineURL: String?
    @Option(name: .customLong("rate-limit-ip"), help: "Requests per second from one client address; 0: none. (KASSA_RATE_LIMIT_IP, default 0)")
    var rateLimitIP: Int?
    @Option(name: .customLong("rate-limit-key"), help: "Requests per second with one API key; 0: none. (KASSA_RATE_LIMIT_KEY, default 0)")
    var rateLimitKey: Int?
    @Option(name: .customLong("auth-failure-limit"), help: "Failed authentications per minute from one client address, and against one credential, before 429; 0: none. (KASSA_AUTH_FAILURE_LIMIT, default 30)")
    var authFailureLimit: Int?
    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain: with --tls-key, the port speaks https and wss only. (KASSA_TLS_CERT)")
    var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key for --tls-cert. (KASSA_TLS_KEY)")
    var tlsKey: String?
    @Option(name: .customLong("max-connections"), help: "Connections open at once from all addresses; more are closed on arrival. The file limit is raised to hold them (up to the hard limit). (KASSA_MAX_CONNECTIONS, default 16384)")
    var maxConnections: Int?
    @Option(name: .customLong("max-connections-per-address"), help: "Connections open at once from one client address; more are closed on arrival. (KASSA_MAX_CONNECTIONS_PER_ADDRESS, default 4096)")
    var maxConnectionsPerAddress: Int?
    @Option(name: .customLong("max-half-open-per-address"), help: "Connections from one address without a whole request yet; more are closed on arrival. (KASSA_MAX_HALF_OPEN_PER_ADDRESS, default 256)")
    var maxHalfOpenPerAddress: Int?
    @Option(name: .customLong("max-half-open"), help: "Half-open connections in all; past it the longest-waiting one is closed. Sizes the header pool. (KASSA_MAX_HALF_OPEN, default 1024)")
    var maxHalfOpen: Int?
    @Option(name: .customLong("max-websockets"), help: "WebSockets open at once at most; 0: no limit. (KASSA_MAX_WEBSOCKETS, default 0)")
    var maxWebSockets: Int?
    @Option(name: .customLong("max-sessions"), help: "Sessions one node holds at most; 0: no limit. (KASSA_MAX_SESSIONS, default 0)")
    var maxSessions: Int?
    @Option(name: .customLong("push-stamps"), help: "A live push's `at`: ms (the contract's milliseconds) or us (microseconds, so a benchmark times pushes exactly). (KASSA_PUSH_STAMPS, default ms)")
    var pushStamps: String?
    @Option(name: .customLong("ended-session-seconds"), help: "Seconds an ended session stays in memory after its last stream closes; later it is read from the database. (KASSA_ENDED_SESSION_SECONDS, default 30)")
    var endedSessionSeconds: Int?
    @Option(name: .customLong("waiting-session-seconds"), help: "Seconds a session waiting for the payer's choice, followed by no stream, stays in memory; later it is read from the database and upstream. (KASSA_WAITING_SESSION_SECONDS, default 120)")
    var waitingSessionSeconds: Int?
    @Option(name: .customLong("cluster-secret"), help: "Seals client tokens (at least 32 random bytes); nodes sharing it can pick up each other's sessions. Several, comma-separated, rotate: the first seals, all open. (KASSA_CLUSTER_SECRET, default: one per process)")
    var clusterSecret: String?
    @Option(name: .customLong("client-token-max-age"), help: "Seconds a client token is valid after its session was created. (KASSA_CLIENT_TOKEN_MAX_AGE, default 86400)")
    var clientTokenMaxAge: Int?
    @Option(name: .customLong("client-token-after-end"), help: "Seconds a client token stays valid after its session ended. (KASSA_CLIENT_TOKEN_AFTER_END, default 900)")
    var clientTokenAfterEnd: Int?
    @Option(name: .customLong("peers"), help: "Comma-separated base URLs of the other nodes (http://node2:8080); the support API, the admin page and kassa events then search every node. They must share --admin-token. (KASSA_PEERS)")
    var peers: String?
    @Option(name: .customLong("node-name"), help: "How this node marks its events among its peers. (KASSA_NODE_NAME, default: the listen address)")
    var nodeName: String?
    @Option(name: .customLong("cors-origins"), help: "Comma-separated web origins (https://shop.example) whose pages may call the client endpoints and open streams. (KASSA_CORS_ORIGINS, default none)")
    var corsOrigins: String?
    @Option(name: .customLong("otlp-endpoint"), help: "OTLP/HTTP collector URL spans are exported to (http://collector:4318; a URL without a path gets /v1/traces); empty: no traces. (KASSA_OTLP_ENDPOINT, default none)")
    var otlpEndpoint: String?
    @Option(name: .customLong("retention-days"), help: "Days events are kept. (KASSA_RETENTION_DAYS, default 30)")
    var retentionDays: Int?
    @Option(name: .customLong("retention-max-bytes"), help: "Largest size of the live data; the oldest events go first. (KASSA_RETENTION_MAX_BYTES, default 1073741824)")
    var retentionMaxBytes: Int?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. (KASSA_LOG_LEVEL, default info)")
    var logLevel: String?

    func run() async throws {
        let levelName = setting(logLevel, "KASSA_LOG_LEVEL", default: "info")
        guard let level = Logger.Level(rawValue: levelName) else { throw ValidationError("unknown log level \(levelName)") }
        LoggingSystem.bootstrap { label in JSONLogHandler(label: label, level: level) }
        let logger = Logger(label: "kassa")

        let (host, port) = try parseListen(setting(listen, "KASSA_LISTEN", default: "127.0.0.1:8080"))
        let databasePath = setting(db, "KASSA_DB", default: "./kassa.sqlite")
        guard let durabilityChoice = Store.Durability(rawValue: setting(durability, "KASSA_DURABILITY", default: "normal")) else {
            throw ValidationError("--durability must be normal or full")
        }
        let upstream = setting(upstreamURL, "KASSA_UPSTREAM_URL", default: "")
        let token = setting(upstreamToken, "KASSA_UPSTREAM_TOKEN", default: "")

        var keys = commaList(setting(apiKeys, "KASSA_API_KEYS", default: ""))
        var generatedKey: String?
        if keys.isEmpty {
            let generated = Secrets.randomHex(bytes: 16)
            keys = [generated]
            generatedKey = generated
            printToTerminal("kassa: generated Merchant API key (pass --api-keys to choose one): \(generated)")
        }
        var admin = setting(adminToken, "KASSA_ADMIN_TOKEN", default: "")
        var generatedAdmin: String?
        if admin.isEmpty {
            admin = Secrets.randomHex(bytes: 16)
            generatedAdmin = admin
            printToTerminal("kassa: generated admin token (pass --admin-token to choose one): \(admin)")
        }
        let upstreamHost = URLComponents(string: upstream)?.host ?? ""
        let allowedHosts = commaList(setting(allowedUpstreamHosts, "KASSA_ALLOWED_UPSTREAM_HOSTS", default: upstreamHost))

        var edge = EdgeConfiguration(
            host: host, port: port,
            maxBodyBytes: try setting(maxBodyBytes, "KASSA_MAX_BODY_BYTES", default: 1 << 20),
            maxFrameBytes: try setting(maxFrameBytes, "KASSA_MAX_FRAME_BYTES", default: 64 << 10),
            maxOutboundBytes: try setting(maxOutboundBytes, "KASSA_MAX_OUTBOUND_BYTES", default: 1 << 20),
            pingIntervalSeconds: try setting(pingInterval, "KASSA_PING_INTERVAL", default: 20),
            idleTimeoutSeconds: try setting(idleTimeout, "KASSA_IDLE_TIMEOUT", default: 60),
            requestTimeoutSeconds: try setting(requestTimeout, "KASSA_REQUEST_TIMEOUT", default: 10),
            shutdownGraceSeconds: Double(try setting(shutdownGrace, "KASSA_SHUTDOWN_GRACE", default: 5)))
        edge.maxWebSockets = try setting(maxWebSockets, "KASSA_MAX_WEBSOCKETS", default: 0)
        edge.maxConnections = try setting(maxConnections, "KASSA_MAX_CONNECTIONS", default: EdgeConfiguration.defaultMaxConnections)
        edge.maxConnectionsPerAddress = try setting(maxConnectionsPerAddress, "KASSA_MAX_CONNECTIONS_PER_ADDRESS", default: 4_096)
        edge.maxHalfOpenPerAddress = try setting(maxHalfOpenPerAddress, "KASSA_MAX_HALF_OPEN_PER_ADDRESS", default: 256)
        edge.maxHalfOpen = try setting(maxHalfOpen, "KASSA_MAX_HALF_OPEN", default: 1_024)
        guard (16...1_048_576).contains(edge.maxConnections), (1...1_000_000).contains(edge.maxConnectionsPerAddress), (1...65_000).contains(edge.maxHalfOpenPerAddress),
              (16...65_000).contains(edge.maxHalfOpen) else {
            throw ValidationError("--max-connections must be 16 to 1048576, --max-connections-per-address 1 to 1000000, --max-half-open-per-address 1 to 65000, --max-half-open 16 to 65000")
        }
        edge.tlsCertificatePath = setting(tlsCert, "KASSA_TLS_CERT", default: "").nonEmpty
        edge.tlsKeyPath = setting(tlsKey, "KASSA_TLS_KEY", default: "").nonEmpty
        let gatewayBase = GatewayConfiguration(
            apiKeys: keys, adminToken: admin, upstreamURL: upstream, upstreamToken: token,
            allowedUpstreamHosts: allowedHosts,
            upstreamTimeoutMs: try setting(upstreamTimeoutMs, "KASSA_UPSTREAM_TIMEOUT_MS", default: 10_000),
            payeeID: setting(payeeID, "KASSA_PAYEE_ID", default: "").nonEmpty,
            appleAppIDs: commaList(setting(appleAppIDs, "KASSA_APPLE_APP_IDS", default: "")),
            iosTrampolineURL: setting(iosTrampolineURL, "KASSA_IOS_TRAMPOLINE_URL", default: GatewayConfiguration.defaultTrampolineURL),
            publicBaseURL: setting(publicURL, "KASSA_PUBLIC_URL", default: ""))

        var gateway = gatewayBase
        let secrets = commaList(setting(clusterSecret, "KASSA_CLUSTER_SECRET", default: ""))
        // A short or weak one is refused by KassaNode before anything opens or starts.
        if !secrets.isEmpty { gateway.clusterSecrets = secrets }
        gateway.clientTokenMaxAgeSeconds = try setting(clientTokenMaxAge, "KASSA_CLIENT_TOKEN_MAX_AGE", default: 86_400)
        gateway.clientTokenAfterEndSeconds = try setting(clientTokenAfterEnd, "KASSA_CLIENT_TOKEN_AFTER_END", default: 900)
        guard (60...31_536_000).contains(gateway.clientTokenMaxAgeSeconds), (0...gateway.clientTokenMaxAgeSeconds).contains(gateway.clientTokenAfterEndSeconds) else {
            throw ValidationError("--client-token-max-age must be from 60 s to a year, and --client-token-after-end from 0 to that")
        }
        for peer in commaList(setting(peers, "KASSA_PEERS", default: "")) {
            var base = peer
            while base.hasSuffix("/") { base.removeLast() }
            guard let url = URLComponents(string: base), url.scheme == "http" || url.scheme == "https", url.host?.isEmpty == false,
                  url.path.isEmpty, url.query == nil else {
                throw ValidationError("--peers takes base URLs such as http://node2:8080: \(peer)")
            }
            gateway.peers.append(base)
        }
        gateway.upstreamConnections = try setting(upstreamConnections, "KASSA_UPSTREAM_CONNECTIONS", default: GatewayConfiguration.defaultUpstreamConnections)
        guard (1...65_536).contains(gateway.upstreamConnections) else { throw ValidationError("--upstream-connections must be 1 to 65536") }
        // The upstream connections' descriptors come beside the edge's, with room for the files.
        edge.reservedDescriptors = max(edge.reservedDescriptors, gateway.upstreamConnections + 256)
        gateway.nodeName = setting(nodeName, "KASSA_NODE_NAME", default: "\(host):\(port)")
        guard !gateway.nodeName.isEmpty, gateway.nodeName.count <= 64 else { throw ValidationError("--node-name must be 1 to 64 characters") }
        for origin in commaList(setting(corsOrigins, "KASSA_CORS_ORIGINS", default: "")) {
            guard let normalized = CrossOrigin.normalized(origin) else {
                throw ValidationError("--cors-origins takes origins such as https://shop.example (scheme, host and port only, no *): \(origin)")
            }
            gateway.corsOrigins.append(normalized)
        }
        if let endpoint = setting(otlpEndpoint, "KASSA_OTLP_ENDPOINT", default: "").nonEmpty {
            gateway.otlpEndpoint = try Self.tracesURL(endpoint)
        }
        gateway.rateLimitPerIP = Double(try setting(rateLimitIP, "KASSA_RATE_LIMIT_IP", default: 0))
        gateway.rateLimitPerKey = Double(try setting(rateLimitKey, "KASSA_RATE_LIMIT_KEY", default: 0))
        gateway.authFailuresPerMinute = try setting(authFailureLimit, "KASSA_AUTH_FAILURE_LIMIT", default: 30)
        guard (0...100_000).contains(gateway.authFailuresPerMinute) else { throw ValidationError("--auth-failure-limit must be from 0 to 100000") }
        gateway.maxSessions = try setting(maxSessions, "KASSA_MAX_SESSIONS", default: 0)
        switch setting(pushStamps, "KASSA_PUSH_STAMPS", default: "ms") {
        case "ms": gateway.pushStampsInMicroseconds = false
        case "us": gateway.pushStampsInMicroseconds = true
        default: throw ValidationError("--push-stamps must be ms or us")
        }
        gateway.applePayMerchantID = setting(applePayMerchantID, "KASSA_APPLE_PAY_MERCHANT_ID", default: "").nonEmpty
        gateway.threeDSMethodTimeoutMs = try setting(threeDSMethodTimeoutMs, "KASSA_3DS_METHOD_TIMEOUT_MS", default: 10_000)
        guard (100...600_000).contains(gateway.threeDSMethodTimeoutMs) else {
            throw ValidationError("--3ds-method-timeout-ms must be from 100 to 600000")
        }
        switch setting(eventLogging, "KASSA_EVENT_LOGGING", default: "on") {
        case "on": gateway.eventLogging = true
        case "off": gateway.eventLogging = false
        default: throw ValidationError("--event-logging must be on or off")
        }
        gateway.endedSessionMemorySeconds = Double(try setting(endedSessionSeconds, "KASSA_ENDED_SESSION_SECONDS", default: 30))
        gateway.waitingSessionMemorySeconds = Double(try setting(waitingSessionSeconds, "KASSA_WAITING_SESSION_SECONDS", default: 120))

        let node: KassaNode
        do {
            let retention = Retention(maxAgeDays: Double(try setting(retentionDays, "KASSA_RETENTION_DAYS", default: 30)),
                                      maxBytes: Int64(try setting(retentionMaxBytes, "KASSA_RETENTION_MAX_BYTES", default: 1 << 30)))
            let welcome = Self.welcome(host: host, tls: edge.tlsCertificatePath != nil, embedded: upstream.isEmpty, database: databasePath,
                                       apiKey: generatedKey, adminToken: generatedAdmin)
            node = try KassaNode(edge: edge, gateway: gateway, databasePath: databasePath, durability: durabilityChoice,
                                 retention: retention, logger: logger, onListening: { port in printToTerminal(welcome(port)) })
        } catch {
            logger.critical("cannot start", metadata: ["error": "\(error)"])
            printToTerminal("kassa: \(error)")
            throw ExitCode(1)
        }
        // The group takes SIGTERM and SIGINT before the node opens its port (in its run), so an
        // early signal still stops cleanly: the edge drains, then the event log is flushed.
        let group = ServiceGroup(services: [node], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        do {
            try await group.run()
        } catch {
            logger.error("\(error)")
            printToTerminal("kassa: \(error)")
            throw ExitCode(1)
        }
        logger.info("stopped")
    }

    /// The OTLP/HTTP traces URL for `--otlp-endpoint`: a collector's base URL gets the signal's path.
    static func tracesURL(_ endpoint: String) throws -> String {
        guard let url = URLComponents(string: endpoint), url.scheme == "http" || url.scheme == "https", url.host?.isEmpty == false,
              url.query == nil else {
            throw ValidationError("--otlp-endpoint takes an http(s) URL such as http://collector:4318: \(endpoint)")
        }
        return url.path.isEmpty || url.path == "/" ? (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces" : endpoint
    }

    /// Where to go next, on the terminal once the port is open: the demo, the admin page and the
    /// event log, with the credentials only when this run generated them (configured ones are the operator's).
    static func welcome(host: String, tls: Bool, embedded: Bool, database: String, apiKey: String?, adminToken: String?) -> @Sendable (Int) -> String {
        { port in
            let shown = host == "0.0.0.0" || host == "::" ? "127.0.0.1" : host
            let base = "\(tls ? "https" : "http")://" + URLAuthority.of(host: shown, port: port)
            return """
            kassa: ready at \(base)\(embedded ? ", paying against the embedded Swedbank Pay simulator" : "")
              1. pay:     \(base)/demo/   API key \(apiKey ?? "(one of --api-keys)"): Create session, then pay with Swish
              2. explain: \(base)/admin/  admin token \(adminToken ?? "(your --admin-token)"): the session's timeline
              3. shell:   kassa events --db \(database) --kind session.created,state.transition
            """
        }
    }
}
