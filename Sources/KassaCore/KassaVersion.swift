public enum KassaVersion {
    public static let string = "0.1.0"
}
