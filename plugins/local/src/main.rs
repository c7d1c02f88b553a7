//! The `local` plugin binary: serves [`LocalPlugin`] on stdin/stdout.

use orrery_plugin_local::LocalPlugin;

fn main() {
    orrery_plugin_sdk::serve(LocalPlugin)
}
