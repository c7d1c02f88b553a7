//! `AWS::S3::Bucket` and `AWS::S3::BucketPolicy` against moto.

use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use orrery_plugin_sdk::schema::ErrorCode;

use crate::common::*;

const BUCKET: &str = "AWS::S3::Bucket";
const POLICY: &str = "AWS::S3::BucketPolicy";

#[tokio::test]
async fn a_bucket_is_created_read_updated_drifts_is_repaired_listed_and_deleted() {
    let Some(env) = Env::start().await else {
        return;
    };
    let desired = json!({
        "bucket": "orrery-logs",
        "versioning": "Enabled",
        "sse_algorithm": "AES256",
        "public_access_block": {
            "block_public_acls": true, "block_public_policy": true,
            "ignore_public_acls": true, "restrict_public_buckets": true
        },
        "object_ownership": "BucketOwnerPreferred",
        "lifecycle_rules": [{"id": "expire", "status": "Enabled", "prefix": "tmp/", "expiration_days": 7}],
        "tags": {"team": "platform"},
    });
    let created = env.create(BUCKET, props(desired.clone())).await;
    let got = ok(&created);
    assert_eq!(created.native_id.as_deref(), Some("orrery-logs"));
    has(&got, &desired);
    has(
        &got,
        &json!({"arn": "arn:aws:s3:::orrery-logs", "region": REGION}),
    );
    has(&ok(&env.read(BUCKET, "orrery-logs").await), &desired);

    let again = env.create(BUCKET, props(desired.clone())).await;
    failed(&again, ErrorCode::AlreadyExists);

    // In place.
    let changed = json!({
        "bucket": "orrery-logs",
        "versioning": "Suspended",
        "public_access_block": {
            "block_public_acls": false, "block_public_policy": true,
            "ignore_public_acls": false, "restrict_public_buckets": true
        },
        "object_ownership": "BucketOwnerEnforced",
        "lifecycle_rules": [
            {"id": "expire", "status": "Disabled", "prefix": "tmp/", "expiration_days": 30},
            {"id": "archive", "status": "Enabled", "noncurrent_version_expiration_days": 90,
             "abort_incomplete_multipart_upload_days": 3,
             "transitions": [{"days": 30, "storage_class": "STANDARD_IA"}, {"days": 90, "storage_class": "GLACIER"}]}
        ],
        "tags": {"team": "data", "env": "test"},
    });
    has(
        &ok(&env
            .update(BUCKET, "orrery-logs", props(changed.clone()))
            .await),
        &changed,
    );
    has(&ok(&env.read(BUCKET, "orrery-logs").await), &changed);

    // A new name is a new bucket: the schema replaces, update refuses.
    replaces(BUCKET, "bucket");
    let renamed = env
        .update(
            BUCKET,
            "orrery-logs",
            props(json!({"bucket": "orrery-logs-2"})),
        )
        .await;
    failed(&renamed, ErrorCode::NotUpdatable);

    // Out of band: versioning back on, tags and lifecycle rules gone.
    env.raw
        .s3
        .put_bucket_versioning()
        .bucket("orrery-logs")
        .versioning_configuration(
            VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    env.raw
        .s3
        .delete_bucket_tagging()
        .bucket("orrery-logs")
        .send()
        .await
        .unwrap();
    env.raw
        .s3
        .delete_bucket_lifecycle()
        .bucket("orrery-logs")
        .send()
        .await
        .unwrap();
    let drifted = json_of(&ok(&env.read(BUCKET, "orrery-logs").await));
    assert_eq!(drifted["versioning"], "Enabled", "{drifted:#}");
    assert!(drifted.get("tags").is_none(), "{drifted:#}");
    assert!(drifted.get("lifecycle_rules").is_none(), "{drifted:#}");
    has(
        &ok(&env
            .update(BUCKET, "orrery-logs", props(changed.clone()))
            .await),
        &changed,
    );

    let listed = env.list_all(BUCKET, 1).await;
    let ours = listed
        .iter()
        .find(|(id, _)| id == "orrery-logs")
        .expect("listed");
    has(&ours.1, &changed);

    assert_eq!(ok(&env.delete(BUCKET, "orrery-logs").await).len(), 0);
    failed(&env.read(BUCKET, "orrery-logs").await, ErrorCode::NotFound);
    failed(
        &env.delete(BUCKET, "orrery-logs").await,
        ErrorCode::NotFound,
    );
}

#[tokio::test]
async fn a_bucket_policy_is_compared_as_a_document_and_drift_is_seen() {
    let Some(env) = Env::start().await else {
        return;
    };
    ok(&env
        .create(BUCKET, props(json!({"bucket": "orrery-site"})))
        .await);
    let statement = |action: &str| {
        json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": "read", "Effect": "Allow", "Principal": "*",
                "Action": action, "Resource": "arn:aws:s3:::orrery-site/*"
            }]
        })
    };
    let desired = json!({"bucket": "orrery-site", "policy": statement("s3:GetObject")});
    let created = env.create(POLICY, props(desired.clone())).await;
    has(&ok(&created), &desired);
    failed(
        &env.create(POLICY, props(desired.clone())).await,
        ErrorCode::AlreadyExists,
    );

    let changed = json!({"bucket": "orrery-site", "policy": statement("s3:GetObjectVersion")});
    has(
        &ok(&env
            .update(POLICY, "orrery-site", props(changed.clone()))
            .await),
        &changed,
    );
    replaces(POLICY, "bucket");

    // Out of band: the policy rewritten directly.
    env.raw
        .s3
        .put_bucket_policy()
        .bucket("orrery-site")
        .policy(statement("s3:ListBucket").to_string())
        .send()
        .await
        .unwrap();
    let drifted = json_of(&ok(&env.read(POLICY, "orrery-site").await));
    assert_eq!(drifted["policy"]["Statement"][0]["Action"], "s3:ListBucket");

    let listed = env.list_all(POLICY, 0).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].0, "orrery-site");

    ok(&env.delete(POLICY, "orrery-site").await);
    failed(&env.read(POLICY, "orrery-site").await, ErrorCode::NotFound);
    failed(
        &env.delete(POLICY, "orrery-site").await,
        ErrorCode::NotFound,
    );
    assert!(env.list_all(POLICY, 0).await.is_empty());
}
