//! The NATS service protocol for the relay's endpoints: `$SRV.PING`,
//! `$SRV.INFO` and `$SRV.STATS` (each also `.<name>` and `.<name>.<id>`),
//! answered with the JSON of the `io.nats.micro.v1` schemas that
//! `orrery satellites`, the dashboard and `nats micro` read.
//!
//! async-nats's `service` wraps every message in a request that clones the
//! client and the endpoint's name and, when answered, locks a map of every
//! endpoint's statistics and hashes the name to find its own: about 3,000
//! instructions per relayed request (callgrind), more than the relay's own
//! decode and encode. Here the relay reads plain queue subscriptions and
//! each endpoint counts in atomics; this task reads them only when asked.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use tokio::task::JoinHandle;

/// The subject prefix of the service protocol.
const API_PREFIX: &str = "$SRV";

/// What a service says about itself.
#[derive(Clone, Debug)]
pub struct ServiceInfo {
    /// The service's name, shared by every instance.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its version.
    pub version: String,
    /// Free-form facts about this instance.
    pub metadata: HashMap<String, String>,
}

/// One endpoint's description and live counters.
#[derive(Debug)]
pub struct EndpointStats {
    name: String,
    subject: String,
    queue_group: String,
    metadata: HashMap<String, String>,
    requests: AtomicU64,
    errors: AtomicU64,
    processing_ns: AtomicU64,
}

impl EndpointStats {
    /// An endpoint serving `subject` in `queue_group`, not yet counted.
    pub fn new(
        name: String,
        subject: String,
        queue_group: String,
        metadata: HashMap<String, String>,
    ) -> Self {
        EndpointStats {
            name,
            subject,
            queue_group,
            metadata,
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            processing_ns: AtomicU64::new(0),
        }
    }

    /// Counts one request answered after `took`; `error` when the answer
    /// was an error of the service's own.
    pub fn record(&self, took: Duration, error: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.processing_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The endpoint's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The subject it serves.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Its queue group.
    pub fn queue_group(&self) -> &str {
        &self.queue_group
    }
}

/// Per-endpoint data for `$SRV.STATS`, by endpoint name.
pub type StatsData = Box<dyn Fn(&str) -> serde_json::Value + Send + Sync>;

/// The responder of a started service; dropping it stops answering.
#[derive(Debug)]
pub struct Service {
    task: JoinHandle<()>,
}

impl Service {
    /// Subscribes to the protocol's subjects and answers them until
    /// stopped. `id` tells this instance from the service's others.
    pub async fn start(
        client: async_nats::Client,
        info: ServiceInfo,
        id: String,
        endpoints: Vec<Arc<EndpointStats>>,
        data: StatsData,
    ) -> Result<Service, async_nats::SubscribeError> {
        let mut subscriptions = Vec::new();
        for verb in ["PING", "INFO", "STATS"] {
            for subject in [
                format!("{API_PREFIX}.{verb}"),
                format!("{API_PREFIX}.{verb}.{}", info.name),
                format!("{API_PREFIX}.{verb}.{}.{id}", info.name),
            ] {
                subscriptions.push(client.subscribe(subject).await?);
            }
        }
        let answers = Answers {
            info,
            id,
            started: now_rfc3339(),
            endpoints,
            data,
        };
        let mut requests = futures::stream::select_all(subscriptions);
        let task = tokio::spawn(async move {
            while let Some(message) = requests.next().await {
                let Some(reply) = message.reply else { continue };
                let verb = message.subject.split('.').nth(1).unwrap_or_default();
                let Some(body) = answers.answer(verb) else {
                    continue;
                };
                if let Err(e) = client.publish(reply, body.into()).await {
                    tracing::warn!(error = %e, "cannot answer a service request");
                }
            }
        });
        Ok(Service { task })
    }

    /// Stops answering.
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Answers {
    info: ServiceInfo,
    id: String,
    started: String,
    endpoints: Vec<Arc<EndpointStats>>,
    data: StatsData,
}

impl Answers {
    /// The JSON answer to `verb`; `None` for a verb this service does not
    /// answer (a subject of ours carries only the three).
    fn answer(&self, verb: &str) -> Option<Vec<u8>> {
        let info = &self.info;
        let json = match verb {
            "PING" => serde_json::to_vec(&Ping {
                kind: "io.nats.micro.v1.ping_response",
                name: &info.name,
                id: &self.id,
                version: &info.version,
                metadata: &info.metadata,
            }),
            "INFO" => serde_json::to_vec(&Info {
                kind: "io.nats.micro.v1.info_response",
                name: &info.name,
                id: &self.id,
                description: &info.description,
                version: &info.version,
                metadata: &info.metadata,
                endpoints: self
                    .endpoints
                    .iter()
                    .map(|e| EndpointInfo {
                        name: &e.name,
                        subject: &e.subject,
                        queue_group: &e.queue_group,
                        metadata: &e.metadata,
                    })
                    .collect(),
            }),
            "STATS" => serde_json::to_vec(&Stats {
                kind: "io.nats.micro.v1.stats_response",
                name: &info.name,
                id: &self.id,
                version: &info.version,
                metadata: &info.metadata,
                started: &self.started,
                endpoints: self.endpoints.iter().map(|e| self.stats(e)).collect(),
            }),
            _ => return None,
        };
        json.ok()
    }

    fn stats<'a>(&self, e: &'a EndpointStats) -> EndpointStatsJson<'a> {
        let requests = e.requests.load(Ordering::Relaxed);
        let processing_time = e.processing_ns.load(Ordering::Relaxed);
        EndpointStatsJson {
            name: &e.name,
            subject: &e.subject,
            queue_group: &e.queue_group,
            num_requests: requests,
            num_errors: e.errors.load(Ordering::Relaxed),
            processing_time,
            average_processing_time: processing_time.checked_div(requests).unwrap_or(0),
            last_error: "",
            data: (self.data)(&e.name),
        }
    }
}

#[derive(Serialize)]
struct Ping<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    id: &'a str,
    version: &'a str,
    metadata: &'a HashMap<String, String>,
}

#[derive(Serialize)]
struct Info<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    id: &'a str,
    description: &'a str,
    version: &'a str,
    metadata: &'a HashMap<String, String>,
    endpoints: Vec<EndpointInfo<'a>>,
}

#[derive(Serialize)]
struct EndpointInfo<'a> {
    name: &'a str,
    subject: &'a str,
    queue_group: &'a str,
    metadata: &'a HashMap<String, String>,
}

#[derive(Serialize)]
struct Stats<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    id: &'a str,
    version: &'a str,
    metadata: &'a HashMap<String, String>,
    started: &'a str,
    endpoints: Vec<EndpointStatsJson<'a>>,
}

/// Durations in nanoseconds, as the schema has them.
#[derive(Serialize)]
struct EndpointStatsJson<'a> {
    name: &'a str,
    subject: &'a str,
    queue_group: &'a str,
    num_requests: u64,
    num_errors: u64,
    processing_time: u64,
    average_processing_time: u64,
    last_error: &'static str,
    data: serde_json::Value,
}

/// Now as RFC 3339 in UTC.
fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_count_requests_errors_and_time() {
        let e = EndpointStats::new("e".into(), "s".into(), "q".into(), HashMap::new());
        e.record(Duration::from_micros(3), false);
        e.record(Duration::from_micros(5), true);
        let answers = Answers {
            info: ServiceInfo {
                name: "svc".into(),
                description: String::new(),
                version: "1".into(),
                metadata: HashMap::new(),
            },
            id: "i".into(),
            started: now_rfc3339(),
            endpoints: vec![Arc::new(e)],
            data: Box::new(|name| serde_json::json!({ "endpoint": name })),
        };
        let stats: serde_json::Value =
            serde_json::from_slice(&answers.answer("STATS").unwrap()).unwrap();
        let e = &stats["endpoints"][0];
        assert_eq!(e["num_requests"], 2);
        assert_eq!(e["num_errors"], 1);
        assert_eq!(e["processing_time"], 8_000);
        assert_eq!(e["average_processing_time"], 4_000);
        assert_eq!(e["data"]["endpoint"], "e");
        assert!(answers.answer("SCHEMA").is_none());
    }
}
