//! The satellite's OpenTelemetry instruments. They record into the global
//! meter provider, which `orrery_plugin_sdk::telemetry::init` sets up; without
//! it they cost nothing and record nothing.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::Histogram;
use opentelemetry::{KeyValue, StringValue, Value};
use orrery_schema::{ErrorCode, MessageKind};

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
        self.value().as_str().into_owned()
    }

    /// The `outcome` label value; no allocation for a known code.
    fn value(&self) -> Value {
        match self {
            Outcome::Answered => Value::from("answered"),
            Outcome::Refused(code) => label(code.known_str(), code.as_str()),
        }
    }
}

/// A label value: the static string when there is one (no allocation per
/// request), else an owned copy.
fn label(known: Option<&'static str>, otherwise: &str) -> Value {
    match known {
        Some(s) => Value::from(s),
        None => Value::from(otherwise.to_owned()),
    }
}

/// Instruments of the relay, for one plugin.
#[derive(Clone)]
pub struct RelayMetrics {
    duration: Histogram<f64>,
    plugin: Value,
}

impl RelayMetrics {
    /// Instruments on the global meter provider, labelled with `plugin`.
    pub fn new(plugin: &str) -> Self {
        let meter = opentelemetry::global::meter("orrery-satellite");
        Self {
            duration: meter
                .f64_histogram("orrery.relay.duration")
                .with_unit("s")
                .with_description("Requests relayed to a plugin, from receipt to answer, by plugin, operation and outcome.")
                .build(),
            plugin: Value::String(StringValue::from(Arc::<str>::from(plugin))),
        }
    }

    /// Records one relayed request.
    pub fn record(&self, operation: &MessageKind, outcome: &Outcome, took: Duration) {
        self.duration.record(
            took.as_secs_f64(),
            &[
                KeyValue::new("plugin", self.plugin.clone()),
                KeyValue::new(
                    "operation",
                    label(operation.known_str(), operation.as_str()),
                ),
                KeyValue::new("outcome", outcome.value()),
            ],
        );
    }
}
