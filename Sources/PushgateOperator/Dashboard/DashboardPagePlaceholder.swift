enum DashboardPage {
    static let html = "<!doctype html><title>Pushgate</title>"
}
