//! Drive a plugin in-process, through the same frames and codec as a real
//! child process, for fast unit tests.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{ConnectError, PluginClient};
use crate::plugin::ResourcePlugin;
use crate::server::serve_io;

/// Buffer of each in-memory pipe.
const PIPE_BYTES: usize = 1 << 20;

/// Serves `plugin` on in-memory pipes and returns a connected client.
/// The plugin stops when every clone of the client is dropped.
///
/// # Errors
///
/// As [`PluginClient::connect`]; in practice only when the plugin's
/// announcement cannot be encoded (e.g. its schemas are over the message
/// limit).
pub async fn start<P: ResourcePlugin>(plugin: P) -> Result<PluginClient, ConnectError> {
    let (host_side, plugin_side) = tokio::io::duplex(PIPE_BYTES);
    let (plugin_read, plugin_write) = tokio::io::split(plugin_side);
    let (host_read, host_write) = tokio::io::split(host_side);
    tokio::spawn(async move {
        if let Err(e) = serve_io(
            Arc::new(plugin),
            plugin_read,
            plugin_write,
            std::future::pending(),
        )
        .await
        {
            tracing::debug!(error = %e, "in-process plugin stopped");
        }
    });
    PluginClient::connect(host_read, host_write, Duration::from_secs(5)).await
}
