//! The NATS relay: serves plugin operations on `orrery.op.<plugin>.<target>`
//! in a queue group per plugin, as a NATS service (`$SRV.PING/INFO/STATS`).
//!
//! N satellites serving the same plugin share its queue group, so adding one
//! adds capacity with no change on the primary. Concurrency per plugin is
//! bounded: when every permit is taken the relay stops pulling from NATS
//! (back-pressure) instead of queueing without bound.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use orrery_plugin_sdk::telemetry;
use orrery_schema::{Envelope, ErrorCode, MessageKind, Request, TraceContext, PROTOCOL_MAJOR};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{Instrument, Span};

use crate::metrics::{Outcome, RelayMetrics};
use crate::service::{EndpointStats, Service, ServiceInfo};
pub use orrery_bus::answer::failure_answer;
use orrery_bus::answer::protocol_error;
use orrery_bus::bus::{message_limit, HEADER_ROOM};
use orrery_bus::plugin_host::{stopped, PluginHost};
use orrery_bus::receipts;
pub use orrery_bus::subjects::{
    direct_subject, operation_subject, queue_group, SERVICE_NAME, SUBJECT_PREFIX,
};

/// How long a stopping satellite waits for NATS to take its last messages.
const FLUSH_GRACE: Duration = Duration::from_secs(5);

/// How the relay serves.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// This satellite's id, shown in service info.
    pub satellite_id: String,
    /// Targets served; empty means every target.
    pub targets: Vec<String>,
    /// Most requests in flight per plugin.
    pub max_in_flight: usize,
    /// Timeout for requests that carry no deadline.
    pub default_timeout: Duration,
    /// How long a drain waits for in-flight requests.
    pub drain_grace: Duration,
    /// Whether requests asking for a receipt (`Orrery-Receipt-By`) get
    /// one before their answer (see [`orrery_bus::receipts`]).
    pub receipts: bool,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            satellite_id: "satellite".into(),
            targets: Vec::new(),
            max_in_flight: 256,
            default_timeout: Duration::from_secs(60),
            drain_grace: Duration::from_secs(30),
            receipts: false,
        }
    }
}

/// Why the relay could not serve.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Registering the service or an endpoint failed.
    #[error("cannot register with NATS: {0}")]
    Register(String),
}

/// Serves every plugin until `shutdown` completes, then drains: stops
/// taking requests, finishes those in flight (up to the grace period) and
/// stops the plugins.
pub async fn serve(
    client: async_nats::Client,
    hosts: Vec<PluginHost>,
    config: RelayConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RelayError> {
    let plugins: Vec<String> = hosts
        .iter()
        .map(|h| format!("{}@{}", h.name(), h.announcement().version))
        .collect();
    let targets = if config.targets.is_empty() {
        vec!["*".to_owned()]
    } else {
        config.targets.clone()
    };
    let endpoint_name =
        |host: &PluginHost, target: &str| format!("{}-{}", host.name(), target.replace('*', "all"));
    let by_endpoint: HashMap<String, PluginHost> = hosts
        .iter()
        .flat_map(|h| {
            targets
                .iter()
                .map(move |t| (endpoint_name(h, t), h.clone()))
        })
        .collect();
    // This instance's id in the service API: what a receipt names, what
    // its direct subjects end with, and what primaries ping to tell a live
    // satellite from a silent one.
    let instance = uuid::Uuid::now_v7().simple().to_string();
    let mut endpoints = Vec::new();
    for host in &hosts {
        let permits = Arc::new(Semaphore::new(config.max_in_flight));
        for target in &targets {
            let stats = Arc::new(EndpointStats::new(
                endpoint_name(host, target),
                operation_subject(host.name(), target),
                queue_group(host.name()),
                HashMap::from([
                    ("plugin".to_owned(), host.name().to_owned()),
                    ("version".to_owned(), host.announcement().version.clone()),
                    ("target".to_owned(), target.clone()),
                ]),
            ));
            let register = |e: async_nats::SubscribeError| RelayError::Register(e.to_string());
            let queue = client
                .queue_subscribe(stats.subject().to_owned(), stats.queue_group().to_owned())
                .await
                .map_err(register)?;
            // Addressed to this satellite alone: a primary that knows which
            // satellites are live sends here, so a hung one gets no new work
            // (see orrery_bus::receipts).
            let direct = match config.receipts {
                true => Some(
                    client
                        .subscribe(direct_subject(host.name(), target, &instance))
                        .await
                        .map_err(register)?,
                ),
                false => None,
            };
            let requests = Requests { queue, direct };
            endpoints.push((requests, stats, host.clone(), permits.clone()));
        }
    }
    let service = Service::start(
        client.clone(),
        ServiceInfo {
            name: SERVICE_NAME.to_owned(),
            description: "Orrery satellite: relays operations to plugin processes".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            metadata: HashMap::from([
                ("satellite_id".to_owned(), config.satellite_id.clone()),
                ("plugins".to_owned(), plugins.join(",")),
                ("protocol".to_owned(), PROTOCOL_MAJOR.to_string()),
                // Primaries ask for receipts only while every satellite
                // they see says it gives them.
                // Which (plugin, target) a primary may address here directly.
                ("targets".to_owned(), targets.join(",")),
                (
                    receipts::METADATA.to_owned(),
                    if config.receipts { "1" } else { "0" }.to_owned(),
                ),
            ]),
        },
        instance.clone(),
        endpoints
            .iter()
            .map(|(_, stats, _, _)| stats.clone())
            .collect(),
        // `$SRV.STATS` carries each plugin's live health and load, for
        // `orrery satellites` and `orrery plugins`.
        Box::new(move |endpoint| {
            by_endpoint
                .get(endpoint)
                .map_or(serde_json::Value::Null, |host| {
                    let status = host.status();
                    serde_json::json!({
                        "plugin": host.name(),
                        "state": status.state,
                        "restarts": status.restarts,
                        "in_flight": status.in_flight,
                        "backed_off_targets": status.backed_off_targets,
                    })
                })
        }),
    )
    .await
    .map_err(|e| RelayError::Register(e.to_string()))?;

    tracing::info!(
        satellite = %config.satellite_id,
        plugins = %plugins.join(","),
        ?targets,
        max_payload = client.max_payload(),
        "serving"
    );

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut loops = JoinSet::new();
    for (requests, stats, host, permits) in endpoints {
        loops.spawn(serve_endpoint(
            client.clone(),
            requests,
            stats,
            host,
            permits,
            (config.clone(), config.receipts.then(|| instance.clone())),
            stop_rx.clone(),
        ));
    }
    let describe = {
        let mut stop = stop_rx.clone();
        tokio::spawn(orrery_bus::describe::serve_describe(
            client.clone(),
            hosts.clone(),
            config.targets.clone(),
            config.satellite_id.clone(),
            async move {
                stopped(&mut stop).await;
            },
        ))
    };
    shutdown.await;
    tracing::info!(satellite = %config.satellite_id, "draining: no new requests, finishing in-flight ones");
    // Requests the server sent before the signal may still be unread in the
    // socket, and unsubscribing drops what is unread: one round trip to the
    // server first reads them into the endpoints, which serve them all.
    let _ = tokio::time::timeout(FLUSH_GRACE, client.flush()).await;
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(config.drain_grace, async {
        while loops.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("drain grace period over; abandoning the requests still in flight");
    }
    let _ = describe.await;
    for host in &hosts {
        host.stop(Duration::from_secs(5)).await;
    }
    // With the NATS server gone these would wait for a reconnection that
    // may never come; a stopping satellite must still exit.
    service.stop();
    let _ = tokio::time::timeout(FLUSH_GRACE, client.flush()).await;
    Ok(())
}

async fn serve_endpoint(
    client: async_nats::Client,
    mut requests: Requests,
    stats: Arc<EndpointStats>,
    host: PluginHost,
    permits: Arc<Semaphore>,
    (config, receipt): (RelayConfig, Option<String>),
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // Requests in flight are futures polled by this task rather than tasks
    // of their own: no spawn, no task allocation and no cross-thread
    // hand-off per request. Each holds its permit until it has answered.
    // The relay's own work per request is a decode and an encode, so one
    // task per endpoint keeps up with far more than a plugin answers; the
    // waiting happens in the plugin.
    let satellite_id = config.satellite_id.as_str();
    let mut in_flight = FuturesUnordered::new();
    let metrics = RelayMetrics::new(host.name());
    let mut stopping = false;
    let mut ended = false;
    // One stop future for the loop: a new one per turn would register
    // with the watch, and leave it again, twice per request.
    let stop = stopped(&mut stop);
    tokio::pin!(stop);
    while !ended {
        // Take a permit before pulling the next request: a full plugin
        // leaves requests in NATS, where another satellite can take them.
        let next = async {
            let permit = permits.clone().acquire_owned().await.ok()?;
            let request = requests.next().await?;
            Some((permit, request))
        };
        tokio::select! {
            biased;
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            () = &mut stop, if !stopping => {
                stopping = true;
                // Unsubscribing leaves already-delivered requests in the
                // stream; the loop keeps serving them until it ends.
                requests.unsubscribe().await;
            }
            next = next => match next {
                Some((permit, request)) => {
                    let host = host.clone();
                    let default_timeout = config.default_timeout;
                    let metrics = metrics.clone();
                    let stats = &stats;
                    let client = &client;
                    let receipt = receipt.as_deref();
                    // Read per request: a reconnection may reach a server
                    // with another `max_payload`.
                    let limit = message_limit(client);
                    // Boxed: the future is kilobytes, and pushed unboxed it
                    // is copied whole on its way into the set's task. Made
                    // in its box (`Box::write` into an uninitialised one)
                    // rather than on the stack and copied there.
                    in_flight.push(Box::into_pin(Box::write(Box::new_uninit(), async move {
                        let started = Instant::now();
                        let (operation, outcome) = match receipt {
                            Some(instance) if !receipts::confirm(client, &request, instance).await => {
                                (unknown(), Outcome::Refused(ErrorCode::DeadlineExceeded))
                            }
                            _ => handle(client, request, &host, satellite_id, default_timeout, limit).await,
                        };
                        let took = started.elapsed();
                        stats.record(took, matches!(outcome, Outcome::Refused(_)));
                        metrics.record(&operation, &outcome, took);
                        drop(permit);
                    })));
                }
                None => ended = true,
            },
        }
    }
    while in_flight.next().await.is_some() {}
}

/// An endpoint's subscriptions: its queue group's, and with receipts its
/// direct subject's.
struct Requests {
    queue: async_nats::Subscriber,
    direct: Option<async_nats::Subscriber>,
}

impl Requests {
    /// The next request of either; `None` once both have ended. Each call
    /// polls the subscribers themselves: a subscriber closed by
    /// `unsubscribe` ends only when polled again (a combinator that waits
    /// for a wake-up would wait forever).
    async fn next(&mut self) -> Option<async_nats::Message> {
        let Some(direct) = &mut self.direct else {
            return self.queue.next().await;
        };
        tokio::select! {
            Some(request) = self.queue.next() => Some(request),
            Some(request) = direct.next() => Some(request),
            else => None,
        }
    }

    /// Stops both; what they delivered already is still read.
    async fn unsubscribe(&mut self) {
        let _ = self.queue.unsubscribe().await;
        if let Some(direct) = &mut self.direct {
            let _ = direct.unsubscribe().await;
        }
    }
}

/// The `satellite.relay` span of one relayed request, made once its
/// envelope is read (all fields at once: recording one later makes the JSON
/// log layer format them all again), and whether its trace is sampled. A
/// sampled request's span is a child of the primary's `nats.request` span
/// through the `traceparent` header.
fn relay_span(
    request: &async_nats::Message,
    envelope: &Envelope,
    host: &PluginHost,
    satellite: &str,
) -> (Span, bool) {
    let trace = incoming_trace(request);
    let sampled = telemetry::is_sampled(trace.as_ref());
    let span = orrery_plugin_sdk::entry_span!(
        sampled,
        "satellite.relay",
        otel.kind = "server",
        plugin = host.name(),
        satellite,
        operation = envelope.kind.as_str(),
        message_id = %envelope.id,
        trace_id = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    if let Some(trace) = &trace {
        telemetry::set_parent(&span, trace);
    }
    (span, sampled)
}

/// The W3C context in a request's headers, if any.
fn incoming_trace(request: &async_nats::Message) -> Option<TraceContext> {
    let headers = request.headers.as_ref()?;
    Some(TraceContext {
        traceparent: headers.get(telemetry::TRACEPARENT)?.as_str().to_owned(),
        tracestate: headers
            .get(telemetry::TRACESTATE)
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default(),
    })
}

/// Relays one request and answers it; returns the operation and outcome
/// for the metrics.
///
/// The request is decoded (the relay sets its trace context and answer
/// limit), but its body only when the host holds targets or an answer must
/// be given on the plugin's behalf; the plugin's answer is forwarded as the
/// bytes it wrote, not decoded again and re-encoded.
async fn handle(
    client: &async_nats::Client,
    request: async_nats::Message,
    host: &PluginHost,
    satellite_id: &str,
    default_timeout: Duration,
    limit: usize,
) -> (MessageKind, Outcome) {
    let payload = &request.payload;
    let envelope = match Envelope::decode(payload) {
        Err(e) => {
            if request.reply.is_none() {
                tracing::warn!(plugin = host.name(), subject = %request.subject, error = %e, "dropping undecodable bytes without a reply subject");
                return (unknown(), Outcome::Refused(ErrorCode::MalformedMessage));
            }
            tracing::warn!(plugin = host.name(), subject = %request.subject, error = %e, "answering undecodable bytes with an error");
            let code = ErrorCode::MalformedMessage;
            let answer = protocol_error(None, code.clone(), format!("not an Orrery envelope: {e}"));
            respond(client, &request, &answer, None, limit).await;
            return (unknown(), Outcome::Refused(code));
        }
        Ok(envelope) => envelope,
    };
    if envelope.protocol != PROTOCOL_MAJOR {
        let code = ErrorCode::UnsupportedProtocol;
        let message = format!(
            "request speaks protocol {} but this satellite speaks protocol {PROTOCOL_MAJOR}",
            envelope.protocol
        );
        let answer = protocol_error(Some(&envelope), code.clone(), message);
        respond(client, &request, &answer, None, limit).await;
        return (envelope.kind, Outcome::Refused(code));
    }
    let (span, sampled) = relay_span(&request, &envelope, host, satellite_id);
    let kind = envelope.kind.clone();
    // Pinned where it is made, as the plugin's handler is: the span's
    // wrapper then moves a pointer, not the 2.5 KB future (three copies of
    // it per request otherwise, BENCHMARKS.md relay round 14).
    let work = std::pin::pin!(forward(
        client,
        &request,
        envelope,
        host,
        satellite_id,
        default_timeout,
        limit,
    ));
    let outcome = work.instrument(span.clone()).await;
    // Only an exported span carries its outcome: no log line is written
    // inside the request after it is known.
    if sampled {
        span.record("outcome", outcome.label().as_str());
    }
    (kind, outcome)
}

/// Hands a decoded request to the plugin and sends its answer (or one on
/// its behalf); runs inside the request's [`relay_span`].
async fn forward(
    client: &async_nats::Client,
    request: &async_nats::Message,
    mut envelope: Envelope,
    host: &PluginHost,
    satellite_id: &str,
    default_timeout: Duration,
    limit: usize,
) -> Outcome {
    let payload = &request.payload;
    // Which satellite served what (the multi-host test counts these);
    // the body is decoded for its request id only when enabled.
    tracing::debug!(
        satellite = %satellite_id,
        operation = %envelope.kind,
        request_id = %Request::from_envelope(&envelope)
            .map(|r| r.request_id().to_owned())
            .unwrap_or_default(),
        "relaying to the plugin"
    );
    // The plugin's handler span becomes a child of this relay span;
    // without telemetry here, the primary's context passes through.
    if let Some(trace) = telemetry::current_trace().or_else(|| incoming_trace(request)) {
        envelope.trace = Some(trace);
    }
    // The plugin answers within what the way back carries.
    envelope.max_message_bytes = Some(envelope.accepts_bytes().min(limit) as u64);
    let timeout = envelope.deadline_ms.map_or(default_timeout, until);
    let trace = envelope.trace.clone();
    // The request goes to the plugin without a copy; an answer given on
    // its behalf decodes it again from the NATS payload.
    let relayed = || Envelope {
        trace: trace.clone(),
        ..Envelope::decode(payload).unwrap_or_default()
    };
    // The subject's last token is the target (`orrery.op.<plugin>.<target>`):
    // a target whose requests crash the plugin again and again is backed
    // off alone.
    let target = request.subject.as_str().rsplit_once('.').map(|(_, t)| t);
    match host.call_answered_on(target, envelope, timeout).await {
        Ok(answered) => {
            if answered.bytes.len() <= limit {
                send(client, request, answered.bytes).await;
                return Outcome::Answered;
            }
            // An answer NATS cannot carry would be dropped and its caller
            // would wait for the deadline: it learns why at once instead.
            let code = ErrorCode::MessageTooLarge;
            let message = format!(
                "the plugin's `{}` answer is {} bytes, larger than the {limit} bytes a NATS \
                 message can carry here (the server's max_payload less {HEADER_ROOM} bytes for \
                 headers)",
                answered.envelope.kind,
                answered.bytes.len(),
            );
            tracing::warn!(%message, "answering with an error instead");
            let answer = failure_answer(&relayed(), code.clone(), message);
            respond(client, request, &answer, None, limit).await;
            Outcome::Refused(code)
        }
        Err(e) => {
            let code = e.code();
            tracing::warn!(error = %e, "the plugin could not answer");
            let relayed = relayed();
            let answer = failure_answer(&relayed, code.clone(), e.to_string());
            respond(client, request, &answer, Some(&relayed), limit).await;
            Outcome::Refused(code)
        }
    }
}

/// Answers with `answer`, encoded: replaced by `MessageTooLarge` when it is
/// over `limit` and answers `relayed`.
async fn respond(
    client: &async_nats::Client,
    request: &async_nats::Message,
    answer: &Envelope,
    relayed: Option<&Envelope>,
    limit: usize,
) {
    let mut bytes = match answer.encode() {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "cannot encode an answer");
            return;
        }
    };
    if bytes.len() > limit {
        if let Some(relayed) = relayed {
            let message = format!(
                "the `{}` answer is {} bytes, larger than the {limit} bytes a NATS message can \
                 carry here (the server's max_payload less {HEADER_ROOM} bytes for headers)",
                answer.kind,
                bytes.len(),
            );
            tracing::warn!(%message, "answering with an error instead");
            match failure_answer(relayed, ErrorCode::MessageTooLarge, message).encode() {
                Ok(b) => bytes = b,
                Err(e) => tracing::error!(error = %e, "cannot encode an answer"),
            }
        }
    }
    send(client, request, bytes.into()).await;
}

async fn send(client: &async_nats::Client, request: &async_nats::Message, bytes: bytes::Bytes) {
    let Some(reply) = &request.reply else {
        return;
    };
    if let Err(e) = client.publish(reply.clone(), bytes).await {
        tracing::warn!(error = %e, "cannot send an answer");
    }
}

/// The operation label of a request that is not an envelope.
fn unknown() -> MessageKind {
    MessageKind::Unknown("unknown".into())
}

fn until(deadline_ms: u64) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Duration::from_millis(deadline_ms.saturating_sub(now))
}
