//! The blast radius of a failing plugin (issue 44, item 3): one plugin's
//! failed start leaves the satellite's other plugins serving, and is
//! retried until it comes up; a target whose requests crash its plugin
//! again and again is backed off alone, the plugin's other targets served.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{binary, NatsServer};
use orrery_plugin_sdk::schema::{
    CreateRequest, ErrorCode, OperationStatus, ProgressEvent, PropertyMap, Request, Target, Value,
};
use orrery_plugin_sdk::Answer;
use orrery_satellite::bus::NatsBus;
use orrery_satellite::plugin_host::{PluginHost, PluginSpec};
use orrery_satellite::relay::{self, RelayConfig};
use orrery_satellite::supervisor::Policy;
use orrery_testing::wait::Wait;

fn create(i: usize, target: &str, config: PropertyMap) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("blast-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: format!("thing-{i}"),
        target: Target {
            name: target.into(),
            config,
            ..Default::default()
        },
        properties: PropertyMap::from([("name".to_owned(), Value::from(format!("thing-{i}")))]),
    })
}

/// The plugin's answer, or the bus error as text.
async fn send(bus: &NatsBus, plugin: &str, request: &Request) -> Result<ProgressEvent, String> {
    match bus.send(plugin, request, Duration::from_secs(10)).await {
        Ok(Answer::Progress(p)) => Ok(p),
        other => Err(format!("{other:?}")),
    }
}

/// An executable shell script `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// Kills the satellite when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_failing_its_first_handshake_leaves_the_satellites_other_plugins_serving() {
    let dir = tempfile::tempdir().unwrap();
    // Not a plugin: it writes something that is no handshake and exits.
    let broken = script(dir.path(), "orrery-plugin-halfway", "echo hello; exit 3");
    let server = NatsServer::start().await;
    let started = Instant::now();
    let mut satellite = Child(
        Command::new(binary("orrery-satellite"))
            .args(["--nats-url", &server.url, "--id", "blast"])
            .arg("--plugin")
            .arg(&broken)
            .arg("--plugin")
            .arg(binary("orrery-plugin-testbed"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bus = NatsBus::new(server.client().await);
    let served = Wait::new("the testbed plugin serves", Duration::from_secs(30))
        .every(Duration::from_millis(20))
        .until_ok_async(|| {
            let bus = &bus;
            async move {
                match send(bus, "testbed", &create(0, "t1", PropertyMap::new())).await {
                    Ok(event) if event.status == OperationStatus::Success => Ok(event),
                    other => Err(format!("{other:?}")),
                }
            }
        })
        .await;
    assert_eq!(served.request_id, "blast-0");
    eprintln!(
        "the healthy plugin served {:?} after the satellite started",
        started.elapsed()
    );
    let event = send(&bus, "halfway", &create(1, "t1", PropertyMap::new()))
        .await
        .unwrap();
    assert_eq!(event.status, OperationStatus::Failure);
    let code = event.error_code.unwrap();
    assert_eq!(code, ErrorCode::PluginUnhealthy, "{:?}", event.message);
    assert!(code.is_retryable());
    let message = event.message.unwrap();
    assert!(
        message.contains("`halfway`") && message.contains("handshake"),
        "names the plugin and its handshake failure: {message}"
    );
    // Both served still, and the process runs.
    let again = send(&bus, "testbed", &create(2, "t1", PropertyMap::new()))
        .await
        .unwrap();
    assert_eq!(again.status, OperationStatus::Success, "{again:?}");
    assert!(
        satellite.0.try_wait().unwrap().is_none(),
        "the satellite still runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_satellite_none_of_whose_plugins_starts_exits_1_naming_each() {
    let dir = tempfile::tempdir().unwrap();
    let one = script(dir.path(), "orrery-plugin-one", "exit 3");
    let server = NatsServer::start().await;
    let out = tokio::task::spawn_blocking(move || {
        Command::new(binary("orrery-satellite"))
            .args(["--nats-url", &server.url, "--id", "none"])
            .arg("--plugin")
            .arg(&one)
            .arg("--plugin")
            .arg("/bin/false")
            .output()
            .unwrap()
    });
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("the satellite exits")
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no plugin could be started")
            && stderr.contains("`one`")
            && stderr.contains("`false`"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_failing_its_first_handshake_is_retried_with_backoff_and_serves_once_it_comes_up()
{
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    // Fails its handshake until `ready` exists, then is the testbed plugin.
    let plugin = script(
        dir.path(),
        "orrery-plugin-testbed",
        &format!(
            "[ -e '{}' ] && exec '{}'\nexit 3",
            ready.display(),
            binary("orrery-plugin-testbed").display()
        ),
    );
    let mut spec = PluginSpec::new(&plugin);
    spec.policy = Policy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        max_restarts: 10_000,
        ..Policy::default()
    };
    let host = PluginHost::start_or_retry(spec).await.unwrap();
    assert!(!host.is_announced());
    assert_eq!(host.name(), "testbed");
    assert_eq!(host.status().state, "unhealthy");
    let server = NatsServer::start().await;
    let client = server.client().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let relay = tokio::spawn(relay::serve(
        client.clone(),
        vec![host.clone()],
        RelayConfig::default(),
        async {
            let _ = stopped.await;
        },
    ));
    let bus = NatsBus::new(server.client().await);
    let refused = Wait::new("the relay answers", Duration::from_secs(10))
        .until_ok_async(|| {
            let bus = &bus;
            async move { send(bus, "testbed", &create(0, "t1", PropertyMap::new())).await }
        })
        .await;
    assert_eq!(refused.error_code, Some(ErrorCode::PluginUnhealthy));
    let message = refused.message.unwrap();
    assert!(
        message.contains("`testbed`") && message.contains("handshake"),
        "{message}"
    );
    assert!(host.status().restarts > 0, "retried: {:?}", host.status());
    std::fs::write(&ready, "").unwrap();
    let up_at = Instant::now();
    Wait::new(
        "the plugin serves once it comes up",
        Duration::from_secs(10),
    )
    .until_ok_async(|| {
        let bus = &bus;
        async move {
            match send(bus, "testbed", &create(1, "t1", PropertyMap::new())).await {
                Ok(event) if event.status == OperationStatus::Success => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    eprintln!("served {:?} after it could come up", up_at.elapsed());
    assert!(host.is_announced());
    assert_eq!(host.status().state, "running");
    // Described now that it has announced itself.
    let announced = orrery_satellite::describe::describe_target(
        &client,
        "testbed",
        "t1",
        Duration::from_secs(10),
        Duration::from_millis(50),
    )
    .await
    .unwrap()
    .announcement;
    assert_eq!(announced.name, "testbed");
    assert!(!announced.resources.is_empty());
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), relay)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_crashes_its_plugin_again_and_again_is_backed_off_alone() {
    let mut spec = PluginSpec::new(binary("orrery-plugin-testbed"));
    spec.policy = Policy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        max_restarts: 3,
        cool_down: Duration::from_secs(600),
        ..Policy::default()
    };
    let host = PluginHost::start_or_retry(spec).await.unwrap();
    let server = NatsServer::start().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let relay = tokio::spawn(relay::serve(
        server.client().await,
        vec![host.clone()],
        RelayConfig::default(),
        async {
            let _ = stopped.await;
        },
    ));
    let bus = NatsBus::new(server.client().await);
    let healthy = |i| create(i, "b", PropertyMap::new());
    Wait::new("target b served", Duration::from_secs(10))
        .until_ok_async(|| {
            let bus = &bus;
            async move {
                match send(bus, "testbed", &healthy(0)).await {
                    Ok(event) if event.status == OperationStatus::Success => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        })
        .await;
    // Target a's every create aborts the plugin process.
    let crashing = PropertyMap::from([("crash_on".to_owned(), Value::from("create"))]);
    let mut codes = Vec::new();
    let started = Instant::now();
    let refused = loop {
        let event = send(
            &bus,
            "testbed",
            &create(codes.len() + 1, "a", crashing.clone()),
        )
        .await
        .unwrap();
        let code = event.error_code.clone().unwrap();
        if code == ErrorCode::PluginUnhealthy {
            break event;
        }
        codes.push(code);
        assert!(codes.len() < 10, "a never backed off: {codes:?}");
    };
    eprintln!(
        "target a backed off after {} crashes, {:?}; codes before: {codes:?}",
        codes.len(),
        started.elapsed()
    );
    let message = refused.message.unwrap();
    assert!(
        message.contains("`testbed`") && message.contains("`a`") && message.contains("crash loop"),
        "{message}"
    );
    assert_eq!(host.status().backed_off_targets, ["a"]);
    // `orrery satellites` shows it too, in the endpoint's live data.
    let stats = server
        .client()
        .await
        .request(format!("$SRV.STATS.{}", relay::SERVICE_NAME), "".into())
        .await
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&stats.payload).unwrap();
    let data = &stats["endpoints"][0]["data"];
    assert_eq!(
        data["backed_off_targets"],
        serde_json::json!(["a"]),
        "{stats}"
    );
    assert_eq!(data["plugin"], "testbed");
    let mut restarts = None;
    // Target b is served, by the restarted process, while a stays refused
    // without reaching the plugin (no more restarts).
    for i in 0..5 {
        let event = Wait::new("target b served again", Duration::from_secs(10))
            .until_ok_async(|| {
                let bus = &bus;
                async move {
                    match send(bus, "testbed", &healthy(100 + i)).await {
                        Ok(event) if event.status == OperationStatus::Success => Ok(event),
                        other => Err(format!("{other:?}")),
                    }
                }
            })
            .await;
        assert_eq!(event.request_id, format!("blast-{}", 100 + i));
        // Counted once the restarted process serves.
        let restarts = *restarts.get_or_insert(host.status().restarts);
        assert_eq!(
            host.status().restarts,
            restarts,
            "a reached the plugin no more"
        );
        let again = send(&bus, "testbed", &create(200 + i, "a", crashing.clone()))
            .await
            .unwrap();
        assert_eq!(
            again.error_code,
            Some(ErrorCode::PluginUnhealthy),
            "{again:?}"
        );
    }
    // Three crashes charged to a; one more when a request of a came in
    // before the supervisor had taken in the third.
    assert!((3..=4).contains(&codes.len()), "{codes:?}");
    assert!(codes.iter().all(|c| *c == ErrorCode::PluginUnavailable));
    assert_eq!(host.status().state, "running");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), relay)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
