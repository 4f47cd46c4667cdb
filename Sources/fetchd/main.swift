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
signal(SIGTERM, SIG_IGN)
signal(SIGINT, SIG_IGN)
// SIGHUP reloads --config (a signal source below); its default action would end the daemon.
signal(SIGHUP, SIG_IGN)

let daemon: Daemon
do {
    daemon = try Daemon(options: options, environment: ProcessInfo.processInfo.environment)
} catch {
    printError("fetchd: \(error)")
    exit(1)
}

let stop = DispatchSemaphore(value: 0)
let signalQueue = DispatchQueue(label: "fetchd.signals")
let signalSources = [SIGTERM, SIGINT].map { number in
    let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
    // @Sendable: the handler runs on the signal queue, not on the main actor of this file.
    source.setEventHandler { @Sendable in stop.signal() }
    source.resume()
    return source
}

let hangUpSource = DispatchSource.makeSignalSource(signal: SIGHUP, queue: signalQueue)
hangUpSource.setEventHandler { @Sendable in daemon.hangUp() }
hangUpSource.resume()

daemon.start()
stop.wait()
daemon.shutdown()
withExtendedLifetime((signalSources, hangUpSource)) {}
exit(0)

/// One line on standard error.
func printError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}
