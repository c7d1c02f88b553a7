//! The SDK's conformance suite, in-process, against `conformance/*.json`
//! (default config: no faults, two status polls per create and delete).

use orrery_plugin_sdk::conformance::assert_conformant;
use orrery_plugin_testbed::{TestbedPlugin, ASYNC_THING, NOOP_THING};

#[tokio::test]
async fn the_plugin_is_conformant() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance");
    let report = assert_conformant(TestbedPlugin::default(), fixtures).await;
    for ty in [ASYNC_THING, NOOP_THING] {
        let ran = report
            .checks
            .iter()
            .any(|c| c.check == "concurrent_operations" && c.resource_type.as_deref() == Some(ty));
        assert!(ran, "no fixture exercised {ty}:\n{}", report.to_text());
    }
}
