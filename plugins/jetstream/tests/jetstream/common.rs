//! A nats-server to manage and the plugin in-process, talking to it.

use std::ops::Deref;

use async_nats::jetstream;
use orrery_plugin_jetstream::JetstreamPlugin;
use orrery_plugin_sdk::schema::{PropertyMap, Value};
pub use orrery_testing::nats::NatsServer;
pub use orrery_testing::{failed, ok, props, PluginEnv};

/// A JetStream server and the plugin, whose target names that server.
pub struct Env {
    pub server: NatsServer,
    plugin: PluginEnv,
}

impl Deref for Env {
    type Target = PluginEnv;

    fn deref(&self) -> &PluginEnv {
        &self.plugin
    }
}

/// A target config naming `urls`.
pub fn config(urls: &[&str]) -> PropertyMap {
    let servers = urls.iter().map(|u| Value::from(*u)).collect();
    props([("servers", Value::List(servers))])
}

impl Env {
    pub async fn new() -> Env {
        let server = NatsServer::start().await;
        let plugin = PluginEnv::start(JetstreamPlugin::default(), config(&[&server.url])).await;
        Env { server, plugin }
    }

    /// A raw JetStream client of the managed server, for changes out of band.
    pub async fn js(&self) -> jetstream::Context {
        jetstream::new(self.server.client().await)
    }
}
