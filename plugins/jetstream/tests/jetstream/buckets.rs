//! `Jetstream::KvBucket` and `Jetstream::ObjectBucket`: usable by a NATS
//! client as made, updatable, listed apart from plain streams.

use orrery_plugin_jetstream::{kv, object};
use orrery_plugin_sdk::schema::{ErrorCode, Value};

use crate::common::{failed, ok, props, Env};

#[tokio::test]
async fn a_kv_bucket_works_for_clients_and_updates_in_place() {
    let env = Env::new().await;
    let spec = props([
        ("bucket", "settings".into()),
        ("history", 5.into()),
        ("ttl", 600.into()),
    ]);
    let created = ok(&env.create(kv::TYPE, spec).await);
    assert_eq!(created["history"], Value::from(5));
    assert_eq!(created["storage"], Value::from("file"));

    let store = env.js().await.get_key_value("settings").await.unwrap();
    store.put("colour", "blue".into()).await.unwrap();
    store.put("colour", "green".into()).await.unwrap();
    assert_eq!(store.get("colour").await.unwrap().unwrap(), "green");

    let shorter = props([
        ("bucket", "settings".into()),
        ("history", 2.into()),
        ("ttl", 30.into()),
    ]);
    let updated = ok(&env.update(kv::TYPE, "settings", shorter).await);
    assert_eq!(updated["ttl"], Value::from(30));
    assert_eq!(
        env.js()
            .await
            .get_key_value("settings")
            .await
            .unwrap()
            .status()
            .await
            .unwrap()
            .history(),
        2
    );

    let memory = props([("bucket", "settings".into()), ("storage", "memory".into())]);
    failed(
        &env.update(kv::TYPE, "settings", memory).await,
        ErrorCode::NotUpdatable,
    );
    let listed = env.list_all(kv::TYPE, 0).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, "settings");
    ok(&env.delete(kv::TYPE, "settings").await);
    failed(&env.read(kv::TYPE, "settings").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn an_object_bucket_works_for_clients() {
    let env = Env::new().await;
    let spec = props([
        ("bucket", "assets".into()),
        ("description", "images".into()),
    ]);
    ok(&env.create(object::TYPE, spec).await);
    let store = env.js().await.get_object_store("assets").await.unwrap();
    let mut bytes: &[u8] = b"png bytes";
    store.put("logo.png", &mut bytes).await.unwrap();
    assert_eq!(store.info("logo.png").await.unwrap().size, 9);

    let bigger = props([("bucket", "assets".into()), ("max_bytes", 1_000_000.into())]);
    assert_eq!(
        ok(&env.update(object::TYPE, "assets", bigger).await)["max_bytes"],
        Value::from(1_000_000)
    );
    assert_eq!(env.list_all(object::TYPE, 0).await.len(), 1);
    assert!(env.list_all(kv::TYPE, 0).await.is_empty());
    ok(&env.delete(object::TYPE, "assets").await);
    failed(
        &env.delete(object::TYPE, "assets").await,
        ErrorCode::NotFound,
    );
}
