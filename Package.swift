// swift-tools-version:6.0
import PackageDescription

// Every target is compiled in Swift 6 language mode (strict concurrency) with the
// upcoming features that make intent explicit.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "fetchd",
    products: [
        .executable(name: "fetchd", targets: ["fetchd"]),
    ],
    targets: [
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CJansson",
            pkgConfig: "jansson",
            providers: [.apt(["libjansson-dev"])]
        ),
        // SQLite (durable jobs, the HTTP cache's index) and hiredis (limits shared through Redis).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // No pkgConfig: hiredis's .pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM warns about;
        // the shim includes <hiredis/hiredis.h> from /usr/include and the modulemap links it.
        .systemLibrary(
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        // Linux calls Swift's Glibc module does not show (epoll, eventfd, SO_PEERCRED).
        .target(name: "CLinux"),
        // SHA-256 on the CPU's SHA extensions, the fast path of FetchEngine's digest.
        .target(name: "CDigest"),
        // HTTP: libcurl multi on one thread. Knows nothing of JSON or sockets.
        .target(name: "FetchEngine", dependencies: ["CCurl", "CLinux", "CDigest"], swiftSettings: strict),
        // JSON-RPC 2.0: JSON values, framing, dispatch. Knows nothing of HTTP.
        // jansson's parse trees from a per-thread arena (its json_set_alloc_funcs).
        .target(name: "CJanssonArena"),
        .target(name: "JSONRPC", dependencies: ["CJansson", "CJanssonArena"], swiftSettings: strict),
        // The daemon joins them: socket server, one file per method, jobs, configuration.
        .target(name: "FetchDaemon", dependencies: ["FetchEngine", "JSONRPC", "CLinux", "CSQLite", "CHiredis"], swiftSettings: strict),
        .executableTarget(name: "fetchd", dependencies: ["FetchDaemon", "CLinux"], swiftSettings: strict),
        .testTarget(name: "FetchEngineTests", dependencies: ["FetchEngine", "CCurl", "CLinux"], swiftSettings: strict),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC", "CJanssonArena"], swiftSettings: strict),
        .testTarget(name: "FetchDaemonTests", dependencies: ["FetchDaemon", "JSONRPC", "FetchEngine"], swiftSettings: strict),
    ]
)
