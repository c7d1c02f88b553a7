//! The testbed's test environment: the plugin in process, one target
//! (`orrery_testing::PluginEnv`, shared with the other plugins).

use std::ops::{Deref, DerefMut};

use orrery_plugin_sdk::schema::{ListResult, PropertyMap};
use orrery_plugin_testbed::TestbedPlugin;
pub use orrery_plugin_testbed::{ASYNC_THING, NOOP_THING};
pub use orrery_testing::{failed, ok, props, PluginEnv};

/// A fresh testbed served in-process, talking to one target.
pub struct Env(PluginEnv);

impl Deref for Env {
    type Target = PluginEnv;

    fn deref(&self) -> &PluginEnv {
        &self.0
    }
}

impl DerefMut for Env {
    fn deref_mut(&mut self) -> &mut PluginEnv {
        &mut self.0
    }
}

impl Env {
    /// The target's config is `config`.
    pub async fn new(config: PropertyMap) -> Env {
        Env(PluginEnv::start(TestbedPlugin::default(), config).await)
    }

    /// One list page.
    pub async fn list(&self, ty: &str, page_size: u32, page_token: Option<String>) -> ListResult {
        self.list_page(ty, page_size, page_token).await
    }
}
