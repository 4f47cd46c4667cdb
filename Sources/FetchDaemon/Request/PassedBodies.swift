import FetchEngine
import Glibc
import JSONRPC

/// A fetch's `bodyTo`, `bodyFrom` and `bodySize`: bodies that flow through descriptors the
/// client passed with its request line (SCM_RIGHTS), taken from the line in the order
/// bodyFrom, bodyTo. Each is owned from here on by what reads or writes it, which closes it
/// when the job ends (or when it is freed, if the request never became a job).
struct PassedBodies {
    /// Where the response body is written (`bodyTo: "fd"`).
    var to: DescriptorSink?
    /// Where the request body is read from (`bodyFrom: "fd"`).
    var from: DescriptorSource?
    /// The request named no `method`: one with a body from a descriptor is a POST.
    var methodGiven = true

    init() {}

    /// Reads the three fields (after the request model and `responseBody`).
    init(reading reader: inout ParamReader, model: RequestModel, mode: ResponseBody.Mode,
         descriptors: LineDescriptors?) throws {
        let wantsFrom = try Self.readFD(&reader, "bodyFrom")
        let wantsTo = try Self.readFD(&reader, "bodyTo")
        let size = try reader.integer("bodySize", in: 0...Int.max)
        if size != nil && !wantsFrom {
            throw RPCError.invalidParams(field: reader.field("bodySize"), "only with bodyFrom")
        }
        if wantsFrom, model.body != .none {
            throw RPCError.invalidParams(field: reader.field("bodyFrom"),
                                         "only one of json, form, body, bodyBase64, bodyFile, bodyFrom may be given")
        }
        if wantsTo, mode.streams {
            throw RPCError.invalidParams(field: reader.field("bodyTo"), "not with responseBody \"\(mode.rawValue)\"")
        }
        methodGiven = reader.isPresent("method")
        if wantsFrom {
            let fd = try Self.take(descriptors, field: reader.field("bodyFrom"))
            do {
                from = try DescriptorSource(descriptor: fd, length: size.map(Int64.init))
            } catch {
                close(fd)
                throw RPCError.invalidParams(field: reader.field("bodyFrom"), error.detail)
            }
        }
        if wantsTo {
            let fd = try Self.take(descriptors, field: reader.field("bodyTo"))
            do {
                to = try DescriptorSink(descriptor: fd)
            } catch {
                close(fd)
                throw RPCError.invalidParams(field: reader.field("bodyTo"), error.detail)
            }
        }
    }

    /// `"fd"`, the one value these fields take.
    private static func readFD(_ reader: inout ParamReader, _ key: String) throws -> Bool {
        guard let value = try reader.string(key) else { return false }
        guard value == "fd" else { throw RPCError.invalidParams(field: reader.field(key), "expected \"fd\"") }
        return true
    }

    private static func take(_ descriptors: LineDescriptors?, field: String) throws -> Int32 {
        guard let fd = descriptors?.take() else {
            throw RPCError.invalidParams(field: field, "no descriptor came with the request line (SCM_RIGHTS, on the sendmsg of its first byte)")
        }
        return fd
    }

    /// The delivery of a response body that streams (nil: it comes whole in the answer).
    func delivery(mode: ResponseBody.Mode, policy: RetryPolicy) -> (any BodyDelivery)? {
        if let to { return DescriptorDelivery(sink: to, policy: policy) }
        switch mode {
        case .stream: return NotificationDelivery(policy: policy)
        case .lines: return LinesDelivery(policy: policy)
        case .events: return EventsDelivery()
        case .auto, .text, .base64, .json, .none: return nil
        }
    }

    /// The request as these bodies make it: the response to the delivery's receiver, the
    /// body from the descriptor (application/octet-stream unless the request says).
    func apply(to request: inout HTTPRequest, delivery: (any BodyDelivery)?) {
        if let receiver = delivery?.receiver { request.destination = .stream(receiver) }
        guard let from else { return }
        request.body = .stream(StreamedBody(from))
        if request.header(named: "Content-Type") == nil,
           !request.removedHeaders.contains(where: { $0.caseInsensitiveEquals("Content-Type") }) {
            request.headers.append(HTTPHeader("Content-Type", "application/octet-stream"))
        }
    }

    /// The stage a job with these bodies adds (nil: none streams).
    func stage(delivery: (any BodyDelivery)?) -> BodyDeliveryStage? {
        delivery == nil && from == nil ? nil : BodyDeliveryStage(delivery: delivery, upload: from)
    }
}

extension DescriptorSource: ClosableBody {}
