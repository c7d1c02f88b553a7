//! The `testbed` plugin binary: serves [`TestbedPlugin`] on stdin/stdout.

use orrery_plugin_testbed::TestbedPlugin;

fn main() {
    orrery_plugin_sdk::serve(TestbedPlugin::default())
}
