//! Traces, metrics and logs for every Orrery process.
//!
//! One call, [`init`], wires `tracing` to stderr (text or JSON lines) and to
//! OpenTelemetry. Spans always get W3C trace and span ids, so log lines carry
//! a trace id and context crosses process boundaries even when nothing is
//! exported; spans and metrics leave the process over OTLP/HTTP only when an
//! endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! Plugin authors get this for free: [`crate::serve`] calls [`init`] and opens
//! a span around every handler, parented to the satellite's relay span
//! through the frame envelope's `trace` field.

mod config;
mod init;
mod prometheus;
mod propagation;
mod sampling;

pub use config::{parse_ratio, SamplingError, TelemetryConfig};
pub use init::{init, MetricsReader, Telemetry};
pub use propagation::{current_trace, record_trace_id, set_parent, TRACEPARENT, TRACESTATE};
pub use sampling::{is_sampled, sample_root, sampled_flag, SAMPLED_FIELD};
