/// The Merchant Backend API of the Swedbank Pay Mobile SDK (seed 000).
public enum MerchantAPI {
    /// The API key header, as the seed's examples name it.
    public static let apiKeyHeader = "your-api-key"
}
