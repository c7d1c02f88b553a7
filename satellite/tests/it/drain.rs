//! The `orrery-satellite` binary under load: SIGTERM drains it.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{binary, NatsServer};
use orrery_plugin_sdk::schema::{
    CreateRequest, OperationStatus, PropertyMap, Request, Target, Value,
};
use orrery_plugin_sdk::Answer;
use orrery_satellite::bus::{BusError, NatsBus};
use orrery_satellite::relay;
use orrery_testing::wait::{wait_until_async, Wait};

fn slow_create(i: usize) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("drain-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: format!("thing-{i}"),
        target: Target {
            name: "slow".into(),
            config: PropertyMap::from([("delay_ms".to_owned(), Value::from(500))]),
            ..Default::default()
        },
        properties: PropertyMap::from([("name".to_owned(), Value::from(format!("thing-{i}")))]),
    })
}

/// `orrery-satellite` serving the testbed plugin as `id`, drain grace 30 s.
fn testbed_satellite(url: &str, id: &str) -> std::process::Child {
    testbed_satellite_with(url, id, &[])
}

/// As [`testbed_satellite`], with more flags.
fn testbed_satellite_with(url: &str, id: &str, flags: &[&str]) -> std::process::Child {
    Command::new(binary("orrery-satellite"))
        .args(["--nats-url", url, "--id", id, "--drain-grace-secs", "30"])
        .args(flags)
        .arg("--plugin")
        .arg(binary("orrery-plugin-testbed"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Sends SIGTERM to `child`.
fn sigterm(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// How `child` exited, at most 20 s after a SIGTERM sent `when`.
async fn exit_within_20s(child: &mut std::process::Child, when: &str) -> std::process::ExitStatus {
    let what = format!("the satellite's exit after SIGTERM {when}");
    let wait = Wait::new(&what, Duration::from_secs(20));
    let exit = wait
        .poll_async(|| std::future::ready(child.try_wait().unwrap().ok_or(())))
        .await;
    exit.unwrap_or_else(|()| {
        let _ = child.kill();
        wait.fail("still running, killed")
    })
}

/// Waits until satellite `id` answers `$SRV.INFO` with its testbed
/// endpoint listed: the service answers before its endpoints are added.
async fn wait_registered(client: &async_nats::Client, id: &str) {
    let endpoint = &relay::operation_subject("testbed", "*");
    let what = format!("satellite {id} registered with its testbed endpoint");
    wait_until_async(&what, Duration::from_secs(20), move || async move {
        client
            .request(format!("$SRV.INFO.{}", relay::SERVICE_NAME), "".into())
            .await
            .is_ok_and(|m| {
                let info = String::from_utf8_lossy(&m.payload);
                info.contains(id) && info.contains(endpoint)
            })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_work_takes_nothing_new_and_exits_zero() {
    let server = NatsServer::start().await;
    let mut satellite = testbed_satellite(&server.url, "drainer");
    let client = server.client().await;
    wait_registered(&client, "drainer").await;

    // Publish every request and flush: once the server has answered the
    // flush, all of them are routed to the satellite's subscription, so the
    // signal below arrives with the whole batch taken and in flight.
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(format!("{inbox}.*")).await.unwrap();
    for i in 0..50 {
        let envelope = slow_create(i).to_envelope().unwrap().with_deadline_ms(Some(
            orrery_plugin_sdk::client::deadline_ms(Duration::from_secs(60)),
        ));
        client
            .publish_with_reply(
                relay::operation_subject("testbed", "slow"),
                format!("{inbox}.{i}"),
                envelope.encode().unwrap().into(),
            )
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
    sigterm(&satellite);

    let mut succeeded = std::collections::BTreeSet::new();
    while succeeded.len() < 50 {
        let message = tokio::time::timeout(
            Duration::from_secs(30),
            futures::StreamExt::next(&mut replies),
        )
        .await
        .expect("every in-flight operation is answered during the drain")
        .unwrap();
        let envelope = orrery_plugin_sdk::schema::Envelope::decode(&message.payload).unwrap();
        match orrery_plugin_sdk::client::decode_answer(&envelope) {
            Ok(Answer::Progress(event)) if event.status == OperationStatus::Success => {
                assert!(
                    succeeded.insert(event.request_id.clone()),
                    "answered twice: {}",
                    event.request_id
                );
            }
            other => panic!("an operation failed during the drain: {other:?}"),
        }
    }

    let bus = NatsBus::new(client.clone());
    let exit = tokio::task::spawn_blocking(move || satellite.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.code(), Some(0), "a drained satellite exits 0");
    let after = bus
        .send("testbed", &slow_create(99), Duration::from_secs(5))
        .await;
    assert!(
        matches!(after, Err(BusError::NoSatellite { .. })),
        "takes nothing new: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_even_when_the_nats_server_is_gone() {
    let server = NatsServer::start().await;
    let mut satellite = testbed_satellite(&server.url, "orphan");
    let client = server.client().await;
    wait_registered(&client, "orphan").await;
    drop(client);
    drop(server);
    sigterm(&satellite);
    // Nothing is in flight, so only the last flush to a server that is gone
    // can hold the exit; it is bounded by a few seconds.
    let exit = exit_within_20s(&mut satellite, "with NATS gone").await;
    assert_eq!(exit.code(), Some(0), "{exit:?}");
}

/// Whether process `pid` has a child yet (`/proc/*/stat`, field 4).
fn has_child(pid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .is_some_and(|ppid| ppid == pid.to_string())
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_still_starting_exits_zero_instead_of_dying() {
    // A plugin that never announces itself: the signal lands while the
    // satellite waits for the handshake, before it has served anything.
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("mute-plugin");
    std::fs::write(&plugin, "#!/bin/sh\nexec /bin/sleep 60\n").unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let server = NatsServer::start().await;
    let mut satellite = Command::new(binary("orrery-satellite"))
        .args(["--nats-url", &server.url, "--id", "starting"])
        .args(["--handshake-timeout-secs", "60", "--plugin"])
        .arg(&plugin)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = satellite.id();
    wait_until_async(
        "the satellite's plugin process",
        Duration::from_secs(20),
        || std::future::ready(has_child(pid)),
    )
    .await;
    sigterm(&satellite);
    let exit = exit_within_20s(&mut satellite, "while starting").await;
    // Were the handlers installed only once serving, this would be death by
    // SIGTERM (no exit code) — and likewise in the instant between
    // registering with NATS and awaiting the signal.
    assert_eq!(exit.code(), Some(0), "{exit:?}");
}

/// The default runtime is one thread; `--worker-threads N` gives N
/// workers. Both relay concurrent operations and drain on SIGTERM (the
/// other tests here run the default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_worker_threads_it_relays_concurrently_and_drains_too() {
    let server = NatsServer::start().await;
    let mut satellite = testbed_satellite_with(&server.url, "workers", &["--worker-threads", "2"]);
    let client = server.client().await;
    wait_registered(&client, "workers").await;
    let bus = NatsBus::new(client);
    let answers = futures::future::join_all((0..20).map(|i| {
        let bus = bus.clone();
        async move {
            bus.send("testbed", &slow_create(i), Duration::from_secs(30))
                .await
        }
    }))
    .await;
    for answer in answers {
        match answer {
            Ok(Answer::Progress(event)) => assert_eq!(event.status, OperationStatus::Success),
            other => panic!("not relayed: {other:?}"),
        }
    }
    sigterm(&satellite);
    let exit = exit_within_20s(&mut satellite, "with two worker threads").await;
    assert_eq!(exit.code(), Some(0));
}

#[test]
fn a_worker_count_that_is_not_a_number_is_refused() {
    let out = Command::new(binary("orrery-satellite"))
        .args(["--worker-threads", "many"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--worker-threads"),
        "names the flag: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
