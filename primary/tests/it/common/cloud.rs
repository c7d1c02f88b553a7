//! Stacks of cloud-like things (`Testbed::Cloud::Thing`): the plugin
//! assigns its own ids and deduplicates by request id only, and a create
//! lands `create_ms` later on the provider's side, so a test counting in
//! the provider's world (`orrery_plugin_testbed::store::census`) can see a
//! duplicate.

use std::path::Path;

/// Stack `name` of `things` things (labels `c000`…, names `NAME-000`…) on
/// target `lab`, whose provider keeps its world in `world`.
pub fn stack(name: &str, world: &Path, things: usize, create_ms: u64) -> String {
    let mut doc = format!(
        "stack: {name}\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {{ store: \"{}\", create_ms: {create_ms} }}\nresources:\n",
        world.display()
    );
    for i in 0..things {
        doc.push_str(&format!(
            "  - label: c{i:03}\n    type: Testbed::Cloud::Thing\n    target: lab\n    properties: {{ name: {name}-{i:03}, value: {i} }}\n"
        ));
    }
    doc
}
