/// Why the store could not do what was asked, in words an operator can act on.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) { self.description = description }
}
