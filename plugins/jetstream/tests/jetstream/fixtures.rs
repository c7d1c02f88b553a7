//! The SDK's conformance suite against `conformance/*.json`, in-process and
//! through `orrery plugin test` on the built binary, each against its own
//! nats-server.

use std::path::Path;
use std::process::Command;

use orrery_plugin_jetstream::JetstreamPlugin;
use orrery_plugin_sdk::conformance::{self, Fixture, Options};
use orrery_plugin_sdk::harness;
use orrery_plugin_sdk::schema::Value;

use crate::common::NatsServer;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance");

/// The fixtures, pointed at `server`, where the consumers' streams and the
/// entries' buckets now exist.
async fn fixtures_for(server: &NatsServer) -> Vec<Fixture> {
    let js = async_nats::jetstream::new(server.client().await);
    let streams = std::iter::once("conf-orders".to_owned())
        .chain((0..8).map(|i| format!("conf-orders-c{i}")));
    for name in streams {
        js.create_stream(async_nats::jetstream::stream::Config {
            subjects: vec![name.clone()],
            name,
            storage: async_nats::jetstream::stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    for bucket in
        std::iter::once("conf-kv".to_owned()).chain((0..8).map(|i| format!("conf-kv-c{i}")))
    {
        js.create_key_value(async_nats::jetstream::kv::Config {
            bucket,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let mut fixtures = conformance::load_fixtures(Path::new(FIXTURES)).unwrap();
    for fixture in &mut fixtures {
        fixture.target.config.insert(
            "servers".into(),
            Value::List(vec![server.url.clone().into()]),
        );
    }
    fixtures
}

#[tokio::test]
async fn the_plugin_is_conformant() {
    let server = NatsServer::start().await;
    let fixtures = fixtures_for(&server).await;
    assert_eq!(fixtures.len(), 5);
    let client = harness::start(JetstreamPlugin::default()).await.unwrap();
    let report = conformance::run(&client, &fixtures, &Options::default()).await;
    assert!(report.passed(), "{}", report.to_text());
    for ty in [
        "Jetstream::Stream",
        "Jetstream::Consumer",
        "Jetstream::KvBucket",
        "Jetstream::KvEntry",
        "Jetstream::ObjectBucket",
    ] {
        let ran = report
            .checks
            .iter()
            .any(|c| c.check == "concurrent_operations" && c.resource_type.as_deref() == Some(ty));
        assert!(ran, "no fixture exercised {ty}:\n{}", report.to_text());
    }
}

#[tokio::test]
async fn orrery_plugin_test_passes_on_the_built_binary() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    for (i, fixture) in fixtures_for(&server).await.iter().enumerate() {
        let json = serde_json::json!({
            "resource_type": fixture.resource_type,
            "target": {"name": fixture.target.name, "config": {"servers": [server.url]}},
            "create": orrery_plugin_sdk::from_value::<serde_json::Value>(&Value::Map(fixture.create.clone())).unwrap(),
            "update": orrery_plugin_sdk::from_value::<serde_json::Value>(&Value::Map(fixture.update.clone())).unwrap(),
            "replace": fixture.replace.clone().map(|r| orrery_plugin_sdk::from_value::<serde_json::Value>(&Value::Map(r)).unwrap()),
        });
        std::fs::write(dir.path().join(format!("{i}.json")), json.to_string()).unwrap();
    }
    let out = Command::new(orrery_testing::binary("orrery"))
        .args([
            "plugin",
            "test",
            env!("CARGO_BIN_EXE_orrery-plugin-jetstream"),
            "--fixtures",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ty in ["Stream", "Consumer", "KvBucket", "KvEntry", "ObjectBucket"] {
        assert!(
            stdout.contains(&format!("concurrent_operations [Jetstream::{ty}]")),
            "{stdout}"
        );
    }
    assert!(!stdout.contains("FAIL"), "{stdout}");
}
