/// The cache's families for getMetrics and --metrics-listen (operations.md "Metrics"): the same
/// counts getCacheStats answers, read when the metrics are asked for (nothing per request).
extension HTTPCache {
    func metricFamilies() -> [MetricFamily] {
        let (counts, entries, bytes) = stats
        let outcomes: [(String, Int)] = [
            ("hit", counts.hits), ("miss", counts.misses), ("revalidated", counts.revalidated),
            ("stale", counts.stale), ("collapsed", counts.collapsed), ("bypass", counts.bypassed),
        ]
        return [
            MetricFamily("fetchd_cache_requests_total", .counter, "Requests the HTTP cache saw, by what it did (a result's cache field).",
                         samples: outcomes.map { .init(labels: [("outcome", $0.0)], value: Double($0.1)) }),
            MetricFamily("fetchd_cache_entries", .gauge, "Answers stored in the HTTP cache now.", value: entries),
            MetricFamily("fetchd_cache_bytes", .gauge, "Bytes the HTTP cache holds now (bodies and headers).",
                         samples: [.init(value: Double(bytes))]),
        ]
    }
}
