//! Installs the subscriber and the OpenTelemetry providers of a process.

use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::FilterExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::config::TelemetryConfig;

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP span or metric exporter could not be built.
    #[cfg(feature = "otlp")]
    #[error(transparent)]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The telemetry of a running process. Keep it alive for the process's
/// lifetime: dropping it flushes and stops the exporters.
pub struct Telemetry {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
    reader: SharedReader,
    #[cfg(feature = "otlp")]
    push: Option<super::metrics_push::MetricsPush>,
}

/// Sets up logs, traces and metrics as `config` says and returns the handle
/// that keeps them running.
///
/// Logs go to stderr. Spans are recorded and exported only with an OTLP
/// endpoint, for the traces Orrery samples (see `sampling.rs`); without one
/// tracing costs next to nothing. Metrics are always readable through
/// [`Telemetry::prometheus_text`] and pushed over OTLP when exporting. A
/// second call in one process (tests) keeps the first subscriber.
///
/// # Errors
///
/// When an OTLP endpoint is configured and its span or metric exporter
/// cannot be built (e.g. the HTTP client cannot be created). Without an
/// endpoint it does not fail.
pub fn init(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
    let resource = Resource::builder()
        .with_service_name(config.service_name.clone())
        .with_attribute(KeyValue::new("process.pid", i64::from(std::process::id())))
        .build();

    #[allow(unused_mut)] // not reassigned without the `otlp` feature
    let mut tracer = SdkTracerProvider::builder().with_resource(resource.clone());
    let reader = SharedReader(Arc::new(ManualReader::builder().build()));
    #[allow(unused_mut)] // not reassigned without the `otlp` feature
    let mut meter = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_reader(reader.clone());
    let exporting = cfg!(feature = "otlp") && config.otlp_endpoint.is_some();
    #[cfg(feature = "otlp")]
    let mut metrics_exporter = None;
    #[cfg(not(feature = "otlp"))]
    if config.otlp_endpoint.is_some() {
        eprintln!(
            "{}: built without OTLP export (orrery-plugin-sdk feature `otlp`); the OTLP endpoint is ignored",
            config.service_name
        );
    }
    #[cfg(feature = "otlp")]
    if let Some(endpoint) = &config.otlp_endpoint {
        use opentelemetry_otlp::WithExportConfig;
        use opentelemetry_sdk::trace::Sampler;
        let base = endpoint.trim_end_matches('/');
        // opentelemetry-otlp reads the standard header and timeout
        // variables itself and retries load and network failures; the
        // endpoint given here wins over its own reading of the variables.
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{base}/v1/traces"))
            .build()?;
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_endpoint(format!("{base}/v1/metrics"))
            .build()?;
        // Orrery has sampled before a span reaches the layer (sampling.rs).
        tracer = tracer
            .with_sampler(Sampler::AlwaysOn)
            .with_batch_exporter(spans);
        // Pushed from the one reader (metrics_push.rs), not a second one.
        metrics_exporter = Some(metrics);
    }
    super::sampling::set_root_ratio(if exporting {
        config.sampling_ratio
    } else {
        0.0
    });
    let tracer = tracer.build();
    let meter = meter.build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    opentelemetry::global::set_tracer_provider(tracer.clone());
    opentelemetry::global::set_meter_provider(meter.clone());

    // Lines name their trace through the fields of the spans around them,
    // so those spans must pass this filter too: `info` (the default) keeps
    // Orrery's; a narrower RUST_LOG keeps `orrery_plugin_sdk`,
    // `orrery_satellite`, `orrery_primary` at `info` for trace ids in lines.
    let logs = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(&config.default_log_filter))
        .and(limits());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if config.log_json {
        fmt.json()
            .with_current_span(true)
            .with_span_list(true)
            .with_filter(logs)
            .boxed()
    } else {
        fmt.with_ansi(false).with_filter(logs).boxed()
    };
    // Only sampled traces reach OpenTelemetry (its per-layer filter,
    // `sampling::traced_only`); without export there is no layer at all.
    let otel = exporting.then(|| {
        let otel = tracing_opentelemetry::layer()
            .with_tracer(tracer.tracer("orrery"))
            // Source locations and thread names would be attributes on
            // every span: a cost on each request for little.
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            // Parents come from the tracing span tree, not OpenTelemetry's
            // thread-local context: attaching and detaching that on every
            // poll of a traced future was a third of a traced request's
            // cost in the layer (BENCHMARKS.md, Tracing overhead), and
            // nothing here reads `opentelemetry::Context::current()`.
            .with_context_activation(false);
        otel.with_filter(super::sampling::traced_only().and(limits()))
    });
    // A subscriber set earlier (a test harness) is kept.
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();

    Ok(Telemetry {
        tracer,
        meter,
        #[cfg(feature = "otlp")]
        push: metrics_exporter
            .map(|exporter| super::metrics_push::MetricsPush::start(reader.clone(), exporter)),
        reader,
    })
}

impl Telemetry {
    /// Every metric of this process in the Prometheus text format.
    pub fn prometheus_text(&self) -> String {
        self.metrics().prometheus_text()
    }

    /// A cloneable reader of this process's metrics, for HTTP handlers.
    pub fn metrics(&self) -> MetricsReader {
        MetricsReader(self.reader.clone())
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // Errors here mean the collector is gone; the process is ending anyway.
        let _ = self.tracer.shutdown();
        // The last push collects, so it goes before the meter stops.
        #[cfg(feature = "otlp")]
        drop(self.push.take());
        let _ = self.meter.shutdown();
    }
}

/// Reads the current metrics of the process on demand.
#[derive(Clone, Debug)]
pub struct MetricsReader(SharedReader);

impl MetricsReader {
    /// Every metric in the Prometheus text format; empty when collection
    /// failed (the providers were shut down).
    pub fn prometheus_text(&self) -> String {
        let mut metrics = ResourceMetrics::default();
        match self.0.collect(&mut metrics) {
            Ok(()) => super::prometheus::render(&metrics),
            Err(_) => String::new(),
        }
    }
}

/// Log targets held off, or under a level, whatever `RUST_LOG` asks for
/// them, because what they write may be a credential:
///
/// - tokio-postgres writes every statement's text, and its parameters, at
///   `debug`, and a statement may carry a credential (issue #43: a role's
///   password in the logs at `RUST_LOG=debug`);
/// - the AWS SDK (issue #46): the orchestrator's `trace` dumps its runtime
///   components, the identity cache's session access key id among them;
///   the profile provider logs the credentials it loaded (their key id) at
///   `info`, the `AssumeRole` provider the session's key id at `debug`;
///   a property of a shared config file set twice is logged with both
///   values at `trace` (an `aws_secret_access_key`). Their other lines
///   (attempts, retries, the identity cache's expiry and refresh) stay.
const LIMITS: [&str; 7] = [
    "tokio_postgres::query=off",
    "tokio_postgres::prepare=off",
    "tokio_postgres::simple_query=off",
    "aws_smithy_runtime::client::orchestrator=debug",
    "aws_config::profile::credentials=warn",
    "aws_config::sts=info",
    "aws_runtime::env_config::property=debug",
];

/// A filter passing everything but what [`LIMITS`] holds off or under its
/// level: the second half of an `and` with what `RUST_LOG` asks, so a
/// limit only ever lowers a target's level (a directive added to the
/// asked filter itself would raise one the default `info` keeps lower),
/// and no directive of `RUST_LOG`, narrowed to a span or a field or not,
/// lifts it. Logs and OpenTelemetry both pass it.
fn limits() -> EnvFilter {
    LIMITS
        .iter()
        .filter_map(|d| d.parse().ok())
        .fold(EnvFilter::new("trace"), EnvFilter::add_directive)
}

/// A manual reader that both the meter provider and the HTTP endpoint hold.
#[derive(Clone, Debug)]
pub(super) struct SharedReader(Arc<ManualReader>);

#[cfg(test)]
pub(super) fn shared(reader: Arc<ManualReader>) -> SharedReader {
    SharedReader(reader)
}

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

#[cfg(test)]
mod silence_tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::{EnvFilter, Layer};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn statement_text_is_never_logged_whatever_rust_log_says() {
        for asked in [
            "trace",
            "debug,tokio_postgres=trace,tokio_postgres::query=trace",
            "trace,aws_config=trace,aws_smithy_runtime::client::orchestrator=trace",
            "info",
        ] {
            let buffer = Buffer::default();
            let writer = buffer.clone();
            let fmt = tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .with_filter(EnvFilter::new(asked).and(super::limits()));
            let subscriber = tracing_subscriber::registry().with(fmt);
            tracing::subscriber::with_default(subscriber, || {
                tracing::debug!(target: "tokio_postgres::simple_query", "executing statement batch: ALTER ROLE \"r\" WITH PASSWORD 'hunter2'");
                tracing::debug!(target: "tokio_postgres::prepare", "preparing query s0: SELECT 'hunter2'");
                tracing::debug!(target: "tokio_postgres::query", "executing statement s0 with parameters: [\"hunter2\"]");
                tracing::debug!(target: "tokio_postgres::connection", "still logged");
                tracing::trace!(target: "aws_smithy_runtime::client::orchestrator", runtime_components = "access_key_id: \"hunter2\"");
                tracing::info!(target: "aws_config::profile::credentials", creds = "access_key_id: \"hunter2\"", "loaded base credentials");
                tracing::debug!(target: "aws_config::sts::assume_role", access_key_id = "hunter2", "obtained assumed credentials");
                tracing::trace!(target: "aws_runtime::env_config::property", "overwriting aws_secret_access_key: was hunter2, now hunter2");
                tracing::debug!(target: "aws_smithy_runtime::client::orchestrator", "beginning attempt #1, still logged");
            });
            let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
            assert!(!text.contains("hunter2"), "{asked}: {text}");
            if asked == "info" {
                // A limit lowers a level, never raises one.
                assert!(!text.contains("still logged"), "{asked}: {text}");
            } else {
                assert!(text.contains("still logged"), "{asked}: {text}");
                assert!(text.contains("beginning attempt"), "{asked}: {text}");
            }
        }
    }
}
