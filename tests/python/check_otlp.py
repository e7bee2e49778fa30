#!/usr/bin/env python3
"""Checks the OpenTelemetry spans `ttrace-reader export` wrote, with the official protos
(the opentelemetry-proto package: pip install opentelemetry-proto).

Usage: check_otlp.py TRACES.pb TRACES.jsonl

Parses the protobuf file as a TracesData and each JSON line as one (OTLP's JSON mapping:
trace and span ids in hex), checks that the two hold the same spans, and prints them as
JSON, one object per span, for the test to compare with the trace; on a failure, one line
on stderr and exit status 1.
"""

import base64
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.trace.v1 import trace_pb2


def ids_to_base64(span):
    """OTLP JSON gives ids in hex; the protobuf JSON mapping wants base64."""
    for key in ("traceId", "spanId", "parentSpanId"):
        if key in span:
            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    for link in span.get("links", []):
        for key in ("traceId", "spanId"):
            link[key] = base64.b64encode(bytes.fromhex(link[key])).decode()


def value(v):
    kind = v.WhichOneof("value")
    return {
        "string_value": lambda: {"Str": v.string_value},
        "int_value": lambda: {"Int": v.int_value},
        "bool_value": lambda: {"Bool": v.bool_value},
        "double_value": lambda: {"Double": v.double_value},
    }[kind]()


def spans_of(data):
    out = []
    for rs in data.resource_spans:
        resource = [[a.key, value(a.value)] for a in rs.resource.attributes]
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append({
                    "trace": s.trace_id.hex(),
                    "id": s.span_id.hex(),
                    "parent": s.parent_span_id.hex() or None,
                    "name": s.name,
                    "kind": s.kind,
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "attrs": [[a.key, value(a.value)] for a in s.attributes],
                    "events": [
                        {"ns": e.time_unix_nano, "name": e.name,
                         "attrs": [[a.key, value(a.value)] for a in e.attributes]}
                        for e in s.events
                    ],
                    "dropped_events": s.dropped_events_count,
                    "links": [[l.trace_id.hex(), l.span_id.hex()] for l in s.links],
                    "resource": resource,
                    "scope": ss.scope.name,
                })
    return out


def main():
    if len(sys.argv) != 3:
        print("usage: check_otlp.py TRACES.pb TRACES.jsonl", file=sys.stderr)
        sys.exit(2)
    data = trace_pb2.TracesData()
    with open(sys.argv[1], "rb") as f:
        data.ParseFromString(f.read())
    from_proto = spans_of(data)
    from_json = []
    with open(sys.argv[2]) as f:
        for n, line in enumerate(f, 1):
            doc = json.loads(line)
            for rs in doc["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for s in ss["spans"]:
                        ids_to_base64(s)
            line_data = trace_pb2.TracesData()
            try:
                json_format.ParseDict(doc, line_data)
            except json_format.ParseError as e:
                print(f"{sys.argv[2]}:{n}: {e}", file=sys.stderr)
                sys.exit(1)
            from_json.extend(spans_of(line_data))
    key = lambda s: s["id"]
    if sorted(from_proto, key=key) != sorted(from_json, key=key):
        print("the protobuf and the JSON lines hold different spans", file=sys.stderr)
        sys.exit(1)
    json.dump(from_proto, sys.stdout)


if __name__ == "__main__":
    main()
