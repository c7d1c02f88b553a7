//! `Local::Fs::File` through the harness.

use std::os::unix::fs::PermissionsExt;

use orrery_plugin_sdk::schema::{ErrorCode, Value};

use crate::common::{failed, ok, props, Env, FILE};

/// Hex SHA-256 of "hello\n".
const HELLO_SHA256: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

#[tokio::test]
async fn create_read_update_delete() {
    let env = Env::new().await;
    let created = env
        .create(
            FILE,
            props([
                ("path", "a.txt".into()),
                ("content", "hello\n".into()),
                ("mode", 0o640.into()),
                ("owner_note", "s3cret".into()),
            ]),
        )
        .await;
    assert_eq!(created.native_id.as_deref(), Some("a.txt"));
    let state = ok(&created);
    assert_eq!(state["content"], Value::from("hello\n"));
    assert_eq!(state["mode"], Value::from(0o640));
    assert_eq!(state["sha256"], Value::from(HELLO_SHA256));
    assert!(
        !state.contains_key("owner_note"),
        "write-only field returned"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("a.txt")).unwrap(),
        "hello\n"
    );

    let read = ok(&env.read(FILE, "a.txt").await);
    assert_eq!(read, state);

    let updated = env
        .update(
            FILE,
            "a.txt",
            props([
                ("path", "a.txt".into()),
                ("content", "bye".into()),
                ("owner_note", "other".into()),
                // Read-only: ignored on input.
                ("sha256", "0000".into()),
            ]),
        )
        .await;
    assert_eq!(updated.native_id.as_deref(), Some("a.txt"));
    let state = ok(&updated);
    assert_eq!(state["content"], Value::from("bye"));
    assert_ne!(state["sha256"], Value::from(HELLO_SHA256));
    assert_ne!(state["sha256"], Value::from("0000"));
    assert_eq!(
        state["mode"],
        Value::from(0o640),
        "absent mode is unchanged"
    );
    assert!(!state.contains_key("owner_note"));
    assert_eq!(std::fs::read_to_string(env.path("a.txt")).unwrap(), "bye");

    // Absent content leaves the content as it is.
    let state = ok(&env
        .update(
            FILE,
            "a.txt",
            props([("path", "a.txt".into()), ("mode", 0o600.into())]),
        )
        .await);
    assert_eq!(state["content"], Value::from("bye"));
    let mode = std::fs::metadata(env.path("a.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600);

    ok(&env.delete(FILE, "a.txt").await);
    assert!(!env.path("a.txt").exists());
    failed(&env.read(FILE, "a.txt").await, ErrorCode::NotFound);
    failed(&env.delete(FILE, "a.txt").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn absent_content_creates_an_empty_file() {
    let env = Env::new().await;
    let state = ok(&env.create(FILE, props([("path", "empty".into())])).await);
    assert_eq!(state["content"], Value::from(""));
    assert_eq!(std::fs::read(env.path("empty")).unwrap(), b"");
}

#[tokio::test]
async fn creating_twice_is_already_exists_and_keeps_the_content() {
    let env = Env::new().await;
    ok(&env
        .create(
            FILE,
            props([("path", "f".into()), ("content", "one".into())]),
        )
        .await);
    failed(
        &env.create(
            FILE,
            props([("path", "f".into()), ("content", "two".into())]),
        )
        .await,
        ErrorCode::AlreadyExists,
    );
    assert_eq!(std::fs::read_to_string(env.path("f")).unwrap(), "one");
}

#[tokio::test]
async fn missing_parent_is_an_invalid_request() {
    let env = Env::new().await;
    let message = failed(
        &env.create(FILE, props([("path", "no/such/f".into())]))
            .await,
        ErrorCode::InvalidRequest,
    );
    assert!(message.contains("`no/such`"), "{message}");
    std::fs::write(env.path("plain"), "").unwrap();
    let message = failed(
        &env.create(FILE, props([("path", "plain/f".into())])).await,
        ErrorCode::InvalidRequest,
    );
    assert!(message.contains("not a directory"), "{message}");
}

#[tokio::test]
async fn changing_the_path_is_not_updatable() {
    let env = Env::new().await;
    ok(&env.create(FILE, props([("path", "f".into())])).await);
    failed(
        &env.update(
            FILE,
            "f",
            props([("path", "g".into()), ("content", "x".into())]),
        )
        .await,
        ErrorCode::NotUpdatable,
    );
    assert_eq!(std::fs::read_to_string(env.path("f")).unwrap(), "");
}

#[tokio::test]
async fn directories_and_symlinks_are_not_files() {
    let env = Env::new().await;
    std::fs::create_dir(env.path("d")).unwrap();
    std::fs::write(env.path("real"), "x").unwrap();
    std::os::unix::fs::symlink("real", env.path("link")).unwrap();
    failed(&env.read(FILE, "d").await, ErrorCode::NotFound);
    failed(&env.read(FILE, "link").await, ErrorCode::NotFound);
    failed(
        &env.update(
            FILE,
            "link",
            props([("path", "link".into()), ("content", "y".into())]),
        )
        .await,
        ErrorCode::NotFound,
    );
    failed(&env.delete(FILE, "link").await, ErrorCode::NotFound);
    assert_eq!(std::fs::read_to_string(env.path("real")).unwrap(), "x");
    // Creating over a symlink does not write through it.
    failed(
        &env.create(
            FILE,
            props([("path", "link".into()), ("content", "y".into())]),
        )
        .await,
        ErrorCode::AlreadyExists,
    );
    assert_eq!(std::fs::read_to_string(env.path("real")).unwrap(), "x");
}

#[tokio::test]
async fn content_that_is_not_text_or_too_large_is_refused() {
    let env = Env::new().await;
    std::fs::write(env.path("binary"), [0xff, 0xfe, 0x00]).unwrap();
    failed(&env.read(FILE, "binary").await, ErrorCode::InvalidRequest);
    let big = "x".repeat(256 * 1024 + 1);
    failed(
        &env.create(
            FILE,
            props([("path", "big".into()), ("content", big.into())]),
        )
        .await,
        ErrorCode::InvalidRequest,
    );
    assert!(!env.path("big").exists());
    failed(
        &env.create(FILE, props([("path", "f".into()), ("content", 1.into())]))
            .await,
        ErrorCode::InvalidRequest,
    );
    failed(
        &env.create(
            FILE,
            props([("path", "f".into()), ("owner_note", true.into())]),
        )
        .await,
        ErrorCode::InvalidRequest,
    );
}

#[tokio::test]
async fn list_pages_files_and_never_returns_write_only_fields() {
    let env = Env::new().await;
    std::fs::create_dir(env.path("sub")).unwrap();
    for i in 0..5 {
        let path = format!("f{i}");
        let note = Value::from("secret");
        ok(&env
            .create(FILE, props([("path", path.into()), ("owner_note", note)]))
            .await);
    }
    ok(&env
        .create(
            FILE,
            props([("path", "sub/inner".into()), ("content", "in".into())]),
        )
        .await);
    std::fs::write(env.path("binary"), [0xff]).unwrap();

    let all = env.list_all(FILE, 2).await;
    let ids: Vec<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["f0", "f1", "f2", "f3", "f4", "sub/inner"]);
    for (id, properties) in &all {
        assert!(
            !properties.contains_key("owner_note"),
            "{id}: {properties:?}"
        );
        assert!(properties.contains_key("sha256"), "{id}");
    }
    // Page size 0 lets the plugin choose; it never exceeds its cap.
    let page = env.list_page(FILE, 0, None).await;
    assert_eq!(page.resources.len(), 6);
    assert_eq!(page.next_page_token, None);
}
