//! Paths, target configs and resource types the plugin must refuse.

use orrery_plugin_sdk::schema::{ErrorCode, MatchOp, Target, Value};

use crate::common::{failed, ok, props, Env, DIR, FILE, LINK};

#[tokio::test]
async fn paths_that_escape_the_root_are_refused() {
    let env = Env::new().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "outside").unwrap();
    std::os::unix::fs::symlink(outside.path(), env.path("out")).unwrap();

    let cases = [
        ("/etc/passwd", "absolute"),
        ("../x", "`..`"),
        ("a/../../x", "`..`"),
        ("a/./b", "plain relative"),
        ("a//b", "plain relative"),
        ("a/", "plain relative"),
        ("./x", "plain relative"),
        ("x/.", "plain relative"),
        ("x/..", "`..`"),
        ("a\0b", "NUL"),
        ("", "empty"),
        ("out/x", "symlink"),
        ("out/secret", "symlink"),
    ];
    let long = "n".repeat(256);
    let cases = cases.into_iter().chain([(long.as_str(), "at most")]);
    for (path, why) in cases {
        for resource_type in [DIR, FILE, LINK] {
            let spec = props([("path", path.into()), ("target", "t".into())]);
            let message = failed(
                &env.create(resource_type, spec).await,
                ErrorCode::InvalidRequest,
            );
            assert!(message.contains(why), "{resource_type} `{path}`: {message}");
        }
        failed(&env.read(FILE, path).await, ErrorCode::InvalidRequest);
        failed(&env.delete(FILE, path).await, ErrorCode::InvalidRequest);
        let update = props([("path", path.into()), ("content", "x".into())]);
        failed(
            &env.update(FILE, path, update).await,
            ErrorCode::InvalidRequest,
        );
    }
    assert!(!outside.path().join("x").exists());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "outside"
    );
    // The symlink itself lives inside the root and is readable as a Symlink.
    ok(&env.read(LINK, "out").await);
}

#[tokio::test]
async fn the_root_must_be_an_existing_absolute_directory() {
    let env = Env::new().await;
    let file = env.path("plain");
    std::fs::write(&file, "").unwrap();
    let roots = [
        (None, "root"),
        (Some(Value::from("relative/dir")), "absolute"),
        (Some(Value::from("/no/such/orrery/root")), "does not exist"),
        (Some(Value::from(file.to_str().unwrap())), "not a directory"),
        (Some(Value::from(7)), "root"),
    ];
    for (root, why) in roots {
        let mut target = Target {
            name: "bad".into(),
            ..Default::default()
        };
        if let Some(root) = root {
            target.config.insert("root".into(), root);
        }
        let mut env2 = Env::new().await;
        env2.target = target;
        let message = failed(
            &env2.create(DIR, props([("path", "d".into())])).await,
            ErrorCode::InvalidRequest,
        );
        assert!(message.contains(why), "{message}");
        assert!(message.contains("`bad`"), "{message}");
    }
}

#[tokio::test]
async fn unknown_resource_types_are_invalid_requests() {
    let env = Env::new().await;
    let message = failed(
        &env.create("Local::Fs::Socket", props([("path", "s".into())]))
            .await,
        ErrorCode::InvalidRequest,
    );
    assert!(message.contains("Local::Fs::Socket"), "{message}");
    let page = env.list_page("Nope", 0, None).await;
    assert_eq!(page.error_code, Some(ErrorCode::InvalidRequest));
}

#[tokio::test]
async fn announcement_describes_the_plugin() {
    let env = Env::new().await;
    let hello = env.client.announcement();
    assert_eq!(hello.name, "local");
    assert_eq!(hello.namespace, "Local");
    assert_eq!(hello.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(hello.rate_limit.max_in_flight, 64);

    let types: Vec<&str> = hello
        .resources
        .iter()
        .map(|r| r.type_name.as_str())
        .collect();
    assert_eq!(types, [DIR, FILE, LINK]);
    for schema in &hello.resources {
        assert_eq!(schema.identifier, ["path"]);
        let path = schema.field("path").unwrap();
        assert!(path.hints.create_only && path.hints.required);
    }
    let file = hello.resource(FILE).unwrap();
    let note = &file.field("owner_note").unwrap().hints;
    assert!(note.write_only && note.opaque);
    assert!(file.field("sha256").unwrap().hints.read_only);
    assert!(
        hello
            .resource(LINK)
            .unwrap()
            .field("target")
            .unwrap()
            .hints
            .create_only
    );

    assert_eq!(hello.discovery_filters.len(), 3);
    let condition = &hello.discovery_filters[0].exclude_when[0];
    assert_eq!(condition.property, "path");
    assert_eq!(condition.op, MatchOp::Prefix);
    assert_eq!(condition.value, Value::from("."));
}
