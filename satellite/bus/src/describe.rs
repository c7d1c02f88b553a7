//! Plugin schemas over NATS: a satellite answers `orrery.describe.<plugin>`
//! with the plugin's announcement, so a primary learns schemas without
//! having the plugin binaries itself.

use std::time::Duration;

use futures::StreamExt;
use orrery_schema::{Announcement, Envelope, MessageKind, MAX_FRAME_BYTES};

use crate::bus::{message_limit, BusError};
use crate::plugin_host::PluginHost;
use crate::subjects::describe_queue_group;
pub use crate::subjects::describe_subject;

/// Answers describe requests for every plugin until `shutdown` resolves.
pub async fn serve_describe(
    client: async_nats::Client,
    hosts: Vec<PluginHost>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), async_nats::SubscribeError> {
    let mut subscriptions = futures::stream::SelectAll::new();
    // A plugin is described once it has announced itself: a satellite
    // still retrying its first handshake leaves describe requests to the
    // satellites that can answer them.
    let mut pending = futures::stream::FuturesUnordered::new();
    for host in hosts {
        let client = client.clone();
        pending.push(async move {
            host.announced().await;
            let sub = client
                .queue_subscribe(
                    describe_subject(host.name()),
                    describe_queue_group(host.name()),
                )
                .await?;
            // The largest request this satellite takes for the plugin: what
            // NATS carries, never more than a frame.
            let accepts = message_limit(&client).min(MAX_FRAME_BYTES) as u64;
            let envelope = Envelope::new(MessageKind::Announce, host.announcement())
                .map(|e| e.with_max_message_bytes(Some(accepts)));
            let payload: Option<bytes::Bytes> = match envelope.and_then(|e| e.encode()) {
                Ok(bytes) => Some(bytes.into()),
                Err(e) => {
                    tracing::error!(plugin = %host.name(), error = %e, "cannot encode the announcement");
                    None
                }
            };
            Ok::<_, async_nats::SubscribeError>(payload.map(|p| (sub, p)))
        });
    }
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            Some(ready) = pending.next(), if !pending.is_empty() => {
                if let Some((sub, payload)) = ready? {
                    subscriptions.push(sub.map(move |msg| (msg, payload.clone())));
                }
            }
            Some((msg, payload)) = subscriptions.next(), if !subscriptions.is_empty() => {
                if let Some(reply) = msg.reply {
                    if let Err(e) = client.publish(reply, payload).await {
                        tracing::warn!(error = %e, "cannot answer a describe request");
                    }
                }
            }
            () = &mut shutdown => return Ok(()),
        }
    }
}

/// Asks any satellite serving `plugin` for its announcement.
pub async fn describe(
    client: &async_nats::Client,
    plugin: &str,
    timeout: Duration,
) -> Result<Announcement, BusError> {
    let request = async_nats::Request::new()
        .payload(bytes::Bytes::new())
        .timeout(Some(timeout));
    let message = client
        .send_request(describe_subject(plugin), request)
        .await
        .map_err(|e| match e.kind() {
            async_nats::RequestErrorKind::NoResponders => BusError::NoSatellite {
                plugin: plugin.to_owned(),
                target: "*".to_owned(),
            },
            async_nats::RequestErrorKind::TimedOut => BusError::Timeout {
                plugin: plugin.to_owned(),
                timeout,
            },
            _ => BusError::Transport(e.to_string()),
        })?;
    let envelope = Envelope::decode(&message.payload)
        .map_err(|e| BusError::Transport(format!("undecodable announcement: {e}")))?;
    envelope
        .body()
        .map_err(|e| BusError::Transport(format!("undecodable announcement of `{plugin}`: {e}")))
}
