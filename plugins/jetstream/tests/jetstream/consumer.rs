//! `Jetstream::Consumer`: composite identity `<stream>/<name>`, create-only
//! policies, updatable limits, listed under its stream.

use orrery_plugin_jetstream::{consumer::TYPE, stream};
use orrery_plugin_sdk::schema::{ErrorCode, PropertyMap, Value};

use crate::common::{failed, ok, props, Env};

fn shipping(ack_wait: i64) -> PropertyMap {
    props([
        ("stream", "ORDERS".into()),
        ("name", "shipping".into()),
        ("ack_policy", "explicit".into()),
        ("filter_subjects", Value::List(vec!["orders.paid".into()])),
        ("ack_wait", ack_wait.into()),
        ("max_deliver", 5.into()),
    ])
}

async fn with_stream() -> Env {
    let env = Env::new().await;
    let spec = props([
        ("name", "ORDERS".into()),
        ("subjects", Value::List(vec!["orders.>".into()])),
        ("storage", "memory".into()),
    ]);
    ok(&env.create(stream::TYPE, spec).await);
    env
}

#[tokio::test]
async fn a_consumer_is_created_updated_listed_and_deleted() {
    let env = with_stream().await;
    let created = env.create(TYPE, shipping(30)).await;
    let state = ok(&created);
    assert_eq!(created.native_id.as_deref(), Some("ORDERS/shipping"));
    assert_eq!(state["ack_wait"], Value::from(30));
    assert_eq!(
        state["filter_subjects"],
        Value::List(vec!["orders.paid".into()])
    );
    assert_eq!(
        state["deliver_policy"],
        Value::from("all"),
        "server default"
    );
    let raw = env
        .js()
        .await
        .get_stream("ORDERS")
        .await
        .unwrap()
        .consumer_info("shipping")
        .await
        .unwrap();
    assert_eq!(raw.config.max_deliver, 5);
    failed(
        &env.create(TYPE, shipping(30)).await,
        ErrorCode::AlreadyExists,
    );

    let mut two = shipping(60);
    two.insert(
        "filter_subjects".into(),
        Value::List(vec!["orders.paid".into(), "orders.refunded".into()]),
    );
    let updated = ok(&env.update(TYPE, "ORDERS/shipping", two).await);
    assert_eq!(updated["ack_wait"], Value::from(60));
    assert_eq!(ok(&env.read(TYPE, "ORDERS/shipping").await), updated);

    let mut none = shipping(60);
    none.insert("ack_policy".into(), "none".into());
    let message = failed(
        &env.update(TYPE, "ORDERS/shipping", none).await,
        ErrorCode::NotUpdatable,
    );
    assert!(message.contains("ack_policy"), "{message}");

    // A client's ephemeral consumer is not a managed resource.
    let raw = env.js().await.get_stream("ORDERS").await.unwrap();
    let _ephemeral = raw
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let listed = env.list_all(TYPE, 0).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, "ORDERS/shipping");

    ok(&env.delete(TYPE, "ORDERS/shipping").await);
    failed(
        &env.read(TYPE, "ORDERS/shipping").await,
        ErrorCode::NotFound,
    );
}

#[tokio::test]
async fn bad_ids_and_missing_streams_are_refused() {
    let env = with_stream().await;
    for id in [
        "ORDERS",
        "/shipping",
        "ORDERS/",
        "a/b/c",
        "ORDERS/ship.ping",
    ] {
        failed(&env.read(TYPE, id).await, ErrorCode::InvalidRequest);
    }
    let mut elsewhere = shipping(30);
    elsewhere.insert("stream".into(), "NOPE".into());
    let message = failed(&env.create(TYPE, elsewhere).await, ErrorCode::NotFound);
    assert!(message.contains("NOPE/shipping"), "{message}");
}

#[tokio::test]
async fn listed_under_a_parent_stream_only_that_streams_consumers_come_back() {
    use orrery_plugin_sdk::schema::{ListRequest, ListedResource, Request};
    use orrery_plugin_sdk::Answer;

    let env = with_stream().await;
    let other = props([("name", "AUDIT".into()), ("storage", "memory".into())]);
    ok(&env.create(stream::TYPE, other).await);
    ok(&env.create(TYPE, shipping(30)).await);
    let mut audit = shipping(30);
    audit.insert("stream".into(), "AUDIT".into());
    audit.remove("filter_subjects");
    ok(&env.create(TYPE, audit).await);

    let under = |stream: &str| {
        Request::List(ListRequest {
            request_id: "list".into(),
            resource_type: TYPE.into(),
            target: env.target.clone(),
            parent: Some(ListedResource {
                native_id: stream.into(),
                properties: props([("name", stream.into())]),
            }),
            ..Default::default()
        })
    };
    let timeout = std::time::Duration::from_secs(10);
    let Answer::List(page) = env.client.request(&under("AUDIT"), timeout).await.unwrap() else {
        panic!("not a list answer");
    };
    let ids: Vec<_> = page
        .resources
        .iter()
        .map(|r| r.native_id.as_str())
        .collect();
    assert_eq!(ids, ["AUDIT/shipping"]);
    assert_eq!(page.resources[0].properties["stream"], Value::from("AUDIT"));
    // Without a parent (an older host), every stream's.
    let all: Vec<String> = env
        .list_all(TYPE, 0)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(all, ["AUDIT/shipping", "ORDERS/shipping"]);
}
