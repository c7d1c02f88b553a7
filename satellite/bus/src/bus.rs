//! The caller's side: "send this operation to plugin P for target T".
//!
//! [`NatsBus`] sends over NATS to whichever satellite of the plugin's queue
//! group takes it. No responders, timeouts and lost satellites come back as
//! failures with a code (`NoSatellite`, `DeadlineExceeded`), never as hangs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use orrery_plugin_sdk::client::{deadline_ms, decode_answer};
use orrery_plugin_sdk::telemetry;
use orrery_plugin_sdk::{Answer, CallError};
use orrery_schema::{Envelope, ErrorCode, Request};
use tracing::Instrument;

use crate::receipts;
use crate::subjects::{direct_subject, operation_subject};

/// Why an operation got no answer from a plugin.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BusError {
    /// No satellite serves the plugin for the target.
    #[error("no satellite serves plugin `{plugin}` for target `{target}`")]
    NoSatellite {
        /// The plugin.
        plugin: String,
        /// The target.
        target: String,
    },
    /// The plugin is not among those this process runs (embedded mode:
    /// its binary was not found, or it did not start).
    #[error("plugin `{plugin}` is not running in this process (not found or not started; see the plugin search path: --plugin-dir, ORRERY_PLUGIN_DIR), so nothing can reach target `{target}`")]
    PluginNotFound {
        /// The plugin.
        plugin: String,
        /// The target.
        target: String,
    },
    /// No answer before the deadline: the outcome is unknown.
    #[error("no answer from plugin `{plugin}` within {timeout:?}")]
    Timeout {
        /// The plugin.
        plugin: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The satellite that took the request stopped answering its pings
    /// (killed, hung or cut off) before answering: the outcome is unknown.
    #[error("satellite `{satellite}` went silent while plugin `{plugin}` on target `{target}` worked on the request (its outcome is unknown)")]
    SatelliteLost {
        /// The plugin.
        plugin: String,
        /// The target.
        target: String,
        /// The silent satellite's service instance id.
        satellite: String,
    },
    /// The transport failed.
    #[error("transport failed: {0}")]
    Transport(String),
    /// The request cannot fit a NATS message; it was not sent.
    #[error(
        "the `{kind}` request for plugin `{plugin}` on target `{target}` is {len} bytes, \
         larger than the {limit} bytes a NATS message can carry here (the server's \
         max_payload less {HEADER_ROOM} bytes for headers); raise `max_payload` on the \
         NATS servers to send it"
    )]
    TooLarge {
        /// The plugin.
        plugin: String,
        /// The target.
        target: String,
        /// The request's kind.
        kind: String,
        /// The encoded request's size.
        len: usize,
        /// The most a message may carry.
        limit: usize,
    },
}

impl BusError {
    /// The error of a request to `plugin` that could not be encoded:
    /// [`BusError::TooLarge`] against `limit` when it is over the message
    /// limit (a retry would be too), else [`BusError::Transport`].
    pub fn unencodable(
        plugin: &str,
        request: &Request,
        limit: usize,
        e: orrery_schema::EncodeError,
    ) -> BusError {
        match e {
            orrery_schema::EncodeError::TooLarge { len, .. } => BusError::TooLarge {
                plugin: plugin.to_owned(),
                target: request.target().name.clone(),
                kind: request.kind().to_string(),
                len,
                limit,
            },
            e => BusError::Transport(e.to_string()),
        }
    }

    /// The error code a scheduler classifies.
    pub fn code(&self) -> ErrorCode {
        match self {
            BusError::NoSatellite { .. } => ErrorCode::NoSatellite,
            BusError::PluginNotFound { .. } => ErrorCode::PluginNotFound,
            BusError::Timeout { .. } => ErrorCode::DeadlineExceeded,
            BusError::SatelliteLost { .. } => ErrorCode::PluginUnavailable,
            BusError::Transport(_) => ErrorCode::NetworkFailure,
            BusError::TooLarge { .. } => ErrorCode::MessageTooLarge,
        }
    }
}

/// Bytes of a NATS message's `max_payload` kept for its headers (trace
/// context, the service API's own): the envelope gets the rest.
pub const HEADER_ROOM: usize = 1024;

/// The largest envelope a message of `client` can carry: the
/// `max_payload` the server announced when the client (re)connected,
/// less [`HEADER_ROOM`].
pub fn message_limit(client: &async_nats::Client) -> usize {
    client.max_payload().saturating_sub(HEADER_ROOM)
}

/// Operations over NATS.
#[derive(Clone)]
pub struct NatsBus {
    client: async_nats::Client,
    /// Counts the connection's drops (see [`watch_drops`]).
    drops: tokio::sync::watch::Receiver<u64>,
    /// When the connection last dropped or came back.
    back_at: Arc<Mutex<Option<Instant>>>,
    /// Which satellites answer, and whether they give receipts.
    receipts: receipts::Watch,
}

/// How often the connection's state is looked at.
const DROP_CHECK: Duration = Duration::from_millis(50);

/// For this long after the connection comes back, a request nobody
/// answers is not proof that no satellite serves the target: satellites
/// reconnect too, a moment later. It fails as retryable instead.
pub const RECONNECT_SETTLE: Duration = Duration::from_secs(10);

/// A counter of `client`'s connection drops, bumped within [`DROP_CHECK`]
/// of each, and the instant it last dropped or came back. A request in flight when
/// the connection drops fails at once: its answer would come back to a
/// subscription the server forgot, so waiting out its timeout (a minute)
/// only stalls the command. Outside a runtime nothing watches, and
/// requests wait for their timeout.
fn watch_drops(
    client: &async_nats::Client,
) -> (
    tokio::sync::watch::Receiver<u64>,
    Arc<Mutex<Option<Instant>>>,
) {
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    let back_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let client = client.clone();
        let back = back_at.clone();
        runtime.spawn(async move {
            let connected = async_nats::connection::State::Connected;
            let mut was_up = client.connection_state() == connected;
            // Ends with the last bus over this watch.
            while !tx.is_closed() {
                tokio::time::sleep(DROP_CHECK).await;
                let up = client.connection_state() == connected;
                if was_up != up {
                    // Down or back: either starts the settling time (an
                    // answer may beat this watch to the reconnect).
                    *back.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                }
                if was_up && !up {
                    tx.send_modify(|n| *n += 1);
                }
                was_up = up;
            }
        });
    }
    (rx, back_at)
}

impl NatsBus {
    /// A bus over a connected client.
    pub fn new(client: async_nats::Client) -> Self {
        let (drops, back_at) = watch_drops(&client);
        NatsBus {
            receipts: receipts::Watch::start(&client),
            client,
            drops,
            back_at,
        }
    }

    /// Whether the connection dropped or came back within
    /// [`RECONNECT_SETTLE`], or is down now.
    fn settling(&self) -> bool {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return true;
        }
        let back = *self.back_at.lock().unwrap_or_else(|p| p.into_inner());
        back.is_some_and(|at| at.elapsed() < RECONNECT_SETTLE)
    }

    /// Sends `request` to plugin `plugin` for its target and waits at most
    /// `timeout` for the answer.
    pub async fn send(
        &self,
        plugin: &str,
        request: &Request,
        timeout: Duration,
    ) -> Result<Answer, BusError> {
        let target = request.target().name.as_str();
        let limit = message_limit(&self.client);
        let envelope = request
            .to_envelope()
            .map_err(|e| BusError::unencodable(plugin, request, limit, e))?
            .with_deadline_ms(Some(deadline_ms(timeout)))
            .with_max_message_bytes(Some(limit as u64));
        let answer = self.call(plugin, target, &envelope, timeout).await?;
        decode_answer(&answer).map_err(|e: CallError| BusError::Transport(e.to_string()))
    }

    /// Sends an envelope and returns the answering envelope.
    pub async fn call(
        &self,
        plugin: &str,
        target: &str,
        envelope: &Envelope,
        timeout: Duration,
    ) -> Result<Envelope, BusError> {
        let too_large = |len| BusError::TooLarge {
            plugin: plugin.to_owned(),
            target: target.to_owned(),
            kind: envelope.kind.to_string(),
            len,
            limit: message_limit(&self.client),
        };
        let payload = envelope.encode().map_err(|e| match e {
            orrery_schema::EncodeError::TooLarge { len, .. } => too_large(len),
            e => BusError::Transport(e.to_string()),
        })?;
        // Sending it would fail the same way on every retry.
        if payload.len() > message_limit(&self.client) {
            return Err(too_large(payload.len()));
        }
        let subject = operation_subject(plugin, target);
        // The client span exists for traced requests only: it is there to
        // be exported, and creating, entering and leaving it (and asking
        // OpenTelemetry's filter about it) on every untraced request was
        // 5,600 instructions per operation when exporting at 1 %
        // (BENCHMARKS.md, relay round 9). The caller's context is read once
        // for an untraced request: each read clones and drops a span handle
        // (relay round 14).
        let caller_trace = telemetry::current_trace();
        let span = if caller_trace.is_some() {
            tracing::info_span!(
                "nats.request",
                otel.kind = "client",
                messaging.system = "nats",
                messaging.destination.name = %subject,
            )
        } else {
            tracing::Span::none()
        };
        // The satellite's relay span becomes a child of this one.
        let trace = caller_trace.and_then(|_| span.in_scope(telemetry::current_trace));
        let headers = trace.map(|trace| {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(telemetry::TRACEPARENT, trace.traceparent.as_str());
            if !trace.tracestate.is_empty() {
                headers.insert(telemetry::TRACESTATE, trace.tracestate.as_str());
            }
            headers
        });
        if self.receipts.ask() {
            let sent = Sent {
                plugin,
                target,
                subject,
                payload: payload.into(),
                headers: headers.unwrap_or_default(),
                timeout,
            };
            return self.call_with_receipt(sent).instrument(span).await;
        }
        let mut request = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(timeout));
        if let Some(headers) = headers {
            request = request.headers(headers);
        }
        let mut drops = self.drops.clone();
        drops.mark_unchanged();
        let answered = tokio::select! {
            answered = self.client.send_request(subject, request).instrument(span) => answered,
            Ok(()) = drops.changed() => return Err(dropped(plugin, target)),
        };
        match answered {
            Ok(message) => decode(&message),
            Err(e) => Err(match e.kind() {
                async_nats::RequestErrorKind::NoResponders => self.no_responders(plugin, target),
                async_nats::RequestErrorKind::TimedOut => BusError::Timeout {
                    plugin: plugin.to_owned(),
                    timeout,
                },
                _ => BusError::Transport(e.to_string()),
            }),
        }
    }

    /// No satellite subscribes to the request's subject: none serves the
    /// target, unless the connection came back moments ago.
    fn no_responders(&self, plugin: &str, target: &str) -> BusError {
        if self.settling() {
            BusError::Transport(format!(
                "no satellite answered plugin `{plugin}` for target `{target}` yet: \
                 the connection to NATS came back moments ago, and satellites reconnect too"
            ))
        } else {
            BusError::NoSatellite {
                plugin: plugin.to_owned(),
                target: target.to_owned(),
            }
        }
    }

    /// Sends a request asking for a receipt (see [`receipts`]): sent again
    /// under the same envelope while no satellite takes it in time, then
    /// waited for unless the satellite that took it falls silent.
    async fn call_with_receipt(&self, sent: Sent<'_>) -> Result<Envelope, BusError> {
        let Sent {
            plugin,
            target,
            subject,
            payload,
            headers,
            timeout,
        } = sent;
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || BusError::Timeout {
            plugin: plugin.to_owned(),
            timeout,
        };
        let transport = |e: &dyn std::fmt::Display| BusError::Transport(e.to_string());
        let inbox = self.client.new_inbox();
        let mut replies = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| transport(&e))?;
        let mut drops = self.drops.clone();
        drops.mark_unchanged();
        let taken_by = loop {
            let mut headers = headers.clone();
            headers.insert(
                receipts::RECEIPT_BY,
                receipts::receipt_by().to_string().as_str(),
            );
            // A live satellite serving the target, addressed alone, so a
            // hung one gets nothing new; the queue group when none is known.
            let direct = self.receipts.pick(plugin, target);
            let to = direct
                .as_deref()
                .map_or_else(|| subject.clone(), |id| direct_subject(plugin, target, id));
            self.client
                .publish_with_reply_and_headers(to, inbox.clone(), headers, payload.clone())
                .await
                .map_err(|e| transport(&e))?;
            let until = deadline.min(
                tokio::time::Instant::now() + receipts::RECEIPT_WINDOW + receipts::RECEIPT_GRACE,
            );
            let first = tokio::select! {
                first = tokio::time::timeout_at(until, replies.next()) => first,
                Ok(()) = drops.changed() => return Err(dropped(plugin, target)),
            };
            match first {
                Err(_) if tokio::time::Instant::now() >= deadline => return Err(timed_out()),
                // Nobody took it: it reached no plugin, and the satellite
                // that reads it late drops it. NATS picks a member again.
                Err(_) => {
                    tracing::debug!(%plugin, %target, satellite = ?direct, "no satellite took the request in time; sending it again");
                    if let Some(id) = &direct {
                        self.receipts.shun(id);
                    }
                    continue;
                }
                Ok(None) => return Err(transport(&"the reply subscription ended")),
                Ok(Some(m)) if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) => {
                    match &direct {
                        // Its identity may not subscribe to its direct
                        // subjects (older permissions), or it just went.
                        Some(id) => {
                            self.receipts.undirected(id);
                            continue;
                        }
                        None => return Err(self.no_responders(plugin, target)),
                    }
                }
                Ok(Some(m)) => match receipt_of(&m) {
                    Some(id) => break id,
                    // A satellite that gives no receipts answered at once.
                    None => return decode(&m),
                },
            }
        };
        loop {
            tokio::select! {
                answer = tokio::time::timeout_at(deadline, replies.next()) => match answer {
                    Err(_) => return Err(timed_out()),
                    Ok(None) => return Err(transport(&"the reply subscription ended")),
                    Ok(Some(m)) => match receipt_of(&m) {
                        // Taken twice: a satellite read it after its time by
                        // its own clock but not by ours.
                        Some(other) => tracing::warn!(%plugin, %target, first = %taken_by, %other, "a request was taken by two satellites; are their clocks in step with this host's?"),
                        None => return decode(&m),
                    },
                },
                () = self.receipts.silent(&taken_by) => {
                    return Err(BusError::SatelliteLost {
                        plugin: plugin.to_owned(),
                        target: target.to_owned(),
                        satellite: taken_by,
                    })
                }
                Ok(()) = drops.changed() => return Err(dropped(plugin, target)),
            }
        }
    }
}

/// A request on its way, for [`NatsBus::call_with_receipt`].
struct Sent<'a> {
    plugin: &'a str,
    target: &'a str,
    subject: String,
    payload: bytes::Bytes,
    headers: async_nats::HeaderMap,
    timeout: Duration,
}

/// The satellite instance a receipt names; `None` for any other message.
fn receipt_of(message: &async_nats::Message) -> Option<String> {
    let headers = message.headers.as_ref()?;
    Some(headers.get(receipts::RECEIPT)?.as_str().to_owned())
}

fn decode(message: &async_nats::Message) -> Result<Envelope, BusError> {
    Envelope::decode(&message.payload)
        .map_err(|e| BusError::Transport(format!("undecodable answer: {e}")))
}

fn dropped(plugin: &str, target: &str) -> BusError {
    BusError::Transport(format!(
        "the connection to NATS dropped while plugin `{plugin}` on target `{target}` \
         worked on the request (its outcome is unknown)"
    ))
}
