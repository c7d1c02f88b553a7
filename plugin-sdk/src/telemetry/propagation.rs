//! W3C trace context in and out of spans: NATS headers between primary and
//! satellite, the envelope's `trace` field between satellite and plugin.
//!
//! The text is written and read here rather than through a `HashMap`
//! carrier: OpenTelemetry's `HashMap` injector and extractor hash and
//! lower-case every key, and its formatter goes through `fmt` for each id.
//! That was a quarter of what a traced request costs (BENCHMARKS.md, relay
//! round 12). The text is the same (`propagation_tests` in this module
//! compares it with `TraceContextPropagator`'s), and reading still goes
//! through the propagator's own parser.

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt as _, TraceFlags};
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
    let span = cx.span();
    let ids = span.span_context();
    ids.is_valid().then(|| TraceContext {
        traceparent: traceparent(ids),
        tracestate: ids.trace_state().header(),
    })
}

/// `00-<trace id>-<span id>-<flags>`, as `TraceContextPropagator` writes it
/// (only the sampled flag is passed on).
fn traceparent(ids: &SpanContext) -> String {
    let mut out = String::with_capacity(55);
    out.push_str("00-");
    push_hex(&mut out, &ids.trace_id().to_bytes());
    out.push('-');
    push_hex(&mut out, &ids.span_id().to_bytes());
    out.push('-');
    push_hex(
        &mut out,
        &[(ids.trace_flags() & TraceFlags::SAMPLED).to_u8()],
    );
    out
}

/// Appends `bytes` as lower-case hex, two digits each.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

/// The trace id of `ids` as log lines show it (32 lower-case hex digits).
fn trace_id_text(ids: &SpanContext) -> String {
    let mut out = String::with_capacity(32);
    push_hex(&mut out, &ids.trace_id().to_bytes());
    out
}

/// Makes `span` a child of the remote span described by `trace` (when
/// OpenTelemetry records `span`) and fills its `trace_id` field for the log
/// lines inside it. A missing or malformed context leaves `span` a root:
/// tracing is never a reason to refuse a request.
pub fn set_parent(span: &tracing::Span, trace: &TraceContext) {
    let cx = remote(trace);
    let remote = cx.span().span_context().clone();
    if remote.is_valid() {
        span.record("trace_id", tracing::field::display(trace_id_text(&remote)));
        let _ = span.set_parent(cx);
    }
}

/// `trace` as the propagator's carrier: its two fields by their header
/// names, nothing else.
struct Carrier<'a>(&'a TraceContext);

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(self.0.traceparent.as_str()),
            TRACESTATE if !self.0.tracestate.is_empty() => Some(self.0.tracestate.as_str()),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

/// The remote context `trace` carries, invalid when it is malformed.
fn remote(trace: &TraceContext) -> opentelemetry::Context {
    TraceContextPropagator::new().extract(&Carrier(trace))
}

/// Fills `span`'s `trace_id` field so every log line inside it names the
/// trace. The span must declare the field (`trace_id = tracing::field::Empty`).
pub fn record_trace_id(span: &tracing::Span) {
    let cx = span.context();
    let ids = cx.span();
    let ids = ids.span_context();
    if ids.is_valid() {
        span.record("trace_id", tracing::field::display(trace_id_text(ids)));
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

    /// The text written and read here is what OpenTelemetry's own
    /// propagator writes and reads through a `HashMap`.
    #[test]
    fn traceparent_and_trace_ids_match_the_propagators() {
        use opentelemetry::trace::{SpanId, TraceId, TraceState};
        use std::collections::HashMap;
        use std::str::FromStr;
        for (trace, span, flags, state) in [
            (1u128, 1u64, 1u8, ""),
            (u128::MAX, u64::MAX, 0, "a=1,b=2"),
            (
                0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
                0x00f0_67aa_0ba9_02b7,
                0xff,
                "k=v",
            ),
        ] {
            let ids = SpanContext::new(
                TraceId::from(trace),
                SpanId::from(span),
                TraceFlags::new(flags),
                true,
                TraceState::from_str(state).unwrap(),
            );
            let cx = opentelemetry::Context::new().with_remote_span_context(ids.clone());
            let mut theirs = HashMap::new();
            TraceContextPropagator::new().inject_context(&cx, &mut theirs);
            assert_eq!(theirs[TRACEPARENT], traceparent(&ids));
            assert_eq!(theirs[TRACESTATE], ids.trace_state().header());
            assert_eq!(trace_id_text(&ids), ids.trace_id().to_string());
            let ours = TraceContext {
                traceparent: traceparent(&ids),
                tracestate: ids.trace_state().header(),
            };
            let back = remote(&ours);
            let back = back.span().span_context().clone();
            let expected = TraceContextPropagator::new().extract(&theirs);
            assert_eq!(back, expected.span().span_context().clone());
            assert_eq!(back.trace_id(), ids.trace_id());
            assert_eq!(back.is_sampled(), flags & 1 == 1);
        }
    }
}
