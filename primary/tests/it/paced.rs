//! Resuming and discovery obey a plugin's rate limit as commands do: the
//! same token bucket per `namespace/target`, the process's, shared by every
//! run at once. Every request reaching the plugin is counted by a transport
//! wrapper; the time is measured here, by the test, not by the code under
//! test: requests ≤ burst + rate·t.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, SendFuture, Transport};
use orrery_primary::apply::{Executor, Options};
use orrery_primary::discovery;
use orrery_primary::plan::{self, Mode, SecretHasher};
use orrery_primary::scheduler::{BucketLimit, RateRegistry};
use orrery_primary::stack::{self, Catalog};
use orrery_primary::state::{self, OpStatus, OperationRecord};
use orrery_schema::{CreateRequest, PropertyMap, RateLimit, Request, Target, Value};

const RATE: f64 = 40.0;
const BURST: u32 = 2;

/// Counts the requests that pass through it, and when each was sent.
struct Counting {
    inner: LocalBus,
    sent: AtomicU64,
    at: Mutex<Vec<Instant>>,
}

impl Transport for Counting {
    fn send<'a>(
        &'a self,
        plugin: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> SendFuture<'a> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        self.at.lock().unwrap().push(Instant::now());
        self.inner.send(plugin, request, timeout)
    }
}

async fn testbed() -> (Arc<Counting>, Catalog) {
    testbed_announcing(None).await
}

/// The testbed, its announcement carrying `rate_limit` when given.
async fn testbed_announcing(rate_limit: Option<RateLimit>) -> (Arc<Counting>, Catalog) {
    let host = PluginHost::start(PluginSpec::new(orrery_testing::binary(
        "orrery-plugin-testbed",
    )))
    .await
    .unwrap();
    let mut announcement = host.announcement().clone();
    if let Some(rate_limit) = rate_limit {
        announcement.rate_limit = rate_limit;
    }
    let mut catalog = Catalog::new();
    catalog.insert(announcement);
    let transport = Arc::new(Counting {
        inner: LocalBus::new([host]),
        sent: AtomicU64::new(0),
        at: Mutex::new(Vec::new()),
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
        ..Default::default()
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
        RateRegistry::local(),
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
        ..Default::default()
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
        &RateRegistry::local(),
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

/// Records of stack `s` on target `t` of the testbed, naming `first` as
/// managed, so that discovery finds the target.
fn discoverable_store(first: &str) -> (tempfile::TempDir, state::Store) {
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
    store
        .put_resource(&state::StoredResource {
            stack: "s".into(),
            label: "first".into(),
            resource_type: "Testbed::Noop::Thing".into(),
            target: "t".into(),
            plugin: "testbed".into(),
            native_id: first.into(),
            managed: true,
            ..Default::default()
        })
        .unwrap();
    (dir, store)
}

/// Two applies (stacks `a` and `b`, each creating 20 things on target `t`
/// of the testbed) and a discovery of `t` listing 20 things one per page,
/// all at once in one process: 60 requests or more on one bucket, whose
/// limit (20/s, burst 3) the plugin announces. The three runs share it,
/// so over the test's clock from the start, the k-th request reaching the
/// plugin comes no sooner than k ≤ burst + rate·t (+1 for rounding)
/// allows. With a bucket per run, each run would get the whole rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_commands_and_a_discovery_on_one_target_share_its_rate_limit() {
    const RATE: f64 = 20.0;
    const BURST: u32 = 3;
    const THINGS: usize = 20;
    let (transport, catalog) = testbed_announcing(Some(RateLimit {
        requests_per_second: RATE,
        burst: BURST,
        max_in_flight: 0,
    }))
    .await;
    // What discovery lists: things on `t` before the applies start.
    let target = Target {
        name: "t".into(),
        config: PropertyMap::new(),
        ..Default::default()
    };
    for i in 0..THINGS {
        let name = format!("listed-{i:03}");
        create(&transport, &target, "Testbed::Noop::Thing", i, &name).await;
    }
    // The discovery's records are kept in a store of their own, so that
    // the things the applies create meanwhile cannot meet the applies'
    // records; the bucket is the same, `Testbed/t`.
    let (_listed_dir, listed_store) = discoverable_store("listed-000");
    let targets = discovery::targets_to_discover(listed_store.as_ref(), None, None).unwrap();
    assert_eq!(targets.len(), 1);

    let dir = tempfile::tempdir().unwrap();
    let store = state::open_dir(dir.path()).unwrap();
    let hasher = SecretHasher::new(store.secret_key().unwrap());
    // The process's one registry, as the service's plugin pool holds it.
    let rates = RateRegistry::local();
    let apply = |name: &'static str| {
        let mut doc =
            format!("stack: {name}\ntargets:\n  - name: t\n    plugin: testbed\nresources:\n");
        for i in 0..THINGS {
            doc.push_str(&format!(
                "  - label: r{i}\n    type: Testbed::Noop::Thing\n    target: t\n    properties: {{ name: {name}-{i:03} }}\n"
            ));
        }
        let parsed = stack::parse(&format!("{name}.yaml"), &doc, "/").unwrap();
        let graph = stack::validate(&parsed, &catalog).unwrap();
        let plan = plan::plan(&parsed, &graph, &catalog, &[], Mode::Reconcile, &hasher);
        let executor = Executor::new(
            transport.clone(),
            store.clone(),
            catalog.clone(),
            hasher.clone(),
            Options::default(),
            rates.clone(),
        );
        async move {
            executor
                .run(
                    &format!("c-{name}"),
                    "apply",
                    name,
                    Some((&parsed, &graph)),
                    &plan,
                    &[],
                )
                .await
                .unwrap()
        }
    };
    let options = discovery::Options {
        page_size: 1,
        ..discovery::Options::default()
    };
    let discover = discovery::discover(
        transport.as_ref(),
        &catalog,
        &rates,
        listed_store.as_ref(),
        &targets,
        &options,
    );

    transport.at.lock().unwrap().clear();
    let started = Instant::now();
    let (a, b, listed) = tokio::time::timeout(Duration::from_secs(120), async {
        tokio::join!(apply("a"), apply("b"), discover)
    })
    .await
    .expect("the three runs end");
    let mut at = std::mem::take(&mut *transport.at.lock().unwrap());

    assert!(a.ok() && b.ok(), "{a:?} {b:?}");
    assert_eq!((a.succeeded, b.succeeded), (THINGS, THINGS));
    let listed = listed.unwrap();
    assert!(listed.failures.is_empty(), "{listed:?}");
    assert!(listed.pages >= THINGS as u64, "{listed:?}");
    assert!(at.len() >= 3 * THINGS, "{} requests", at.len());
    at.sort();
    for (i, t) in at.iter().enumerate() {
        let k = i + 1;
        let elapsed = t.duration_since(started);
        let allowed = f64::from(BURST) + RATE * elapsed.as_secs_f64() + 1.0;
        assert!(
            k as f64 <= allowed,
            "request {k} of {} reached the plugin {elapsed:?} after the start, \
             above {BURST} + {RATE}/s (+1): {allowed:.1} allowed",
            at.len()
        );
    }
}
