//! The whole life of a JetStream stack through the real `orrery` binary
//! and plugin process: apply, no-op plan, update, replace, drift made with
//! a raw client (seen, then corrected), discovery of streams made by hand,
//! import by native id, destroy. Embedded and through a satellite.

use async_nats::jetstream::{self, consumer::pull, stream};

use crate::common::NatsServer;
use crate::orrery::Orrery;

fn stack(url: &str, max_msgs: u32, kv_storage: &str, adopted: bool) -> String {
    let mut doc = format!(
        r#"stack: js
targets:
  - name: managed
    plugin: jetstream
    config: {{ servers: ["{url}"] }}
resources:
  - label: orders
    type: Jetstream::Stream
    target: managed
    properties: {{ name: ORDERS, subjects: ["orders.>"], max_msgs: {max_msgs}, max_age: 86400 }}
  - label: shipping
    type: Jetstream::Consumer
    target: managed
    properties: {{ stream: "${{orders.name}}", name: shipping, ack_policy: explicit, ack_wait: 30 }}
  - label: settings
    type: Jetstream::KvBucket
    target: managed
    properties: {{ bucket: settings, history: 3, storage: {kv_storage} }}
"#
    );
    if adopted {
        doc.push_str(
            r#"  - label: handmade
    type: Jetstream::Stream
    target: managed
    properties: { name: HANDMADE }
  - label: by-hand
    type: Jetstream::Consumer
    target: managed
    properties: { stream: HANDMADE, name: by-hand }
"#,
        );
    }
    doc
}

async fn max_msgs(js: &jetstream::Context, name: &str) -> i64 {
    js.get_stream(name)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .config
        .max_messages
}

async fn stream_names(js: &jetstream::Context) -> Vec<String> {
    use futures::TryStreamExt;
    let mut names: Vec<String> = js.stream_names().try_collect().await.unwrap();
    names.sort();
    names
}

fn unmanaged(orrery: &Orrery) -> Vec<(String, String)> {
    let run = orrery.run(&["inventory", "--unmanaged", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let mut rows: Vec<(String, String)> = run
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["type"].as_str().unwrap().to_owned(),
                r["native_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}

async fn the_cycle(orrery: Orrery) {
    let managed = NatsServer::start().await;
    let js = jetstream::new(managed.client().await);
    let url = managed.url.clone();
    let first = orrery.write("stack.yaml", &stack(&url, 1000, "file", false));

    let run = orrery.run_file("apply", &first, &["--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("3 succeeded"), "{run:?}");
    assert_eq!(max_msgs(&js, "ORDERS").await, 1000);
    let consumer = js
        .get_stream("ORDERS")
        .await
        .unwrap()
        .consumer_info("shipping")
        .await
        .unwrap();
    assert_eq!(consumer.config.ack_wait.as_secs(), 30);
    assert_eq!(
        js.get_key_value("settings")
            .await
            .unwrap()
            .status()
            .await
            .unwrap()
            .history(),
        3
    );
    let run = orrery.run_file("plan", &first, &[]);
    assert_eq!(run.code, 0, "nothing to do after apply: {run:?}");

    // Update in place.
    let updated = orrery.write("stack.yaml", &stack(&url, 2000, "file", false));
    let run = orrery.run_file("apply", &updated, &["--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(max_msgs(&js, "ORDERS").await, 2000);

    // Replace: storage is create-only.
    js.get_key_value("settings")
        .await
        .unwrap()
        .put("k", "v".into())
        .await
        .unwrap();
    let replaced = orrery.write("stack.yaml", &stack(&url, 2000, "memory", false));
    let run = orrery.run_file("plan", &replaced, &["--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let actions: Vec<String> = run.json()["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["label"] == "settings")
        .map(|c| c["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(actions, ["replace"], "{run:?}");
    let run = orrery.run_file("apply", &replaced, &["--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let info = js
        .get_stream("KV_settings")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .clone();
    assert_eq!(info.config.storage, stream::StorageType::Memory);
    assert_eq!(info.state.messages, 0, "a new bucket");

    // Drift, made with a raw client.
    let mut config = js
        .get_stream("ORDERS")
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .config
        .clone();
    config.max_messages = 5;
    js.update_stream(config).await.unwrap();
    let run = orrery.run(&["drift", "--stack", "js", "--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let drifted = run.json()["drifted"].clone();
    assert_eq!(drifted.as_array().unwrap().len(), 1, "{run:?}");
    assert_eq!(drifted[0]["label"], "orders");
    assert_eq!(drifted[0]["fields"], serde_json::json!(["max_msgs"]));
    let run = orrery.run_file("apply", &replaced, &["--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(max_msgs(&js, "ORDERS").await, 2000, "apply restored it");
    let run = orrery.run(&["drift", "--stack", "js"]);
    assert_eq!(run.code, 0, "{run:?}");

    // Discovery: a stream and its consumer made by hand appear unmanaged.
    let handmade = js
        .create_stream(stream::Config {
            name: "HANDMADE".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    handmade
        .create_consumer(pull::Config {
            durable_name: Some("by-hand".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let run = orrery.run_file("discover", &replaced, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let expected = [
        (
            "Jetstream::Consumer".to_owned(),
            "HANDMADE/by-hand".to_owned(),
        ),
        ("Jetstream::Stream".to_owned(), "HANDMADE".to_owned()),
    ];
    assert_eq!(unmanaged(&orrery), expected);

    // Import both by native id; the document that declares them plans nothing.
    for (label, ty, id) in [
        ("handmade", "Jetstream::Stream", "HANDMADE"),
        ("by-hand", "Jetstream::Consumer", "HANDMADE/by-hand"),
    ] {
        let run = orrery.run(&[
            "import",
            "--stack",
            "js",
            "--label",
            label,
            "--type",
            ty,
            "--target",
            "managed",
            "--native-id",
            id,
        ]);
        assert_eq!(run.code, 0, "{run:?}");
    }
    let adopted = orrery.write("stack.yaml", &stack(&url, 2000, "memory", true));
    let run = orrery.run_file("plan", &adopted, &[]);
    assert_eq!(run.code, 0, "imported resources plan no change: {run:?}");
    let run = orrery.run_file("discover", &adopted, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(unmanaged(&orrery), []);

    let run = orrery.run(&["destroy", "--stack", "js", "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        stream_names(&js).await,
        Vec::<String>::new(),
        "everything destroyed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_cycle_embedded() {
    the_cycle(Orrery::embedded()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_cycle_through_a_satellite() {
    the_cycle(Orrery::through_a_satellite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_the_server_refuses_fails_the_apply_at_once_naming_the_stream() {
    let managed = NatsServer::start().await;
    let orrery = Orrery::embedded();
    let doc = format!(
        "stack: bad\ntargets:\n  - name: managed\n    plugin: jetstream\n    config: {{ servers: [\"{}\"] }}\n\
         resources:\n  - label: big\n    type: Jetstream::Stream\n    target: managed\n    properties: {{ name: BIG, replicas: 3 }}\n",
        managed.url
    );
    let file = orrery.write("bad.yaml", &doc);
    let run = orrery.run_file("apply", &file, &["--yes"]);
    assert_ne!(run.code, 0, "{run:?}");
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(
        all.contains("Jetstream::Stream `BIG`") && all.contains("replicas > 1"),
        "{run:?}"
    );
    assert!(
        all.contains("0 retries"),
        "a terminal error is not retried: {run:?}"
    );
}
