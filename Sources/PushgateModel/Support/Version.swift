/// The version this build reports (`pushgate --version`, `pushgate_build_info`): the API
/// version `openapi.yaml` describes.
public enum PushgateVersion {
    public static let current = "0.4.0"
}
