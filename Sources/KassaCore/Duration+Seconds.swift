extension Duration {
    /// The duration as a number of seconds (metrics, reports) or milliseconds (event durations).
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    public var inMilliseconds: Double { inSeconds * 1000 }
}
