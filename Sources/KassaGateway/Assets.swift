import KassaEdge

/// The files under `Resources/`, embedded in the binary when it is built, so a
/// deployment is one file. Edit them as files; the pages' script and style are
/// files too, so the pages run under a CSP with no `'unsafe-inline'`.
enum Assets {
    static let openAPI = withSharedSchemas(PackageResources.openapi_yaml)
    static let asyncAPI = withSharedSchemas(PackageResources.asyncapi_yaml)
    static let kassaJS = PackageResources.kassa_js
    static let kassaTypes = PackageResources.kassa_d_ts
    static let adminHTML = PackageResources.admin_html
    static let adminJS = PackageResources.admin_js
    static let adminCSS = PackageResources.admin_css
    static let demoHTML = PackageResources.demo_html
    static let demoJS = PackageResources.demo_js
    static let demoCSS = PackageResources.demo_css
    static let menuJS = PackageResources.menu_js

    /// The line in openapi.yaml and asyncapi.yaml (under `components.schemas`) that stands for
    /// schemas.yaml: the HTTP and stream contracts share one definition of each shared schema.
    static let sharedSchemasMarker = Array("    # kassa:shared-schemas\n".utf8)

    static func withSharedSchemas(_ document: [UInt8]) -> [UInt8] {
        var shared = PackageResources.schemas_yaml
        while shared.last == UInt8(ascii: "\n") { shared.removeLast() }
        shared.append(UInt8(ascii: "\n"))
        let marker = sharedSchemasMarker
        guard let start = (0...(document.count - marker.count)).first(where: { document[$0..<($0 + marker.count)].elementsEqual(marker) }) else {
            preconditionFailure("an API document lacks the shared-schemas marker")
        }
        return Array(document[..<start]) + shared + Array(document[(start + marker.count)...])
    }

    /// Scripts, styles and connections only from this origin; never framed; no plugins.
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    /// The demo checkout also frames the issuer's 3-D Secure pages and posts forms to them,
    /// wherever the issuer is: as a card checkout must.
    static let demoContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        + "connect-src 'self'; frame-src 'self' https: http:; frame-ancestors 'none'; base-uri 'none'; form-action 'self' https: http:"
}

extension HTTPResponse {
    /// One of the gateway's static files, under the pages' CSP.
    static func asset(_ bytes: [UInt8], contentType: String, policy: String = Assets.contentSecurityPolicy) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: contentType,
                     headers: [("content-security-policy", policy), ("cache-control", "no-cache"),
                               ("x-content-type-options", "nosniff"), ("referrer-policy", "no-referrer")],
                     body: bytes)
    }
}
