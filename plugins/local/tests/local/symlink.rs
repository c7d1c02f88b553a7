//! `Local::Fs::Symlink` through the harness.

use orrery_plugin_sdk::schema::{ErrorCode, Value};

use crate::common::{failed, ok, props, Env, LINK};

#[tokio::test]
async fn create_read_update_delete() {
    let env = Env::new().await;
    std::fs::write(env.path("real.txt"), "x").unwrap();
    let spec = props([("path", "link".into()), ("target", "real.txt".into())]);
    let created = env.create(LINK, spec.clone()).await;
    assert_eq!(created.native_id.as_deref(), Some("link"));
    assert_eq!(ok(&created), spec);
    assert_eq!(
        std::fs::read_link(env.path("link")).unwrap().to_str(),
        Some("real.txt")
    );
    assert_eq!(ok(&env.read(LINK, "link").await), spec);

    // An update that changes nothing succeeds and keeps the native id.
    let same = env.update(LINK, "link", spec.clone()).await;
    assert_eq!(ok(&same), spec);
    assert_eq!(same.native_id.as_deref(), Some("link"));

    ok(&env.delete(LINK, "link").await);
    assert!(std::fs::symlink_metadata(env.path("link")).is_err());
    assert!(
        env.path("real.txt").exists(),
        "delete removed the link's target"
    );
    failed(&env.read(LINK, "link").await, ErrorCode::NotFound);
    failed(&env.delete(LINK, "link").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn changing_the_target_is_not_updatable() {
    let env = Env::new().await;
    ok(&env
        .create(LINK, props([("path", "l".into()), ("target", "a".into())]))
        .await);
    let message = failed(
        &env.update(
            LINK,
            "l",
            props([("path", "l".into()), ("target", "b".into())]),
        )
        .await,
        ErrorCode::NotUpdatable,
    );
    assert!(message.contains("`target`"), "{message}");
    failed(
        &env.update(
            LINK,
            "l",
            props([("path", "m".into()), ("target", "a".into())]),
        )
        .await,
        ErrorCode::NotUpdatable,
    );
    assert_eq!(
        std::fs::read_link(env.path("l")).unwrap().to_str(),
        Some("a")
    );
}

#[tokio::test]
async fn dangling_and_nested_links_are_fine() {
    let env = Env::new().await;
    std::fs::create_dir_all(env.path("a/b")).unwrap();
    ok(&env
        .create(
            LINK,
            props([("path", "a/b/up".into()), ("target", "../../x".into())]),
        )
        .await);
    ok(&env
        .create(
            LINK,
            props([("path", "dangling".into()), ("target", "nowhere".into())]),
        )
        .await);
    let all = env.list_all(LINK, 1).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].0, "a/b/up");
    assert_eq!(all[0].1["target"], Value::from("../../x"));
    assert_eq!(all[1].0, "dangling");
}

#[tokio::test]
async fn targets_outside_the_root_are_refused() {
    let env = Env::new().await;
    std::fs::create_dir(env.path("a")).unwrap();
    for (path, target) in [
        ("l", "/etc/passwd"),
        ("l", "../x"),
        ("a/l", "../../x"),
        ("l", ""),
        // Inside, but `..` after a name depends on what the name is.
        ("a/l", "x/../y"),
    ] {
        let message = failed(
            &env.create(
                LINK,
                props([("path", path.into()), ("target", target.into())]),
            )
            .await,
            ErrorCode::InvalidRequest,
        );
        assert!(message.contains("target"), "{path} -> {target}: {message}");
    }
    assert!(std::fs::symlink_metadata(env.path("l")).is_err());
}

#[tokio::test]
async fn creating_twice_is_already_exists() {
    let env = Env::new().await;
    let spec = props([("path", "l".into()), ("target", "a".into())]);
    ok(&env.create(LINK, spec.clone()).await);
    failed(&env.create(LINK, spec).await, ErrorCode::AlreadyExists);
    failed(
        &env.create(LINK, props([("path", "l".into())])).await,
        ErrorCode::InvalidRequest,
    );
}

#[tokio::test]
async fn files_are_not_symlinks() {
    let env = Env::new().await;
    std::fs::write(env.path("f"), "x").unwrap();
    failed(&env.read(LINK, "f").await, ErrorCode::NotFound);
    failed(&env.delete(LINK, "f").await, ErrorCode::NotFound);
    assert!(env.path("f").exists());
}
