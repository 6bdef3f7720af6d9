// swift-tools-version:6.2
// Benchmark-only: a minimal Hummingbird WebSocket server speaking the part of
// Kassa's stream protocol that the ping workload uses. Built by bench/compare.sh,
// never by the product.
import PackageDescription

let package = Package(
    name: "PushServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: [.defaults]),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
    ],
    targets: [
        .executableTarget(name: "PushServer", dependencies: [
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
        ]),
    ]
)
