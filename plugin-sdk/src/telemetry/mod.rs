//! Traces, metrics and logs for every Orrery process.
//!
//! One call, [`init`], wires `tracing` to stderr (text or JSON lines) and,
//! when an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT`), to
//! OpenTelemetry: spans of sampled traces and every metric leave the
//! process over OTLP/HTTP. Which requests are traced is decided where a
//! trace enters a process ([`sample_root`], [`is_sampled`], `entry_span!`).
//! Without an endpoint metrics are still readable ([`MetricsReader`]) and
//! tracing costs next to nothing.
//!
//! Plugin authors get this for free: [`crate::serve`] calls [`init`] and opens
//! a span around every handler, parented to the satellite's relay span
//! through the frame envelope's `trace` field.

mod config;
mod init;
#[cfg(feature = "otlp")]
mod metrics_push;
mod prometheus;
mod propagation;
mod sampling;

pub use config::{parse_ratio, SamplingError, TelemetryConfig};
pub use init::{init, MetricsReader, Telemetry, TelemetryError};
pub use prometheus::write_family as write_prometheus_family;
pub use propagation::{current_trace, record_trace_id, set_parent, TRACEPARENT, TRACESTATE};
pub use sampling::{is_sampled, sample_root, sampled_flag, SAMPLED_FIELD, UNTRACED_FIELD};
