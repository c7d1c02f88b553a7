//! `Jetstream::Stream` against a real server: create, read (drift), update,
//! create-only fields, list, delete.

use orrery_plugin_jetstream::stream::TYPE;
use orrery_plugin_sdk::schema::{ErrorCode, Value};

use crate::common::{failed, ok, props, Env};

fn orders(max_msgs: i64) -> orrery_plugin_sdk::schema::PropertyMap {
    props([
        ("name", "ORDERS".into()),
        ("subjects", Value::List(vec!["orders.>".into()])),
        ("storage", "memory".into()),
        ("max_msgs", max_msgs.into()),
        ("max_age", 3600.into()),
        ("metadata", Value::Map(props([("team", "shop".into())]))),
    ])
}

#[tokio::test]
async fn a_stream_is_created_read_updated_listed_and_deleted() {
    let env = Env::new().await;
    let created = env.create(TYPE, orders(100)).await;
    let state = ok(&created);
    assert_eq!(created.native_id.as_deref(), Some("ORDERS"));
    assert_eq!(state["max_age"], Value::from(3600));
    assert_eq!(state["storage"], Value::from("memory"));
    assert_eq!(
        state["retention"],
        Value::from("limits"),
        "server default filled in"
    );
    assert_eq!(
        state["metadata"],
        Value::Map(props([("team", "shop".into())]))
    );
    let raw = env.js().await.get_stream("ORDERS").await.unwrap();
    assert_eq!(raw.cached_info().config.max_messages, 100);
    assert_eq!(raw.cached_info().config.max_age.as_secs(), 3600);

    failed(
        &env.create(TYPE, orders(100)).await,
        ErrorCode::AlreadyExists,
    );

    let updated = ok(&env.update(TYPE, "ORDERS", orders(500)).await);
    assert_eq!(updated["max_msgs"], Value::from(500));
    assert_eq!(ok(&env.read(TYPE, "ORDERS").await), updated);

    let mut on_disk = orders(500);
    on_disk.insert("storage".into(), "file".into());
    let message = failed(
        &env.update(TYPE, "ORDERS", on_disk).await,
        ErrorCode::NotUpdatable,
    );
    assert!(
        message.contains("`storage`") && message.contains("ORDERS"),
        "{message}"
    );
    let mut renamed = orders(500);
    renamed.insert("name".into(), "OTHER".into());
    failed(
        &env.update(TYPE, "ORDERS", renamed).await,
        ErrorCode::NotUpdatable,
    );

    let ids: Vec<String> = env
        .list_all(TYPE, 0)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["ORDERS"]);

    ok(&env.delete(TYPE, "ORDERS").await);
    failed(&env.read(TYPE, "ORDERS").await, ErrorCode::NotFound);
    failed(&env.delete(TYPE, "ORDERS").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn read_sees_a_change_made_out_of_band() {
    let env = Env::new().await;
    ok(&env.create(TYPE, orders(100)).await);
    let js = env.js().await;
    let mut config = js
        .get_stream("ORDERS")
        .await
        .unwrap()
        .cached_info()
        .config
        .clone();
    config.max_messages = 7;
    config.subjects = vec!["orders.>".into(), "refunds.>".into()];
    js.update_stream(config).await.unwrap();
    let state = ok(&env.read(TYPE, "ORDERS").await);
    assert_eq!(state["max_msgs"], Value::from(7));
    assert_eq!(
        state["subjects"],
        Value::List(vec!["orders.>".into(), "refunds.>".into()])
    );
}

#[tokio::test]
async fn list_pages_and_leaves_out_the_buckets_streams() {
    let env = Env::new().await;
    for name in ["A", "B", "C"] {
        ok(&env
            .create(
                TYPE,
                props([("name", name.into()), ("storage", "memory".into())]),
            )
            .await);
    }
    let kv = orrery_plugin_jetstream::kv::TYPE;
    ok(&env
        .create(
            kv,
            props([("bucket", "settings".into()), ("storage", "memory".into())]),
        )
        .await);
    let first = env.list_page(TYPE, 2, None).await;
    assert_eq!(first.resources.len(), 2);
    let second = env.list_page(TYPE, 2, first.next_page_token.clone()).await;
    let ids: Vec<_> = first
        .resources
        .iter()
        .chain(&second.resources)
        .map(|r| r.native_id.as_str())
        .collect();
    assert_eq!(ids, ["A", "B", "C"]);
    assert_eq!(second.next_page_token, None);
}

#[tokio::test]
async fn a_mirror_and_sources_are_kept() {
    let env = Env::new().await;
    ok(&env.create(TYPE, orders(100)).await);
    let origin = |name: &str| Value::Map(props([("name", name.into())]));
    let mirror = ok(&env
        .create(
            TYPE,
            props([
                ("name", "COPY".into()),
                ("storage", "memory".into()),
                ("mirror", origin("ORDERS")),
            ]),
        )
        .await);
    assert_eq!(mirror["mirror"], origin("ORDERS"));
    let sourced = ok(&env
        .create(
            TYPE,
            props([
                ("name", "ALL".into()),
                ("storage", "memory".into()),
                ("sources", Value::List(vec![origin("ORDERS")])),
            ]),
        )
        .await);
    assert_eq!(sourced["sources"], Value::List(vec![origin("ORDERS")]));
    let moved = props([("name", "COPY".into()), ("mirror", origin("ALL"))]);
    failed(
        &env.update(TYPE, "COPY", moved).await,
        ErrorCode::NotUpdatable,
    );
}
