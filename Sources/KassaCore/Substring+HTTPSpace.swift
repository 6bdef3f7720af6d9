extension Substring {
    /// Without the spaces and tabs around it (HTTP's optional whitespace), found by bytes.
    /// Foundation's `trimmingCharacters(in:)` reads through UTF-16: a visible part of every
    /// request with a body, whose media type is checked.
    public func trimmingHTTPSpace() -> Substring {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }), let last = utf8.lastIndex(where: { !isSpace($0) }) else {
            return self[endIndex...]
        }
        // Past the last byte that is no space: a space or the end follows, so this is a character boundary.
        return self[first..<utf8.index(after: last)]
    }
}
