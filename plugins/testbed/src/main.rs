//! The `testbed` plugin binary: serves [`TestbedPlugin`] on stdin/stdout.

use orrery_plugin_testbed::TestbedPlugin;

/// A store file for every target whose config names none.
const STORE_ENV: &str = "ORRERY_TESTBED_STORE";

fn main() {
    let plugin = match std::env::var_os(STORE_ENV) {
        Some(path) if !path.is_empty() => TestbedPlugin::with_store(path),
        _ => TestbedPlugin::default(),
    };
    orrery_plugin_sdk::serve(plugin)
}
