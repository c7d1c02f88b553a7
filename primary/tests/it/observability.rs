//! Observability end to end: a real nats-server, two satellites with their
//! plugin processes, the primary, and an OTLP receiver inside the test that
//! decodes the real export requests. One apply must be one trace across
//! every process, correctly parented; `/metrics` on the primary and the
//! satellites must count every operation, in valid Prometheus text.

use orrery_testing::nats;

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use common::fleet::{apply_through_nats, satellite_command, spread_stack, wait_registered, Killed};
use common::server::free_port;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use orrery_testing::wait::{wait_until_async, Wait};
use prost::Message;

/// One span as an OTLP exporter sent it.
#[derive(Clone, Debug)]
struct Seen {
    service: String,
    pid: i64,
    name: String,
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Vec<u8>,
}

/// An OTLP/HTTP receiver on a free port: `/v1/traces` requests are decoded
/// and kept, and so are the (service, metric name) pairs of `/v1/metrics`.
async fn otlp_receiver() -> (
    String,
    Arc<Mutex<Vec<Seen>>>,
    Arc<Mutex<Vec<(String, String)>>>,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let metrics = Arc::new(Mutex::new(Vec::new()));
    let keep_metrics = metrics.clone();
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            post(move |body: Bytes| {
                let keep = keep.clone();
                async move {
                    let request =
                        ExportTraceServiceRequest::decode(body).expect("a valid OTLP trace export");
                    let mut keep = keep.lock().unwrap();
                    for rs in request.resource_spans {
                        let attrs = rs.resource.map(|r| r.attributes).unwrap_or_default();
                        let attr = |key: &str| {
                            attrs
                                .iter()
                                .find(|a| a.key == key)
                                .and_then(|a| a.value.clone())
                                .and_then(|v| v.value)
                        };
                        let service = match attr("service.name") {
                            Some(Any::StringValue(s)) => s,
                            _ => String::new(),
                        };
                        let pid = match attr("process.pid") {
                            Some(Any::IntValue(p)) => p,
                            _ => 0,
                        };
                        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                            keep.push(Seen {
                                service: service.clone(),
                                pid,
                                name: span.name,
                                trace: span.trace_id,
                                id: span.span_id,
                                parent: span.parent_span_id,
                            });
                        }
                    }
                    axum::http::StatusCode::OK
                }
            }),
        )
        .route(
            "/v1/metrics",
            post(move |body: Bytes| {
                let keep = keep_metrics.clone();
                async move {
                    let request = ExportMetricsServiceRequest::decode(body)
                        .expect("a valid OTLP metrics export");
                    let mut keep = keep.lock().unwrap();
                    for rm in request.resource_metrics {
                        let service = rm
                            .resource
                            .iter()
                            .flat_map(|r| &r.attributes)
                            .find(|a| a.key == "service.name")
                            .and_then(|a| a.value.clone()?.value)
                            .map(|v| match v {
                                Any::StringValue(s) => s,
                                _ => String::new(),
                            })
                            .unwrap_or_default();
                        for m in rm.scope_metrics.into_iter().flat_map(|s| s.metrics) {
                            keep.push((service.clone(), m.name));
                        }
                    }
                    axum::http::StatusCode::OK
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen, metrics)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_apply_is_one_trace_across_primary_satellites_and_plugins() {
    let server = nats::NatsServer::start().await;
    let (otlp, seen, exported_metrics) = otlp_receiver().await;
    let scratch = common::Scratch::new();
    let satellite = |id: &str| {
        let log = std::fs::File::create(scratch.path().join(format!("{id}.log"))).unwrap();
        Killed(
            satellite_command(&server.url, id)
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
                .env("OTEL_BSP_SCHEDULE_DELAY", "100")
                // The relay's lines, and the plugin's own lines (its target),
                // re-emitted by the satellite (target `plugin`).
                .env(
                    "RUST_LOG",
                    "orrery_satellite=debug,orrery_plugin_sdk=info,orrery_plugin_local=debug,plugin=debug",
                )
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    };
    let _a = satellite("sat-a");
    let _b = satellite("sat-b");
    let client = server.client().await;
    wait_registered(&client, 2, Duration::from_secs(20)).await;

    let file = scratch.write("traced.yaml", &spread_stack("traced", 4, 6));
    let run = apply_through_nats(
        &file,
        &server.url,
        &scratch.path().join("state"),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("28 succeeded"), "{run:?}");
    // The primary pushed its metrics over OTLP as it exited.
    let exported = exported_metrics.lock().unwrap().clone();
    assert!(
        exported
            .iter()
            .any(|(service, name)| service == "orrery-primary"
                && name == "orrery.operation.duration"),
        "metrics exported over OTLP: {exported:?}"
    );

    // Satellites and plugins export every 100 ms; the primary flushed at exit.
    let wait = Wait::new("the apply's complete trace", Duration::from_secs(30))
        .every(Duration::from_millis(100));
    let looked = wait.poll_async(|| {
        let spans = seen.lock().unwrap().clone();
        let root = spans.iter().find(|s| s.name == "orrery.command");
        if let Some(root) = root {
            let trace: Vec<Seen> = spans
                .iter()
                .filter(|s| s.trace == root.trace)
                .cloned()
                .collect();
            // Complete once every handler's relay span and that relay's
            // parent in the primary have arrived too.
            let ids: BTreeSet<&[u8]> = trace.iter().map(|s| s.id.as_slice()).collect();
            let handlers: Vec<&Seen> = trace.iter().filter(|s| s.name == "plugin.handle").collect();
            let linked = |s: &Seen| {
                trace
                    .iter()
                    .find(|p| p.id == s.parent)
                    .is_some_and(|relay| ids.contains(relay.parent.as_slice()))
            };
            if handlers.len() >= 28 && handlers.iter().all(|h| linked(h)) {
                let trace = (root.trace.clone(), trace);
                return std::future::ready(Ok(trace));
            }
        }
        std::future::ready(Err(spans))
    });
    let (trace, spans) = looked.await.unwrap_or_else(|spans| {
        let names: Vec<_> = spans.iter().map(|s| (&s.service, &s.name)).collect();
        wait.fail(format_args!("spans seen: {names:?}"))
    });

    let processes: BTreeSet<(String, i64)> =
        spans.iter().map(|s| (s.service.clone(), s.pid)).collect();
    assert!(
        processes.len() >= 4,
        "spans from at least four processes (primary, two satellites, plugins): {processes:?}"
    );
    assert!(
        processes.iter().any(|(s, _)| s == "orrery-primary"),
        "{processes:?}"
    );
    assert_eq!(
        processes
            .iter()
            .filter(|(s, _)| s == "orrery-satellite")
            .count(),
        2,
        "both satellites relayed: {processes:?}"
    );
    assert!(
        processes.iter().any(|(s, _)| s == "orrery-plugin-local"),
        "{processes:?}"
    );

    let by_id: HashMap<&[u8], &Seen> = spans.iter().map(|s| (s.id.as_slice(), s)).collect();
    let parent = |s: &Seen| by_id.get(s.parent.as_slice()).copied();
    for handler in spans.iter().filter(|s| s.name == "plugin.handle") {
        assert_eq!(handler.service, "orrery-plugin-local");
        let relay = parent(handler).expect("a handler span has a parent in the trace");
        assert_eq!(relay.name, "satellite.relay", "handler parent: {relay:?}");
        assert_eq!(relay.service, "orrery-satellite");
        // The relay hangs under the primary's request of one attempt.
        let mut up = parent(relay).expect("a relay span has a parent in the trace");
        assert_eq!(up.service, "orrery-primary", "relay parent: {up:?}");
        while up.name != "orrery.attempt" {
            up = parent(up).unwrap_or_else(|| panic!("no attempt above {up:?}"));
            assert_eq!(up.service, "orrery-primary");
        }
        let operation = parent(up).expect("an attempt has an operation");
        assert_eq!(operation.name, "orrery.operation");
        assert_eq!(
            parent(operation).map(|c| c.name.as_str()),
            Some("orrery.command")
        );
    }

    // Log lines inside a relayed request name the trace.
    let trace_id = hex(&trace);
    let logs: String = ["sat-a", "sat-b"]
        .iter()
        .map(|id| std::fs::read_to_string(scratch.path().join(format!("{id}.log"))).unwrap())
        .collect();
    assert!(
        logs.lines()
            .any(|l| l.contains("relaying") && l.contains(&format!("trace_id={trace_id}"))),
        "satellite log lines carry trace id {trace_id}:\n{logs}"
    );
    // The plugin's lines from inside its handler, captured from its stderr.
    let creating: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("plugin=local") && l.contains("creating"))
        .collect();
    assert_eq!(creating.len(), 28, "one plugin line per create:\n{logs}");
    assert!(
        creating
            .iter()
            .all(|l| l.contains(&format!("trace_id={trace_id}")) && l.contains("request_id=")),
        "plugin lines carry the request's trace id {trace_id}:\n{}",
        creating.join("\n")
    );
}

fn http_get(url: &str) -> String {
    ureq::get(url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .body_mut()
        .read_to_string()
        .unwrap()
}

/// Sum of every sample named `metric` in a scrape, which must parse.
fn sum(text: &str, metric: &str) -> f64 {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .expect("valid Prometheus text");
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsampled_apply_records_no_spans_anywhere() {
    let server = nats::NatsServer::start().await;
    let (otlp, seen, exported_metrics) = otlp_receiver().await;
    let scratch = common::Scratch::new();
    let log = scratch.path().join("sat-a.log");
    let mut sat = Killed(
        satellite_command(&server.url, "sat-a")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
            // The SDK at `info` for its `plugin.handle` span, whose fields
            // the plugin's lines carry (docs/observability.md, Logs).
            .env(
                "RUST_LOG",
                "orrery_plugin_sdk=info,orrery_plugin_local=debug,plugin=debug",
            )
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let client = server.client().await;
    wait_registered(&client, 1, Duration::from_secs(20)).await;
    let file = scratch.write("quiet.yaml", &spread_stack("quiet", 2, 4));
    let run = apply_through_nats(
        &file,
        &server.url,
        &scratch.path().join("state"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp),
            ("ORRERY_TRACE_SAMPLING", "0"),
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    // A satellite flushes what it recorded as it stops.
    let stopped = Command::new("kill")
        .args(["-TERM", &sat.0.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let sat = &mut sat.0;
    wait_until_async("the satellite stopped", Duration::from_secs(30), || {
        std::future::ready(sat.try_wait().unwrap().is_some())
    })
    .await;
    // The primary exported at exit (its metrics arrived), and nothing it
    // sent was marked sampled, so no process recorded a span.
    assert!(
        exported_metrics
            .lock()
            .unwrap()
            .iter()
            .any(|(service, _)| service == "orrery-primary"),
        "the primary exported"
    );
    // Untraced, the plugin's lines from inside its handler still name
    // their request (the unexported `plugin.handle` span's fields).
    let logs = std::fs::read_to_string(&log).unwrap();
    let creating: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("plugin=local") && l.contains("creating"))
        .collect();
    assert_eq!(creating.len(), 10, "one plugin line per create:\n{logs}");
    assert!(
        creating
            .iter()
            .all(|l| l.contains("request_id=") && !l.contains("request_id= ")),
        "plugin lines carry their request id:\n{}",
        creating.join("\n")
    );
    let spans = seen.lock().unwrap().clone();
    assert!(
        spans.is_empty(),
        "spans of an unsampled apply: {:?}",
        spans
            .iter()
            .map(|s| (&s.service, &s.name))
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_every_operation_on_the_primary_and_the_satellites() {
    let server = nats::NatsServer::start().await;
    let scratch = common::Scratch::new();
    let ports = [free_port(), free_port()];
    let _a = Killed(
        satellite_command(&server.url, "sat-a")
            .args(["--health-port", &ports[0].to_string()])
            .spawn()
            .unwrap(),
    );
    let _b = Killed(
        satellite_command(&server.url, "sat-b")
            .args(["--health-port", &ports[1].to_string()])
            .spawn()
            .unwrap(),
    );
    let client = server.client().await;
    wait_registered(&client, 2, Duration::from_secs(20)).await;

    let port = free_port();
    let _primary = Killed(
        Command::new(env!("CARGO_BIN_EXE_orrery"))
            .args(["primary", "--insecure-no-auth", "--nats-url", &server.url])
            .env("ORRERY_LISTEN", format!("127.0.0.1:{port}"))
            .env("ORRERY_DATA_DIR", scratch.path().join("state"))
            .env("ORRERY_STACK_DIR", scratch.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let doc = spread_stack("metered", 3, 5);
    let report = tokio::task::spawn_blocking(move || {
        Wait::new("the primary ready", Duration::from_secs(30))
            .every(Duration::from_millis(50))
            .until(|| ureq::get(format!("{base}/readyz")).call().is_ok());
        let mut answer = ureq::post(format!("{base}/v1/stacks/apply"))
            .send_json(serde_json::json!({ "document": doc }))
            .expect("apply accepted");
        let answer: serde_json::Value = answer.body_mut().read_json().unwrap();
        let id = answer["command_id"]
            .as_str()
            .expect("a command id")
            .to_owned();
        Wait::new("the apply ended", Duration::from_secs(60))
            .every(Duration::from_millis(50))
            .until_ok(|| {
                let command: serde_json::Value =
                    serde_json::from_str(&http_get(&format!("{base}/v1/commands/{id}"))).unwrap();
                if command["status"] != "running" && command["active"] == false {
                    Ok(())
                } else {
                    Err(command)
                }
            });
        let command = http_get(&format!("{base}/v1/commands/{id}"));
        // The satellites are counted half a second after start.
        let metrics = Wait::new("a satellite count in /metrics", Duration::from_secs(10))
            .every(Duration::from_millis(50))
            .until_ok(|| {
                let metrics = http_get(&format!("{base}/metrics"));
                if metrics.contains("\norrery_satellites ") {
                    Ok(metrics)
                } else {
                    Err(metrics)
                }
            });
        (
            serde_json::from_str::<serde_json::Value>(&command).unwrap(),
            metrics,
        )
    })
    .await
    .unwrap();
    let (command, primary_metrics) = report;
    assert_eq!(command["status"], "completed", "{command}");

    // 3 directories + 15 files, each created once.
    let operations = 18.0;
    assert_eq!(
        sum(&primary_metrics, "orrery_operation_duration_seconds_count"),
        operations,
        "{primary_metrics}"
    );
    assert!(
        primary_metrics.contains("outcome=\"succeeded\"")
            && primary_metrics.contains("plugin=\"local\""),
        "{primary_metrics}"
    );
    assert_eq!(
        sum(&primary_metrics, "orrery_requests_in_flight"),
        0.0,
        "{primary_metrics}"
    );
    assert_eq!(
        sum(&primary_metrics, "orrery_satellites"),
        2.0,
        "{primary_metrics}"
    );

    let satellites: Vec<String> = tokio::task::spawn_blocking(move || {
        ports
            .iter()
            .map(|p| http_get(&format!("http://127.0.0.1:{p}/metrics")))
            .collect()
    })
    .await
    .unwrap();
    let relayed: f64 = satellites
        .iter()
        .map(|m| sum(m, "orrery_relay_duration_seconds_count"))
        .sum();
    assert_eq!(relayed, operations, "{satellites:?}");
    for m in &satellites {
        assert_eq!(sum(m, "orrery_plugin_up"), 1.0, "{m}");
        assert_eq!(sum(m, "orrery_nats_connected"), 1.0, "{m}");
    }
}
