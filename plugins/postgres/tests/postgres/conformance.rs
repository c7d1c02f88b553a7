//! The SDK's conformance suite against the built plugin binary and the
//! throwaway server.

use std::time::Duration;

use orrery_plugin_sdk::conformance::{load_fixtures, run, Options};
use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};

use crate::common::{raw, target_config};

/// What the fixtures name and do not create (see `conformance/README.md`).
async fn prerequisites() {
    let admin = raw("postgres").await;
    let mut roles = vec![
        "conf_group".to_owned(),
        "conf_owner".into(),
        "conf_grantee".into(),
    ];
    roles.extend((0..8).map(|i| format!("conf_owner-c{i}")));
    for role in roles {
        admin
            .batch_execute(&format!("CREATE ROLE \"{role}\""))
            .await
            .unwrap();
    }
    let mut databases = vec!["conf_parent".to_owned()];
    databases.extend((0..8).map(|i| format!("conf_parent-c{i}")));
    for db in databases {
        admin
            .batch_execute(&format!("CREATE DATABASE \"{db}\""))
            .await
            .unwrap();
    }
    let parent = raw("conf_parent").await;
    let mut schemas = vec!["conf_s".to_owned()];
    schemas.extend((0..8).map(|i| format!("conf_s-c{i}")));
    for s in schemas {
        parent
            .batch_execute(&format!("CREATE SCHEMA \"{s}\""))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_binary_passes_the_conformance_suite_for_every_type() {
    prerequisites().await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance");
    let mut fixtures = load_fixtures(dir.as_ref()).unwrap();
    for fixture in &mut fixtures {
        fixture.target.config = target_config();
    }
    let plugin = spawn_plugin(&SpawnConfig::new(env!(
        "CARGO_BIN_EXE_orrery-plugin-postgres"
    )))
    .await
    .unwrap();
    let options = Options {
        call_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let report = run(&plugin.client, &fixtures, &options).await;
    assert!(report.passed(), "{}", report.to_text());
    for ty in [
        "Postgres::Role",
        "Postgres::Database",
        "Postgres::Schema",
        "Postgres::Grant",
        "Postgres::DefaultPrivileges",
        "Postgres::Extension",
    ] {
        let ran = |check: &str| {
            report
                .checks
                .iter()
                .any(|c| c.check == check && c.resource_type.as_deref() == Some(ty) && c.passed)
        };
        assert!(
            ran("update_create_only_is_not_updatable") && ran("concurrent_operations"),
            "{ty} not fully exercised:\n{}",
            report.to_text()
        );
    }
}
