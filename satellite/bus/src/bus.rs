//! The caller's side: "send this operation to plugin P for target T".
//!
//! [`NatsBus`] sends over NATS to whichever satellite of the plugin's queue
//! group takes it. No responders, timeouts and lost satellites come back as
//! failures with a code (`NoSatellite`, `DeadlineExceeded`), never as hangs.

use std::time::Duration;

use orrery_plugin_sdk::client::{deadline_ms, decode_answer};
use orrery_plugin_sdk::telemetry;
use orrery_plugin_sdk::{Answer, CallError};
use orrery_schema::{Envelope, ErrorCode, Request};
use tracing::Instrument;

use crate::subjects::operation_subject;

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
    /// No answer before the deadline: the outcome is unknown.
    #[error("no answer from plugin `{plugin}` within {timeout:?}")]
    Timeout {
        /// The plugin.
        plugin: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The transport failed.
    #[error("transport failed: {0}")]
    Transport(String),
}

impl BusError {
    /// The error code a scheduler classifies.
    pub fn code(&self) -> ErrorCode {
        match self {
            BusError::NoSatellite { .. } => ErrorCode::NoSatellite,
            BusError::Timeout { .. } => ErrorCode::DeadlineExceeded,
            BusError::Transport(_) => ErrorCode::NetworkFailure,
        }
    }
}

/// Operations over NATS.
#[derive(Clone)]
pub struct NatsBus {
    client: async_nats::Client,
}

impl NatsBus {
    /// A bus over a connected client.
    pub fn new(client: async_nats::Client) -> Self {
        NatsBus { client }
    }

    /// Sends `request` to plugin `plugin` for its target and waits at most
    /// `timeout` for the answer.
    pub async fn send(
        &self,
        plugin: &str,
        request: &Request,
        timeout: Duration,
    ) -> Result<Answer, BusError> {
        let target = request.target().name.clone();
        let envelope = request
            .to_envelope()
            .map_err(|e| BusError::Transport(e.to_string()))?
            .with_deadline_ms(Some(deadline_ms(timeout)));
        let answer = self.call(plugin, &target, &envelope, timeout).await?;
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
        let payload = envelope
            .encode()
            .map_err(|e| BusError::Transport(e.to_string()))?;
        let subject = operation_subject(plugin, target);
        let span = tracing::info_span!(
            "nats.request",
            otel.kind = "client",
            messaging.system = "nats",
            messaging.destination.name = %subject,
        );
        let mut request = async_nats::Request::new()
            .payload(payload.into())
            .timeout(Some(timeout));
        // The satellite's relay span becomes a child of this one.
        if let Some(trace) = span.in_scope(telemetry::current_trace) {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(telemetry::TRACEPARENT, trace.traceparent.as_str());
            if !trace.tracestate.is_empty() {
                headers.insert(telemetry::TRACESTATE, trace.tracestate.as_str());
            }
            request = request.headers(headers);
        }
        match self
            .client
            .send_request(subject, request)
            .instrument(span)
            .await
        {
            Ok(message) => Envelope::decode(&message.payload)
                .map_err(|e| BusError::Transport(format!("undecodable answer: {e}"))),
            Err(e) => Err(match e.kind() {
                async_nats::RequestErrorKind::NoResponders => BusError::NoSatellite {
                    plugin: plugin.to_owned(),
                    target: target.to_owned(),
                },
                async_nats::RequestErrorKind::TimedOut => BusError::Timeout {
                    plugin: plugin.to_owned(),
                    timeout,
                },
                _ => BusError::Transport(e.to_string()),
            }),
        }
    }
}
