import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The width ArgumentParser wraps help to, found as it finds it: `COLUMNS`, else the terminal
/// on stdout, else 80. Help text wrapped here to less than this is left as it is.
enum HelpScreen {
    static var columns: Int {
        if let columns = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), columns > 0 {
            return columns
        }
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }
}
