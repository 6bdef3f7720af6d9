import KassaCore
import KassaEdge

/// Problems in the shape the Swedbank Pay API answers with:
/// `{type, title, status, instance, detail, problems: [{name, description}]}`.
enum SwedbankProblem {
    static let base = "https://api.payex.com/psp/errordetail/"

    static func make(_ type: String, _ title: String, _ status: Int, _ detail: String,
                     problems: [(String, String)] = []) -> HTTPResponse {
        var object: [String: JSONValue] = [
            "type": .string(base + type), "title": .string(title), "status": .number(Double(status)),
            "detail": .string(detail), "instance": .string("https://api.payex.com/psp/problems/sim"),
        ]
        if !problems.isEmpty {
            object["problems"] = .array(problems.map { ["name": .string($0.0), "description": .string($0.1)] })
        }
        return HTTPResponse(status: status, contentType: Problem.contentType, body: JSONValue.object(object).bytes)
    }

    static func inputError(_ resource: String, _ problems: [(String, String)]) -> HTTPResponse {
        make("\(resource)/inputerror", "Error in input data", 400,
             "Input validation failed, error description in problems node!", problems: problems)
    }

    static func unauthorized() -> HTTPResponse {
        make("unauthorized", "Unauthorized", 401, "The bearer token is missing or not valid.")
    }

    static func notFound(_ resource: String, _ what: String) -> HTTPResponse {
        make("\(resource)/notfound", "Not Found", 404, "\(what) was not found.")
    }

    static func systemError(status: Int) -> HTTPResponse {
        make("systemerror", "System error", status, "An internal error occurred (simulated).")
    }
}
