//! OTLP's `ExportTraceServiceRequest`, encoded straight from the SDK's span
//! data.
//!
//! `opentelemetry-otlp` first converts every span into `opentelemetry-proto`
//! messages (a `String` or `Vec` for each id, name, key and value), groups
//! them by scope through a hash map, and then encodes those: a third of what
//! a traced request cost in the relay's process (BENCHMARKS.md, relay round
//! 15). The bytes written here are the same message; `otlp_traces_tests.rs`
//! decodes them with `opentelemetry-proto` and compares the result with that
//! crate's own conversion of the same spans.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanContext, SpanId, Status};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::SpanData;
use opentelemetry_sdk::Resource;

use super::protobuf::{Proto, Wire};

/// A process's resource, encoded once when the exporter learns it.
#[derive(Clone, Debug, Default)]
pub(super) struct EncodedResource {
    /// The body of a `Resource` message.
    body: Vec<u8>,
    schema_url: String,
}

impl EncodedResource {
    pub(super) fn new(resource: &Resource) -> Self {
        let mut p = Proto::default();
        for (key, value) in resource.iter() {
            key_value(&mut p, 1, key.as_str(), value);
        }
        EncodedResource {
            body: p.buf,
            schema_url: resource.schema_url().unwrap_or_default().to_owned(),
        }
    }
}

/// The export request for `spans`: one `ResourceSpans`, one `ScopeSpans` per
/// instrumentation scope in the order the scopes first appear.
pub(super) fn export_request(resource: &EncodedResource, spans: &[SpanData]) -> Vec<u8> {
    // A relay span takes about 400 bytes.
    let mut p = Proto::with_capacity(resource.body.len() + 64 + spans.len() * 512);
    p.message(1, |p| {
        p.message(1, |p| p.buf.extend_from_slice(&resource.body));
        let mut scopes: Vec<&InstrumentationScope> = Vec::new();
        for span in spans {
            let scope = &span.instrumentation_scope;
            if scopes.contains(&scope) {
                continue;
            }
            scopes.push(scope);
            p.message(2, |p| {
                p.message(1, |p| {
                    p.bytes(1, scope.name().as_bytes());
                    p.bytes(2, scope.version().unwrap_or_default().as_bytes());
                    attributes(p, 3, scope.attributes());
                });
                for span in spans.iter().filter(|s| s.instrumentation_scope == *scope) {
                    p.message(2, |p| span_body(p, span));
                }
                p.bytes(3, scope.schema_url().unwrap_or_default().as_bytes());
            });
        }
        p.bytes(3, resource.schema_url.as_bytes());
    });
    p.buf
}

/// Bit 8 of a span's or link's flags says whether bit 9 (the parent or
/// linked context is remote) is known; the low byte is the W3C trace flags.
fn flags(context: &SpanContext, remote: bool) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    u32::from(context.trace_flags().to_u8()) | HAS_IS_REMOTE | if remote { IS_REMOTE } else { 0 }
}

fn span_body(p: &mut Proto, span: &SpanData) {
    let context = &span.span_context;
    p.bytes(1, &context.trace_id().to_bytes());
    p.bytes(2, &context.span_id().to_bytes());
    p.bytes(3, context.trace_state().header().as_bytes());
    if span.parent_span_id != SpanId::INVALID {
        p.bytes(4, &span.parent_span_id.to_bytes());
    }
    p.fixed32(16, flags(context, span.parent_span_is_remote));
    p.bytes(5, span.name.as_bytes());
    // OTLP's numbering: internal 1, server 2, client 3, producer 4,
    // consumer 5.
    let kind = match span.span_kind {
        opentelemetry::trace::SpanKind::Internal => 1,
        opentelemetry::trace::SpanKind::Server => 2,
        opentelemetry::trace::SpanKind::Client => 3,
        opentelemetry::trace::SpanKind::Producer => 4,
        opentelemetry::trace::SpanKind::Consumer => 5,
    };
    p.uint(6, kind);
    p.fixed64(7, nanos(span.start_time));
    p.fixed64(8, nanos(span.end_time));
    attributes(p, 9, &span.attributes);
    p.uint(10, u64::from(span.dropped_attributes_count));
    for event in &span.events.events {
        p.message(11, |p| {
            p.fixed64(1, nanos(event.timestamp));
            p.bytes(2, event.name.as_bytes());
            attributes(p, 3, &event.attributes);
            p.uint(4, u64::from(event.dropped_attributes_count));
        });
    }
    p.uint(12, u64::from(span.events.dropped_count));
    for link in &span.links.links {
        let linked = &link.span_context;
        p.message(13, |p| {
            p.bytes(1, &linked.trace_id().to_bytes());
            p.bytes(2, &linked.span_id().to_bytes());
            p.bytes(3, linked.trace_state().header().as_bytes());
            attributes(p, 4, &link.attributes);
            p.uint(5, u64::from(link.dropped_attributes_count));
            p.fixed32(6, flags(linked, linked.is_remote()));
        });
    }
    p.uint(14, u64::from(span.links.dropped_count));
    p.message(15, |p| match &span.status {
        Status::Unset => {}
        Status::Ok => p.uint(3, 1),
        Status::Error { description } => {
            p.bytes(2, description.as_bytes());
            p.uint(3, 2);
        }
    });
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

fn attributes<'a>(p: &mut Proto, field: u32, attributes: impl IntoIterator<Item = &'a KeyValue>) {
    for kv in attributes {
        key_value(p, field, kv.key.as_str(), &kv.value);
    }
}

fn key_value(p: &mut Proto, field: u32, key: &str, value: &Value) {
    p.message(field, |p| {
        p.bytes(1, key.as_bytes());
        p.message(2, |p| any_value(p, value));
    });
}

/// The body of an `AnyValue`: its `oneof` is written even at a default
/// value (`false`, `0`, `""`), so an attribute set to one keeps its type.
fn any_value(p: &mut Proto, value: &Value) {
    match value {
        Value::Bool(b) => bool_value(p, *b),
        Value::I64(i) => int_value(p, *i),
        Value::F64(f) => double_value(p, *f),
        Value::String(s) => string_value(p, s.as_str()),
        Value::Array(array) => p.message(5, |p| match array {
            Array::Bool(v) => v.iter().for_each(|b| p.message(1, |p| bool_value(p, *b))),
            Array::I64(v) => v.iter().for_each(|i| p.message(1, |p| int_value(p, *i))),
            Array::F64(v) => v.iter().for_each(|f| p.message(1, |p| double_value(p, *f))),
            Array::String(v) => v
                .iter()
                .for_each(|s| p.message(1, |p| string_value(p, s.as_str()))),
            // A kind of array added after this was written: an empty
            // array rather than a wrong value.
            _ => {}
        }),
        // A kind of value added after this was written: an empty value.
        _ => {}
    }
}

fn string_value(p: &mut Proto, s: &str) {
    p.key(1, Wire::Len);
    p.len_value(s.as_bytes());
}

fn bool_value(p: &mut Proto, b: bool) {
    p.key(2, Wire::Varint);
    p.varint(u64::from(b));
}

fn int_value(p: &mut Proto, i: i64) {
    p.key(3, Wire::Varint);
    p.varint(i as u64);
}

fn double_value(p: &mut Proto, f: f64) {
    p.key(4, Wire::Fixed64);
    p.buf.extend_from_slice(&f.to_bits().to_le_bytes());
}
