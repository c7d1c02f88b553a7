use super::*;
use orrery_schema::{CreateRequest, Request, Target};

fn props<const N: usize>(pairs: [(&str, Value); N]) -> PropertyMap {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn create(target: &str, config: PropertyMap) -> Envelope {
    Request::Create(CreateRequest {
        request_id: "r".into(),
        resource_type: "Local::Fs::File".into(),
        label: "f".into(),
        target: Target {
            name: target.into(),
            config,
            ..Default::default()
        },
        properties: props([("path", "a".into())]),
    })
    .to_envelope()
    .unwrap()
}

fn config_of(envelope: &Envelope) -> PropertyMap {
    Request::from_envelope(envelope)
        .unwrap()
        .target()
        .config
        .clone()
}

#[test]
fn nothing_held_and_no_reference_leaves_the_bytes_alone() {
    let envelope = create("site", props([("root", "/srv".into())]));
    let before = envelope.body.clone();
    let after = HeldTargets::default()
        .hold("other", props([("root", "/x".into())]))
        .apply(envelope)
        .unwrap();
    assert_eq!(after.body, before);
}

#[test]
fn held_fields_are_added_and_may_not_be_set_otherwise() {
    let held = HeldTargets::default().hold("site", props([("root", "/srv/site".into())]));
    let added = held.apply(create("site", PropertyMap::new())).unwrap();
    assert_eq!(config_of(&added)["root"], Value::from("/srv/site"));
    let same = held
        .apply(create("site", props([("root", "/srv/site".into())])))
        .unwrap();
    assert_eq!(config_of(&same)["root"], Value::from("/srv/site"));
    let refused = held
        .apply(create("site", props([("root", "/home/victim".into())])))
        .unwrap_err();
    assert_eq!(
        refused,
        HeldError::Fixed {
            target: "site".into(),
            field: "root".into()
        }
    );
}

#[test]
fn a_request_reads_only_the_variables_and_files_the_operator_exposes() {
    std::env::set_var("ORRERY_HELD_TEST_EXPOSED", "s3cr3t-exposed");
    std::env::set_var("ORRERY_HELD_TEST_HIDDEN", "s3cr3t-hidden");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pg-password"), "s3cr3t-file\n").unwrap();
    std::fs::write(dir.path().join("..hidden"), "x").unwrap();
    let held = HeldTargets::default()
        .secrets_dir(dir.path())
        .expose_env(["ORRERY_HELD_TEST_EXPOSED".to_owned()]);

    let ok = held
        .apply(create(
            "db",
            props([
                ("password", "${file:pg-password}".into()),
                (
                    "url",
                    "postgres://u:${env:ORRERY_HELD_TEST_EXPOSED}@h/db".into(),
                ),
            ]),
        ))
        .unwrap();
    let config = config_of(&ok);
    assert_eq!(config["password"], Value::from("s3cr3t-file"));
    assert_eq!(
        config["url"],
        Value::from("postgres://u:s3cr3t-exposed@h/db")
    );

    for (reference, reason) in [
        ("${env:ORRERY_HELD_TEST_HIDDEN}", "--secret-env"),
        ("${file:../etc/passwd}", "plain file name"),
        ("${file:/etc/passwd}", "plain file name"),
        ("${file:..hidden}", "plain file name"),
        ("${file:missing}", "cannot open"),
        ("${env:ORRERY_HELD_TEST_EXPOSED", "not closed"),
    ] {
        let error = held
            .apply(create("db", props([("password", reference.into())])))
            .unwrap_err();
        let message = error.to_string();
        assert!(message.contains(reason), "{reference}: {message}");
        assert!(!message.contains("s3cr3t"), "{message}");
    }
    let none = HeldTargets::default()
        .apply(create(
            "db",
            props([("password", "${file:pg-password}".into())]),
        ))
        .unwrap_err();
    assert!(none.to_string().contains("no secrets directory"), "{none}");
}

#[test]
fn the_operators_own_configuration_may_read_any_file_of_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("deep").join("pw");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "from-the-operator").unwrap();
    let held = HeldTargets::default().hold(
        "db",
        props([("password", format!("${{file:{}}}", secret.display()).into())]),
    );
    let ok = held.apply(create("db", PropertyMap::new())).unwrap();
    assert_eq!(config_of(&ok)["password"], Value::from("from-the-operator"));
}

#[test]
fn the_local_cli_resolves_any_reference_from_its_base() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pw.txt"), "local-secret\r\n").unwrap();
    std::env::set_var("ORRERY_HELD_TEST_OPEN", "open-secret");
    let held = HeldTargets::default().policy(RefPolicy::Open {
        base: dir.path().to_path_buf(),
    });
    let ok = held
        .apply(create(
            "db",
            props([
                ("a", "${file:pw.txt}".into()),
                (
                    "b",
                    Value::List(vec!["${env:ORRERY_HELD_TEST_OPEN}".into()]),
                ),
            ]),
        ))
        .unwrap();
    let config = config_of(&ok);
    assert_eq!(config["a"], Value::from("local-secret"));
    assert_eq!(config["b"], Value::List(vec!["open-secret".into()]));
}

#[test]
fn a_large_file_is_refused_not_read_into_memory() {
    let dir = tempfile::tempdir().unwrap();
    let big = vec![b'x'; MAX_SECRET_BYTES as usize + 10];
    std::fs::write(dir.path().join("big"), big).unwrap();
    let held = HeldTargets::default().secrets_dir(dir.path());
    let error = held
        .apply(create("db", props([("p", "${file:big}".into())])))
        .unwrap_err();
    assert!(error.to_string().contains("larger than"), "{error}");
}

#[test]
fn fields_this_release_does_not_know_pass_through() {
    let mut envelope = create("site", PropertyMap::new());
    let mut body: PropertyMap = codec::decode(&envelope.body).unwrap();
    body.insert("from_a_newer_primary".into(), Value::Int(7));
    envelope.body = codec::encode(&body).unwrap();
    let held = HeldTargets::default().hold("site", props([("root", "/srv".into())]));
    let after: PropertyMap = codec::decode(&held.apply(envelope).unwrap().body).unwrap();
    assert_eq!(after["from_a_newer_primary"], Value::Int(7));
}

#[test]
fn debug_output_names_fields_but_never_values() {
    let held = HeldTargets::default().hold("db", props([("password", "hunter2".into())]));
    let shown = format!("{held:?}");
    assert!(
        shown.contains("password") && !shown.contains("hunter2"),
        "{shown}"
    );
}

#[test]
fn a_reference_is_found_wherever_its_two_bytes_meet() {
    assert!(mentions_ref(b"${env:X}"));
    assert!(mentions_ref(b"cost $5, then $${file:k}"));
    assert!(mentions_ref(b"tail ${"));
    assert!(!mentions_ref(b""));
    assert!(!mentions_ref(b"$"));
    assert!(!mentions_ref(b"price $ {not} and $5 and {x}$"));
    assert!(!mentions_ref(b"{$}"));
}

fn create_for(stack: Option<&str>, target: &str, config: PropertyMap) -> Envelope {
    let mut envelope = create(target, config);
    let mut request = Request::from_envelope(&envelope).unwrap();
    if let Request::Create(c) = &mut request {
        c.target.stack = stack.map(str::to_owned);
    }
    envelope.body = request.to_envelope().unwrap().body;
    envelope
}

fn team_b_only() -> HeldTargets {
    HeldTargets::default()
        .hold("b-root", props([("root", "/srv/team-b".into())]))
        .restrict(
            "b-root",
            Access {
                stacks: vec!["team-b-*".into()],
                open_fields: vec![],
            },
        )
}

#[test]
fn a_held_target_serves_only_the_stacks_its_operator_names() {
    let held = team_b_only();
    let ok = held
        .apply(create_for(Some("team-b-web"), "b-root", PropertyMap::new()))
        .unwrap();
    assert_eq!(config_of(&ok)["root"], Value::from("/srv/team-b"));
    for stack in [Some("team-a-web"), Some("team-b"), None] {
        let refused = held
            .apply(create_for(stack, "b-root", PropertyMap::new()))
            .unwrap_err();
        assert!(
            matches!(&refused, HeldError::Stack { target, stack: s, .. } if target == "b-root" && s.as_deref() == stack),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("team-b-*"), "{refused}");
    }
    // A restriction alone, with nothing held, is enforced as well.
    let restricted = HeldTargets::default().restrict(
        "site",
        Access {
            stacks: vec!["web".into()],
            open_fields: vec![],
        },
    );
    restricted
        .apply(create_for(Some("web"), "site", PropertyMap::new()))
        .unwrap();
    restricted
        .apply(create_for(Some("webx"), "site", PropertyMap::new()))
        .unwrap_err();
}

#[test]
fn a_held_credential_goes_only_where_the_operator_said() {
    let held = HeldTargets::default()
        .hold(
            "db",
            props([("user", "svc".into()), ("password", "pw-7f3a".into())]),
        )
        .restrict(
            "db",
            Access {
                stacks: vec!["*".into()],
                open_fields: vec!["dbname".into()],
            },
        );
    for field in ["host", "port", "sslmode", "dsn"] {
        let refused = held
            .apply(create_for(
                Some("app"),
                "db",
                props([(field, "attacker.example".into())]),
            ))
            .unwrap_err();
        assert_eq!(
            refused,
            HeldError::Sealed {
                target: "db".into(),
                field: field.into()
            }
        );
        assert!(!refused.to_string().contains("pw-7f3a"));
    }
    let ok = held
        .apply(create_for(
            Some("app"),
            "db",
            props([("dbname", "app".into())]),
        ))
        .unwrap();
    assert_eq!(config_of(&ok)["password"], Value::from("pw-7f3a"));
    // Without a credential held, the other fields stay the stack's.
    let rooted = HeldTargets::default().hold("site", props([("root", "/srv".into())]));
    rooted
        .apply(create_for(
            None,
            "site",
            props([("create_root", true.into())]),
        ))
        .unwrap();
}

fn credential_source(path: &str) -> Value {
    Value::Map(props([
        ("source", "profile".into()),
        ("credentials_file", path.into()),
    ]))
}

#[test]
fn only_the_operator_names_credentials_of_its_host() {
    let b_keys = "/etc/orrery/aws/team-b/credentials";
    let held = HeldTargets::default()
        .hold("b-aws", props([("credentials", credential_source(b_keys))]))
        .hold("open", props([("region", "eu-west-1".into())]));
    // A target nobody holds, one held without a credential, and one held
    // with its own: a stack's credential source is refused on each.
    for target in ["unheld", "open"] {
        let refused = held
            .apply(create_for(
                Some("team-a"),
                target,
                props([("credentials", credential_source(b_keys))]),
            ))
            .unwrap_err();
        assert_eq!(
            refused,
            HeldError::HostOnly {
                target: target.into(),
                field: "credentials".into()
            }
        );
    }
    let refused = held
        .apply(create_for(
            Some("team-a"),
            "b-aws",
            props([("credentials", credential_source("/root/.aws/credentials"))]),
        ))
        .unwrap_err();
    assert!(matches!(refused, HeldError::Fixed { .. }), "{refused:?}");
    // The operator's own reaches the plugin.
    let ok = held
        .apply(create_for(Some("team-b"), "b-aws", PropertyMap::new()))
        .unwrap();
    assert_eq!(config_of(&ok)["credentials"], credential_source(b_keys));
    // The local CLI's user is the operator.
    let local = HeldTargets::default().policy(RefPolicy::Open {
        base: PathBuf::from("/"),
    });
    let ok = local
        .apply(create_for(
            None,
            "mine",
            props([("credentials", credential_source(b_keys))]),
        ))
        .unwrap();
    assert_eq!(config_of(&ok)["credentials"], credential_source(b_keys));
}

#[test]
fn a_stack_cannot_name_a_nats_credentials_file_of_the_host() {
    let held = HeldTargets::default();
    for field in ["creds_file", "tls_cert_file", "tls_key_file"] {
        let refused = held
            .apply(create_for(
                Some("team-a"),
                "js",
                props([(field, "/etc/orrery/nats/team-b.creds".into())]),
            ))
            .unwrap_err();
        assert_eq!(
            refused,
            HeldError::HostOnly {
                target: "js".into(),
                field: field.into()
            }
        );
    }
}
