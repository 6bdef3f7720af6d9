// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Kassa",
    // Supported on Linux only (Debian 12 and later): the edge runs libwebsockets on libev, and
    // both come from the distribution's packages. No Apple platform is built or tested.
    products: [
        .executable(name: "kassa", targets: ["kassa"]),
        // The Swift client library for apps and services: Codable stream types and a resuming session client.
        .library(name: "KassaClient", targets: ["KassaClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // Client tokens (ChaCha20-Poly1305, HKDF) and digests: library crypto, never our own.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // The executable's start, signals and graceful stop.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // KassaClient's WebSocket (SwiftNIO): works on Linux and Apple platforms alike, where Foundation's
        // URLSession has no WebSockets on Linux. The gateway and the load client do not link it.
        .package(url: "https://github.com/hummingbird-project/swift-websocket", from: "1.6.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // Traces: the gateway speaks swift-distributed-tracing's API; the executable exports the spans
        // with swift-otel over OTLP/HTTP only (its gRPC exporter, and gRPC's cold build, left out).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // C libraries, each wrapped by exactly one Swift module below.
        .systemLibrary(name: "CLibWebSockets", pkgConfig: "libwebsockets",
                       providers: [.apt(["libwebsockets-dev", "libev-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLZ4", pkgConfig: "liblz4",
                       providers: [.apt(["liblz4-dev"])]),

        // The stream's frames and vocabulary, and JSON values: no I/O, no dependency; shared by the
        // gateway, the load client and KassaClient, so the protocol is defined once.
        .target(name: "KassaProtocol"),
        // Domain: no I/O.
        .target(name: "KassaCore", dependencies: ["KassaProtocol", .product(name: "Crypto", package: "swift-crypto")]),
        // The client library: a session stream that resumes by itself, over swift-websocket.
        .target(name: "KassaClient", dependencies: [
            "KassaProtocol",
            .product(name: "WSClient", package: "swift-websocket"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // libwebsockets HTTP + WebSocket server.
        .target(name: "KassaEdge", dependencies: [
            "KassaCore", "CLibWebSockets",
        ]),
        // libcurl upstream client.
        .target(name: "KassaUpstream", dependencies: ["CCurl", "KassaCore"]),
        // SQLite event log and session store.
        .target(name: "KassaStore", dependencies: [
            "KassaCore", "CLZ4", .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        // The Swedbank Pay stand-in, served by its own edge.
        .target(name: "KassaSimulator", dependencies: ["KassaCore", "KassaEdge"]),
        // Routes and handlers.
        .target(name: "KassaGateway", dependencies: [
            "KassaCore", "KassaEdge", "KassaUpstream", "KassaStore",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "Tracing", package: "swift-distributed-tracing"),
        ], resources: [
            // Embedded in the binary (PackageResources), so a deployment is one file.
            .embedInCode("Resources/openapi.yaml"), .embedInCode("Resources/asyncapi.yaml"), .embedInCode("Resources/schemas.yaml"),
            .embedInCode("Resources/kassa.js"), .embedInCode("Resources/kassa.d.ts"),
            .embedInCode("Resources/admin.html"), .embedInCode("Resources/admin.js"), .embedInCode("Resources/admin.css"),
            .embedInCode("Resources/demo.html"), .embedInCode("Resources/demo.js"), .embedInCode("Resources/demo.css"),
            .embedInCode("Resources/menu.js"),
        ]),
        // `kassa load`: scripted WebSocket load against a gateway.
        .target(name: "KassaLoad", dependencies: [
            "KassaCore", "KassaEdge",
            .product(name: "Histogram", package: "hdrhistogram-swift"),
        ]),
        // libFuzzer targets for every parser (bench/fuzz.sh builds them with -sanitize=fuzzer).
        .executableTarget(name: "KassaFuzz", dependencies: ["KassaCore", "KassaEdge", "KassaLoad", "KassaUpstream"],
                          swiftSettings: [.enableExperimentalFeature("Extern")]),
        // The executable wires the parts (KassaNode) and runs them as services; the embedded
        // simulator is wired here too, so the gateway module never imports it.
        .executableTarget(name: "kassa", dependencies: [
            "KassaCore", "KassaGateway", "KassaEdge", "KassaStore", "KassaUpstream", "KassaSimulator", "KassaLoad",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "OTel", package: "swift-otel"),
        ]),
        // The pure modules alone: no server, no socket, no database; fast.
        .testTarget(name: "KassaUnitTests", dependencies: ["KassaCore", "KassaEdge", .product(name: "Crypto", package: "swift-crypto")]),
        // End to end: real servers on loopback, real curl, real SQLite files, Chromium. The helpers
        // (a scoped test node, raw sockets, child processes, the session client) are in Tests/Support.
        .testTarget(name: "KassaTests", dependencies: [
            "KassaCore", "KassaEdge", "KassaUpstream", "KassaStore", "KassaGateway", "KassaSimulator", "KassaLoad", "kassa", "KassaClient",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ], path: "Tests", sources: ["KassaTests", "Support"]),
    ]
)
