//! "Send this operation to plugin P for target T": the one interface the
//! primary uses, over NATS ([`crate::bus::NatsBus`]) or in-process
//! ([`LocalBus`]). Both run the same envelope encode/decode path.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use orrery_plugin_sdk::client::{deadline_ms, decode_answer};
use orrery_plugin_sdk::Answer;
use orrery_schema::{Request, MAX_FRAME_BYTES};

use crate::answer::failure_answer;
use crate::bus::{BusError, NatsBus};
use crate::plugin_host::PluginHost;

/// The future a transport returns.
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<Answer, BusError>> + Send + 'a>>;

/// Sends operations to plugins, wherever they run.
pub trait Transport: Send + Sync + 'static {
    /// Sends `request` to plugin `plugin` (for the request's target) and
    /// waits at most `timeout` for its answer.
    fn send<'a>(
        &'a self,
        plugin: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> SendFuture<'a>;
}

impl Transport for NatsBus {
    fn send<'a>(
        &'a self,
        plugin: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> SendFuture<'a> {
        Box::pin(NatsBus::send(self, plugin, request, timeout))
    }
}

/// The in-process relay: plugins supervised by this process, no NATS. The
/// embedded single-host mode and fast tests use it; requests still travel
/// as encoded envelopes over the plugin's stdio link.
#[derive(Clone, Default)]
pub struct LocalBus {
    hosts: HashMap<String, PluginHost>,
}

impl LocalBus {
    /// A bus over these supervised plugins, keyed by announced name.
    pub fn new(hosts: impl IntoIterator<Item = PluginHost>) -> Self {
        LocalBus {
            hosts: hosts
                .into_iter()
                .map(|h| (h.name().to_owned(), h))
                .collect(),
        }
    }

    /// The supervised plugins.
    pub fn hosts(&self) -> impl Iterator<Item = &PluginHost> {
        self.hosts.values()
    }

    /// Stops every plugin, letting in-flight requests finish within `grace`.
    pub async fn stop(&self, grace: Duration) {
        for host in self.hosts.values() {
            host.stop(grace).await;
        }
    }
}

impl Transport for LocalBus {
    fn send<'a>(
        &'a self,
        plugin: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> SendFuture<'a> {
        Box::pin(async move {
            // In-process there are no satellites: a plugin missing here
            // is not installed (or did not start), which a retry cannot
            // change.
            let Some(host) = self.hosts.get(plugin) else {
                return Err(BusError::PluginNotFound {
                    plugin: plugin.to_owned(),
                    target: request.target().name.clone(),
                });
            };
            let envelope = request
                .to_envelope()
                .map_err(|e| BusError::unencodable(plugin, request, MAX_FRAME_BYTES, e))?
                .with_deadline_ms(Some(deadline_ms(timeout)))
                .with_trace(orrery_plugin_sdk::telemetry::current_trace());
            let answer = match host.call(envelope.clone(), timeout).await {
                Ok(answer) => answer,
                Err(e) => failure_answer(&envelope, e.code(), e.to_string()),
            };
            decode_answer(&answer).map_err(|e| BusError::Transport(e.to_string()))
        })
    }
}
