// The stream's vocabulary and JSONValue live in KassaProtocol, which client libraries use without
// the domain; everything that imports the domain sees them as before.
@_exported import KassaProtocol
