import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client for tests that must send what a well-behaved
/// client never would: broken HTTP, half requests, hand-made WebSocket frames.
/// Call it from `onThread`.
final class RawSocket: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    /// Set by `abort`, which closes the descriptor itself.
    private var closed = false

    /// `source`: the local address to connect from (any of 127.0.0.0/8 on Linux), to be another client.
    init(port: Int, receiveBuffer: Int32? = nil, timeoutSeconds: Int = 10, source: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed") }
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw TestFailure("bind to \(source) failed") }
        }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // No close(fd) here: deinit closes it (a second close could hit a descriptor reused meanwhile).
        guard result == 0 else { throw TestFailure("connect to \(port) failed") }
    }

    /// The server's end of a connection taken from `listener` (nil when none came in `timeoutMs`).
    init?(acceptingFrom listener: BlackHoleListener, timeoutMs: Int32 = 5_000, timeoutSeconds: Int = 10) {
        var waiting = pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&waiting, 1, timeoutMs) == 1 else { return nil }
        fd = accept(listener.fd, nil, nil)
        guard fd >= 0 else { return nil }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { if !closed { close(fd) } }

    /// Resets the connection (RST, not FIN) and closes the descriptor, as a server that drops a
    /// connection at once does.
    func abort() {
        var reset = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
        close(fd)
        closed = true
    }

    /// Ends the connection now; the descriptor itself is closed by deinit.
    func hangUp() { shutdown(fd, Int32(SHUT_RDWR)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send failed") }
            offset += n
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads more bytes into the buffer; false at EOF or timeout.
    private func fill() -> Bool { receive() > 0 }

    /// One `recv` into the buffer: the byte count, 0 at EOF, -1 at the timeout or an error.
    private func receive() -> Int {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { buffer.append(contentsOf: chunk[0..<n]) }
        return n
    }

    /// True when the peer closes the connection (EOF, not the timeout) without sending anything more.
    func closesWithNothingMore() -> Bool { buffer.isEmpty && receive() == 0 }

    /// Everything until the peer closes (or the timeout).
    func readToEnd() -> [UInt8] {
        while fill() {}
        defer { buffer = [] }
        return buffer
    }

    /// An HTTP response head and body (Content-Length framed), or nil if the connection ended first.
    func readHTTPResponse() -> (status: Int, headers: [String: String], body: String)? {
        while true {
            if let end = buffer.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
                var lines = head.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ")
                var headers: [String: String] = [:]
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                while buffer.count < end.upperBound + length { guard fill() else { return nil } }
                let body = String(decoding: buffer[end.upperBound..<(end.upperBound + length)], as: UTF8.self)
                buffer.removeFirst(end.upperBound + length)
                return (statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0, headers, body)
            }
            guard fill() else { return nil }
        }
    }

    // MARK: WebSocket

    struct Frame {
        var fin: Bool
        var opcode: UInt8
        var payload: [UInt8]
        var text: String { String(decoding: payload, as: UTF8.self) }
        /// The close code of a close frame.
        var closeCode: UInt16? {
            opcode == 0x8 && payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil
        }
    }

    /// Performs the opening handshake; returns the HTTP status (101 when upgraded).
    func upgrade(path: String, protocol subprotocol: String? = "kassa.v1", headers: [String] = []) throws -> (status: Int, headers: [String: String], body: String) {
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocol { request += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
        for h in headers { request += h + "\r\n" }
        try send(request + "\r\n")
        guard let response = readHTTPResponse() else { throw TestFailure("no handshake answer") }
        return response
    }

    /// Sends one masked frame (clients must mask).
    /// `masked: false` sends the frame as only a server may (RFC 6455 §5.1 wants clients' frames masked).
    func sendFrame(opcode: UInt8, payload: [UInt8], fin: Bool = true, masked: Bool = true) throws {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            frame.append(maskBit | UInt8(payload.count))
        } else if payload.count < 65536 {
            frame.append(maskBit | 126)
            frame.append(UInt8(payload.count >> 8)); frame.append(UInt8(payload.count & 0xFF))
        } else {
            frame.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        guard masked else { return try send(frame + payload) }
        let mask: [UInt8] = [0x11, 0x22, 0x33, 0x44]
        frame.append(contentsOf: mask)
        for (i, b) in payload.enumerated() { frame.append(b ^ mask[i % 4]) }
        try send(frame)
    }

    func sendText(_ text: String) throws { try sendFrame(opcode: 0x1, payload: Array(text.utf8)) }

    /// The next frame from the server, or nil when the connection ended.
    func readFrame() -> Frame? {
        func need(_ n: Int) -> Bool {
            while buffer.count < n { guard fill() else { return false } }
            return true
        }
        guard need(2) else { return nil }
        let fin = buffer[0] & 0x80 != 0
        let opcode = buffer[0] & 0x0F
        var length = Int(buffer[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard need(4) else { return nil }
            length = Int(buffer[2]) << 8 | Int(buffer[3]); offset = 4
        } else if length == 127 {
            guard need(10) else { return nil }
            length = 0
            for i in 2..<10 { length = length << 8 | Int(buffer[i]) }
            offset = 10
        }
        guard need(offset + length) else { return nil }
        let payload = Array(buffer[offset..<(offset + length)])
        buffer.removeFirst(offset + length)
        return Frame(fin: fin, opcode: opcode, payload: payload)
    }

    /// Reads frames until one that is not a ping/pong/data frame of no interest: returns the first
    /// frame for which `stop` is true.
    func readFrame(until stop: (Frame) -> Bool) -> Frame? {
        while let frame = readFrame() {
            if stop(frame) { return frame }
        }
        return nil
    }
}

/// A port with a listener that accepts nothing by itself: a black hole for timeout tests, or an
/// upstream a test plays by hand, taking each connection with `RawSocket(acceptingFrom:)`.
final class BlackHoleListener: @unchecked Sendable {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw TestFailure("cannot listen") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}

/// A loopback port with nothing listening on it.
func closedPort() throws -> Int {
    let listener = try BlackHoleListener()
    return listener.port
}
