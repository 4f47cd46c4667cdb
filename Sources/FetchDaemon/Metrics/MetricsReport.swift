import FetchEngine
import JSONRPC

/// One metric family as `getMetrics` and `/metrics` show it: a name in Prometheus form, its
/// type, its help line and its samples. Made when the metrics are asked for, never on a
/// request's path.
struct MetricFamily: Sendable {
    enum Kind: String, Sendable {
        case counter, gauge, histogram
    }

    struct Sample: Sendable {
        var labels: [(String, String)] = []
        var value: Double = 0
        /// Histograms: per-bucket counts (not cumulative, the last +Inf) and the sum.
        var buckets: [Int] = []
        var sum: Double = 0
    }

    let name: String
    let kind: Kind
    let help: String
    var samples: [Sample]

    init(_ name: String, _ kind: Kind, _ help: String, samples: [Sample]) {
        self.name = name
        self.kind = kind
        self.help = help
        self.samples = samples
    }

    /// A family with one unlabelled sample.
    init(_ name: String, _ kind: Kind, _ help: String, value: Int) {
        self.init(name, kind, help, samples: [Sample(value: Double(value))])
    }
}

/// What `getMetrics` returns and `/metrics` serves, in Prometheus' text format 0.0.4 or as JSON.
enum MetricsReport {
    static func prometheusText(_ families: [MetricFamily]) -> String {
        var out = ""
        out.reserveCapacity(4096)
        for family in families {
            out += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.kind.rawValue)\n"
            for sample in family.samples {
                guard family.kind == .histogram else {
                    out += family.name + labelText(sample.labels) + " " + number(sample.value) + "\n"
                    continue
                }
                var cumulative = 0
                for (index, count) in sample.buckets.enumerated() {
                    cumulative += count
                    let bound = index < Metrics.bucketBounds.count ? number(Metrics.bucketBounds[index]) : "+Inf"
                    out += family.name + "_bucket" + labelText(sample.labels + [("le", bound)]) + " \(cumulative)\n"
                }
                out += family.name + "_sum" + labelText(sample.labels) + " " + number(sample.sum) + "\n"
                out += family.name + "_count" + labelText(sample.labels) + " \(cumulative)\n"
            }
        }
        return out
    }

    static func json(_ families: [MetricFamily]) -> JSONValue {
        .array(families.map { family in
            [
                "name": .string(family.name), "type": .string(family.kind.rawValue), "help": .string(family.help),
                "samples": .array(family.samples.map { sample in
                    var object: JSONObject = ["labels": .object(JSONObject(sample.labels.map { ($0.0, JSONValue.string($0.1)) }))]
                    if family.kind == .histogram {
                        var cumulative = 0
                        object["buckets"] = .array(sample.buckets.enumerated().map { index, count in
                            cumulative += count
                            let bound: JSONValue = index < Metrics.bucketBounds.count ? .double(Metrics.bucketBounds[index]) : "+Inf"
                            return ["le": bound, "count": JSONValue(cumulative)]
                        })
                        object["sum"] = .double(sample.sum)
                        object["count"] = JSONValue(cumulative)
                    } else {
                        object["value"] = sample.value == sample.value.rounded() && abs(sample.value) < 9e15
                            ? JSONValue(Int(sample.value)) : .double(sample.value)
                    }
                    return .object(object)
                }),
            ]
        })
    }

    private static func labelText(_ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return "" }
        return "{" + labels.map { "\($0.0)=\"\(escaped($0.1))\"" }.joined(separator: ",") + "}"
    }

    /// Label values escape backslash, double quote and newline (the text format's rule).
    private static func escaped(_ value: String) -> String {
        guard value.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return value }
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    private static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 9e15 { return String(Int(value)) }
        return String(value)
    }
}
