import JSONRPC

/// `getMetrics {"format": "prometheus" | "json"}`: the daemon's metrics (operations.md,
/// "Metrics"), as Prometheus' text (`{"text"}`) or as JSON (`{"metrics": [...]}`).
struct GetMetricsMethod: InlineRPCMethod {
    static let name = "getMetrics"

    let sources: MetricsSources

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        var reader = try ParamReader(params)
        let format = try reader.string("format") ?? "prometheus"
        try reader.finish()
        switch format {
        case "prometheus": return ["text": .string(MetricsReport.prometheusText(sources.families()))]
        case "json": return ["metrics": MetricsReport.json(sources.families())]
        default: throw RPCError.invalidParams(field: "format", "expected \"prometheus\" or \"json\"")
        }
    }
}
