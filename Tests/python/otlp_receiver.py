"""An OTLP/HTTP trace receiver for the tests: takes POST /v1/traces (protobuf, gzip or not),
decodes each ExportTraceServiceRequest with OpenTelemetry's own proto package (PyPI
opentelemetry-proto), answers as a collector does, and prints every span as one JSON line.

The first line printed is `port N`, the ephemeral loopback port it listens on. It stops
when its stdin closes. With `--count` (benchmarks) it prints nothing per span, only
`spans N` at the end.
"""
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

lock = threading.Lock()
counting = "--count" in sys.argv[1:]
received = 0


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def attributes(pairs):
    return {a.key: value(a.value) for a in pairs}


def emit(line):
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces" or "protobuf" not in self.headers.get("Content-Type", ""):
            emit({"error": f"unexpected {self.path} {self.headers.get('Content-Type')}"})
            self.send_response(400)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        if counting:
            global received
            with lock:
                received += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            self.answer()
            return
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    emit({
                        "traceId": span.trace_id.hex(),
                        "spanId": span.span_id.hex(),
                        "parentSpanId": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": Span.SpanKind.Name(span.kind),
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": attributes(span.attributes),
                        "status": span.status.code,
                        "links": [{"traceId": l.trace_id.hex(), "spanId": l.span_id.hex()} for l in span.links],
                        "resource": resource,
                    })
        self.answer()

    def answer(self):
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
emit_port = f"port {server.server_address[1]}"
with lock:
    print(emit_port, flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
server.shutdown()
if counting:
    print(f"spans {received}", flush=True)
