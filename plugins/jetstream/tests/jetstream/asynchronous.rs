//! On a three-node cluster, a replica change or a placement move answers
//! `InProgress`, and `status` reports success only once the replicas are
//! current.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use orrery_plugin_jetstream::{kv, stream::TYPE, JetstreamPlugin};
use orrery_plugin_sdk::schema::{Operation, OperationStatus, ProgressEvent, PropertyMap, Value};

use crate::cluster::Cluster;
use crate::common::{config, ok, props, PluginEnv};

/// Polls as the runtime does (after `retry_after_ms`), bounded; the final
/// event and the number of polls. (Its own loop, not an `orrery_testing`
/// wait: the plugin sets the interval, and the polls are counted.)
async fn settle(
    env: &PluginEnv,
    operation: Operation,
    mut event: ProgressEvent,
) -> (ProgressEvent, u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut polls = 0;
    while event.status == OperationStatus::InProgress {
        assert!(Instant::now() < deadline, "never settled: {event:?}");
        let wait = event
            .retry_after_ms
            .expect("InProgress carries retry_after_ms");
        tokio::time::sleep(Duration::from_millis(wait)).await;
        event = env.status(operation.clone(), &event).await;
        polls += 1;
    }
    (event, polls)
}

/// Every peer of stream `name` current, and how many there are (leader
/// included).
async fn replicas(js: &jetstream::Context, name: &str) -> (usize, bool) {
    let info = js
        .get_stream(name)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    let cluster = info.cluster.expect("clustered");
    let current = cluster.replicas.iter().all(|p| p.current);
    (
        cluster.replicas.len() + 1,
        current && cluster.leader.is_some(),
    )
}

fn spec(replicas: i64, tag: Option<&str>) -> PropertyMap {
    let mut spec = props([
        ("name", "EVENTS".into()),
        ("subjects", Value::List(vec!["events.>".into()])),
        ("replicas", replicas.into()),
    ]);
    if let Some(tag) = tag {
        spec.insert(
            "placement".into(),
            Value::Map(props([("tags", Value::List(vec![tag.into()]))])),
        );
    }
    spec
}

#[tokio::test]
async fn a_replica_change_is_in_progress_until_the_new_replicas_are_current() {
    let cluster = Cluster::start().await;
    let env = PluginEnv::start(JetstreamPlugin::default(), config(&cluster.url_refs())).await;
    let js = jetstream::new(async_nats::connect(&cluster.urls[0]).await.unwrap());
    ok(&env.create(TYPE, spec(1, None)).await);
    // Something for the new replicas to catch up on.
    let payload = bytes_of(4096);
    for i in 0..500 {
        js.publish(format!("events.{i}"), payload.clone())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    let started = env.update(TYPE, "EVENTS", spec(3, None)).await;
    assert_eq!(started.status, OperationStatus::InProgress, "{started:?}");
    assert_eq!(started.native_id.as_deref(), Some("EVENTS"));
    let (done, _) = settle(&env, Operation::Update, started).await;
    let state = ok(&done);
    assert_eq!(state["replicas"], Value::from(3));
    assert_eq!(
        replicas(&js, "EVENTS").await,
        (3, true),
        "success before the replicas were current"
    );

    let down = env.update(TYPE, "EVENTS", spec(1, None)).await;
    assert_eq!(down.status, OperationStatus::InProgress, "{down:?}");
    ok(&settle(&env, Operation::Update, down).await.0);
    assert_eq!(replicas(&js, "EVENTS").await.0, 1);

    // A bucket is a stream too: created with three replicas, it settles.
    let bucket = props([("bucket", "config".into()), ("replicas", 3.into())]);
    let started = env.create(kv::TYPE, bucket).await;
    assert_eq!(started.status, OperationStatus::InProgress, "{started:?}");
    ok(&settle(&env, Operation::Create, started).await.0);
    assert_eq!(replicas(&js, "KV_config").await, (3, true));
}

#[tokio::test]
async fn a_placement_move_is_in_progress_until_the_stream_has_moved() {
    let cluster = Cluster::start().await;
    let env = PluginEnv::start(JetstreamPlugin::default(), config(&cluster.url_refs())).await;
    let js = jetstream::new(async_nats::connect(&cluster.urls[0]).await.unwrap());
    let created = env.create(TYPE, spec(1, Some("az:0"))).await;
    ok(&created);
    let leader =
        |info: &jetstream::stream::Info| info.cluster.as_ref().and_then(|c| c.leader.clone());
    let info = js
        .get_stream("EVENTS")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    assert_eq!(leader(&info).as_deref(), Some("n0"));

    let started = env.update(TYPE, "EVENTS", spec(1, Some("az:2"))).await;
    assert_eq!(started.status, OperationStatus::InProgress, "{started:?}");
    let (done, _) = settle(&env, Operation::Update, started).await;
    ok(&done);
    let info = js
        .get_stream("EVENTS")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    assert_eq!(
        leader(&info).as_deref(),
        Some("n2"),
        "success before the move finished"
    );
    assert!(info.cluster.unwrap().replicas.is_empty());
}

fn bytes_of(n: usize) -> bytes::Bytes {
    bytes::Bytes::from(vec![b'x'; n])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orrery_apply_polls_a_replica_change_until_it_is_done() {
    let cluster = Cluster::start().await;
    let js = jetstream::new(async_nats::connect(&cluster.urls[0]).await.unwrap());
    let orrery = crate::orrery::Orrery::embedded();
    let servers: Vec<String> = cluster.urls.iter().map(|u| format!("\"{u}\"")).collect();
    let doc = |replicas: u32| {
        format!(
            "stack: replicated\ntargets:\n  - name: c1\n    plugin: jetstream\n    config: {{ servers: [{}] }}\n\
             resources:\n  - label: events\n    type: Jetstream::Stream\n    target: c1\n    properties: {{ name: EVENTS, subjects: [\"events.>\"], replicas: {replicas} }}\n",
            servers.join(", ")
        )
    };
    let file = orrery.write("stack.yaml", &doc(1));
    let run = orrery.run_file("apply", &file, &["--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let payload = bytes_of(4096);
    for i in 0..200 {
        js.publish(format!("events.{i}"), payload.clone())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let file = orrery.write("stack.yaml", &doc(3));
    // --verbose: every transition is printed, in_progress included.
    let run = orrery.run_file("apply", &file, &["--yes", "--verbose"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("update events: in_progress"), "{run:?}");
    assert!(run.stdout.contains("update events: succeeded"), "{run:?}");
    assert_eq!(replicas(&js, "EVENTS").await, (3, true));
    let run = orrery.run_file("plan", &file, &[]);
    assert_eq!(run.code, 0, "{run:?}");
}
