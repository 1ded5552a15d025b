/// A device's reported power state. A device that never reported one is `awake`: an agent that
/// says nothing about power is treated like a plugged-in device, so nothing it is sent waits on a
/// state it will never leave.
public enum DevicePower: String, Sendable, Hashable, CaseIterable {
    case awake
    case idle
    /// No silent push is released on budget; wake events still release everything.
    case lowPower
}

/// An app's reported state on its device.
public enum AppState: String, Sendable, Hashable, CaseIterable {
    case foreground
    case background
    /// Force-quit: held silent pushes are dropped and new ones discarded until `foreground`, as on
    /// a real device, where only the user relaunching the app lifts it (so `background` does not).
    case terminated
}
