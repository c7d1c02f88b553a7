//! Crash-resume through NATS: a real nats-server, two `orrery-satellite`
//! processes running the testbed plugin (one per target, so each target's
//! things live in one plugin process, which outlives the primary), and a
//! 100-resource stack of `Testbed::Async::Thing` applied with
//! `orrery apply --nats-url`. The `orrery` process is killed with SIGKILL at
//! five points, chosen by watching its state store (read-only); after each
//! kill `orrery apply --yes` runs again and must finish the same command
//! (`completed`), leave the inventory an uninterrupted apply leaves, and
//! every real thing must exist exactly once.
//!
//! Two points are reached through the executor's test seam
//! `ORRERY_TEST_HANG_AT` (the process stops there until killed): the first
//! operation and the command's end are a microsecond from their neighbours.

use orrery_testing::nats;

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::crash::{kill_when, Killed, Seen};
use futures::StreamExt;
use orrery_bus::bus::NatsBus;
use orrery_plugin_sdk::Answer;
use orrery_schema::{ListRequest, PropertyMap, Request, Target, Value};

const RESOURCES: usize = 100;
/// The smaller document of the delete scenario keeps this many.
const KEPT: usize = 60;
const TARGETS: [&str; 2] = ["ta", "tb"];
/// Each testbed request takes this long, so a kill lands mid-apply.
const DELAY_MS: u64 = 15;
const CONCURRENCY: &str = "8";

fn satellite(url: &str, id: &str, target: &str) -> Killed {
    Killed(
        Command::new(nats::binary("orrery-satellite"))
            .args(["--nats-url", url, "--id", id, "--target", target])
            .arg("--plugin")
            .arg(nats::binary("orrery-plugin-testbed"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Satellite ids answering `$SRV.PING`.
async fn satellites(client: &async_nats::Client) -> usize {
    let inbox = client.new_inbox();
    let mut sub = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply("$SRV.PING.orrery-satellite", inbox, "".into())
        .await
        .unwrap();
    let mut ids = std::collections::HashSet::new();
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(300), sub.next()).await {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&msg.payload) {
            if let Some(id) = v["id"].as_str() {
                ids.insert(id.to_owned());
            }
        }
    }
    ids.len()
}

/// One satellite per target, both answering `$SRV.PING`, and a client.
async fn two_satellites(server: &nats::NatsServer) -> (Killed, Killed, async_nats::Client) {
    let a = satellite(&server.url, "sat-a", TARGETS[0]);
    let b = satellite(&server.url, "sat-b", TARGETS[1]);
    let client = server.client().await;
    orrery_testing::wait_for_async(
        "2 satellites answering $SRV.PING",
        Duration::from_secs(20),
        || {
            let client = &client;
            async move {
                let n = satellites(client).await;
                if n >= 2 {
                    Ok(())
                } else {
                    Err(format!("{n} answered"))
                }
            }
        },
    )
    .await;
    (a, b, client)
}

/// The stack document: `n` things named `{prefix}-thing-{i}` spread over the
/// two targets.
fn document(prefix: &str, n: usize) -> String {
    let mut doc = String::from("stack: crash\ntargets:\n");
    for t in TARGETS {
        doc.push_str(&format!(
            "  - name: {t}\n    plugin: testbed\n    config: {{ polls: 2, delay_ms: {DELAY_MS} }}\n"
        ));
    }
    doc.push_str("resources:\n");
    for i in 0..n {
        doc.push_str(&format!(
            "  - label: t{i:03}\n    type: Testbed::Async::Thing\n    target: {}\n    properties: {{ name: {prefix}-thing-{i:03}, value: {i} }}\n",
            TARGETS[i % 2]
        ));
    }
    doc
}

/// One scenario's scratch directory and NATS URL.
struct Env {
    scratch: common::Scratch,
    url: String,
    prefix: String,
}

impl Env {
    fn new(url: &str, prefix: &str) -> Env {
        Env {
            scratch: common::Scratch::new(),
            url: url.to_owned(),
            prefix: prefix.to_owned(),
        }
    }

    fn state(&self) -> PathBuf {
        self.scratch.path().join("state")
    }

    fn doc(&self, n: usize) -> PathBuf {
        self.scratch
            .write(&format!("stack-{n}.yaml"), &document(&self.prefix, n))
    }

    fn orrery(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
        cmd.args(args)
            .env("ORRERY_DATA_DIR", self.state())
            .env("ORRERY_PLUGIN_DIR", "/nonexistent")
            .env_remove("ORRERY_DATABASE_URL")
            .env_remove("ORRERY_TEST_HANG_AT");
        cmd
    }

    /// `orrery apply FILE --yes --nats-url URL` to its end.
    fn apply(&self, doc: &Path) -> common::Run {
        let out = self
            .orrery(&[
                "apply",
                doc.to_str().unwrap(),
                "--yes",
                "--nats-url",
                &self.url,
                "--concurrency",
                CONCURRENCY,
            ])
            .output()
            .unwrap();
        common::Run::from(out)
    }

    /// The same apply, in the background, optionally stopping at a seam.
    fn spawn_apply(&self, doc: &Path, hang_at: Option<&str>) -> Killed {
        let mut cmd = self.orrery(&[
            "apply",
            doc.to_str().unwrap(),
            "--yes",
            "--nats-url",
            &self.url,
            "--concurrency",
            CONCURRENCY,
        ]);
        if let Some(point) = hang_at {
            cmd.env("ORRERY_TEST_HANG_AT", point);
        }
        Killed(
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    /// `orrery inventory --output json`, with this scenario's thing prefix
    /// replaced so scenarios compare.
    fn inventory(&self) -> serde_json::Value {
        let run = common::Run::from(
            self.orrery(&["inventory", "--output", "json"])
                .output()
                .unwrap(),
        );
        assert_eq!(run.code, 0, "{run:?}");
        let text = run
            .stdout
            .replace(&format!("\"{}-thing-", self.prefix), "\"X-thing-");
        serde_json::from_str(&text).unwrap()
    }

    /// `orrery status --output json` of the latest command.
    fn status(&self) -> serde_json::Value {
        let run = common::Run::from(
            self.orrery(&["status", "--output", "json"])
                .output()
                .unwrap(),
        );
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"))
    }
}

/// Every thing of this scenario on both targets, by name → count, listed
/// through NATS page by page.
async fn things(bus: &NatsBus, prefix: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for t in TARGETS {
        let mut config = PropertyMap::new();
        config.insert("polls".into(), Value::from(2u64));
        let mut token = None;
        loop {
            let request = Request::List(ListRequest {
                parent: None,
                request_id: format!("list-{prefix}-{t}"),
                resource_type: "Testbed::Async::Thing".into(),
                target: Target {
                    name: t.into(),
                    config: config.clone(),
                    ..Default::default()
                },
                page_size: 17,
                page_token: token.take(),
            });
            let page = match bus
                .send("testbed", &request, Duration::from_secs(10))
                .await
                .unwrap()
            {
                Answer::List(page) => page,
                other => panic!("list answered {other:?}"),
            };
            for r in page.resources {
                if r.native_id.starts_with(&format!("{prefix}-")) {
                    *out.entry(r.native_id).or_insert(0) += 1;
                }
            }
            match page.next_page_token {
                Some(next) if !next.is_empty() => token = Some(next),
                _ => break,
            }
        }
    }
    out
}

fn expected_things(prefix: &str, n: usize) -> BTreeMap<String, usize> {
    (0..n)
        .map(|i| (format!("{prefix}-thing-{i:03}"), 1))
        .collect()
}

/// After a kill: applies again and checks the outcome.
async fn resume_and_check(
    env: &Env,
    bus: &NatsBus,
    doc: &Path,
    n: usize,
    killed: &Seen,
    expected: &serde_json::Value,
    what: &str,
) {
    let started = Instant::now();
    let run = env.apply(doc);
    assert_eq!(run.code, 0, "{what}: the apply after the kill: {run:?}");
    let (killed_id, _) = killed.command.clone().unwrap();
    assert!(
        run.stdout
            .contains(&format!("Resuming interrupted command {killed_id}")),
        "{what}: resumes the killed command: {run:?}"
    );
    let resumed_line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("Resuming"))
        .unwrap();
    eprintln!(
        "{what}: {resumed_line} ({} ms)",
        started.elapsed().as_millis()
    );
    let status = env.status();
    assert_eq!(status["id"], killed_id.as_str(), "{what}: the same command");
    assert_eq!(status["status"], "completed", "{what}: {status}");
    assert_eq!(
        &env.inventory(),
        expected,
        "{what}: the inventory of an uninterrupted apply"
    );
    assert_eq!(
        things(bus, &env.prefix).await,
        expected_things(&env.prefix, n),
        "{what}: every real thing exists exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_primary_at_five_points_loses_and_duplicates_nothing() {
    let started = Instant::now();
    let server = nats::NatsServer::start().await;
    let (_a, _b, client) = two_satellites(&server).await;
    let bus = NatsBus::new(client.clone());

    // The uninterrupted result: the full stack, then the smaller one.
    let base = Env::new(&server.url, "base");
    let (full, small) = (base.doc(RESOURCES), base.doc(KEPT));
    let run = base.apply(&full);
    assert_eq!(run.code, 0, "{run:?}");
    let expected_full = base.inventory();
    assert_eq!(expected_full.as_array().unwrap().len(), RESOURCES);
    assert_eq!(
        things(&bus, "base").await,
        expected_things("base", RESOURCES)
    );
    let run = base.apply(&small);
    assert_eq!(run.code, 0, "{run:?}");
    let expected_small = base.inventory();
    assert_eq!(expected_small.as_array().unwrap().len(), KEPT);
    assert_eq!(things(&bus, "base").await, expected_things("base", KEPT));
    eprintln!(
        "uninterrupted applies: {} ms",
        started.elapsed().as_millis()
    );

    // 1. Before the first operation: the command is recorded, nothing sent.
    let env = Env::new(&server.url, "p1");
    let doc = env.doc(RESOURCES);
    let mut apply = env.spawn_apply(&doc, Some("before_first_operation"));
    let seen = kill_when(
        &env.state(),
        &mut apply.0,
        "before the first operation",
        |_| true,
    );
    assert_eq!(seen.total(), 0, "{seen:?}");
    resume_and_check(&env, &bus, &doc, RESOURCES, &seen, &expected_full, "1").await;

    // 2. Mid-way, operations in flight (sent, unanswered).
    let env = Env::new(&server.url, "p2");
    let doc = env.doc(RESOURCES);
    let mut apply = env.spawn_apply(&doc, None);
    let seen = kill_when(&env.state(), &mut apply.0, "mid-way", |s| {
        s.count("create", "succeeded") >= 30 && s.count("create", "running") >= 1
    });
    assert!(seen.count("create", "succeeded") < RESOURCES, "{seen:?}");
    resume_and_check(&env, &bus, &doc, RESOURCES, &seen, &expected_full, "2").await;

    // 3. InProgress operations outstanding.
    let env = Env::new(&server.url, "p3");
    let doc = env.doc(RESOURCES);
    let mut apply = env.spawn_apply(&doc, None);
    let seen = kill_when(&env.state(), &mut apply.0, "in progress", |s| {
        s.count("create", "in_progress") >= 6 && s.count("create", "succeeded") >= 10
    });
    assert!(seen.count("create", "in_progress") >= 1, "{seen:?}");
    resume_and_check(&env, &bus, &doc, RESOURCES, &seen, &expected_full, "3").await;

    // 4. During deletes: the full stack, then a smaller document.
    let env = Env::new(&server.url, "p4");
    let (full, small) = (env.doc(RESOURCES), env.doc(KEPT));
    let run = env.apply(&full);
    assert_eq!(run.code, 0, "{run:?}");
    let mut apply = env.spawn_apply(&small, None);
    let seen = kill_when(&env.state(), &mut apply.0, "during deletes", |s| {
        s.count("delete", "succeeded") >= 8
            && s.count("delete", "running") + s.count("delete", "in_progress") >= 1
    });
    assert!(
        seen.count("delete", "succeeded") < RESOURCES - KEPT,
        "{seen:?}"
    );
    resume_and_check(&env, &bus, &small, KEPT, &seen, &expected_small, "4").await;

    // 5. Right before the command completes: every operation recorded.
    let env = Env::new(&server.url, "p5");
    let doc = env.doc(RESOURCES);
    let mut apply = env.spawn_apply(&doc, Some("before_finish"));
    let seen = kill_when(
        &env.state(),
        &mut apply.0,
        "before the command completes",
        |s| s.count("create", "succeeded") == RESOURCES,
    );
    resume_and_check(&env, &bus, &doc, RESOURCES, &seen, &expected_full, "5").await;

    eprintln!("crash-resume: {} ms in all", started.elapsed().as_millis());
}

/// Cloud-like things: the plugin assigns ids, only the request id
/// deduplicates, and a create takes this long on the provider's side.
const CLOUD_CREATE_MS: u64 = 1_500;
const CLOUD_RESOURCES: usize = 48;

/// `n` `Testbed::Cloud::Thing`s over both targets, kept in `store`.
fn cloud_document(store: &Path, n: usize) -> String {
    let mut doc = String::from("stack: cloud\ntargets:\n");
    for t in TARGETS {
        doc.push_str(&format!(
            "  - name: {t}\n    plugin: testbed\n    config: {{ store: \"{}\", create_ms: {CLOUD_CREATE_MS} }}\n",
            store.display()
        ));
    }
    doc.push_str("resources:\n");
    for i in 0..n {
        doc.push_str(&format!(
            "  - label: c{i:03}\n    type: Testbed::Cloud::Thing\n    target: {}\n    properties: {{ name: cloud-{i:03}, value: {i} }}\n",
            TARGETS[i % 2]
        ));
    }
    doc
}

/// The scenario, counted in the plugin's world: three SIGKILLs of
/// `orrery apply` while creates that take seconds are in flight, then an
/// apply to the end. Every desired thing exists exactly once at the
/// provider, and the stack records each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_primary_during_slow_cloud_creates_makes_no_duplicate() {
    let started = Instant::now();
    let server = nats::NatsServer::start().await;
    let (_a, _b, _client) = two_satellites(&server).await;

    let env = Env::new(&server.url, "cloud");
    let store = env.scratch.path().join("cloud.sqlite");
    let doc = env
        .scratch
        .write("cloud.yaml", &cloud_document(&store, CLOUD_RESOURCES));
    let mut command = None;
    for (kill, at_least) in [8, 20, 32].into_iter().enumerate() {
        let mut apply = env.spawn_apply(&doc, None);
        let seen = kill_when(&env.state(), &mut apply.0, "creates in flight", |s| {
            s.count("create", "succeeded") >= at_least && s.count("create", "running") >= 1
        });
        assert!(
            seen.count("create", "succeeded") < CLOUD_RESOURCES,
            "kill {kill}: {seen:?}"
        );
        eprintln!(
            "kill {kill}: {} created, {} in flight",
            seen.count("create", "succeeded"),
            seen.count("create", "running")
        );
        let id = seen.command.clone().unwrap().0;
        assert_eq!(
            *command.get_or_insert(id.clone()),
            id,
            "one command throughout"
        );
    }
    let run = env.apply(&doc);
    assert_eq!(run.code, 0, "the apply after the kills: {run:?}");
    let status = env.status();
    assert_eq!(status["id"], command.unwrap().as_str(), "the same command");
    assert_eq!(status["status"], "completed", "{status}");

    let census = orrery_plugin_testbed::store::census(&store).unwrap();
    let duplicated: Vec<_> = census.rows.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicated.is_empty(),
        "{} duplicates at the provider: {duplicated:?}",
        census.duplicates()
    );
    assert_eq!(census.rows.len(), CLOUD_RESOURCES, "every thing exists");
    let inventory = env.inventory();
    let recorded = inventory.as_array().unwrap();
    assert_eq!(recorded.len(), CLOUD_RESOURCES, "{inventory}");
    let ids: std::collections::BTreeSet<_> = recorded
        .iter()
        .map(|r| r["native_id"].to_string())
        .collect();
    assert_eq!(
        ids.len(),
        CLOUD_RESOURCES,
        "each recorded once: {inventory}"
    );
    eprintln!("cloud crash-resume: {} ms", started.elapsed().as_millis());
}
