//! The SDK's conformance suite, in-process, against `conformance/*.json`.

use orrery_plugin_local::LocalPlugin;
use orrery_plugin_sdk::conformance::assert_conformant;

#[tokio::test]
async fn the_plugin_is_conformant() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance");
    let report = assert_conformant(LocalPlugin, fixtures).await;
    for ty in [
        "Local::Fs::Directory",
        "Local::Fs::File",
        "Local::Fs::Symlink",
    ] {
        let ran = report.checks.iter().any(|c| {
            c.check == "update_create_only_is_not_updatable"
                && c.resource_type.as_deref() == Some(ty)
        });
        assert!(ran, "no fixture exercised {ty}:\n{}", report.to_text());
    }
}
