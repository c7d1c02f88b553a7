//! The satellite's OpenTelemetry instruments. They record into the global
//! meter provider, which `orrery_plugin_sdk::telemetry::init` sets up; without
//! it they cost nothing and record nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::metrics::{BoundHistogram, Histogram};
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
pub struct RelayMetrics(Arc<Instruments>);

struct Instruments {
    duration: Histogram<f64>,
    plugin: Value,
    /// The histogram bound to `plugin`, each known operation and
    /// `answered`, the labels of nearly every request: resolved once, not
    /// sorted, hashed and looked up per request (1,400 instructions a
    /// request, BENCHMARKS.md relay round 14). A handful of entries at most,
    /// one per operation the plugin is sent.
    answered: Mutex<Vec<(&'static str, BoundHistogram<f64>)>>,
}

impl RelayMetrics {
    /// Instruments on the global meter provider, labelled with `plugin`.
    pub fn new(plugin: &str) -> Self {
        let meter = opentelemetry::global::meter("orrery-satellite");
        Self(Arc::new(Instruments {
            duration: meter
                .f64_histogram("orrery.relay.duration")
                .with_unit("s")
                .with_description("Requests relayed to a plugin, from receipt to answer, by plugin, operation and outcome.")
                .build(),
            plugin: Value::String(StringValue::from(Arc::<str>::from(plugin))),
            answered: Mutex::new(Vec::new()),
        }))
    }

    /// Records one relayed request.
    pub fn record(&self, operation: &MessageKind, outcome: &Outcome, took: Duration) {
        let seconds = took.as_secs_f64();
        let metrics = &self.0;
        if let (Outcome::Answered, Some(kind)) = (outcome, operation.known_str()) {
            let mut answered = metrics.answered.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, bound)) = answered.iter().find(|(k, _)| *k == kind) {
                bound.record(seconds);
            } else {
                let bound = metrics.duration.bind(&metrics.labels(kind.into(), outcome));
                bound.record(seconds);
                answered.push((kind, bound));
            }
            return;
        }
        let kind = label(operation.known_str(), operation.as_str());
        metrics
            .duration
            .record(seconds, &metrics.labels(kind, outcome));
    }
}

impl Instruments {
    fn labels(&self, operation: Value, outcome: &Outcome) -> [KeyValue; 3] {
        [
            KeyValue::new("plugin", self.plugin.clone()),
            KeyValue::new("operation", operation),
            KeyValue::new("outcome", outcome.value()),
        ]
    }
}
