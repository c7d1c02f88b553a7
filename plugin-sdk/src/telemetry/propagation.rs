//! W3C trace context in and out of spans: NATS headers between primary and
//! satellite, the envelope's `trace` field between satellite and plugin.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use orrery_schema::TraceContext;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// The trace context of the current span, to send with the next hop's
/// request; `None` outside any traced span or when telemetry is not set up.
pub fn current_trace() -> Option<TraceContext> {
    let mut carrier = HashMap::with_capacity(2);
    TraceContextPropagator::new().inject_context(&tracing::Span::current().context(), &mut carrier);
    Some(TraceContext {
        traceparent: carrier.remove(TRACEPARENT)?,
        tracestate: carrier.remove(TRACESTATE).unwrap_or_default(),
    })
}

/// Writes the current span's `traceparent` (and `tracestate`) headers
/// through `put`; writes nothing outside a traced span.
pub fn inject_headers(mut put: impl FnMut(&'static str, String)) {
    if let Some(trace) = current_trace() {
        put(TRACEPARENT, trace.traceparent);
        if !trace.tracestate.is_empty() {
            put(TRACESTATE, trace.tracestate);
        }
    }
}

/// Makes `span` a child of the remote span described by `trace`. A missing
/// or malformed context leaves `span` a root: tracing is never a reason to
/// refuse a request.
pub fn set_parent(span: &tracing::Span, trace: &TraceContext) {
    parent_from_headers(span, |key| match key {
        TRACEPARENT => Some(trace.traceparent.clone()),
        TRACESTATE => Some(trace.tracestate.clone()),
        _ => None,
    });
}

/// [`set_parent`] from header values looked up by `get`.
pub fn parent_from_headers(span: &tracing::Span, get: impl Fn(&str) -> Option<String>) {
    let mut carrier = HashMap::with_capacity(2);
    for key in [TRACEPARENT, TRACESTATE] {
        if let Some(value) = get(key) {
            carrier.insert(key.to_owned(), value);
        }
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// Fills `span`'s `trace_id` field so every log line inside it names the
/// trace. The span must declare the field (`trace_id = tracing::field::Empty`).
pub fn record_trace_id(span: &tracing::Span) {
    let cx = span.context();
    let ids = cx.span();
    let ids = ids.span_context();
    if ids.is_valid() {
        span.record("trace_id", tracing::field::display(ids.trace_id()));
    }
}
