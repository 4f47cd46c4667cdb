import FetchEngine
import FoundationEssentials

/// Where each metric comes from: the counters in `Metrics`, and the levels read when the
/// metrics are asked for (the engine's active transfers and open connections, the hosts'
/// queue, the jobs, the socket's clients, the stubs' hits). Built once by the Daemon.
struct MetricsSources: Sendable {
    let metrics: Metrics
    let engine: HTTPEngine
    let admission: HostAdmission
    let jobs: JobRegistry
    let stubs: StubStore
    let connections: @Sendable () -> Int
    /// Families that other parts of the daemon add (Daemon.init lists them): the HTTP
    /// cache's counters (fetchd_cache_*) belong here when the cache lands.
    var more: [@Sendable () -> [MetricFamily]] = []

    func families() -> [MetricFamily] {
        let m = metrics
        let hosts = m.hosts.all
        let durations = m.durationSeries().map { series -> MetricFamily.Sample in
            let labels: [(String, String)]
            if series.slot < hosts.count {
                let host = hosts[series.slot]
                labels = [("server_address", host.name), ("server_port", String(host.port)), ("url_scheme", host.scheme)]
            } else {
                labels = [("server_address", "other"), ("server_port", ""), ("url_scheme", "")]
            }
            return MetricFamily.Sample(labels: labels + [("status_class", series.statusClass)], buckets: series.buckets,
                                       sum: Double(series.sumMicroseconds) / 1e6)
        }
        let counts = jobs.counts
        let stubTotals = stubs.totals
        var families = [
            MetricFamily("http_client_request_duration_seconds", .histogram,
                         "Duration of HTTP client requests (each attempt, from its start to its last byte), by host and status class.",
                         samples: durations),
            MetricFamily("http_client_active_requests", .gauge, "HTTP client requests running in the engine now.",
                         value: engine.activeTransfers),
            MetricFamily("fetchd_queued_requests", .gauge, "Requests waiting for their host's limits now.",
                         value: admission.snapshot().scheduler.queued),
            MetricFamily("http_client_open_connections", .gauge,
                         "Connections to servers open now, in use or kept for reuse.", value: engine.openConnections),
            MetricFamily("fetchd_retries_total", .counter, "Attempts made again after a failure or a retryable status.",
                         value: m.value(.retries)),
            MetricFamily("fetchd_retry_after_pauses_total", .counter, "Hosts paused by a 429 or 503 answer with Retry-After.",
                         value: m.value(.retryAfterPauses)),
            MetricFamily("fetchd_host_limit_waits_total", .counter, "Attempts that waited in their host's queue.",
                         value: m.value(.limitWaits)),
            MetricFamily("fetchd_host_limit_wait_seconds_total", .counter, "Time attempts waited for their host's limits.",
                         samples: [.init(value: Double(m.value(.limitWaitMicroseconds)) / 1e6)]),
            MetricFamily("fetchd_sent_bytes_total", .counter, "Request body bytes sent by finished transfers.",
                         value: m.value(.sentBytes)),
            MetricFamily("fetchd_received_bytes_total", .counter, "Response body bytes received by finished transfers.",
                         value: m.value(.receivedBytes)),
            MetricFamily("fetchd_auth_credential_fetches_total", .counter,
                         "Credentials fetched for auth rules (a file read, a token request, a helper run).",
                         value: m.value(.authFetches)),
            MetricFamily("fetchd_auth_credential_failures_total", .counter, "Credential fetches that failed.",
                         value: m.value(.authFailures)),
            MetricFamily("fetchd_stub_hits_total", .counter, "Requests answered by a stub.", value: stubTotals.hits),
            MetricFamily("fetchd_stub_misses_total", .counter, "Requests a stub set had no stub for.", value: stubTotals.misses),
            MetricFamily("fetchd_jobs", .gauge, "Live jobs by state.", samples: [
                .init(labels: [("state", "queued")], value: Double(counts.queued)),
                .init(labels: [("state", "running")], value: Double(counts.running)),
                .init(labels: [("state", "waiting")], value: Double(counts.waiting)),
            ]),
            MetricFamily("fetchd_jobs_ended_total", .counter, "Jobs ended since start, by outcome.", samples: [
                .init(labels: [("outcome", "finished")], value: Double(counts.finished)),
                .init(labels: [("outcome", "failed")], value: Double(counts.failed)),
            ]),
            MetricFamily("fetchd_clients", .gauge, "Clients connected to the daemon's socket now.", value: connections()),
            MetricFamily("fetchd_job_events_dropped_total", .counter,
                         "jobEvent notifications dropped for subscribers that did not read them.",
                         value: m.value(.jobEventsDropped)),
            MetricFamily("fetchd_build_info", .gauge, "The daemon's version (always 1).",
                         samples: [.init(labels: [("version", FetchdVersion.text)], value: 1)]),
        ]
        for provider in more { families += provider() }
        return families
    }
}
