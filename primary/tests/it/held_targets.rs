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
