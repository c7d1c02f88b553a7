//! The satellite's OpenTelemetry instruments. They record into the global
//! meter provider, which `orrery_plugin_sdk::telemetry::init` sets up; without
//! it they cost nothing and record nothing.

use std::time::Duration;

use opentelemetry::metrics::Histogram;
use opentelemetry::KeyValue;
use orrery_schema::ErrorCode;

/// How the satellite finished a relayed request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The plugin answered (whatever it answered: the primary records the
    /// operation's own outcome).
    Answered,
    /// The satellite answered for the plugin with this error.
    Refused(ErrorCode),
}

impl Outcome {
    /// The `outcome` label value.
    pub fn label(&self) -> String {
        match self {
            Outcome::Answered => "answered".into(),
            Outcome::Refused(code) => code.to_string(),
        }
    }
}

/// Instruments of the relay.
#[derive(Clone)]
pub struct RelayMetrics {
    duration: Histogram<f64>,
}

impl RelayMetrics {
    /// Instruments on the global meter provider.
    pub fn new() -> Self {
        let meter = opentelemetry::global::meter("orrery-satellite");
        Self {
            duration: meter
                .f64_histogram("orrery.relay.duration")
                .with_unit("s")
                .with_description("Requests relayed to a plugin, from receipt to answer, by plugin, operation and outcome.")
                .build(),
        }
    }

    /// Records one relayed request.
    pub fn record(&self, plugin: &str, operation: &str, outcome: Outcome, took: Duration) {
        self.duration.record(
            took.as_secs_f64(),
            &[
                KeyValue::new("plugin", plugin.to_owned()),
                KeyValue::new("operation", operation.to_owned()),
                KeyValue::new("outcome", outcome.label()),
            ],
        );
    }
}

impl Default for RelayMetrics {
    fn default() -> Self {
        Self::new()
    }
}
