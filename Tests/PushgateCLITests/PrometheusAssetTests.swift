import Foundation
import PushgateTestFixtures
import Testing

/// The operator assets in `Deploy/` checked by the real promtool (Debian's `prometheus` package):
/// the alerting and recording rules and their unit tests, the example scrape configuration, and
/// every query of the Grafana dashboard. None of them needs a gateway: they are checked against
/// the metric names the gateway exports, listed here once.
@Suite("Prometheus rules, scrape configuration and Grafana dashboard (promtool)", .timeLimit(.minutes(2)))
struct PrometheusAssetTests {
    static let prometheusDirectory = TestFixtures.file("Deploy/prometheus")
    static let rules = prometheusDirectory.appendingPathComponent("pushgate.rules.yml")
    static let ruleTests = prometheusDirectory.appendingPathComponent("pushgate.rules.test.yml")
    static let configuration = prometheusDirectory.appendingPathComponent("prometheus.yml")
    static let dashboard = TestFixtures.file("Deploy/grafana/pushgate.json")

    /// What `GET /metrics` exports (docs/operators.md, "Metrics"; PRODUCT.md section 6).
    static let counters = [
        "pushgate_notifications_received_total", "pushgate_notifications_rejected_total",
        "pushgate_notifications_delivered_total", "pushgate_notifications_dropped_total",
        "pushgate_silent_budget_exhausted_total", "pushgate_piggybacked_total",
        "pushgate_connection_setup_failures_total", "pushgate_notifications_redelivered_total",
        "pushgate_fetch_results_total", "pushgate_fetch_windows_overflow_total", "pushgate_store_lost_batches_total",
        "pushgate_config_reloads_total", "pushgate_store_commit_failures_total",
        "pushgate_request_body_budget_refusals_total",
        "pushgate_connections_refused_total", "pushgate_device_creations_refused_total",
        "pushgate_http2_flood_closures_total",
        "pushgate_timeouts_total",
        // A gateway on PostgreSQL only.
        "pushgate_store_database_errors_total", "pushgate_cluster_forwarded_total", "pushgate_cluster_claims_total",
        "pushgate_cluster_lease_losses_total",
    ]
    static let gauges = [
        "pushgate_held_notifications", "pushgate_stored_notifications", "pushgate_unacked_notifications",
        "pushgate_connected_devices", "pushgate_held_oldest_age_seconds", "pushgate_deferred_oldest_age_seconds",
        "pushgate_silent_refill_scaled", "pushgate_http2_connections",
        "pushgate_http2_streams", "pushgate_build_info", "pushgate_store_healthy", "pushgate_request_body_bytes",
        "pushgate_queued_notification_bytes",
        // A gateway on PostgreSQL only.
        "pushgate_store_database_connected", "pushgate_store_database_connections", "pushgate_cluster_member",
        "pushgate_cluster_devices_held", "pushgate_cluster_nodes",
    ]
    static let histograms = [
        "pushgate_delivery_latency_seconds", "pushgate_hold_duration_seconds",
        "pushgate_store_commit_duration_seconds", "pushgate_store_commit_pushes", "pushgate_store_commit_batches",
    ]
    static let process = [
        "process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
        "process_open_fds", "process_max_fds", "process_start_time_seconds",
    ]
    /// Every series name a query may select: a histogram as its three series, or by its own name
    /// in prose.
    static let knownNames = Set(
        counters + gauges + process + histograms + histograms.flatMap { [$0 + "_bucket", $0 + "_sum", $0 + "_count"] }
    )

    // MARK: Rules

    @Test("promtool check rules: the rules file is valid, with no warnings")
    func checkRules() throws {
        let result = try promtool(["check", "rules", "--lint=all", "--lint-fatal", Self.rules.path])
        expectClean(result, "promtool check rules \(Self.rules.path)")
        #expect(result.stdout.contains("SUCCESS"), "\(result.stdout)")
    }

    @Test("promtool test rules: every alert fires on its series and stays quiet on the others")
    func ruleUnitTests() throws {
        let result = try promtool(["test", "rules", Self.ruleTests.path])
        expectClean(result, "promtool test rules \(Self.ruleTests.path)")
        #expect(result.stdout.contains("SUCCESS"), "\(result.stdout)")
    }

    @Test("every alert has for:, a severity, a summary and a description, and unit tests that fire it and that do not")
    func everyAlertIsComplete() throws {
        let alerts = try alertBlocks(String(contentsOf: Self.rules, encoding: .utf8))
        #expect(alerts.count >= 10, "alerts found: \(alerts.map(\.name))")
        let tests = try String(contentsOf: Self.ruleTests, encoding: .utf8)
        let cases = alertTestCases(tests)
        for alert in alerts {
            for key in ["for:", "severity:", "summary:", "description:"] {
                #expect(
                    alert.lines.contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix(key) },
                    "\(alert.name) has no \(key)"
                )
            }
            let severity = alert.lines.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("severity:") }
                .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) }
            #expect(severity == "critical" || severity == "warning", "\(alert.name): severity \(severity ?? "none")")
            #expect(
                cases[alert.name]?.fires == true,
                "no unit test in \(Self.ruleTests.lastPathComponent) where \(alert.name) fires"
            )
            #expect(
                cases[alert.name]?.quiet == true,
                "no unit test in \(Self.ruleTests.lastPathComponent) where \(alert.name) must not fire"
            )
        }
        let unknown = Set(cases.keys).subtracting(alerts.map(\.name))
        #expect(unknown.isEmpty, "unit tests of alerts the rules do not define: \(unknown.sorted())")
    }

    // MARK: Scrape configuration

    @Test("promtool check config: the example configuration, its rules file and its token file")
    func checkConfiguration() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = try String(contentsOf: Self.configuration, encoding: .utf8)
        #expect(configuration.contains("job_name: pushgate"), "the rules select job=\"pushgate\"")
        #expect(configuration.contains("type: Bearer"), "the gateway wants authorization: bearer <admin token>")
        try FileManager.default.copyItem(
            at: Self.rules,
            to: directory.appendingPathComponent(Self.rules.lastPathComponent)
        )

        // The token file the configuration names, with a token in it: promtool checks it exists.
        let named = try #require(
            configuration.split(separator: "\n").lazy
                .map { $0.trimmingCharacters(in: .whitespaces) }
                .first { $0.hasPrefix("credentials_file:") }?
                .dropFirst("credentials_file:".count).trimmingCharacters(in: .whitespaces),
            "prometheus.yml names no credentials_file for the admin token"
        )
        let token = directory.appendingPathComponent("admin-token")
        try Data("an-admin-token\n".utf8).write(to: token)
        if named.hasPrefix("/") {
            configuration = configuration.replacingOccurrences(of: named, with: token.path)
        } else {
            try FileManager.default.moveItem(at: token, to: directory.appendingPathComponent(named))
        }
        let copy = directory.appendingPathComponent("prometheus.yml")
        try Data(configuration.utf8).write(to: copy)

        let result = try promtool(["check", "config", "--lint=all", "--lint-fatal", copy.path])
        expectClean(result, "promtool check config \(copy.path)")
        #expect(result.stdout.contains("SUCCESS: 1 rule files found"), "\(result.stdout)")
        #expect(result.stdout.contains("is valid prometheus config file syntax"), "\(result.stdout)")
    }

    // MARK: Grafana dashboard

    @Test("every Grafana panel query is valid PromQL (promtool check rules on them as recording rules)")
    func dashboardQueriesAreValidPromQL() throws {
        let queries = try dashboardQueries()
        #expect(queries.count >= 25, "queries found: \(queries.count)")
        var file = "groups:\n  - name: grafana_panels\n    rules:\n"
        for query in queries {
            let expr = substituteVariables(query.expr)
            #expect(
                !expr.contains("$"),
                "panel \(query.panel) (\(query.refId)) uses a variable this test does not know: \(query.expr)"
            )
            file += "      # \(query.panel)\n"
            file += "      - record: grafana_panel_\(query.panelID)_\(query.refId)\n"
            file += "        expr: |-\n"
            file +=
                expr.split(separator: "\n", omittingEmptySubsequences: false).map { "          " + $0 }.joined(
                    separator: "\n"
                ) + "\n"
        }
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let rules = directory.appendingPathComponent("grafana-panels.rules.yml")
        try Data(file.utf8).write(to: rules)

        let result = try promtool(["check", "rules", "--lint=all", "--lint-fatal", rules.path])
        expectClean(result, "promtool check rules on the dashboard's queries:\n\(file)")
        #expect(result.stdout.contains("SUCCESS: \(queries.count) rules found"), "\(result.stdout)")
    }

    @Test("every panel has a query, and the dashboard shows every metric the gateway exports")
    func dashboardCoversTheMetrics() throws {
        let dashboard = try loadDashboard()
        let schemaVersion = dashboard["schemaVersion"] as? Int
        #expect(
            schemaVersion.map { (36...41).contains($0) } == true,
            "schemaVersion \(String(describing: schemaVersion))"
        )
        for panel in panels(dashboard) where panel["type"] as? String != "row" {
            let targets = panel["targets"] as? [[String: Any]] ?? []
            #expect(
                !targets.isEmpty && targets.allSatisfy { !($0["expr"] as? String ?? "").isEmpty },
                "panel \(panel["title"] ?? "?") has no query"
            )
        }
        let used = Set(try dashboardQueries().flatMap { names(in: $0.expr) })
        let missing = Set(Self.counters + Self.gauges + Self.process).subtracting(used)
            .union(Self.histograms.filter { !used.contains($0 + "_bucket") })
        #expect(missing.isEmpty, "metrics no panel shows: \(missing.sorted())")
    }

    @Test("the dashboard names no data source uid: panels use the ${datasource} variable")
    func dashboardHasNoHardCodedDataSource() throws {
        let dashboard = try loadDashboard()
        var references: [String] = []
        collectDataSources(dashboard, into: &references)
        #expect(!references.isEmpty)
        for reference in references {
            // "-- Grafana --" is Grafana's built-in annotation source, the same everywhere.
            #expect(
                reference.hasPrefix("$") || reference == "-- Grafana --",
                "a data source uid from one Grafana: \(reference)"
            )
        }
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        let source = variables.first { $0["type"] as? String == "datasource" }
        #expect(source?["name"] as? String == "datasource")
        #expect(source?["query"] as? String == "prometheus")
        // An exported dashboard keeps the exporter's choice in `current`: its uid.
        #expect(
            (source?["current"] as? [String: Any])?["value"] == nil,
            "the datasource variable carries a current value: \(String(describing: source?["current"]))"
        )
    }

    // MARK: Names

    @Test("the rules, their tests, the configuration and the dashboard name only metrics the gateway exports")
    func onlyKnownMetricNames() throws {
        for file in [Self.rules, Self.ruleTests, Self.configuration, Self.dashboard] {
            let text = try String(contentsOf: file, encoding: .utf8)
            let unknown = Set(names(in: text)).subtracting(Self.knownNames)
            #expect(
                unknown.isEmpty,
                "\(file.lastPathComponent) names metrics the gateway does not export: \(unknown.sorted())"
            )
        }
    }

    // MARK: Helpers

    struct PromtoolMissing: Error, CustomStringConvertible {
        var description: String {
            "promtool is not installed at /usr/bin/promtool: apt-get install prometheus (.ci/run installs it)"
        }
    }

    func promtool(_ arguments: [String]) throws -> ToolRun {
        let path = "/usr/bin/promtool"
        guard FileManager.default.isExecutableFile(atPath: path) else { throw PromtoolMissing() }
        return try run(executable: URL(fileURLWithPath: path), arguments, timeout: .seconds(60))
    }

    /// Exit 0, and no warning, lint finding or failure anywhere in what promtool printed (a lint
    /// finding alone exits 0 without --lint-fatal, and prints FAILED).
    func expectClean(_ result: ToolRun, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        // Paths are printed too; a directory's name is no finding.
        let output = [TestFixtures.repository.path, FileManager.default.temporaryDirectory.path].reduce(
            result.stdout + result.stderr
        ) {
            $0.replacingOccurrences(of: $1, with: "<dir>")
        }
        #expect(result.status == 0, "\(what) exited \(result.status):\n\(output)", sourceLocation: sourceLocation)
        for word in ["warn", "lint", "fail", "error"] {
            #expect(
                !output.lowercased().contains(word),
                "\(what) printed \"\(word)\":\n\(output)",
                sourceLocation: sourceLocation
            )
        }
    }

    func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-prometheus-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Series names in `text`: `pushgate_*` and `process_*` words that are not part of a
    /// recording rule's name (`level:pushgate_...:rate5m`).
    func names(in text: String) -> [String] {
        let pattern = try! NSRegularExpression(pattern: "(?<![A-Za-z0-9_:])(?:pushgate|process)_[a-z0-9_]+")
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range, in: text).map { String(text[$0]) }
        }
    }

    struct AlertBlock {
        var name: String
        var lines: [String]
    }

    /// Each `- alert:` of the rules file with its lines, up to the next rule or group.
    func alertBlocks(_ text: String) -> [AlertBlock] {
        var blocks: [AlertBlock] = []
        var inAlert = false
        for line in text.split(separator: "\n").map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("- alert:") {
                blocks.append(
                    AlertBlock(
                        name: trimmed.dropFirst("- alert:".count).trimmingCharacters(in: .whitespaces),
                        lines: []
                    )
                )
                inAlert = true
            } else if trimmed.hasPrefix("- record:") || trimmed.hasPrefix("- name:") {
                inAlert = false
            } else if inAlert {
                blocks[blocks.count - 1].lines.append(line)
            }
        }
        return blocks
    }

    /// For each alert name in the unit tests: whether some case expects it to fire (a list of
    /// alerts follows) and some expects nothing (`exp_alerts: []`).
    func alertTestCases(_ text: String) -> [String: (fires: Bool, quiet: Bool)] {
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.hasPrefix("#")
        }
        var cases: [String: (fires: Bool, quiet: Bool)] = [:]
        for (index, line) in lines.enumerated() where line.hasPrefix("alertname:") && index + 1 < lines.count {
            let name = line.dropFirst("alertname:".count).trimmingCharacters(in: .whitespaces)
            var seen = cases[name] ?? (false, false)
            if lines[index + 1] == "exp_alerts: []" { seen.quiet = true }
            if lines[index + 1] == "exp_alerts:", index + 2 < lines.count, lines[index + 2].hasPrefix("- exp_labels:") {
                seen.fires = true
            }
            cases[name] = seen
        }
        return cases
    }

    func loadDashboard() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.dashboard))
        return try #require(object as? [String: Any], "pushgate.json is not a JSON object")
    }

    /// Every panel, including those inside collapsed rows.
    func panels(_ dashboard: [String: Any]) -> [[String: Any]] {
        let top = dashboard["panels"] as? [[String: Any]] ?? []
        return top.flatMap { [$0] + ($0["panels"] as? [[String: Any]] ?? []) }
    }

    struct Query {
        var panel: String
        var panelID: Int
        var refId: String
        var expr: String
    }

    func dashboardQueries() throws -> [Query] {
        panels(try loadDashboard()).flatMap { panel in
            (panel["targets"] as? [[String: Any]] ?? []).compactMap { target in
                guard let expr = target["expr"] as? String else { return nil }
                return Query(
                    panel: panel["title"] as? String ?? "?",
                    panelID: panel["id"] as? Int ?? 0,
                    refId: target["refId"] as? String ?? "A",
                    expr: expr
                )
            }
        }
    }

    /// Grafana's variables as Prometheus would see them once Grafana has replaced them.
    func substituteVariables(_ expr: String) -> String {
        [
            ("${__rate_interval}", "1m"), ("$__rate_interval", "1m"), ("${__interval}", "1m"), ("$__interval", "1m"),
            ("${job}", ".+"), ("$job", ".+"), ("${instance}", ".+"), ("$instance", ".+"),
        ].reduce(expr) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
    }

    /// The uid (or the name, in the old string form) of every data source reference.
    func collectDataSources(_ value: Any, into references: inout [String]) {
        if let object = value as? [String: Any] {
            for (key, child) in object {
                if key == "datasource" {
                    if let name = child as? String {
                        references.append(name)
                    } else if let reference = child as? [String: Any] {
                        references.append(reference["uid"] as? String ?? "(no uid)")
                    }
                }
                collectDataSources(child, into: &references)
            }
        } else if let array = value as? [Any] {
            for child in array { collectDataSources(child, into: &references) }
        }
    }
}
