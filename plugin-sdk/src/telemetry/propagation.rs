//! W3C trace context in and out of spans: NATS headers between primary and
//! satellite, the envelope's `trace` field between satellite and plugin.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use orrery_schema::TraceContext;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C `traceparent` header (and field of [`TraceContext`]).
pub const TRACEPARENT: &str = "traceparent";
/// The W3C `tracestate` header.
pub const TRACESTATE: &str = "tracestate";

/// The trace context of the current span, to send with the next hop's
/// request; `None` outside any traced span or when telemetry is not set up.
pub fn current_trace() -> Option<TraceContext> {
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::with_capacity(2);
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    Some(TraceContext {
        traceparent: carrier.remove(TRACEPARENT)?,
        tracestate: carrier.remove(TRACESTATE).unwrap_or_default(),
    })
}

/// Makes `span` a child of the remote span described by `trace` (when
/// OpenTelemetry records `span`) and fills its `trace_id` field for the log
/// lines inside it. A missing or malformed context leaves `span` a root:
/// tracing is never a reason to refuse a request.
pub fn set_parent(span: &tracing::Span, trace: &TraceContext) {
    let cx = remote(trace);
    let remote = cx.span().span_context().clone();
    if remote.is_valid() {
        span.record("trace_id", tracing::field::display(remote.trace_id()));
        let _ = span.set_parent(cx);
    }
}

/// The trace id `trace` names, as log lines show it; `None` when its
/// `traceparent` is missing or malformed.
pub(crate) fn trace_id(trace: &TraceContext) -> Option<String> {
    let cx = remote(trace);
    let ids = cx.span().span_context().clone();
    ids.is_valid().then(|| ids.trace_id().to_string())
}

/// The remote context `trace` carries, invalid when it is malformed.
fn remote(trace: &TraceContext) -> opentelemetry::Context {
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert(TRACEPARENT.to_owned(), trace.traceparent.clone());
    if !trace.tracestate.is_empty() {
        carrier.insert(TRACESTATE.to_owned(), trace.tracestate.clone());
    }
    TraceContextPropagator::new().extract(&carrier)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_or_missing_context_leaves_a_root_span_and_never_panics() {
        let span = tracing::info_span!("test", trace_id = tracing::field::Empty);
        for traceparent in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra\u{0}",
        ] {
            set_parent(
                &span,
                &TraceContext {
                    traceparent: traceparent.into(),
                    tracestate: "k=\u{7f}".into(),
                },
            );
        }
        record_trace_id(&span);
        // No subscriber here: nothing to propagate.
        assert_eq!(span.in_scope(current_trace), None);
    }
}
