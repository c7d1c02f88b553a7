//! Targets belong to operators: a satellite holds its target's
//! configuration (the `local` root, a credential read from its secrets
//! directory) and adds it to each request on its own host. The stack names
//! the target only; the held values never cross NATS and never reach the
//! primary's store; a stack that tries to re-root the target, or to read a
//! file of the satellite's host through a reference, is refused.

use crate::common;

use std::time::Duration;

use futures::StreamExt;
use orrery_testing::nats::NatsServer;

use common::fleet::{
    apply_through_nats, orrery_through_nats, satellite_command, wait_registered, Killed,
};

const ROOT_MARK: &str = "held-root-7f3a";
const TOKEN_MARK: &str = "held-token-c91e";

fn stack(name: &str, config: &str) -> String {
    let mut doc =
        format!("stack: {name}\ntargets:\n  - name: site\n    plugin: local\n{config}resources:\n");
    for i in 0..3 {
        doc.push_str(&format!(
            "  - label: f{i}\n    type: Local::Fs::File\n    target: site\n    properties: {{ path: f{i}, content: \"{i}\" }}\n"
        ));
    }
    doc
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_satellite_holds_its_targets_configuration_and_credentials() {
    let server = NatsServer::start().await;
    let scratch = common::Scratch::new();
    let operator = scratch.path().join("operator");
    let secrets = operator.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("api-token"), format!("{TOKEN_MARK}\n")).unwrap();
    let root = operator.join(ROOT_MARK);
    let config = scratch.write(
        "satellite.toml",
        &format!(
            "secrets_dir = \"{}\"\n\n[target_config.site]\nroot = \"{}\"\ncreate_root = true\napi_token = \"${{file:{}}}\"\n",
            secrets.display(),
            root.display(),
            secrets.join("api-token").display(),
        ),
    );

    // Everything on the bus, replies included, to look for held values.
    let spy = server.client().await;
    let mut all = spy.subscribe(">").await.unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = seen.clone();
    tokio::spawn(async move {
        while let Some(message) = all.next().await {
            sink.lock().unwrap().extend_from_slice(&message.payload);
        }
    });

    let mut command = satellite_command(&server.url, "sat-held");
    command.arg("--config").arg(&config);
    let _satellite = Killed(command.spawn().unwrap());
    let client = server.client().await;
    wait_registered(&client, 1, Duration::from_secs(20)).await;
    let state = scratch.path().join("state");

    // The stack names the target only; the files land in the held root.
    let file = scratch.write("named.yaml", &stack("named", ""));
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    for i in 0..3 {
        assert_eq!(
            std::fs::read_to_string(root.join(format!("f{i}"))).unwrap(),
            i.to_string()
        );
    }

    // A stack re-rooting the target is refused and writes nothing there.
    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let file = scratch.write(
        "rerooted.yaml",
        &stack(
            "rerooted",
            &format!("    config: {{ root: \"{}\" }}\n", elsewhere.display()),
        ),
    );
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("`root` is set by the operator"),
        "the refusal names the field: {said}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // A stack's reference may not read the satellite host's files.
    let file = scratch.write(
        "reader.yaml",
        &stack(
            "reader",
            "    config: { note: \"${file:/etc/hostname}\" }\n",
        ),
    );
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("plain file name"), "{said}");

    // Commands from the recorded targets alone still reach the held
    // configuration: destroy by stack name removes the files.
    let run = orrery_through_nats(
        &state,
        &server.url,
        &["destroy", "--stack", "named", "--yes"],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!root.join("f0").exists(), "destroyed through the held root");

    // Neither held value crossed NATS or reached the primary's store.
    client.flush().await.unwrap();
    spy.flush().await.unwrap();
    let bus = seen.lock().unwrap().clone();
    assert!(!bus.is_empty(), "the spy saw the operations");
    for mark in [ROOT_MARK, TOKEN_MARK] {
        assert!(!contains(&bus, mark), "`{mark}` crossed NATS");
        for entry in std::fs::read_dir(&state).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                assert!(!contains(&bytes, mark), "`{mark}` in {}", path.display());
            }
        }
    }
}

#[test]
fn the_local_cli_resolves_references_at_request_time_and_records_only_the_reference() {
    let scratch = common::Scratch::new();
    let root = scratch.path().join(ROOT_MARK);
    let file = scratch.write(
        "local.yaml",
        &stack(
            "local-refs",
            "    config: { root: \"${env:ORRERY_TEST_HELD_ROOT}\", create_root: true }\n",
        ),
    );
    let run = common::Run::from(
        scratch
            .command(&["apply", file.to_str().unwrap(), "--yes"])
            .env("ORRERY_TEST_HELD_ROOT", &root)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(root.join("f2")).unwrap(), "2");
    for entry in std::fs::read_dir(scratch.state()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !contains(&bytes, ROOT_MARK),
                "resolved value in {}",
                path.display()
            );
        }
    }
    // Unset, the reference is an error naming it, not an empty root.
    let file = scratch.write(
        "unset.yaml",
        &stack(
            "unset-refs",
            "    config: { root: \"${env:ORRERY_TEST_HELD_ROOT}\", create_root: true }\n",
        ),
    );
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("${env:ORRERY_TEST_HELD_ROOT}") && said.contains("not set"),
        "{said}"
    );
}

const B_MARK: &str = "team-b-index-2d9c";
const PG_PASSWORD: &str = "held-pg-password-5e01";

/// Issue 43, attack 1: team A's stack names team B's held targets. The
/// satellite that holds them refuses every operation of a stack its
/// operator did not allow, and never sends a held password to a host the
/// stack chose, even for a stack it does allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_target_serves_only_its_stacks_and_its_credential_only_its_host() {
    let server = NatsServer::start().await;
    let scratch = common::Scratch::new();
    let operator = scratch.path().join("operator");
    let secrets = operator.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("pg-pass"), PG_PASSWORD).unwrap();
    let b_root = operator.join("team-b");
    let config = scratch.write(
        "satellite.toml",
        &format!(
            "[target_config.b-site]\nroot = \"{}\"\ncreate_root = true\n\n\
             [target_access.b-site]\nstacks = [\"team-b-*\"]\n\n\
             [target_config.b-db]\nuser = \"svc\"\npassword = \"${{file:{}}}\"\n\n\
             [target_access.b-db]\nstacks = [\"team-*\"]\n",
            b_root.display(),
            secrets.join("pg-pass").display(),
        ),
    );
    // A server the attacking stack points the held credential at: it
    // records every byte it is sent.
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_port = fake.local_addr().unwrap().port();
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    {
        let received = received.clone();
        std::thread::spawn(move || {
            for stream in fake.incoming() {
                let Ok(mut stream) = stream else { return };
                let received = received.clone();
                std::thread::spawn(move || {
                    use std::io::Read;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        received.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
    }

    let mut command = satellite_command(&server.url, "sat-b");
    command
        .arg("--plugin")
        .arg(orrery_testing::binary("orrery-plugin-postgres"))
        .arg("--config")
        .arg(&config);
    let _satellite = Killed(command.spawn().unwrap());
    let client = server.client().await;
    wait_registered(&client, 1, Duration::from_secs(20)).await;
    let state = scratch.path().join("state");

    // Team B's own stack uses its target.
    let site = |stack: &str, content: &str| {
        format!(
            "stack: {stack}\ntargets:\n  - name: b-site\n    plugin: local\nresources:\n  - label: index\n    type: Local::Fs::File\n    target: b-site\n    properties: {{ path: index.html, content: \"{content}\" }}\n"
        )
    };
    let file = scratch.write("b.yaml", &site("team-b-web", B_MARK));
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let index = b_root.join("index.html");
    assert_eq!(std::fs::read_to_string(&index).unwrap(), B_MARK);

    // Team A's stack naming the same target is refused before planning
    // (the satellite said whom the target is for when describing it): it
    // neither overwrites B's file nor adds one.
    let file = scratch.write("a.yaml", &site("team-a-web", "pwned"));
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("target `b-site` is held by its satellite's operator for other stacks than `team-a-web` (allowed: team-b-*); nothing was planned"),
        "the refusal names the target and the stack: {said}"
    );
    assert!(!said.contains("Plan:"), "{said}");
    assert_eq!(std::fs::read_to_string(&index).unwrap(), B_MARK);
    assert_eq!(std::fs::read_dir(&b_root).unwrap().count(), 1);

    // A primary that sends team A's operation anyway (or one naming no
    // stack) is refused by the satellite, which holds the target.
    let bus = orrery_bus::bus::NatsBus::new(client.clone());
    for stack in [Some("team-a-web"), None] {
        let request = orrery_schema::Request::Create(orrery_schema::CreateRequest {
            request_id: format!("forged-{stack:?}"),
            resource_type: "Local::Fs::File".into(),
            label: "index".into(),
            target: orrery_schema::Target {
                name: "b-site".into(),
                stack: stack.map(str::to_owned),
                ..Default::default()
            },
            properties: [
                ("path".to_owned(), "index.html".into()),
                ("content".to_owned(), "pwned".into()),
            ]
            .into_iter()
            .collect(),
        });
        let answer = bus
            .call(
                "local",
                "b-site",
                &request.to_envelope().unwrap(),
                Duration::from_secs(20),
            )
            .await
            .unwrap();
        let event: orrery_schema::ProgressEvent = answer.body().unwrap();
        assert_eq!(
            event.error_code,
            Some(orrery_schema::ErrorCode::InvalidRequest),
            "{event:?}"
        );
        assert!(
            event
                .message
                .as_deref()
                .is_some_and(|m| m.contains("held on this host for other stacks")),
            "{event:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&index).unwrap(), B_MARK);

    // A stack allowed on the held database still cannot choose where the
    // held password goes.
    let db = format!(
        "stack: team-a-db\ntargets:\n  - name: b-db\n    plugin: postgres\n    config: {{ host: 127.0.0.1, port: {fake_port} }}\nresources:\n  - label: boss\n    type: Postgres::Role\n    target: b-db\n    properties: {{ name: boss, superuser: true }}\n"
    );
    let file = scratch.write("db.yaml", &db);
    let run = apply_through_nats(&file, &server.url, &state, &[]).await;
    assert_ne!(run.code, 0, "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(said.contains("cannot be set by a stack"), "{said}");
    assert!(!said.contains(PG_PASSWORD), "{said}");
    let got = received.lock().unwrap().clone();
    assert!(
        got.is_empty(),
        "the stack's server was sent {} bytes",
        got.len()
    );
}
