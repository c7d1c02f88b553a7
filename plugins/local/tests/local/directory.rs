//! `Local::Fs::Directory` through the harness.

use std::os::unix::fs::PermissionsExt;

use orrery_plugin_sdk::schema::{ErrorCode, Value};

use crate::common::{failed, ok, props, Env, DIR};

#[tokio::test]
async fn create_read_update_delete() {
    let env = Env::new().await;
    let created = env
        .create(DIR, props([("path", "www".into()), ("mode", 0o750.into())]))
        .await;
    assert_eq!(created.native_id.as_deref(), Some("www"));
    let state = ok(&created);
    assert_eq!(state["path"], Value::from("www"));
    assert_eq!(state["mode"], Value::from(0o750));
    assert!(env.path("www").is_dir());

    assert_eq!(ok(&env.read(DIR, "www").await), state);

    let updated = env
        .update(
            DIR,
            "www",
            props([("path", "www".into()), ("mode", 0o700.into())]),
        )
        .await;
    assert_eq!(updated.native_id.as_deref(), Some("www"));
    assert_eq!(ok(&updated)["mode"], Value::from(0o700));
    let mode = std::fs::metadata(env.path("www"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o700);

    let gone = env.delete(DIR, "www").await;
    ok(&gone);
    assert_eq!(gone.native_id.as_deref(), Some("www"));
    assert!(!env.path("www").exists());
    failed(&env.read(DIR, "www").await, ErrorCode::NotFound);
    failed(&env.delete(DIR, "www").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn mode_defaults_to_what_the_umask_gives() {
    let env = Env::new().await;
    let state = ok(&env.create(DIR, props([("path", "d".into())])).await);
    let mode = std::fs::metadata(env.path("d"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(state["mode"], Value::from(mode));
}

#[tokio::test]
async fn nested_directories_need_their_parent() {
    let env = Env::new().await;
    let message = failed(
        &env.create(DIR, props([("path", "a/b/c".into())])).await,
        ErrorCode::InvalidRequest,
    );
    assert!(message.contains("`a/b`"), "{message}");
    assert!(message.contains("does not exist"), "{message}");

    ok(&env.create(DIR, props([("path", "a".into())])).await);
    ok(&env.create(DIR, props([("path", "a/b".into())])).await);
    ok(&env.create(DIR, props([("path", "a/b/c".into())])).await);
    assert!(env.path("a/b/c").is_dir());
    // A missing parent on read or delete simply means the resource is not there.
    failed(&env.read(DIR, "x/y").await, ErrorCode::NotFound);
    failed(&env.delete(DIR, "x/y").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn creating_twice_is_already_exists() {
    let env = Env::new().await;
    ok(&env.create(DIR, props([("path", "d".into())])).await);
    let message = failed(
        &env.create(DIR, props([("path", "d".into())])).await,
        ErrorCode::AlreadyExists,
    );
    assert!(message.contains("`d`"), "{message}");
    // A file of the same name is taken too.
    std::fs::write(env.path("f"), "x").unwrap();
    failed(
        &env.create(DIR, props([("path", "f".into())])).await,
        ErrorCode::AlreadyExists,
    );
}

#[tokio::test]
async fn changing_the_path_is_not_updatable() {
    let env = Env::new().await;
    ok(&env.create(DIR, props([("path", "d".into())])).await);
    let message = failed(
        &env.update(DIR, "d", props([("path", "e".into())])).await,
        ErrorCode::NotUpdatable,
    );
    assert!(message.contains("create-only"), "{message}");
    assert!(env.path("d").is_dir());
    assert!(!env.path("e").exists());
    failed(
        &env.update(DIR, "missing", props([("path", "missing".into())]))
            .await,
        ErrorCode::NotFound,
    );
}

#[tokio::test]
async fn deleting_a_non_empty_directory_is_refused_for_good() {
    let env = Env::new().await;
    ok(&env.create(DIR, props([("path", "d".into())])).await);
    std::fs::write(env.path("d/keep.txt"), "x").unwrap();
    let message = failed(&env.delete(DIR, "d").await, ErrorCode::InvalidRequest);
    assert!(message.contains("not empty"), "{message}");
    assert!(env.path("d/keep.txt").exists());
}

#[tokio::test]
async fn other_kinds_are_not_found() {
    let env = Env::new().await;
    std::fs::write(env.path("f"), "x").unwrap();
    let message = failed(&env.read(DIR, "f").await, ErrorCode::NotFound);
    assert!(message.contains("is a file"), "{message}");
    failed(&env.delete(DIR, "f").await, ErrorCode::NotFound);
    assert!(env.path("f").exists());
}

#[tokio::test]
async fn invalid_properties_are_invalid_requests() {
    let env = Env::new().await;
    failed(
        &env.create(DIR, props([("path", 3.into())])).await,
        ErrorCode::InvalidRequest,
    );
    failed(&env.create(DIR, props([])).await, ErrorCode::InvalidRequest);
    failed(
        &env.create(DIR, props([("path", "d".into()), ("mode", (-1).into())]))
            .await,
        ErrorCode::InvalidRequest,
    );
    let message = failed(
        &env.create(DIR, props([("path", "d".into()), ("mode", 0o10000.into())]))
            .await,
        ErrorCode::InvalidRequest,
    );
    assert!(message.contains("mode"), "{message}");
    assert!(!env.path("d").exists());
}

#[tokio::test]
async fn list_walks_the_root_in_pages() {
    let env = Env::new().await;
    for path in ["a", "a/x", "a/x/deep", "b", "c", ".hidden"] {
        ok(&env.create(DIR, props([("path", path.into())])).await);
    }
    std::fs::write(env.path("a/file.txt"), "not a directory").unwrap();
    std::os::unix::fs::symlink("a", env.path("link-to-a")).unwrap();

    let all = env.list_all(DIR, 2).await;
    let ids: Vec<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, [".hidden", "a", "a/x", "a/x/deep", "b", "c"]);
    for (id, properties) in &all {
        assert_eq!(properties["path"], Value::from(id.as_str()));
        assert!(properties.contains_key("mode"));
    }
    let first = env.list_page(DIR, 4, None).await;
    assert_eq!(first.resources.len(), 4);
    assert_eq!(first.next_page_token.as_deref(), Some("a/x/deep"));
}
