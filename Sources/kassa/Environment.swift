import ArgumentParser
import Foundation

/// A flag's value, else its environment variable's, else the default.
func setting(_ flag: String?, _ variable: String, default fallback: String) -> String {
    if let flag { return flag }
    if let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty { return value }
    return fallback
}

func setting(_ flag: Int?, _ variable: String, default fallback: Int) throws -> Int {
    if let flag { return flag }
    guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else { return fallback }
    guard let number = Int(value) else { throw ValidationError("\(variable) must be a whole number, not \(value)") }
    return number
}

func commaList(_ value: String) -> [String] {
    value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
}

/// `host:port` → parts; a bare port means loopback.
func parseListen(_ value: String) throws -> (host: String, port: Int) {
    let parts = value.split(separator: ":", omittingEmptySubsequences: false)
    if parts.count == 1, let port = Int(parts[0]) { return ("127.0.0.1", port) }
    guard parts.count == 2, let port = Int(parts[1]), (0...65535).contains(port), !parts[0].isEmpty else {
        throw ValidationError("--listen must be HOST:PORT, not \(value)")
    }
    return (String(parts[0]), port)
}

func printToTerminal(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
