//! Schemas signed by the plugin's publisher (issue 43, attack 2, the hub
//! half): a satellite allowed to serve a target can still answer describe
//! for it with a schema of its own. A primary given the hub and its own
//! trusted publisher keys plans with the schema signed in the package the
//! honest satellite installed, and refuses, naming the satellite, an answer
//! that differs from it, names no package, or names one that does not
//! verify.
//!
//! Real nats-server, a real satellite installing `local` from a directory
//! hub (or the JetStream hub on that server), and a forging responder on the same target's describe subject
//! (per-target permissions would let it: it is that target's).

use crate::common;
use crate::trust_describe::{
    contains, document, encoded, forged, forger, forger_with_headers, honest, SECRET,
};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use orrery_hub::{Hub, PublisherKey};
use orrery_testing::nats::NatsServer;

use common::fleet::{apply_through_nats, orrery_through_nats, wait_registered, Killed};

/// Rounds of each attack: which of the two answers arrives first varies.
const ROUNDS: usize = 5;

/// A publisher key written under `dir`; returns it and its public key file.
fn publisher(dir: &Path, name: &str) -> (PublisherKey, PathBuf) {
    let key = PublisherKey::generate().unwrap();
    let public = key.write(&dir.join(name), name).unwrap();
    (key, public)
}

/// `local` packaged at 1.0.0, signed with `key`, published to `hub`.
async fn publish_local(scratch: &Path, hub: &Hub, key: &PublisherKey) {
    let package = orrery_hub::testing::build(
        &orrery_testing::binary("orrery-plugin-local"),
        "1.0.0",
        Some(key),
        &scratch.join("package"),
        None,
    )
    .await;
    hub.publish(&package).await.unwrap();
}

/// `orrery-satellite` serving site-c with `local@=1.0.0` installed from
/// the directory hub `hub` (`None`: the hub on its NATS server), trusting
/// `trusted` for it.
fn hub_satellite(url: &str, id: &str, hub: Option<&Path>, trusted: &Path, cache: &Path) -> Killed {
    let mut command = Command::new(orrery_testing::binary("orrery-satellite"));
    command
        .args(["--nats-url", url, "--id", id, "--target", "site-c"])
        .args(["--install", "local@=1.0.0"])
        .arg("--trusted-key")
        .arg(format!("{}=local", trusted.display()));
    if let Some(hub) = hub {
        command.arg("--hub-dir").arg(hub);
    }
    let child = command
        .arg("--cache-dir")
        .arg(cache)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Killed(child)
}

/// What the satellite at `site-c` answers: its `Orrery-Package` header
/// (waiting, bounded, until one answers with it).
async fn package_header(client: &async_nats::Client) -> String {
    orrery_testing::wait_for_async(
        "the hub satellite names its package",
        Duration::from_secs(20),
        || async move {
            let message = client
                .request("orrery.describe.local.site-c", "".into())
                .await
                .map_err(|e| e.to_string())?;
            message
                .headers
                .as_ref()
                .and_then(|h| h.get("Orrery-Package"))
                .map(|v| v.as_str().to_owned())
                .ok_or_else(|| "no Orrery-Package header".to_owned())
        },
    )
    .await
}

/// `orrery plan FILE --output json` through NATS with the hub flags.
async fn plan(state: &Path, url: &str, file: &Path, hub_flags: &[String]) -> common::Run {
    let mut args = vec![
        "plan".to_owned(),
        file.display().to_string(),
        "--output".to_owned(),
        "json".to_owned(),
    ];
    args.extend(hub_flags.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    orrery_through_nats(state, url, &args).await
}

/// No file under `dir` holds `SECRET`.
fn nowhere_in(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(!contains(&bytes, SECRET), "in clear in {}", path.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_schema_is_refused_by_the_signed_hub_package() {
    let server = NatsServer::start().await;
    let scratch = common::Scratch::new();
    let hub = scratch.path().join("hub");
    let (key, public) = publisher(scratch.path(), "publisher.key");
    publish_local(scratch.path(), &Hub::dir(&hub).unwrap(), &key).await;
    let sat = hub_satellite(
        &server.url,
        "sat-hub",
        Some(&hub),
        &public,
        &scratch.path().join("cache"),
    );
    let client = server.client().await;
    wait_registered(&client, 1, Duration::from_secs(20)).await;
    let claimed = package_header(&client).await;
    assert!(
        claimed.starts_with("local@1.0.0 manifest-sha256="),
        "{claimed}"
    );
    let payload = encoded(&forged(honest(&client, "site-c").await));

    let hub_flags = vec![
        "--trusted-key".to_owned(),
        format!("{}=local", public.display()),
        "--hub-dir".to_owned(),
        hub.display().to_string(),
    ];
    let state = scratch.path().join("state");

    // The honest path: the signed schema plans and applies; the value is
    // write-only in it, so shown nowhere.
    let root = scratch.path().join("site-c-honest");
    let file = scratch.write("honest.yaml", &document("honest", &root));
    let run = plan(&state, &server.url, &file, &hub_flags).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(!contains(run.stdout.as_bytes(), SECRET), "{run:?}");
    let env = [
        ("ORRERY_TRUSTED_KEY", hub_flags[1].as_str()),
        ("ORRERY_HUB_DIR", hub_flags[3].as_str()),
    ];
    let run = apply_through_nats(&file, &server.url, &state, &env).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("note.txt")).unwrap(),
        "hello"
    );

    // A second responder on site-c's describe subject, with the forged
    // schema: without a package header, then naming the honest package.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Orrery-Satellite", "rogue-c");
    headers.insert("Orrery-Package", claimed.as_str());
    let variants = [
        ("no package", None),
        ("the honest package's header", Some(headers)),
    ];
    let mut refused = 0;
    for (what, headers) in variants {
        let rogue = match headers {
            None => {
                forger(
                    server.client().await,
                    &[("orrery.describe.local.site-c", None)],
                    "rogue-c",
                    payload.clone(),
                )
                .await
            }
            Some(headers) => {
                forger_with_headers(
                    server.client().await,
                    &[("orrery.describe.local.site-c", None)],
                    headers,
                    payload.clone(),
                )
                .await
            }
        };
        for i in 0..ROUNDS {
            let root = scratch.path().join(format!("site-c-{refused}"));
            let file = scratch.write(
                &format!("attack-{refused}.yaml"),
                &document(&format!("attack-{refused}"), &root),
            );
            let planned = plan(&state, &server.url, &file, &hub_flags).await;
            let applied = apply_through_nats(&file, &server.url, &state, &env).await;
            for run in [&planned, &applied] {
                let said = format!("{}{}", run.stdout, run.stderr);
                assert!(run.code != 0 && run.code != 2, "{what}, round {i}: {run:?}");
                assert!(!contains(said.as_bytes(), SECRET), "{what}: {said}");
                assert!(
                    said.contains("`rogue-c`") && !said.contains("`sat-hub`"),
                    "{what}: names the forger, and only it: {said}"
                );
                let why = match what {
                    "no package" => "without naming a hub package",
                    _ => "differs from the one signed in its hub package local@1.0.0",
                };
                assert!(said.contains(why), "{what}: {said}");
                if i == 0 {
                    eprintln!("{what}: {}", run.stderr.trim());
                }
            }
            assert!(!root.exists(), "nothing applied");
            refused += 1;
        }
        assert!(rogue.received.load(Ordering::SeqCst) >= ROUNDS, "asked");
    }
    eprintln!("{refused} of {} forged rounds refused", 2 * ROUNDS);
    nowhere_in(&state);

    // `orrery primary` with the same flags: the forged answer is a 502
    // naming the forger; once it is gone the signed schema plans.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Orrery-Satellite", "rogue-c");
    headers.insert("Orrery-Package", claimed.as_str());
    let rogue = forger_with_headers(
        server.client().await,
        &[("orrery.describe.local.site-c", None)],
        headers,
        payload.clone(),
    )
    .await;
    let mut args = vec!["--nats-url".to_owned(), server.url.clone()];
    args.extend(hub_flags.iter().cloned());
    let primary = tokio::task::spawn_blocking(move || {
        common::server::Server::start_with(common::server::ServerOptions {
            args,
            ..Default::default()
        })
    })
    .await
    .unwrap();
    let body =
        serde_json::json!({ "document": document("served", &scratch.path().join("served")) });
    let (primary, (status, answer)) = tokio::task::spawn_blocking(move || {
        let answer = primary.post("/v1/stacks/plan", &body);
        (primary, answer)
    })
    .await
    .unwrap();
    let said = answer.to_string();
    assert_eq!(status, 502, "{said}");
    assert!(
        said.contains("`rogue-c`") && said.contains("differs from the one signed"),
        "{said}"
    );
    drop(rogue);
    let body =
        serde_json::json!({ "document": document("served", &scratch.path().join("served")) });
    let (status, answer) =
        tokio::task::spawn_blocking(move || primary.post("/v1/stacks/plan", &body))
            .await
            .unwrap();
    assert_eq!(status, 200, "{answer}");
    assert!(!contains(answer.to_string().as_bytes(), SECRET), "{answer}");

    // Before: with the honest satellite gone and the forger answering
    // alone, a primary without hub configuration plans with the forged
    // schema (the per-target defence cannot tell: the forger may serve
    // site-c); with it, the plan is refused.
    drop(sat);
    let _alone = forger(
        server.client().await,
        &[("orrery.describe.local.site-c", None)],
        "rogue-c",
        payload.clone(),
    )
    .await;
    let file = scratch.write("alone.yaml", &document("alone", &root));
    let before = plan(&scratch.path().join("before"), &server.url, &file, &[]).await;
    eprintln!(
        "without --trusted-key, the forger alone: exit {}, value shown: {}",
        before.code,
        contains(before.stdout.as_bytes(), SECRET)
    );
    assert!(
        before.code == 2 && contains(before.stdout.as_bytes(), SECRET),
        "the attack works without the hub: {before:?}"
    );
    let after = plan(&state, &server.url, &file, &hub_flags).await;
    let said = format!("{}{}", after.stdout, after.stderr);
    assert!(
        after.code != 0 && after.code != 2 && said.contains("`rogue-c`"),
        "{after:?}"
    );
    assert!(!contains(said.as_bytes(), SECRET), "{said}");
    nowhere_in(&state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_the_primary_cannot_verify_is_refused() {
    let server = NatsServer::start().await;
    let scratch = common::Scratch::new();
    let (key, public) = publisher(scratch.path(), "publisher.key");
    let (_other, other_public) = publisher(scratch.path(), "other.key");
    // The hub on the NATS server itself (JetStream): the satellite and the
    // primary find it on their own connections.
    let hub = Hub::nats(server.client().await).await.unwrap();
    publish_local(scratch.path(), &hub, &key).await;
    let _sat = hub_satellite(
        &server.url,
        "sat-hub",
        None,
        &public,
        &scratch.path().join("cache"),
    );
    let client = server.client().await;
    wait_registered(&client, 1, Duration::from_secs(20)).await;
    package_header(&client).await;
    let state = scratch.path().join("state");
    let root = scratch.path().join("site-c");
    let file = scratch.write("doc.yaml", &document("doc", &root));
    let flags = |key: &Path, hub: Option<&Path>| {
        let mut flags = vec![
            "--trusted-key".to_owned(),
            format!("{}=local", key.display()),
        ];
        if let Some(hub) = hub {
            flags.extend(["--hub-dir".to_owned(), hub.display().to_string()]);
        }
        flags
    };

    // Signed by a key the satellite trusts but this primary does not.
    let run = plan(&state, &server.url, &file, &flags(&other_public, None)).await;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(run.code != 0 && run.code != 2, "{run:?}");
    assert!(
        said.contains("`sat-hub`")
            && said.contains("runs hub package local@1.0.0")
            && said.contains("which is not a trusted key"),
        "{said}"
    );
    eprintln!("untrusted key: {}", run.stderr.trim());

    // A package the primary's hub does not have.
    let empty = scratch.path().join("empty-hub");
    std::fs::create_dir_all(&empty).unwrap();
    let run = plan(&state, &server.url, &file, &flags(&public, Some(&empty))).await;
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(run.code != 0 && run.code != 2, "{run:?}");
    assert!(
        said.contains("`sat-hub`") && said.contains("plugin `local` is not on the hub"),
        "{said}"
    );

    // The same primary trusting the publisher plans, from the hub on its
    // own NATS connection.
    let run = plan(&state, &server.url, &file, &flags(&public, None)).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(!root.exists());
}
