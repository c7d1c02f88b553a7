//! Installs the subscriber and the OpenTelemetry providers of a process.

use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, PeriodicReader, Pipeline, SdkMeterProvider, Temporality,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Level;
use tracing_subscriber::filter::{filter_fn, FilterExt, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::config::TelemetryConfig;

/// The telemetry of a running process. Keep it alive for the process's
/// lifetime: dropping it flushes and stops the exporters.
pub struct Telemetry {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
    reader: SharedReader,
}

/// Sets up logs, traces and metrics as `config` says and returns the handle
/// that keeps them running.
///
/// Logs go to stderr. Spans get trace ids whatever the configuration; they
/// are recorded and exported only with an OTLP endpoint, at the configured
/// sampling ratio. Metrics are always readable through
/// [`Telemetry::prometheus_text`] and pushed over OTLP when exporting. A
/// second call in one process (tests) keeps the first subscriber.
pub fn init(config: &TelemetryConfig) -> Result<Telemetry, opentelemetry_otlp::ExporterBuildError> {
    let resource = Resource::builder()
        .with_service_name(config.service_name.clone())
        .with_attribute(KeyValue::new("process.pid", i64::from(std::process::id())))
        .build();

    let mut tracer = SdkTracerProvider::builder().with_resource(resource.clone());
    let reader = SharedReader(Arc::new(ManualReader::builder().build()));
    let mut meter = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_reader(reader.clone());
    match &config.otlp_endpoint {
        Some(endpoint) => {
            use opentelemetry_otlp::WithExportConfig;
            let base = endpoint.trim_end_matches('/');
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(format!("{base}/v1/traces"))
                .build()?;
            let metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(format!("{base}/v1/metrics"))
                .build()?;
            tracer = tracer
                .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                    config.sampling_ratio,
                ))))
                .with_batch_exporter(spans);
            meter = meter.with_reader(PeriodicReader::builder(metrics).build());
        }
        // Nothing leaves the process, so nothing new is recorded; a sampled
        // parent from upstream still marks children sampled, which keeps the
        // trace whole for the processes downstream that do export.
        None => tracer = tracer.with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOff))),
    }
    let tracer = tracer.build();
    let meter = meter.build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    opentelemetry::global::set_tracer_provider(tracer.clone());
    opentelemetry::global::set_meter_provider(meter.clone());

    // Orrery's own spans stay visible to the log layer whatever the filter,
    // so a line that passes it carries its operation's fields and trace id.
    let logs = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(&config.default_log_filter))
        .or(filter_fn(|meta| {
            meta.is_span() && *meta.level() <= Level::INFO && meta.target().starts_with("orrery")
        }));
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
    // Spans of Orrery and of plugins, not of the libraries under them.
    let spans = Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("async_nats", LevelFilter::OFF)
        .with_target("h2", LevelFilter::OFF)
        .with_target("hyper", LevelFilter::OFF)
        .with_target("hyper_util", LevelFilter::OFF)
        .with_target("reqwest", LevelFilter::OFF)
        .with_target("tower", LevelFilter::OFF)
        .with_target("axum", LevelFilter::OFF);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer.tracer("orrery"))
        // Source locations and thread names would be attributes on every
        // span, recorded or not: a cost paid on each request for little.
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(spans);
    // A subscriber set earlier (a test harness) is kept.
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();

    Ok(Telemetry {
        tracer,
        meter,
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
