//! OTLP metrics, pushed from the same reader the Prometheus text is read
//! from.
//!
//! OpenTelemetry's `PeriodicReader` would be a second reader, and the SDK
//! aggregates every measurement once per reader: the relay's duration
//! histogram, recorded per request, cost twice as much whenever metrics
//! were exported (about 1,400 instructions more per request, BENCHMARKS.md
//! relay round 10). Here every measurement is aggregated once, into the
//! process's one cumulative reader, and a thread of its own collects from
//! it and hands the result to the OTLP exporter, every
//! `OTEL_METRIC_EXPORT_INTERVAL` milliseconds (60 s by default, as the
//! SDK's reader) and once more when the process's telemetry is dropped.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::reader::MetricReader;

use super::init::SharedReader;

/// The standard variable for the export interval, in milliseconds.
const INTERVAL_ENV: &str = "OTEL_METRIC_EXPORT_INTERVAL";
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The pushing thread; dropping this pushes a last time and stops it.
pub(super) struct MetricsPush {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsPush {
    /// Starts pushing what `reader` collects to `exporter`.
    pub(super) fn start<E: PushMetricExporter>(reader: SharedReader, exporter: E) -> Self {
        let interval = std::env::var(INTERVAL_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| *ms > 0)
            .map_or(DEFAULT_INTERVAL, Duration::from_millis);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("otlp-metrics".into())
            .spawn(move || {
                // A message or a dropped sender both mean: last push, stop.
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    push(&reader, &exporter);
                }
                push(&reader, &exporter);
                let _ = exporter.shutdown();
            })
            .ok();
        MetricsPush {
            stop: Some(stop),
            thread,
        }
    }
}

fn push<E: PushMetricExporter>(reader: &SharedReader, exporter: &E) {
    let mut metrics = ResourceMetrics::default();
    if reader.collect(&mut metrics).is_ok() {
        // The exporter's own retries and timeout bound this; an error means
        // the collector is unreachable, and the next push tries again.
        if let Err(e) = futures::executor::block_on(exporter.export(&metrics)) {
            tracing::debug!(error = %e, "pushing metrics over OTLP failed");
        }
    }
}

impl Drop for MetricsPush {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
