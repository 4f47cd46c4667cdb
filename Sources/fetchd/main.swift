internal import CLinux
import FetchDaemon
import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc

// fetchd: arguments, signals, start. Everything else lives in FetchDaemon.

let command: DaemonOptions.Command
do {
    command = try DaemonOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    printError("fetchd: \(error.description)")
    exit(2)
}

let options: DaemonOptions
switch command {
case .help:
    print(DaemonOptions.helpText)
    exit(0)
case .version:
    print("fetchd \(FetchdVersion.text) (\(HTTPEngine.curlVersion))")
    exit(0)
case .run(let parsed):
    do {
        options = try parsed.loadingConfig()
    } catch {
        printError("fetchd: \(error.description)")
        exit(1)
    }
}

// Two malloc arenas are plenty for a daemon whose threads mostly hand work over; more only
// keep freed memory as resident per thread.
_ = fetchd_limit_malloc_arenas(2)
signal(SIGPIPE, SIG_IGN)
// SIGTERM and SIGINT stop the daemon, SIGHUP reloads --config. Blocked here, before the
// daemon makes any thread (each inherits the mask), and taken by this thread with sigwait:
// one that comes while the daemon starts waits as pending. (A libdispatch signal source
// registers itself asynchronously, and a SIGTERM in that gap is lost: with one, 1 in about
// 160 start/ping/stop cycles hangs.)
_ = fetchd_block_daemon_signals()

let daemon: Daemon
do {
    daemon = try Daemon(options: options, environment: ProcessInfo.processInfo.environment)
} catch {
    printError("fetchd: \(error)")
    exit(1)
}

daemon.start()
while fetchd_wait_daemon_signal() == SIGHUP {
    daemon.hangUp()
}
daemon.shutdown()
exit(0)

/// One line on standard error.
func printError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}
