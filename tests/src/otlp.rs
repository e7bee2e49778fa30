//! A reader of the OpenTelemetry spans `ttrace-reader export --format otlp` (JSON lines) and
//! `--format otlp-proto` (protobuf `TracesData`) write, and of what `--otlp-endpoint` posts,
//! so that every machine checks them without OpenTelemetry's tools: both read to the same
//! [`Span`]s, which the tests compare with the trace. It reads the fields ttrace writes and
//! fails loudly on a malformed message.

use crate::perfetto::{bytes, fields, varint, Wire};

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
}

/// A span event.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    pub ns: u64,
    pub name: String,
    pub attrs: Vec<(String, Attr)>,
}

/// A span, with its resource's attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Trace and span ids, in hex; the parent's, if any.
    pub trace: String,
    pub id: String,
    pub parent: Option<String>,
    pub name: String,
    pub kind: u64,
    /// Unix nanoseconds.
    pub start: u64,
    pub end: u64,
    pub attrs: Vec<(String, Attr)>,
    pub events: Vec<SpanEvent>,
    pub dropped_events: u64,
    /// Links: (trace, span), in hex.
    pub links: Vec<(String, String)>,
    pub resource: Vec<(String, Attr)>,
    /// The instrumentation scope's name.
    pub scope: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
}

fn fixed(f: &[(u32, Wire<'_>)], n: u32) -> Option<u64> {
    f.iter().find_map(|(k, w)| match (k, w) {
        (k, Wire::Fixed64(v)) if *k == n => Some(*v),
        _ => None,
    })
}

fn all<'a>(f: &[(u32, Wire<'a>)], n: u32) -> Vec<&'a [u8]> {
    f.iter()
        .filter_map(|(k, w)| match (k, w) {
            (k, Wire::Bytes(b)) if *k == n => Some(*b),
            _ => None,
        })
        .collect()
}

/// A `KeyValue`.
fn key_value(b: &[u8]) -> Result<(String, Attr), String> {
    let f = fields(b)?;
    let key = text(bytes(&f, 1).ok_or("a key value without a key")?)?;
    let v = fields(bytes(&f, 2).ok_or("a key value without a value")?)?;
    let value = match v.first() {
        Some((1, Wire::Bytes(s))) => Attr::Str(text(s)?),
        Some((2, Wire::Varint(b))) => Attr::Bool(*b != 0),
        Some((3, Wire::Varint(i))) => Attr::Int(*i as i64),
        Some((4, Wire::Fixed64(d))) => Attr::Double(f64::from_bits(*d)),
        other => return Err(format!("an any value {other:?}")),
    };
    Ok((key, value))
}

/// Reads a protobuf `TracesData` (or `ExportTraceServiceRequest`: the same fields).
pub fn read_proto(data: &[u8]) -> Result<Vec<Span>, String> {
    let mut spans = Vec::new();
    for rs in all(&fields(data)?, 1) {
        let rs = fields(rs)?;
        let resource = match bytes(&rs, 1) {
            Some(r) => all(&fields(r)?, 1)
                .into_iter()
                .map(key_value)
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        for ss in all(&rs, 2) {
            let ss = fields(ss)?;
            let scope = match bytes(&ss, 1) {
                Some(s) => text(bytes(&fields(s)?, 1).unwrap_or_default())?,
                None => String::new(),
            };
            for s in all(&ss, 2) {
                let f = fields(s)?;
                let attrs = all(&f, 9)
                    .into_iter()
                    .map(key_value)
                    .collect::<Result<_, _>>()?;
                let mut events = Vec::new();
                for e in all(&f, 11) {
                    let e = fields(e)?;
                    events.push(SpanEvent {
                        ns: fixed(&e, 1).ok_or("an event without a time")?,
                        name: text(bytes(&e, 2).unwrap_or_default())?,
                        attrs: all(&e, 3)
                            .into_iter()
                            .map(key_value)
                            .collect::<Result<_, _>>()?,
                    });
                }
                let mut links = Vec::new();
                for l in all(&f, 13) {
                    let l = fields(l)?;
                    let id = |n| bytes(&l, n).map(hex).ok_or("a link without its ids");
                    links.push((id(1)?, id(2)?));
                }
                spans.push(Span {
                    trace: hex(bytes(&f, 1).ok_or("a span without a trace id")?),
                    id: hex(bytes(&f, 2).ok_or("a span without an id")?),
                    parent: bytes(&f, 4).map(hex),
                    name: text(bytes(&f, 5).ok_or("a span without a name")?)?,
                    kind: varint(&f, 6).unwrap_or(0),
                    start: fixed(&f, 7).ok_or("a span without a start")?,
                    end: fixed(&f, 8).ok_or("a span without an end")?,
                    attrs,
                    events,
                    dropped_events: varint(&f, 12).unwrap_or(0),
                    links,
                    resource: resource.clone(),
                    scope: scope.clone(),
                });
            }
        }
    }
    Ok(spans)
}

/// An `AnyValue` of OTLP's JSON mapping.
fn any_json(v: &serde_json::Value) -> Result<Attr, String> {
    let o = v.as_object().ok_or("a value that is no object")?;
    let (k, v) = o.iter().next().ok_or("an empty value")?;
    Ok(match (k.as_str(), v) {
        ("stringValue", serde_json::Value::String(s)) => Attr::Str(s.clone()),
        ("boolValue", serde_json::Value::Bool(b)) => Attr::Bool(*b),
        ("intValue", serde_json::Value::String(s)) => Attr::Int(s.parse().map_err(|_| s.clone())?),
        ("doubleValue", v) => Attr::Double(v.as_f64().ok_or("a double that is no number")?),
        other => return Err(format!("a value {other:?}")),
    })
}

fn attrs_json(v: &serde_json::Value) -> Result<Vec<(String, Attr)>, String> {
    let Some(a) = v.as_array() else {
        return Ok(Vec::new());
    };
    a.iter()
        .map(|kv| {
            Ok((
                kv["key"].as_str().ok_or("a key")?.to_string(),
                any_json(&kv["value"])?,
            ))
        })
        .collect()
}

fn nanos(v: &serde_json::Value) -> Result<u64, String> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .ok_or(format!("{v}: not nanoseconds as a string"))
}

/// Reads JSON lines, a `TracesData` a line.
pub fn read_json_lines(text: &str) -> Result<Vec<Span>, String> {
    let mut spans = Vec::new();
    for line in text.lines() {
        let data: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        for rs in data["resourceSpans"].as_array().ok_or("no resourceSpans")? {
            let resource = attrs_json(&rs["resource"]["attributes"])?;
            for ss in rs["scopeSpans"].as_array().ok_or("no scopeSpans")? {
                let scope = ss["scope"]["name"].as_str().unwrap_or_default().to_string();
                for s in ss["spans"].as_array().ok_or("no spans")? {
                    let str_of = |k: &str| s[k].as_str().map(str::to_string);
                    let events = s["events"]
                        .as_array()
                        .map(|es| {
                            es.iter()
                                .map(|e| {
                                    Ok(SpanEvent {
                                        ns: nanos(&e["timeUnixNano"])?,
                                        name: e["name"].as_str().unwrap_or_default().to_string(),
                                        attrs: attrs_json(&e["attributes"])?,
                                    })
                                })
                                .collect::<Result<Vec<_>, String>>()
                        })
                        .transpose()?
                        .unwrap_or_default();
                    let links = s["links"]
                        .as_array()
                        .map(|ls| {
                            ls.iter()
                                .map(|l| {
                                    let id = |k: &str| l[k].as_str().map(str::to_string);
                                    Some((id("traceId")?, id("spanId")?))
                                })
                                .collect::<Option<Vec<_>>>()
                        })
                        .unwrap_or(Some(Vec::new()))
                        .ok_or("a link without its ids")?;
                    spans.push(Span {
                        trace: str_of("traceId").ok_or("a span without a trace id")?,
                        id: str_of("spanId").ok_or("a span without an id")?,
                        parent: str_of("parentSpanId"),
                        name: str_of("name").ok_or("a span without a name")?,
                        kind: s["kind"].as_u64().unwrap_or(0),
                        start: nanos(&s["startTimeUnixNano"])?,
                        end: nanos(&s["endTimeUnixNano"])?,
                        attrs: attrs_json(&s["attributes"])?,
                        events,
                        dropped_events: s["droppedEventsCount"].as_u64().unwrap_or(0),
                        links,
                        resource: resource.clone(),
                        scope: scope.clone(),
                    });
                }
            }
        }
    }
    Ok(spans)
}
