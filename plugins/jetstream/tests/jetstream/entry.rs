//! `Jetstream::KvEntry`: a key and its value, identity `<bucket>/<key>`,
//! listed under its bucket; a value changed by another client is drift.

use orrery_plugin_jetstream::{kv, kv_entry::TYPE};
use orrery_plugin_sdk::schema::{ErrorCode, PropertyMap, Value};

use crate::common::{failed, ok, props, Env};

fn entry(key: &str, value: &str) -> PropertyMap {
    props([
        ("bucket", "settings".into()),
        ("key", key.into()),
        ("value", value.into()),
    ])
}

#[tokio::test]
async fn an_entry_is_written_read_changed_listed_and_deleted() {
    let env = Env::new().await;
    ok(&env
        .create(kv::TYPE, props([("bucket", "settings".into())]))
        .await);
    let created = env.create(TYPE, entry("ui/colour", "blue")).await;
    assert_eq!(ok(&created)["value"], Value::from("blue"));
    assert_eq!(created.native_id.as_deref(), Some("settings/ui/colour"));
    failed(
        &env.create(TYPE, entry("ui/colour", "red")).await,
        ErrorCode::AlreadyExists,
    );
    let store = env.js().await.get_key_value("settings").await.unwrap();
    assert_eq!(store.get("ui/colour").await.unwrap().unwrap(), "blue");

    store.put("ui/colour", "pink".into()).await.unwrap();
    assert_eq!(
        ok(&env.read(TYPE, "settings/ui/colour").await)["value"],
        Value::from("pink"),
        "drift seen"
    );
    ok(&env
        .update(TYPE, "settings/ui/colour", entry("ui/colour", "green"))
        .await);
    assert_eq!(store.get("ui/colour").await.unwrap().unwrap(), "green");
    failed(
        &env.update(TYPE, "settings/ui/colour", entry("ui/size", "green"))
            .await,
        ErrorCode::NotUpdatable,
    );

    ok(&env.create(TYPE, entry("lang", "fr")).await);
    let ids: Vec<String> = env
        .list_all(TYPE, 1)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["settings/lang", "settings/ui/colour"]);

    ok(&env.delete(TYPE, "settings/lang").await);
    failed(&env.read(TYPE, "settings/lang").await, ErrorCode::NotFound);
    failed(
        &env.delete(TYPE, "settings/lang").await,
        ErrorCode::NotFound,
    );
    assert_eq!(env.list_all(TYPE, 0).await.len(), 1);
    let mut elsewhere = entry("k", "v");
    elsewhere.insert("bucket".into(), "nope".into());
    failed(&env.create(TYPE, elsewhere).await, ErrorCode::NotFound);
    for bad in ["settings", "settings/", "settings/.k", "a.b/k"] {
        failed(&env.read(TYPE, bad).await, ErrorCode::InvalidRequest);
    }
}
