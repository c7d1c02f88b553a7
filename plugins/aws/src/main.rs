//! The `aws` plugin binary: serves [`AwsPlugin`] on stdin/stdout.

use orrery_plugin_aws::AwsPlugin;

// As every Orrery plugin: mimalloc (BENCHMARKS.md, relay round 9).
#[global_allocator]
static ALLOCATOR: orrery_plugin_sdk::Allocator = orrery_plugin_sdk::Allocator;

fn main() {
    orrery_plugin_sdk::serve(AwsPlugin::default())
}
