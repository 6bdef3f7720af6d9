extension String {
    /// Zeros in front up to `width` characters: `"5".leftPadded(to: 2)` is `"05"`.
    public func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
