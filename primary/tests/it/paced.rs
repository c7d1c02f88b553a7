//! Resuming and discovery obey a plugin's rate limit as commands do: the
//! same token bucket per `namespace/target`. Every request reaching the
//! plugin is counted by a transport wrapper; the time is measured here, by
//! the test, not by the code under test: requests ≤ burst + rate·t.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, SendFuture, Transport};
use orrery_primary::apply::{Executor, Options};
use orrery_primary::discovery;
use orrery_primary::plan::SecretHasher;
use orrery_primary::scheduler::BucketLimit;
use orrery_primary::stack::{self, Catalog};
use orrery_primary::state::{self, OpStatus, OperationRecord};
use orrery_schema::{CreateRequest, PropertyMap, Request, Target, Value};

const RATE: f64 = 40.0;
const BURST: u32 = 2;

/// Counts the requests that pass through it.
struct Counting {
    inner: LocalBus,
    sent: AtomicU64,
}

impl Transport for Counting {
    fn send<'a>(
        &'a self,
        plugin: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> SendFuture<'a> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        self.inner.send(plugin, request, timeout)
    }
}

async fn testbed() -> (Arc<Counting>, Catalog) {
    let host = PluginHost::start(PluginSpec::new(orrery_testing::binary(
        "orrery-plugin-testbed",
    )))
    .await
    .unwrap();
    let mut catalog = Catalog::new();
    catalog.insert(host.announcement().clone());
    let transport = Arc::new(Counting {
        inner: LocalBus::new([host]),
        sent: AtomicU64::new(0),
    });
    (transport, catalog)
}

/// Creates thing number `i` called `name` on `target`, straight through the
/// transport (as a primary would have).
async fn create(transport: &Counting, target: &Target, resource_type: &str, i: usize, name: &str) {
    let request = Request::Create(CreateRequest {
        request_id: format!("create-{i}"),
        resource_type: resource_type.into(),
        label: format!("r{i}"),
        target: target.clone(),
        properties: [("name".to_owned(), Value::from(name))].into(),
    });
    transport
        .send("testbed", &request, Duration::from_secs(10))
        .await
        .unwrap();
}

fn limits() -> std::collections::HashMap<String, BucketLimit> {
    [(
        "Testbed/t".to_owned(),
        BucketLimit {
            rate_per_sec: RATE,
            burst: BURST,
        },
    )]
    .into()
}

fn within_the_limit(requests: u64, elapsed: Duration) -> bool {
    requests as f64 <= BURST as f64 + RATE * elapsed.as_secs_f64()
}

/// Ten asynchronous creates were in progress when their primary stopped;
/// each needs eight more status polls. Resuming polls them all — 80 or
/// more requests, which unpaced take well under a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_polls_within_the_rate_limit() {
    const THINGS: usize = 10;
    const POLLS: u64 = 8;
    let (transport, catalog) = testbed().await;
    let mut doc = format!(
        "stack: paced\ntargets:\n  - name: t\n    plugin: testbed\n    config: {{ polls: {POLLS} }}\nresources:\n"
    );
    for i in 0..THINGS {
        doc.push_str(&format!(
            "  - label: a{i}\n    type: Testbed::Async::Thing\n    target: t\n    properties: {{ name: thing-{i} }}\n"
        ));
    }
    let parsed = stack::parse("paced.yaml", &doc, "/").unwrap();
    let graph = stack::validate(&parsed, &catalog).unwrap();
    let target = Target {
        name: "t".into(),
        config: parsed.targets[0].config.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    let store = state::open_dir(dir.path()).unwrap();
    store.begin_command("c1", "paced", "apply").unwrap();
    store.put_targets("paced", &parsed.targets).unwrap();
    // What the stopped primary had done: sent each create, recorded its
    // `InProgress` answer.
    for i in 0..THINGS {
        create(
            &transport,
            &target,
            "Testbed::Async::Thing",
            i,
            &format!("thing-{i}"),
        )
        .await;
        store
            .put_operation(
                "c1",
                &OperationRecord {
                    label: format!("a{i}"),
                    operation: "create".into(),
                    status: OpStatus::InProgress,
                    request_id: format!("create-{i}"),
                    attempts: 1,
                    native_id: Some(format!("thing-{i}")),
                    context: Some(Value::Map(
                        [("polls".to_owned(), Value::from(0u64))]
                            .into_iter()
                            .collect(),
                    )),
                    ..Default::default()
                },
            )
            .unwrap();
    }
    let before = transport.sent.load(Ordering::SeqCst);
    let executor = Executor::new(
        transport.clone(),
        store.clone(),
        catalog,
        SecretHasher::new(store.secret_key().unwrap()),
        Options {
            rate_overrides: limits(),
            ..Options::default()
        },
    );
    let started = Instant::now();
    let resumed = executor.resume(&parsed, &graph).await.unwrap().unwrap();
    let elapsed = started.elapsed();
    let requests = transport.sent.load(Ordering::SeqCst) - before;
    assert_eq!(resumed.resolved, THINGS, "{resumed:?}");
    assert!(
        requests >= THINGS as u64 * (POLLS - 1),
        "every create was polled to its end: {requests} requests"
    );
    assert!(
        within_the_limit(requests, elapsed),
        "{requests} requests in {elapsed:?} exceed {BURST} + {RATE}/s"
    );
}

/// Sixty testbed things listed one per page: sixty list requests or more,
/// which unpaced take well under a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_within_the_rate_limit() {
    const THINGS: usize = 60;
    let (transport, catalog) = testbed().await;
    let target = Target {
        name: "t".into(),
        config: PropertyMap::new(),
    };
    for i in 0..THINGS {
        create(
            &transport,
            &target,
            "Testbed::Noop::Thing",
            i,
            &format!("thing-{i:03}"),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = state::open_dir(dir.path()).unwrap();
    store
        .put_targets(
            "s",
            &[stack::TargetDecl {
                name: "t".into(),
                plugin: "testbed".into(),
                config: PropertyMap::new(),
            }],
        )
        .unwrap();
    // Stacks are found by their records: thing-000 is managed by `s`.
    store
        .put_resource(&state::StoredResource {
            stack: "s".into(),
            label: "first".into(),
            resource_type: "Testbed::Noop::Thing".into(),
            target: "t".into(),
            plugin: "testbed".into(),
            native_id: "thing-000".into(),
            managed: true,
            ..Default::default()
        })
        .unwrap();
    let targets = discovery::targets_to_discover(store.as_ref(), None, None).unwrap();
    assert_eq!(targets.len(), 1);
    let options = discovery::Options {
        page_size: 1,
        rate_overrides: limits(),
        ..discovery::Options::default()
    };
    let before = transport.sent.load(Ordering::SeqCst);
    let started = Instant::now();
    let report = discovery::discover(
        transport.as_ref(),
        &catalog,
        store.as_ref(),
        &targets,
        &options,
    )
    .await
    .unwrap();
    let elapsed = started.elapsed();
    let requests = transport.sent.load(Ordering::SeqCst) - before;
    assert!(report.failures.is_empty(), "{report:?}");
    assert_eq!(report.unmanaged, THINGS as u64 - 1, "{report:?}");
    assert!(requests >= THINGS as u64, "{requests} requests");
    assert!(
        within_the_limit(requests, elapsed),
        "{requests} requests in {elapsed:?} exceed {BURST} + {RATE}/s"
    );
}
