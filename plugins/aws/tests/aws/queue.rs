//! `AWS::SQS::Queue` against moto: FIFO, attributes, a dead-letter queue.

use std::collections::HashMap;

use aws_sdk_sqs::types::QueueAttributeName;
use orrery_plugin_sdk::schema::ErrorCode;

use crate::common::*;

const QUEUE: &str = "AWS::SQS::Queue";

#[tokio::test]
async fn a_queue_with_a_dead_letter_queue_goes_through_its_whole_cycle() {
    let Some(env) = Env::start().await else {
        return;
    };
    let dlq = ok(&env
        .create(QUEUE, props(json!({"name": "orders-dlq"})))
        .await);
    let dlq_arn = json_of(&dlq)["arn"].as_str().unwrap().to_owned();
    assert!(dlq_arn.ends_with(":orders-dlq"), "{dlq_arn}");

    let desired = json!({
        "name": "orders",
        "visibility_timeout_seconds": 45,
        "message_retention_seconds": 86400,
        "delay_seconds": 2,
        "redrive_policy": {"dead_letter_target_arn": dlq_arn, "max_receive_count": 4},
        "kms_master_key_id": "alias/aws/sqs",
        "tags": {"team": "orders"},
    });
    let created = env.create(QUEUE, props(desired.clone())).await;
    let url = created.native_id.clone().unwrap();
    assert!(url.ends_with("/orders"), "{url}");
    has(&ok(&created), &desired);
    has(&ok(&created), &json!({"fifo_queue": false, "url": url}));
    failed(
        &env.create(QUEUE, props(desired.clone())).await,
        ErrorCode::AlreadyExists,
    );

    let changed = json!({
        "name": "orders",
        "visibility_timeout_seconds": 60,
        "message_retention_seconds": 86400,
        "redrive_policy": {"dead_letter_target_arn": dlq_arn, "max_receive_count": 7},
        "tags": {"team": "checkout"},
    });
    let updated = ok(&env.update(QUEUE, &url, props(changed.clone())).await);
    has(&updated, &changed);
    assert!(
        json_of(&updated).get("kms_master_key_id").is_none(),
        "KMS key removed: {updated:?}"
    );

    replaces(QUEUE, "name");
    replaces(QUEUE, "fifo_queue");
    let fifo = env
        .update(
            QUEUE,
            &url,
            props(json!({"name": "orders", "fifo_queue": true})),
        )
        .await;
    failed(&fifo, ErrorCode::NotUpdatable);

    // Out of band: the visibility timeout and the redrive policy changed.
    let attributes = HashMap::from([
        (QueueAttributeName::VisibilityTimeout, "5".to_owned()),
        (QueueAttributeName::RedrivePolicy, String::new()),
    ]);
    env.raw
        .sqs
        .set_queue_attributes()
        .queue_url(&url)
        .set_attributes(Some(attributes))
        .send()
        .await
        .unwrap();
    let drifted = json_of(&ok(&env.read(QUEUE, &url).await));
    assert_eq!(drifted["visibility_timeout_seconds"], 5, "{drifted:#}");
    assert!(drifted.get("redrive_policy").is_none(), "{drifted:#}");
    has(
        &ok(&env.update(QUEUE, &url, props(changed.clone())).await),
        &changed,
    );

    let listed = env.list_all(QUEUE, 1).await;
    let ids: Vec<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&url.as_str()), "{ids:?}");

    ok(&env.delete(QUEUE, &url).await);
    failed(&env.read(QUEUE, &url).await, ErrorCode::NotFound);
    failed(&env.delete(QUEUE, &url).await, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_fifo_queue_keeps_its_fifo_settings() {
    let Some(env) = Env::start().await else {
        return;
    };
    let desired = json!({
        "name": "ledger.fifo",
        "fifo_queue": true,
        "content_based_deduplication": true,
    });
    let created = env.create(QUEUE, props(desired.clone())).await;
    has(&ok(&created), &desired);
    let url = created.native_id.unwrap();
    let changed =
        json!({"name": "ledger.fifo", "fifo_queue": true, "content_based_deduplication": false});
    has(
        &ok(&env.update(QUEUE, &url, props(changed.clone())).await),
        &changed,
    );
    has(&ok(&env.read(QUEUE, &url).await), &changed);
    ok(&env.delete(QUEUE, &url).await);
}
