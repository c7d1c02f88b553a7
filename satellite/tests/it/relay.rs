//! The relay against a real nats-server and real plugin processes.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::{binary, NatsServer};
use orrery_plugin_sdk::schema::{
    CreateRequest, Envelope, ErrorCode, MessageKind, OperationStatus, PropertyMap, ProtocolError,
    Request, Target, Value,
};
use orrery_plugin_sdk::Answer;
use orrery_satellite::bus::{BusError, NatsBus};
use orrery_satellite::plugin_host::{PluginHost, PluginSpec};
use orrery_satellite::relay::{self, operation_subject, RelayConfig};
use orrery_satellite::supervisor::Policy;
use orrery_testing::wait_until_async;
use tokio::sync::oneshot;

struct Satellite {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    host: PluginHost,
}

impl Satellite {
    async fn start(server: &NatsServer, id: &str, spec: PluginSpec) -> Satellite {
        let host = PluginHost::start(spec).await.unwrap();
        let client = server.client().await;
        let (stop, stopped) = oneshot::channel::<()>();
        let config = RelayConfig {
            satellite_id: id.into(),
            ..RelayConfig::default()
        };
        let hosts = vec![host.clone()];
        let task = tokio::spawn(async move {
            relay::serve(client, hosts, config, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        let sat = Satellite {
            stop: Some(stop),
            task,
            host,
        };
        wait_for_endpoint(server, id).await;
        sat
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// Waits until the satellite answers `$SRV.PING` (its endpoints are registered first).
async fn wait_for_endpoint(server: &NatsServer, id: &str) {
    let client = &server.client().await;
    wait_until_async(
        &format!("satellite {id} registered"),
        Duration::from_secs(10),
        move || async move {
            client
                .request(format!("$SRV.INFO.{}", relay::SERVICE_NAME), "".into())
                .await
                .is_ok_and(|msg| String::from_utf8_lossy(&msg.payload).contains(id))
        },
    )
    .await;
}

fn testbed_spec() -> PluginSpec {
    PluginSpec::new(binary("orrery-plugin-testbed"))
}

fn noop_create(i: usize, target: &str, config: PropertyMap) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("req-{i}"),
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

fn progress(answer: Result<Answer, BusError>) -> orrery_plugin_sdk::schema::ProgressEvent {
    match answer {
        Ok(Answer::Progress(p)) => p,
        other => panic!("expected a progress answer, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_satellites_share_1000_operations_and_none_is_lost() {
    let server = NatsServer::start().await;
    let a = Satellite::start(&server, "sat-a", testbed_spec()).await;
    let b = Satellite::start(&server, "sat-b", testbed_spec()).await;
    let bus = NatsBus::new(server.client().await);
    let calls = (0..1000).map(|i| {
        let bus = bus.clone();
        async move {
            let r = noop_create(i, "t1", PropertyMap::new());
            (i, bus.send("testbed", &r, Duration::from_secs(30)).await)
        }
    });
    let mut answers = BTreeMap::new();
    for (i, answer) in futures::future::join_all(calls).await {
        let event = progress(answer);
        assert_eq!(event.status, OperationStatus::Success, "{event:?}");
        assert_eq!(
            event.request_id,
            format!("req-{i}"),
            "answers are not crossed"
        );
        assert!(answers.insert(i, event).is_none());
    }
    assert_eq!(answers.len(), 1000);
    // Each satellite's NATS service stats count what it served.
    let served = endpoint_requests(&server).await;
    let total: u64 = served.values().sum();
    assert_eq!(
        total, 1000,
        "every operation served exactly once: {served:?}"
    );
    assert!(
        served.len() == 2 && served.values().all(|n| *n > 0),
        "both satellites took a share: {served:?}"
    );
    a.stop().await;
    b.stop().await;
}

/// Requests served per satellite id, from `$SRV.STATS`.
async fn endpoint_requests(server: &NatsServer) -> HashMap<String, u64> {
    let client = server.client().await;
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(
            format!("$SRV.STATS.{}", relay::SERVICE_NAME),
            inbox,
            "".into(),
        )
        .await
        .unwrap();
    let mut out = HashMap::new();
    while let Ok(Some(msg)) = tokio::time::timeout(
        Duration::from_millis(500),
        futures::StreamExt::next(&mut sub),
    )
    .await
    {
        let stats: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap();
        let id = stats["id"].as_str().unwrap().to_owned();
        let n: u64 = stats["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["num_requests"].as_u64().unwrap())
            .sum();
        out.insert(id, n);
    }
    out
}

#[tokio::test]
async fn no_satellite_is_an_immediate_error_naming_plugin_and_target() {
    let server = NatsServer::start().await;
    let bus = NatsBus::new(server.client().await);
    let started = std::time::Instant::now();
    let err = bus
        .send(
            "nobody",
            &noop_create(0, "prod-eu", PropertyMap::new()),
            Duration::from_secs(30),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::NoSatellite { .. }), "{err:?}");
    assert_eq!(err.code(), ErrorCode::NoSatellite);
    assert_eq!(
        err.to_string(),
        "no satellite serves plugin `nobody` for target `prod-eu`"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered by no-responders, not a timeout"
    );
}

#[tokio::test]
async fn garbage_on_the_subject_is_answered_and_the_satellite_keeps_serving() {
    let server = NatsServer::start().await;
    let sat = Satellite::start(&server, "sat-g", testbed_spec()).await;
    let client = server.client().await;
    let answer = client
        .request(
            operation_subject("testbed", "t1"),
            b"\xc1 definitely not msgpack".to_vec().into(),
        )
        .await
        .unwrap();
    let envelope = Envelope::decode(&answer.payload).unwrap();
    assert_eq!(envelope.kind, MessageKind::Error);
    let err: ProtocolError = envelope.body().unwrap();
    assert_eq!(err.code, ErrorCode::MalformedMessage);
    // Without a reply subject: dropped with a log line.
    client
        .publish(operation_subject("testbed", "t1"), "junk".into())
        .await
        .unwrap();
    let bus = NatsBus::new(client);
    let event = progress(
        bus.send(
            "testbed",
            &noop_create(1, "t1", PropertyMap::new()),
            Duration::from_secs(10),
        )
        .await,
    );
    assert_eq!(event.status, OperationStatus::Success);
    sat.stop().await;
}

#[tokio::test]
async fn the_service_protocol_describes_the_endpoints_and_counts_requests_and_errors() {
    use async_nats::service::{Info, PingResponse, Stats};
    let server = NatsServer::start().await;
    let sat = Satellite::start(&server, "sat-s", testbed_spec()).await;
    let client = server.client().await;
    let bus = NatsBus::new(client.clone());
    for i in 0..3 {
        let answer = bus
            .send(
                "testbed",
                &noop_create(i, "t1", PropertyMap::new()),
                Duration::from_secs(10),
            )
            .await;
        assert_eq!(progress(answer).status, OperationStatus::Success);
    }
    let answer = client
        .request(operation_subject("testbed", "t1"), "junk".into())
        .await
        .unwrap();
    assert_eq!(
        Envelope::decode(&answer.payload).unwrap().kind,
        MessageKind::Error
    );

    let ask = |subject: String| {
        let client = client.clone();
        async move { client.request(subject, "".into()).await.unwrap().payload }
    };
    let name = relay::SERVICE_NAME;
    // The reference client's own types read every answer.
    let ping: PingResponse = serde_json::from_slice(&ask("$SRV.PING".into()).await).unwrap();
    assert_eq!(ping.kind, "io.nats.micro.v1.ping_response");
    assert_eq!(ping.name, name);
    assert_eq!(ping.metadata["satellite_id"], "sat-s");
    let by_id: PingResponse =
        serde_json::from_slice(&ask(format!("$SRV.PING.{name}.{}", ping.id)).await).unwrap();
    assert_eq!(by_id.id, ping.id);
    let info: Info = serde_json::from_slice(&ask(format!("$SRV.INFO.{name}")).await).unwrap();
    assert_eq!(info.kind, "io.nats.micro.v1.info_response");
    assert_eq!(info.endpoints.len(), 1);
    let endpoint = &info.endpoints[0];
    assert_eq!(endpoint.name, "testbed-all");
    assert_eq!(endpoint.subject, operation_subject("testbed", "*"));
    assert_eq!(endpoint.queue_group, relay::queue_group("testbed"));
    assert_eq!(endpoint.metadata["plugin"], "testbed");
    let stats: Stats = serde_json::from_slice(&ask(format!("$SRV.STATS.{name}")).await).unwrap();
    assert_eq!(stats.kind, "io.nats.micro.v1.stats_response");
    let endpoint = &stats.endpoints[0];
    assert_eq!(endpoint.requests, 4);
    assert_eq!(endpoint.errors, 1, "the answer the satellite gave itself");
    assert!(endpoint.processing_time > Duration::ZERO);
    let data = endpoint.data.as_ref().unwrap();
    assert_eq!(data["plugin"], "testbed");
    assert_eq!(data["state"], "running");
    sat.stop().await;
}

fn config(pairs: &[(&str, Value)]) -> PropertyMap {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_killed_mid_request_fails_its_requests_as_retryable_and_comes_back() {
    let server = NatsServer::start().await;
    let sat = Satellite::start(&server, "sat-k", testbed_spec()).await;
    let bus = NatsBus::new(server.client().await);
    let slow = config(&[("delay_ms", Value::from(30_000))]);
    let in_flight: Vec<_> = (0..5)
        .map(|i| {
            let bus = bus.clone();
            let r = noop_create(i, "slow", slow.clone());
            tokio::spawn(async move { bus.send("testbed", &r, Duration::from_secs(60)).await })
        })
        .collect();
    // Wait until the plugin holds the requests, then kill it.
    let host = &sat.host;
    wait_until_async(
        "5 requests in flight in the plugin",
        Duration::from_secs(10),
        move || std::future::ready(host.status().in_flight >= 5),
    )
    .await;
    let pid = sat.host.status().pid.unwrap();
    let killed_at = std::time::Instant::now();
    kill_9(pid);
    for call in in_flight {
        let event = progress(call.await.unwrap());
        assert_eq!(event.status, OperationStatus::Failure);
        let code = event.error_code.unwrap();
        assert_eq!(code, ErrorCode::PluginUnavailable, "{:?}", event.message);
        assert!(code.is_retryable() && code.is_ambiguous());
    }
    assert!(
        killed_at.elapsed() < Duration::from_secs(10),
        "failed at once, not at the 30 s deadline"
    );
    let event = progress(
        bus.send(
            "testbed",
            &noop_create(9, "t1", PropertyMap::new()),
            Duration::from_secs(30),
        )
        .await,
    );
    assert_eq!(event.status, OperationStatus::Success, "{event:?}");
    assert_eq!(sat.host.status().restarts, 1);
    assert_ne!(sat.host.status().pid, Some(pid));
    sat.stop().await;
}

fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_plugin_is_marked_unhealthy_with_a_clear_error() {
    let server = NatsServer::start().await;
    let mut spec = testbed_spec();
    spec.policy = Policy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        max_restarts: 3,
        window: Duration::from_secs(60),
        cool_down: Duration::from_secs(600),
        stable_after: Duration::from_secs(600),
    };
    let sat = Satellite::start(&server, "sat-c", spec).await;
    let bus = NatsBus::new(server.client().await);
    let crashing = config(&[("crash_on", Value::from("create"))]);
    let mut codes = Vec::new();
    for i in 0..10 {
        let event = progress(
            bus.send(
                "testbed",
                &noop_create(i, "crashy", crashing.clone()),
                Duration::from_secs(30),
            )
            .await,
        );
        let code = event.error_code.clone().unwrap();
        if code == ErrorCode::PluginUnhealthy {
            let message = event.message.unwrap();
            assert!(
                message.contains("testbed") && message.contains("crash loop"),
                "{message}"
            );
            // The crashes came with target `crashy`'s requests in flight:
            // that target is backed off, not the plugin.
            assert!(message.contains("`crashy`"), "{message}");
            assert_eq!(sat.host.status().backed_off_targets, ["crashy"]);
            sat.stop().await;
            return;
        }
        codes.push(code);
    }
    panic!("never marked unhealthy; codes seen: {codes:?}");
}
