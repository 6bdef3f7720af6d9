import Foundation

/// The payment order API versions of Swedbank Pay, and how a request picks one.
///
/// Source: developer.swedbankpay.com, checkout-v3 "payment-request-3-1": the version is a
/// `version=` parameter of the `Content-Type` (or of `Accept` on a GET); valid are 3.1, 3.0
/// and 2.0; without one the request is 2.0, except that `productName: "Checkout3"` in the body
/// makes it 3.0 (3.1 dropped `productName`). The SDKs and the sample backends send no version
/// parameter and pick v3 by `productName` alone (swedbank-pay-sdk-android
/// mobilesdk/src/main/java/com/swedbankpay/mobilesdk/PaymentOrder.kt; swedbank-pay-sdk-mobile-example-merchant
/// examples/node.js/tests/paymentOrderRequest_v3.json).
public enum PaymentOrderVersion: String, Sendable, CaseIterable {
    case v2 = "2.0"
    case v3_0 = "3.0"
    case v3_1 = "3.1"

    public var isV3: Bool { self != .v2 }

    /// The media type that asks for this version (literals: every upstream call of an order sends it).
    public var mediaType: String {
        switch self {
        case .v2: "application/json;version=2.0"
        case .v3_0: "application/json;version=3.0"
        case .v3_1: "application/json;version=3.1"
        }
    }

    /// The version a request asks for; nil when its media type names a version that does not exist.
    public static func requested(contentType: String?, productName: String?) -> PaymentOrderVersion? {
        if let parameter = versionParameter(contentType) { return PaymentOrderVersion(rawValue: parameter) }
        return isCheckout3(productName) ? .v3_0 : .v2
    }

    /// `productName` that makes an order v3.0; the SDKs compare it ignoring case.
    public static func isCheckout3(_ productName: String?) -> Bool {
        productName?.lowercased() == "checkout3"
    }

    static func versionParameter(_ mediaType: String?) -> String? {
        guard let mediaType else { return nil }
        for parameter in mediaType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingHTTPSpace() }
            if pair.count == 2, pair[0].lowercased() == "version" { return String(pair[1]) }
        }
        return nil
    }
}
