//! The SDK's conformance suite against the built plugin binary and a
//! moto_server, every type.

use std::time::Duration;

use orrery_plugin_sdk::conformance::{load_fixtures, run, Options};
use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};
use orrery_plugin_sdk::schema::Value;

use crate::common::*;

/// `name`, `name-2` (the replacement's) and the concurrency check's
/// `name-c0` … `name-c7`.
fn with_copies(name: &str, second: bool) -> Vec<String> {
    let mut all = vec![name.to_owned()];
    if second {
        all.push(format!("{name}-2"));
    }
    all.extend((0..8).map(|i| format!("{name}-c{i}")));
    all
}

/// What the fixtures name and do not create (see `conformance/README.md`).
async fn prerequisites(env: &Env) {
    let raw = &env.raw;
    let location = aws_sdk_s3::types::CreateBucketConfiguration::builder()
        .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(REGION))
        .build();
    for bucket in with_copies("conf-site", true) {
        raw.s3
            .create_bucket()
            .bucket(bucket)
            .create_bucket_configuration(location.clone())
            .send()
            .await
            .unwrap();
    }
    let trust = json!({"Version": "2012-10-17", "Statement": []}).to_string();
    for role in with_copies("conf-attach", false) {
        raw.iam
            .create_role()
            .role_name(role)
            .assume_role_policy_document(&trust)
            .send()
            .await
            .unwrap();
    }
    let document = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}).to_string();
    for policy in ["conf-attach-policy", "conf-attach-policy-2"] {
        raw.iam
            .create_policy()
            .policy_name(policy)
            .policy_document(&document)
            .send()
            .await
            .unwrap();
    }
    for user in with_copies("conf-key-user", true) {
        raw.iam.create_user().user_name(user).send().await.unwrap();
    }
}

#[tokio::test]
async fn the_binary_passes_the_conformance_suite_for_every_type() {
    let Some(env) = Env::start().await else {
        return;
    };
    prerequisites(&env).await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/conformance");
    let mut fixtures = load_fixtures(dir.as_ref()).unwrap();
    for fixture in &mut fixtures {
        fixture
            .target
            .config
            .insert("endpoint_url".into(), Value::from(env.moto.url.as_str()));
    }
    let plugin = spawn_plugin(&SpawnConfig::new(env!("CARGO_BIN_EXE_orrery-plugin-aws")))
        .await
        .unwrap();
    let options = Options {
        call_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let report = run(&plugin.client, &fixtures, &options).await;
    assert!(report.passed(), "{}", report.to_text());
    for ty in AwsPlugin::types() {
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
