//! What `otlp_traces.rs` writes, decoded by `opentelemetry-proto` and
//! compared with that crate's own conversion of the same spans (the one
//! `opentelemetry-otlp` sends).

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use opentelemetry_sdk::Resource;
use prost::Message;

use super::otlp_traces::{export_request, EncodedResource};

fn context(trace: u128, span: u64, sampled: bool, remote: bool, state: &str) -> SpanContext {
    let flags = if sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let state = if state.is_empty() {
        TraceState::default()
    } else {
        state.parse().unwrap()
    };
    SpanContext::new(
        TraceId::from(trace),
        SpanId::from(span),
        flags,
        remote,
        state,
    )
}

fn at(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}

/// A span as the relay records one: a name, a few string attributes.
pub(super) fn plain(scope: &InstrumentationScope, span: u64) -> SpanData {
    SpanData {
        span_context: context(0xabc, span, true, false, ""),
        parent_span_id: SpanId::from(7),
        parent_span_is_remote: true,
        span_kind: SpanKind::Server,
        name: Cow::Borrowed("satellite.relay"),
        start_time: at(1_700_000_000_000_000_001),
        end_time: at(1_700_000_000_000_500_001),
        attributes: vec![
            KeyValue::new("plugin", "testbed"),
            KeyValue::new("operation", "create"),
        ],
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: scope.clone(),
    }
}

/// Every field and every kind of value set, defaults among them, and
/// lengths past one byte of varint.
fn everything(scope: &InstrumentationScope) -> SpanData {
    let long = "x".repeat(20_000);
    let mut events = SpanEvents::default();
    events.events.push(Event::new(
        "retry",
        at(5),
        vec![KeyValue::new("attempt", 2), KeyValue::new("", "")],
        3,
    ));
    events.events.push(Event::new("empty", at(0), vec![], 0));
    events.dropped_count = 4;
    let mut links = SpanLinks::default();
    links.links.push(Link::new(
        context(u128::MAX, u64::MAX, false, true, "vendor=value,other=x"),
        vec![KeyValue::new("why", "follows")],
        1,
    ));
    links.dropped_count = 2;
    SpanData {
        span_context: context(1, 2, true, false, "congo=t61rcWkgMzE"),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Client,
        name: Cow::Owned(long.clone()),
        start_time: UNIX_EPOCH - Duration::from_secs(1),
        end_time: at(u64::MAX),
        attributes: vec![
            KeyValue::new("bool", true),
            KeyValue::new("false", false),
            KeyValue::new("int", -1i64),
            KeyValue::new("zero", 0i64),
            KeyValue::new("big", i64::MAX),
            KeyValue::new("float", 1.5f64),
            KeyValue::new("negative zero", -0.0f64),
            KeyValue::new("nan", f64::NAN),
            KeyValue::new("empty", ""),
            KeyValue::new("long", long),
            KeyValue::new("utf-8", "münchen ✓"),
            KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
            KeyValue::new("ints", Value::Array(Array::I64(vec![0, -5, 1 << 40]))),
            KeyValue::new("floats", Value::Array(Array::F64(vec![0.0, 2.25]))),
            KeyValue::new(
                "strings",
                Value::Array(Array::String(vec![StringValue::from("a"), "".into()])),
            ),
            KeyValue::new("no strings", Value::Array(Array::String(vec![]))),
        ],
        dropped_attributes_count: 9,
        events,
        links,
        status: Status::error("the plugin failed: ünïcode"),
        instrumentation_scope: scope.clone(),
    }
}

/// Ours, decoded, and theirs. NaN is not equal to itself, so the two are
/// compared through their debug forms, which print it alike.
fn both(resource: &Resource, spans: Vec<SpanData>) -> (String, String) {
    let encoded = EncodedResource::new(resource);
    let ours = ExportTraceServiceRequest::decode(export_request(&encoded, &spans).as_slice())
        .expect("a valid export request");
    let theirs = ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(
            spans,
            &ResourceAttributesWithSchema::from(resource),
        ),
    };
    (format!("{ours:#?}"), format!("{theirs:#?}"))
}

fn resource() -> Resource {
    Resource::builder_empty()
        .with_schema_url(
            [
                KeyValue::new("service.name", "orrery-satellite"),
                KeyValue::new("process.pid", 4242i64),
            ],
            "https://opentelemetry.io/schemas/1.21.0",
        )
        .build()
}

#[test]
fn a_batch_of_relay_spans_is_the_message_opentelemetry_proto_makes() {
    let scope = InstrumentationScope::builder("orrery").build();
    let spans = (1..=50).map(|i| plain(&scope, i)).collect();
    let (ours, theirs) = both(&resource(), spans);
    assert_eq!(ours, theirs);
}

#[test]
fn every_field_and_kind_of_value_is_the_message_opentelemetry_proto_makes() {
    let scope = InstrumentationScope::builder("orrery")
        .with_version("1.2.3")
        .with_schema_url("https://example.com/schema")
        .with_attributes([KeyValue::new("scope.attr", 1i64)])
        .build();
    let (ours, theirs) = both(&resource(), vec![everything(&scope)]);
    assert_eq!(ours, theirs);
    assert!(ours.contains("münchen ✓") && ours.contains("ünïcode"));
}

#[test]
fn spans_of_several_scopes_are_grouped_by_scope_in_first_seen_order() {
    let a = InstrumentationScope::builder("a").build();
    let b = InstrumentationScope::builder("b").with_version("2").build();
    let spans = vec![plain(&a, 1), plain(&b, 2), plain(&a, 3), everything(&b)];
    let (ours, theirs) = both(&resource(), spans);
    assert_eq!(ours, theirs);
}

#[test]
fn an_empty_resource_and_batch_are_the_message_opentelemetry_proto_makes() {
    let (ours, theirs) = both(&Resource::builder_empty().build(), vec![]);
    assert_eq!(ours, theirs);
}
