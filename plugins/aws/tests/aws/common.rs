//! A moto_server, the plugin in-process with a target naming it, and raw
//! SDK clients of the same emulator for changes behind the plugin's back.

use std::ops::Deref;

use orrery_plugin_aws::target::{clients, Clients};
pub use orrery_plugin_aws::AwsPlugin;
use orrery_plugin_sdk::schema::{PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{to_properties, ResourcePlugin};
pub use orrery_testing::moto::MotoServer;
pub use orrery_testing::{failed, ok, PluginEnv};
pub use serde_json::json;

/// The region the tests use: not us-east-1, so bucket creates carry a
/// location constraint as they must everywhere else.
pub const REGION: &str = "eu-west-1";

/// The target config naming `endpoint` (moto takes any keys).
pub fn config(endpoint: &str) -> PropertyMap {
    props(json!({
        "region": REGION,
        "endpoint_url": endpoint,
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }))
}

/// Properties from JSON.
pub fn props(value: serde_json::Value) -> PropertyMap {
    to_properties(&value).unwrap()
}

/// Properties as JSON, to compare.
pub fn json_of(props: &PropertyMap) -> serde_json::Value {
    serde_json::to_value(props).unwrap()
}

/// Asserts every field of `want` is in `got` with that value.
#[track_caller]
pub fn has(got: &PropertyMap, want: &serde_json::Value) {
    let got = json_of(got);
    for (k, v) in want.as_object().unwrap() {
        assert_eq!(&got[k], v, "`{k}` in {got:#}");
    }
}

/// The schema of `ty`.
pub fn schema(ty: &str) -> ResourceSchema {
    AwsPlugin::default()
        .resources()
        .into_iter()
        .find(|s| s.type_name == ty)
        .unwrap()
}

/// Asserts the schema says a change to `field` replaces the resource.
#[track_caller]
pub fn replaces(ty: &str, field: &str) {
    let schema = schema(ty);
    let f = schema.field(field).unwrap();
    assert!(
        f.hints.forces_replacement(),
        "{ty}.{field} must force replacement"
    );
}

/// An emulator, the plugin and raw clients of the emulator.
pub struct Env {
    pub moto: MotoServer,
    plugin: PluginEnv,
    pub raw: Clients,
}

impl Deref for Env {
    type Target = PluginEnv;

    fn deref(&self) -> &PluginEnv {
        &self.plugin
    }
}

impl Env {
    /// `None` (the test SKIPs) when there is no moto_server here.
    pub async fn start() -> Option<Env> {
        let moto = MotoServer::start().await?;
        Some(Env::on(moto.url.clone(), moto).await)
    }

    /// The plugin talking to `endpoint` (a proxy in front of `moto`, say).
    pub async fn on(endpoint: String, moto: MotoServer) -> Env {
        let raw = clients(&config(&moto.url)).await.unwrap();
        let plugin = PluginEnv::start(AwsPlugin::default(), config(&endpoint)).await;
        Env { moto, plugin, raw }
    }
}
