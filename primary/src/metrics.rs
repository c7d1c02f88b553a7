//! The primary's OpenTelemetry instruments. They record into the global
//! meter provider that `orrery_plugin_sdk::telemetry::init` sets up at
//! start; a process that never sets one (a library user, a test) records
//! nothing and pays next to nothing. Labels stay low-cardinality: plugin,
//! operation, outcome, rate-limit bucket; never resource ids.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Gauge, Histogram, UpDownCounter};
use opentelemetry::KeyValue;

/// Every instrument of the primary.
pub struct Metrics {
    operation_duration: Histogram<f64>,
    retries: Counter<u64>,
    throttled: Counter<u64>,
    in_flight: UpDownCounter<i64>,
    rate_limit_wait: Counter<f64>,
    discovered: Counter<u64>,
    drift: Counter<u64>,
    satellites: Gauge<u64>,
    audit_dropped: Counter<u64>,
}

/// The instruments, made on first use from the global meter provider.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let meter = opentelemetry::global::meter("orrery-primary");
        Metrics {
            operation_duration: meter
                .f64_histogram("orrery.operation.duration")
                .with_unit("s")
                .with_description("Resource operations from first request to final outcome, by plugin, operation and outcome.")
                .build(),
            retries: meter
                .u64_counter("orrery.operation.retries")
                .with_description("Requests sent again after a retryable failure.")
                .build(),
            throttled: meter
                .u64_counter("orrery.operation.throttled")
                .with_description("Requests a plugin refused with Throttling.")
                .build(),
            in_flight: meter
                .i64_up_down_counter("orrery.requests.in_flight")
                .with_description("Requests sent to plugins and not yet answered.")
                .build(),
            rate_limit_wait: meter
                .f64_counter("orrery.ratelimit.wait")
                .with_unit("s")
                .with_description("Time requests spent waiting for a rate-limit token, by bucket (namespace/target).")
                .build(),
            discovered: meter
                .u64_counter("orrery.discovery.resources")
                .with_description("Resources seen by discovery, by plugin and whether Orrery manages them.")
                .build(),
            drift: meter
                .u64_counter("orrery.drift.detected")
                .with_description("Managed resources found changed or deleted out of band, by plugin and kind.")
                .build(),
            satellites: meter
                .u64_gauge("orrery.satellites")
                .with_description("Satellites answering on NATS, as last counted by the distributed primary.")
                .build(),
            audit_dropped: meter
                .u64_counter("orrery.audit.dropped")
                .with_description("Refusals (401, 403) not written to the audit log because its queue was full.")
                .build(),
        }
    })
}

impl Metrics {
    /// A refusal was not written to the audit log (its queue was full).
    pub fn audit_dropped(&self) {
        self.audit_dropped.add(1, &[]);
    }

    /// One operation reached its final outcome.
    pub fn operation(&self, plugin: &str, operation: &str, outcome: &str, took: Duration) {
        self.operation_duration.record(
            took.as_secs_f64(),
            &[
                KeyValue::new("plugin", plugin.to_owned()),
                KeyValue::new("operation", operation.to_owned()),
                KeyValue::new("outcome", outcome.to_owned()),
            ],
        );
    }

    /// A request is sent again.
    pub fn retry(&self, plugin: &str, operation: &str) {
        self.retries.add(
            1,
            &[
                KeyValue::new("plugin", plugin.to_owned()),
                KeyValue::new("operation", operation.to_owned()),
            ],
        );
    }

    /// A plugin answered `Throttling`.
    pub fn throttled(&self, plugin: &str) {
        self.throttled
            .add(1, &[KeyValue::new("plugin", plugin.to_owned())]);
    }

    /// A request was sent (`+1`) or answered (`-1`).
    pub fn in_flight(&self, delta: i64) {
        self.in_flight.add(delta, &[]);
    }

    /// Requests of `bucket` waited `wait` for tokens in one command.
    pub fn rate_limit_wait(&self, bucket: &str, wait: Duration) {
        if !wait.is_zero() {
            self.rate_limit_wait.add(
                wait.as_secs_f64(),
                &[KeyValue::new("bucket", bucket.to_owned())],
            );
        }
    }

    /// Discovery saw `count` resources of `plugin`.
    pub fn discovered(&self, plugin: &str, managed: bool, count: u64) {
        self.discovered.add(
            count,
            &[
                KeyValue::new("plugin", plugin.to_owned()),
                KeyValue::new("managed", managed),
            ],
        );
    }

    /// `n` satellites answered.
    pub fn satellites(&self, n: u64) {
        self.satellites.record(n, &[]);
    }

    /// Drift sync found `count` resources of `plugin` changed or deleted.
    pub fn drift(&self, plugin: &str, kind: &str, count: u64) {
        self.drift.add(
            count,
            &[
                KeyValue::new("plugin", plugin.to_owned()),
                KeyValue::new("kind", kind.to_owned()),
            ],
        );
    }
}
