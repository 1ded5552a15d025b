// swift-tools-version:6.1
import Foundation
import PackageDescription

// jemalloc instead of glibc's malloc for `pushgate`: the gateway allocates on one event loop and
// frees on another, which glibc's malloc handles with costly consolidation and locking
// (Benchmarks/README.md has the side-by-side figures). Debian: libjemalloc-dev to build,
// libjemalloc2 to run.
// Sanitizer builds (`swift build/test --sanitize=...`) must set PUSHGATE_SYSTEM_MALLOC (to any
// value): the sanitizers replace malloc themselves, and a second allocator linked beside theirs
// frees memory it never allocated. PUSHGATE_SANITIZE (below) implies it.
let environment = ProcessInfo.processInfo.environment
let sanitizer = environment["PUSHGATE_SANITIZE"]
let allocator: [LinkerSetting] =
    environment["PUSHGATE_SYSTEM_MALLOC"] == nil && sanitizer == nil
    ? [.linkedLibrary("jemalloc", .when(platforms: [.linux]))] : []

let package = Package(
    name: "pushgate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushgate", targets: ["pushgate"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        // C libraries from the system (Debian: libnghttp2-dev, libssl-dev). The shim headers wrap
        // only what Swift cannot import (function-like macros).
        .systemLibrary(
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"]), .brew(["nghttp2"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // PostgreSQL's client library (Debian: libpq-dev), for the PostgreSQL store.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),

        // TLS on OpenSSL over memory BIOs, as a NIO channel handler.
        .target(
            name: "PushgateTLS",
            dependencies: [
                "COpenSSL",
                // The OpenSSL error queue reader.
                "PushgateCrypto",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        // Bytes to requests and streaming responses: HTTP/2 on nghttp2 (server and client),
        // HTTP/1.1 for operator routes, protocol sniffing, listeners, graceful shutdown.
        .target(
            name: "PushgateTransport",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "CNGHTTP2",
                "PushgateTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Secure randomness, hashing, ES256 (JWT) keys and signatures, and the error queue, on
        // libcrypto (NIOPosix only for its thread-specific variables: per-thread random pools).
        .target(name: "PushgateCrypto", dependencies: ["COpenSSL", .product(name: "NIOPosix", package: "swift-nio")]),
        // Provider authentication: APNs JWT (ES256) and client-certificate identities, the
        // per-connection token state. Pure and clock-injected; no I/O.
        .target(
            name: "PushgateProviderAuth",
            dependencies: [
                "PushgateCrypto", "PushgateModel", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // The power-aware scheduler: silent budgets, held queues, wake events. A pure state
        // machine, one instance per shard; no I/O, no locks, injected time.
        .target(
            name: "PushgateScheduler",
            dependencies: ["PushgateModel"],
            // The scheduler is one class over dense arrays, confined to its shard's thread; every
            // array access of a class property pays a dynamic exclusivity check (begin/end
            // access through thread-local storage), a large share of its time in
            // SchedulerBenchmark. Debug builds, which run the tests, keep the checks, so an
            // overlapping access still traps there.
            swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
        ),
        // One definition of each concept every layer shares: the push and its notification,
        // push type, priority, disposition, delivery kind, drop reasons, power and app states;
        // the error catalog; the bearer-header reader and the one JSON quoter; the one bounded
        // file read (configuration, secrets, keys). No other I/O and no dependencies, so that
        // the scheduler stays pure.
        .target(name: "PushgateModel"),
        // Several nodes on one database: who owns a device (leases, epochs, claims, fencing), as
        // pure state machines; the database's side is the PostgreSQL store's SQL.
        .target(name: "PushgateCluster", dependencies: ["PushgateStore"]),
        // This gateway as a node of a cluster: its lease kept, its devices claimed, and what
        // arrives for a device another node owns handed to that node.
        .target(
            name: "PushgateClusterNode",
            dependencies: [
                "PushgateCluster",
                "PushgateCrypto",
                "PushgateDelivery",
                "PushgateDeviceAPI",
                "PushgateHTTP",
                "PushgateModel",
                "PushgateOperator",
                "PushgateStore",
                "PushgateTransport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),

        // Durable state behind the NotificationStore protocol: records and commands, and the
        // group commit (ordering, the limit of waiting commands, closing) over a StoreBackend,
        // written once for every database.
        .target(
            name: "PushgateStore",
            dependencies: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                "PushgateModel",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The SQLite backend (WAL, fsync'd commits, one process per database): schema,
        // migrations, commands.
        .target(
            name: "PushgateStoreSQLite",
            dependencies: [
                "PushgateStore",
                "PushgateModel",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for binding the hot commands without GRDB's argument values.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The PostgreSQL backend (libpq in pipeline mode, one connection, commits as durable as
        // the server's synchronous_commit): schema, migrations under an advisory lock, commands,
        // reconnection, and the copy of a SQLite store into an empty database.
        .target(
            name: "PushgateStorePostgres",
            dependencies: [
                "PushgateCluster",
                "CLibPQ",
                "PushgateStore",
                "PushgateModel",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Devices, registrations and queues sharded over the event loops; delivery to event
        // streams; the store behind them.
        .target(
            name: "PushgateDelivery",
            dependencies: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                "PushgateModel",
                "PushgateScheduler",
                "PushgateCrypto",
                "PushgateStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Method and path to handler; the one JSON error format.
        .target(
            name: "PushgateHTTP",
            dependencies: [
                "PushgateTransport",
                "PushgateModel",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The APNs provider API: request validation (pure) and its route.
        .target(
            name: "PushgateProviderAPI",
            dependencies: [
                "PushgateModel",
                "PushgateCrypto",
                "PushgateProviderAuth",
                "PushgateDelivery",
                "PushgateHTTP",
                "PushgateTransport",
                // The connection's peer certificate, a provider identity.
                "PushgateTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // Refused pushes, by apns-id.
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Web Push's push resource (RFC 8030, RFC 8292 VAPID): request validation (pure) and
        // its route.
        .target(
            name: "PushgateWebPush",
            dependencies: [
                "PushgateModel",
                "PushgateCrypto",
                "PushgateDelivery",
                "PushgateHTTP",
                "PushgateTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The device agents' API: devices, registrations, event stream, acks.
        .target(
            name: "PushgateDeviceAPI",
            dependencies: [
                "PushgateModel",
                "PushgateCrypto",
                "PushgateDelivery",
                "PushgateHTTP",
                "PushgateTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The gateway itself: composes the APIs, operator routes and lifecycle.
        .target(
            name: "PushgateGateway",
            dependencies: [
                "PushgateCluster",
                "PushgateClusterNode",
                "PushgateDelivery",
                "PushgateDeviceAPI",
                "PushgateHTTP",
                "PushgateOperator",
                "PushgateProviderAPI",
                "PushgateProviderAuth",
                "PushgateScheduler",
                "PushgateStore",
                "PushgateStorePostgres",
                "PushgateStoreSQLite",
                "PushgateTLS",
                "PushgateTransport",
                "PushgateWebPush",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // SIGHUP, which reloads the configuration.
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // What operators see: Prometheus metrics, the admin API and its live event stream, the
        // dashboard, the admin token, the durable totals.
        .target(
            name: "PushgateOperator",
            dependencies: [
                "PushgateCluster",
                "PushgateCrypto",
                "PushgateDelivery",
                "PushgateHTTP",
                "PushgateModel",
                "PushgateStore",
                "PushgateTransport",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The device API from the device's side: its requests, creation and registration, for
        // the agent, the bench and the tests alike; and a device's background fetch (the silent
        // push's window, the app's command run within it).
        .target(
            name: "PushgateDeviceClient",
            dependencies: [
                "PushgateModel",
                // TLS failures, told apart for the agent's retry decision.
                "PushgateTLS",
                "PushgateTransport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "pushgate",
            dependencies: [
                "PushgateCrypto",
                "PushgateDeviceClient",
                "PushgateGateway",
                "PushgateModel",
                "PushgateProviderAuth",
                "PushgateStore",
                "PushgateStorePostgres",
                "PushgateStoreSQLite",
                "PushgateTLS",
                "PushgateTransport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            linkerSettings: allocator
        ),
        // Release-mode benchmark of the scheduler alone (events/s, bytes per idle device).
        .executableTarget(
            name: "SchedulerBenchmark",
            dependencies: ["PushgateScheduler", "PushgateModel"],
            path: "Benchmarks/SchedulerBenchmark"
        ),
        // Release-mode benchmark of the SQLite store alone, beside Benchmarks/store-floor.c.
        .executableTarget(
            name: "StoreBenchmark",
            dependencies: [
                "PushgateStoreSQLite", "PushgateStore", "PushgateModel",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/StoreBenchmark"
        ),

        .testTarget(
            name: "PushgateTLSTests",
            dependencies: [
                "PushgateTestFixtures",
                "PushgateTLS",
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushgateTransportTests",
            dependencies: [
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "PushgateTestFixtures",
                "PushgateTestKit",
                "PushgateTransport",
                "PushgateTLS",
                "CNGHTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "PushgateGatewayTests",
            dependencies: [
                "PushgateStoreTestKit",
                "PushgateTestFixtures",
                .product(name: "NIOHTTP1", package: "swift-nio"),
                "PushgateDeviceClient",
                "PushgateTestKit",
                "PushgateModel",
                "PushgateGateway",
                "PushgateOperator",
                "PushgateScheduler",
                "PushgateCrypto",
                "PushgateProviderAuth",
                "PushgateDelivery",
                "PushgateHTTP",
                "PushgateStore",
                "PushgateStoreSQLite",
                "PushgateTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "PushgateModelTests", dependencies: ["PushgateModel"]),
        .testTarget(
            name: "PushgateOperatorTests",
            dependencies: [
                "PushgateOperator",
                "PushgateDelivery",
                "PushgateModel",
                "PushgateStore",
                "PushgateStoreTestKit",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushgateHTTPTests",
            dependencies: [
                "PushgateHTTP",
                "PushgateModel",
                "PushgateTransport",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushgateDeviceAPITests",
            dependencies: [
                "PushgateDeviceAPI",
                "PushgateDelivery",
                "PushgateModel",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushgateDeviceClientTests",
            dependencies: [
                "PushgateDeviceClient",
                "PushgateModel",
                "PushgateTLS",
                "PushgateTransport",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushgateDeliveryTests",
            dependencies: [
                "PushgateStoreTestKit",
                "PushgateTestKit",
                "PushgateDelivery",
                "PushgateModel",
                "PushgateStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "PushgateWebPushTests",
            dependencies: [
                "PushgateWebPush",
                "PushgateDelivery",
                "PushgateCrypto",
                "PushgateModel",
                "PushgateTestTools",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushgateProviderAPITests",
            dependencies: [
                "PushgateProviderAPI",
                "PushgateModel",
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Where the test fixtures are (the test CA and certificates), for every test target.
        .target(name: "PushgateTestFixtures", path: "Tests/PushgateTestFixtures"),
        // What the test targets share: the test clock, the recording event sink, HTTP/2 frames
        // as they go over the wire and a client that writes them by hand, waiting for a
        // condition (`eventually`), and a gateway in the test's process (`withGateway`).
        .target(
            name: "PushgateTestKit",
            dependencies: [
                "PushgateDelivery",
                "PushgateDeviceClient",
                "PushgateGateway",
                "PushgateModel",
                "PushgateOperator",
                "PushgateStore",
                "PushgateStoreSQLite",
                "PushgateStoreTestKit",
                "PushgateTransport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/PushgateTestKit"
        ),
        // Runs openssl and python3 for the interoperability tests of several test targets.
        .target(name: "PushgateTestTools", path: "Tests/PushgateTestTools"),
        .testTarget(
            name: "PushgateSchedulerTests",
            dependencies: [
                "PushgateScheduler",
                "PushgateModel",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "PushgateClusterTests",
            dependencies: [
                "PushgateCluster", "PushgateClusterNode", "PushgateDelivery", "PushgateModel",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "PushgateProviderAuthTests",
            dependencies: ["PushgateProviderAuth", "PushgateCrypto", "PushgateModel", "PushgateTestTools"]
        ),
        .testTarget(
            name: "PushgateCryptoTests",
            dependencies: ["PushgateCrypto", "PushgateTestTools"]
        ),
        // A store backend in memory, for tests of any target: it runs the store conformance
        // suite beside SQLite and PostgreSQL, and can stand in for a database where none is
        // under test; and a throwaway PostgreSQL server, started as a plain process.
        .target(
            name: "PushgateStoreTestKit",
            dependencies: [
                "PushgateStore",
                "PushgateStorePostgres",
                "PushgateStoreSQLite",
                "PushgateModel",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/PushgateStoreTestKit"
        ),
        .testTarget(
            name: "PushgateStoreTests",
            dependencies: [
                "PushgateModel",
                "PushgateTestKit",
                "PushgateStore",
                "PushgateStorePostgres",
                "PushgateStoreSQLite",
                "PushgateStoreTestKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PushgateStoreSQLiteTests",
            dependencies: [
                "PushgateModel",
                "PushgateStore",
                "PushgateStoreSQLite",
                "PushgateStoreTestKit",
                // To write databases of older schema versions for the migration tests.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Runs the real `pushgate` binary against clients nobody here wrote (curl, nghttp, h2load).
        .testTarget(
            name: "PushgateCLITests",
            dependencies: [
                "PushgateTestFixtures",
                "PushgateTestKit",
                // The PostgreSQL server of the tests that run the gateway on PostgreSQL.
                "PushgateStoreTestKit",
                "pushgate",
                "PushgateTransport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["python"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// PUSHGATE_SANITIZE=address|thread|fuzzer instruments this package's own modules only, and links
// the sanitizer's runtime into its executables and tests. The dependencies keep the objects of
// the plain debug build in the same scratch path, so that CI's fuzzing and sanitizer runs
// recompile the gateway's 25,000 lines and not NIO and GRDB again, as `swift build --sanitize=`
// (every module) would. The races and memory errors looked for are in this package's code, and
// the dependencies' generic code it uses is specialized, and so instrumented, in its modules.
// "fuzzer" gives the libraries libFuzzer's coverage and ASan (Tests/Fuzz/run.sh links the
// harnesses against them) and the executables and tests ASan alone: libFuzzer brings its own
// main(), and ASan's runtime answers the coverage hooks of an executable that has none.
if let sanitizer {
    for target in package.targets where target.type != .system {
        let linked = sanitizer == "fuzzer" ? "address" : sanitizer
        let compiled = sanitizer == "fuzzer" && target.type == .regular ? "fuzzer,address" : linked
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=\(compiled)"])]
        if target.type == .executable || target.type == .test {
            // lld: gold warns about every ASan symbol it cannot export.
            target.linkerSettings =
                (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=\(linked)", "-use-ld=lld"])]
        }
    }
}
