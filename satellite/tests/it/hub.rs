//! Serving hub-installed plugins against a real nats-server with JetStream
//! and real plugin binaries: install, serve, yank, lock, roll, refuse, and
//! the `orrery` and `orrery-satellite` binaries end to end. (The hub
//! library alone is tested in `satellite/hub/tests/`.)

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{binary, NatsServer};
use orrery_hub::manifest::Manifest;
use orrery_hub::package::Package;
use orrery_hub::store::index_key;
use orrery_hub::testing::{build, requirement};
use orrery_hub::{
    host_platform, Hub, HubError, Installer, LockEntry, LockFile, PublishOutcome, PublisherKey,
    TrustedKeys,
};
use orrery_plugin_sdk::schema::{
    CreateRequest, OperationStatus, PropertyMap, Request, Target, Value,
};
use orrery_plugin_sdk::Answer;
use orrery_satellite::bus::{BusError, NatsBus};
use orrery_satellite::hub::serve::{HubPlugins, RollOutcome, ServeConfig};
use orrery_satellite::relay::RelayConfig;
use orrery_testing::plugin_copy;
use orrery_testing::wait::{wait_until_async, Wait};

fn serve_config(id: &str, requirements: &[&str], lock: Option<PathBuf>) -> ServeConfig {
    let mut config = ServeConfig::new(requirements.iter().map(|r| requirement(r)).collect());
    config.lock_file = lock;
    config.relay = RelayConfig {
        satellite_id: id.into(),
        ..RelayConfig::default()
    };
    config
}

fn write_file(i: usize, root: &Path) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("hub-{i}"),
        resource_type: "Local::Fs::File".into(),
        label: format!("f{i}"),
        target: Target {
            name: "site".into(),
            config: PropertyMap::from([(
                "root".to_owned(),
                Value::from(root.display().to_string()),
            )]),
            ..Default::default()
        },
        properties: PropertyMap::from([
            ("path".to_owned(), Value::from(format!("f{i}.txt"))),
            ("content".to_owned(), Value::from("served by a hub plugin")),
        ]),
    })
}

fn slow_noop(i: usize) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("load-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: format!("thing-{i}"),
        target: Target {
            name: "slow".into(),
            config: PropertyMap::from([("delay_ms".to_owned(), Value::from(50))]),
            ..Default::default()
        },
        properties: PropertyMap::from([("name".to_owned(), Value::from(format!("thing-{i}")))]),
    })
}

async fn succeeds(bus: &NatsBus, plugin: &str, request: &Request) -> bool {
    matches!(
        bus.send(plugin, request, Duration::from_secs(10)).await,
        Ok(Answer::Progress(p)) if p.status == OperationStatus::Success
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_two_versions_install_the_newest_yank_it_and_a_lock_keeps_it() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let bin_10 = plugin_copy(dir.path(), "orrery-plugin-local", "v1.0.0");
    let bin_11 = plugin_copy(dir.path(), "orrery-plugin-local", "v1.1.0");
    let p10 = build(&bin_10, "1.0.0", Some(&key), &dir.path().join("p10"), None).await;
    let p11 = build(&bin_11, "1.1.0", Some(&key), &dir.path().join("p11"), None).await;
    let m = &p11.manifest.manifest;
    assert_eq!(m.name, "local");
    assert_eq!(m.announced_version, "0.1.0");
    assert!(
        m.resource_types.contains(&"Local::Fs::File".to_owned()),
        "resource types come from the real announcement: {:?}",
        m.resource_types
    );

    let hub = Hub::nats(server.client().await).await.unwrap();
    assert_eq!(hub.publish(&p10).await.unwrap(), PublishOutcome::Published);
    assert_eq!(hub.publish(&p11).await.unwrap(), PublishOutcome::Published);
    // The same content again is a no-op; other content under 1.0.0 is refused.
    assert_eq!(
        hub.publish(&p10).await.unwrap(),
        PublishOutcome::AlreadyPublished
    );
    let imposter = build(&bin_11, "1.0.0", Some(&key), &dir.path().join("imp"), None).await;
    let e = hub.publish(&imposter).await.unwrap_err();
    assert!(matches!(e, HubError::RepublishConflict { .. }), "{e}");

    let versions: Vec<String> = hub
        .versions("local")
        .await
        .unwrap()
        .iter()
        .map(|e| e.version.to_string())
        .collect();
    assert_eq!(versions, ["1.0.0", "1.1.0"]);
    let found = hub.search("fs::file").await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].manifest.manifest.version, "1.1.0");
    let schema = hub.schema(&found[0]).await.unwrap().unwrap();
    assert_eq!(schema.name, "local");
    assert!(matches!(
        hub.versions("nope").await,
        Err(HubError::PluginNotFound { .. })
    ));

    // A satellite configured with local@^1.0 installs 1.1.0 and serves it.
    let lock_a = dir.path().join("a.lock");
    let installer = Installer::new(
        Hub::nats_existing(server.client().await).await.unwrap(),
        trusted.clone(),
        dir.path().join("cache-a"),
    );
    let sat_a = HubPlugins::start(
        server.client().await,
        installer,
        serve_config("sat-a", &["local@^1.0"], Some(lock_a.clone())),
    )
    .await
    .unwrap();
    assert!(sat_a.failures().is_empty(), "{:?}", sat_a.failures());
    let running = sat_a.running();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].version, "1.1.0");
    let digest_11 = &p11.manifest.manifest.artifacts[&host_platform()].sha256;
    assert_eq!(&running[0].sha256, digest_11);
    let cached = dir
        .path()
        .join("cache-a")
        .join(digest_11)
        .join("orrery-plugin-local");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&cached).unwrap().permissions().mode() & 0o111,
        0o111,
        "the cached binary is executable"
    );
    let lock = LockFile::load(&lock_a).unwrap();
    let pinned = lock.get("local").unwrap();
    assert_eq!(pinned.version, "1.1.0");
    assert_eq!(&pinned.sha256[&host_platform()], digest_11);

    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let bus = NatsBus::new(server.client().await);
    assert!(succeeds(&bus, "local", &write_file(1, &root)).await);
    assert_eq!(
        std::fs::read_to_string(root.join("f1.txt")).unwrap(),
        "served by a hub plugin"
    );

    // Yank 1.1.0: a fresh satellite picks 1.0.0.
    hub.yank("local", "1.1.0", true, "broken", &key)
        .await
        .unwrap();
    let fresh = Installer::new(
        Hub::nats_existing(server.client().await).await.unwrap(),
        trusted.clone(),
        dir.path().join("cache-b"),
    );
    let resolved = fresh.resolve(&requirement("local@^1.0")).await.unwrap();
    assert_eq!(resolved.manifest.manifest.version, "1.0.0");
    let sat_b = HubPlugins::start(
        server.client().await,
        fresh,
        serve_config("sat-b", &["local@^1.0"], None),
    )
    .await
    .unwrap();
    assert!(sat_b.failures().is_empty(), "{:?}", sat_b.failures());
    assert_eq!(sat_b.running()[0].version, "1.0.0");

    // A satellite with the lock pinned to 1.1.0 keeps 1.1.0, yanked or not.
    let lock_c = dir.path().join("c.lock");
    std::fs::copy(&lock_a, &lock_c).unwrap();
    let pinned_installer = Installer::new(
        Hub::nats_existing(server.client().await).await.unwrap(),
        trusted.clone(),
        dir.path().join("cache-c"),
    );
    let sat_c = HubPlugins::start(
        server.client().await,
        pinned_installer,
        serve_config("sat-c", &["local@^1.0"], Some(lock_c.clone())),
    )
    .await
    .unwrap();
    assert_eq!(sat_c.running()[0].version, "1.1.0");
    assert_eq!(
        std::fs::read(&lock_c).unwrap(),
        std::fs::read(&lock_a).unwrap(),
        "a satisfied lock is not rewritten"
    );
    // All three serve: requests spread over the queue group and succeed.
    for i in 2..12 {
        assert!(succeeds(&bus, "local", &write_file(i, &root)).await);
    }

    sat_a.shutdown().await;
    sat_b.shutdown().await;
    sat_c.shutdown().await;
}

/// Play a compromised hub through the storage layer: replace an index
/// entry with `edit` applied to its manifest JSON.
async fn tamper_entry(
    hub: &Hub,
    name: &str,
    version: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) {
    let key = index_key(name, version);
    let stored = hub.store().get_entry(&key).await.unwrap().unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&stored.bytes).unwrap();
    edit(&mut doc["manifest"]);
    hub.store()
        .put_entry(&key, &serde_json::to_vec(&doc).unwrap())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failed_check_is_refused_with_its_own_error_and_serving_goes_on() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let stranger = PublisherKey::generate().unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let bin = plugin_copy(dir.path(), "orrery-plugin-local", "base");
    let hub = Hub::nats(server.client().await).await.unwrap();
    let out = |v: &str| dir.path().join(format!("pkg-{v}"));

    // A good version the satellite serves throughout.
    let good = build(&bin, "1.0.0", Some(&key), &out("1.0.0"), None).await;
    hub.publish(&good).await.unwrap();

    // 2.0.0: the artifact is replaced on the hub after publishing.
    let tampered_bin = plugin_copy(dir.path(), "orrery-plugin-local", "tampered");
    let p = build(&tampered_bin, "2.0.0", Some(&key), &out("2.0.0"), None).await;
    hub.publish(&p).await.unwrap();
    let digest = p.manifest.manifest.artifacts[&host_platform()]
        .sha256
        .clone();
    let mut evil = std::fs::read(&tampered_bin).unwrap();
    evil.extend_from_slice(b"evil");
    hub.store()
        .put_artifact_bytes(&digest, &evil)
        .await
        .unwrap();

    // 2.1.0: the manifest is edited after signing (a wrong signature).
    let p = build(&bin, "2.1.0", Some(&key), &out("2.1.0"), None).await;
    hub.publish(&p).await.unwrap();
    tamper_entry(&hub, "local", "2.1.0", |m| {
        m["summary"] = "now with extra features".into()
    })
    .await;

    // 2.2.0: signed by a key the operator does not trust.
    let p = build(&bin, "2.2.0", Some(&stranger), &out("2.2.0"), None).await;
    hub.publish(&p).await.unwrap();

    // 2.3.0: unsigned. `publish` refuses it, so it is slipped in below.
    let p = build(&bin, "2.3.0", None, &out("2.3.0"), None).await;
    let e = hub.publish(&p).await.unwrap_err();
    assert!(matches!(e, HubError::Unsigned { .. }), "{e}");
    let signed_twin = build(&bin, "2.3.0", Some(&key), &out("2.3.0-signed"), None).await;
    hub.publish(&signed_twin).await.unwrap();
    tamper_entry(&hub, "local", "2.3.0", |m| {
        m.as_object_mut().unwrap().remove("signature");
    })
    .await;

    // 2.4.0: speaks a protocol major this satellite does not.
    let mut p = build(&bin, "2.4.0", Some(&key), &out("2.4.0"), None).await;
    let mut manifest: Manifest = p.manifest.manifest.clone();
    manifest.protocol = orrery_plugin_sdk::schema::PROTOCOL_MAJOR + 1;
    manifest.sign(&key).unwrap();
    std::fs::write(
        out("2.4.0").join("manifest.json"),
        manifest.to_json_pretty().unwrap(),
    )
    .unwrap();
    p = Package::load(&out("2.4.0")).unwrap();
    hub.publish(&p).await.unwrap();

    // 2.5.0: no binary for this platform.
    let p = build(&bin, "2.5.0", Some(&key), &out("2.5.0"), Some("plan9-mips")).await;
    hub.publish(&p).await.unwrap();

    // 2.6.0: signed by the stranger but claiming the trusted key's id.
    let p = build(&bin, "2.6.0", Some(&stranger), &out("2.6.0"), None).await;
    hub.publish(&p).await.unwrap();
    let trusted_id = key.key_id();
    tamper_entry(&hub, "local", "2.6.0", |m| {
        m["publisher"]["key_id"] = trusted_id.into()
    })
    .await;

    // A satellite serves 1.0.0 and is then pointed at each bad version.
    let lock_path = dir.path().join("sat.lock");
    let installer = Installer::new(
        Hub::nats_existing(server.client().await).await.unwrap(),
        trusted.clone(),
        dir.path().join("cache"),
    );
    // The lock pins 1.0.0 from the start; the requirement admits 2.x.
    let pin_10 = LockFile {
        plugins: vec![LockEntry {
            name: "local".into(),
            version: "1.0.0".into(),
            ..LockEntry::default()
        }],
        ..LockFile::default()
    };
    pin_10.save(&lock_path).unwrap();
    let mut sat = HubPlugins::start(
        server.client().await,
        installer.clone(),
        serve_config("sat", &["local@>=1.0, <3.0"], Some(lock_path.clone())),
    )
    .await
    .unwrap();
    assert_eq!(sat.running()[0].version, "1.0.0");
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let bus = NatsBus::new(server.client().await);

    let cases = [
        ("2.0.0", "artifact-tampered", "checksum check failed"),
        ("2.1.0", "bad-signature", "signature check failed"),
        ("2.2.0", "untrusted-key", "not a trusted key"),
        ("2.3.0", "unsigned", "unsigned"),
        ("2.4.0", "unsupported-protocol", "speaks plugin protocol 2"),
        ("2.5.0", "platform-missing", "no binary for platform"),
        ("2.6.0", "bad-signature", "signature check failed"),
    ];
    let mut kinds = BTreeSet::new();
    let mut i = 0;
    for (version, kind, words) in cases {
        // Directly, through the installer.
        let e = installer
            .install(&requirement(&format!("local@={version}")), None)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), kind, "{version}: {e}");
        assert!(e.to_string().contains(words), "{version}: {e}");
        assert!(e.to_string().contains(&format!("local@{version}")), "{e}");
        kinds.insert(e.kind());
        // Through a lock change on a serving satellite: refused, and the
        // old version keeps serving.
        let lock = LockFile {
            plugins: vec![LockEntry {
                name: "local".into(),
                version: version.into(),
                ..LockEntry::default()
            }],
            ..LockFile::default()
        };
        let outcomes = sat.apply_lock(&lock).await;
        match &outcomes[..] {
            [RollOutcome::Refused { kept, error, .. }] => {
                assert_eq!(kept, "1.0.0");
                assert_eq!(sat.running()[0].version, "1.0.0");
                assert_eq!(error.kind(), kind, "{error}");
            }
            other => panic!("{version}: expected a refusal, got {other:?}"),
        }
        i += 1;
        assert!(succeeds(&bus, "local", &write_file(i, &root)).await);
    }
    assert_eq!(kinds.len(), 6, "distinct checks: {kinds:?}");
    // No cached file is left behind by a refused download (beside the
    // binaries, the cache holds the installer's memory of the index).
    let cached: Vec<_> = std::fs::read_dir(dir.path().join("cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != orrery_hub::seen::SEEN_FILE)
        .collect();
    assert_eq!(
        cached.len(),
        1,
        "only the good binary is cached: {cached:?}"
    );
    sat.shutdown().await;
    // A cached binary edited on disk is caught and fetched again.
    let good_digest = &good.manifest.manifest.artifacts[&host_platform()].sha256;
    let cached_bin = dir
        .path()
        .join("cache")
        .join(good_digest)
        .join("orrery-plugin-local");
    std::fs::write(&cached_bin, b"#!/bin/sh\nexit 0\n").unwrap();
    let again = installer
        .install(&requirement("local@=1.0.0"), None)
        .await
        .unwrap();
    assert_eq!(
        orrery_hub::file_digest(&again.path).await.unwrap().0,
        *good_digest
    );
}

/// The next outcome a watching satellite reports, within 30 s.
async fn next_outcome(outcomes: &mut tokio::sync::mpsc::Receiver<RollOutcome>) -> RollOutcome {
    tokio::time::timeout(Duration::from_secs(30), outcomes.recv())
        .await
        .expect("no roll outcome within 30 s")
        .expect("the satellite stopped reporting")
}

/// A satellite watching its lock file in a task, until stopped.
struct Watcher {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<HubPlugins>,
}

impl Watcher {
    fn start(mut sat: HubPlugins) -> Watcher {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            sat.watch(async {
                let _ = stopped.await;
            })
            .await;
            sat
        });
        Watcher { stop, task }
    }

    async fn stop(self) -> HubPlugins {
        let _ = self.stop.send(());
        self.task.await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_to_a_new_version_under_load_fails_no_operation() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let hub = Hub::nats(server.client().await).await.unwrap();
    for version in ["1.0.0", "1.1.0"] {
        let bin = plugin_copy(dir.path(), "orrery-plugin-testbed", version);
        let p = build(&bin, version, Some(&key), &dir.path().join(version), None).await;
        hub.publish(&p).await.unwrap();
    }
    // 1.2.0 is tampered with on the hub: rolling to it must be refused
    // without disturbing the load either.
    let bin = plugin_copy(dir.path(), "orrery-plugin-testbed", "1.2.0");
    let p = build(&bin, "1.2.0", Some(&key), &dir.path().join("1.2.0"), None).await;
    hub.publish(&p).await.unwrap();
    let digest = p.manifest.manifest.artifacts[&host_platform()]
        .sha256
        .clone();
    hub.store()
        .put_artifact_bytes(&digest, b"not the plugin")
        .await
        .unwrap();

    let lock_path = dir.path().join("fleet.lock");
    let pin = |version: &str| LockFile {
        plugins: vec![LockEntry {
            name: "testbed".into(),
            version: version.into(),
            requirement: "^1".into(),
            ..LockEntry::default()
        }],
        ..LockFile::default()
    };
    pin("1.0.0").save(&lock_path).unwrap();
    let installer = Installer::new(
        Hub::nats_existing(server.client().await).await.unwrap(),
        trusted,
        dir.path().join("cache"),
    );
    let mut config = serve_config("roller", &["testbed@^1"], Some(lock_path.clone()));
    config.lock_poll = Duration::from_millis(100);
    let mut sat = HubPlugins::start(server.client().await, installer, config)
        .await
        .unwrap();
    let first = sat.running()[0].clone();
    assert_eq!(first.version, "1.0.0");

    // Load: 16 workers, each sending one 50 ms operation after another.
    let bus = NatsBus::new(server.client().await);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(Vec::new()));
    // Requests that got no answer at all, with when they were sent.
    let unanswered = Arc::new(Mutex::new(Vec::new()));
    let mut workers = Vec::new();
    for w in 0..16 {
        let (bus, stop, done, failed, unanswered) = (
            bus.clone(),
            stop.clone(),
            done.clone(),
            failed.clone(),
            unanswered.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let i = w * 1_000_000 + n;
                n += 1;
                let sent = Instant::now();
                let answer = bus
                    .send("testbed", &slow_noop(i), Duration::from_secs(10))
                    .await;
                match answer {
                    Ok(Answer::Progress(p)) if p.status == OperationStatus::Success => {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(BusError::Timeout { .. }) => unanswered.lock().unwrap().push((i, sent)),
                    other => failed.lock().unwrap().push(format!("{i}: {other:?}")),
                }
            }
        }));
    }
    // Waits until `more` operations have succeeded since this call.
    let flowing = |more: usize, what: &'static str| {
        let done = done.clone();
        async move {
            let target = done.load(Ordering::Relaxed) + more;
            let done = &done;
            wait_until_async(what, Duration::from_secs(30), move || {
                std::future::ready(done.load(Ordering::Relaxed) >= target)
            })
            .await;
        }
    };

    // The satellite watches the lock file and reports what each change did.
    let (outcome_tx, mut outcomes) = tokio::sync::mpsc::channel(8);
    sat.report_outcomes(outcome_tx);
    flowing(50, "operations before the roll").await;

    // An operator edits the lock: the satellite rolls to 1.1.0.
    let watcher = Watcher::start(sat);
    let roll_started = Instant::now();
    pin("1.1.0").save(&lock_path).unwrap();
    match next_outcome(&mut outcomes).await {
        RollOutcome::Rolled { from, to, .. } => assert_eq!((&*from, &*to), ("1.0.0", "1.1.0")),
        other => panic!("expected the roll to 1.1.0, got {other:?}"),
    }
    // The old relay has drained by the time the roll is reported.
    let roll_ended = Instant::now();
    flowing(50, "operations after the roll").await;
    let sat = watcher.stop().await;
    let rolled = sat.running()[0].clone();
    assert_eq!(rolled.version, "1.1.0");
    assert_ne!(rolled.pid, first.pid, "a new process serves");

    // Then to the tampered 1.2.0: refused, and 1.1.0's process serves on.
    let watcher = Watcher::start(sat);
    pin("1.2.0").save(&lock_path).unwrap();
    match next_outcome(&mut outcomes).await {
        RollOutcome::Refused { kept, error, .. } => {
            assert_eq!(kept, "1.1.0");
            assert_eq!(error.kind(), "artifact-tampered", "{error}");
        }
        other => panic!("expected 1.2.0 to be refused, got {other:?}"),
    }
    flowing(50, "operations after the refusal").await;
    let sat = watcher.stop().await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(
        sat.running()[0],
        rolled,
        "the refusal left the 1.1.0 process serving, untouched"
    );
    let failed = failed.lock().unwrap().clone();
    let unanswered = unanswered.lock().unwrap().clone();
    eprintln!(
        "roll under load: {} operations, {} failed, {} unanswered",
        done.load(Ordering::Relaxed),
        failed.len(),
        unanswered.len()
    );
    assert!(failed.is_empty(), "failed operations: {failed:?}");
    // What core NATS cannot promise: a request the server routes to the old
    // relay in the instant it unsubscribes is dropped by the client library
    // (nothing reads a removed subscription), so its caller times out, the
    // outcome unknown, as for a request lost on the network; the primary
    // settles those (RELIABILITY.md). Only requests sent during the roll,
    // and at most one a worker, may go that way; none before or after it.
    assert!(unanswered.len() <= 16, "unanswered: {unanswered:?}");
    for (i, sent) in &unanswered {
        assert!(
            (roll_started..roll_ended).contains(sent),
            "operation {i} got no answer and was sent outside the roll"
        );
    }
    sat.shutdown().await;
}

/// Lines of a child's stderr, collected by a thread.
fn collect_lines(stderr: std::process::ChildStderr) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

async fn wait_for_line(lines: &Mutex<Vec<String>>, needle: &str, within: Duration) {
    let what = format!("a `{needle}` line");
    let wait = Wait::new(&what, within).every(Duration::from_millis(50));
    let found = move || {
        let found = lines.lock().unwrap().iter().any(|l| l.contains(needle));
        std::future::ready(if found { Ok(()) } else { Err(()) })
    };
    if wait.poll_async(found).await.is_err() {
        wait.fail(format_args!("log:\n{}", lines.lock().unwrap().join("\n")));
    }
}

fn orrery(args: &[&str], nats_url: &str) -> String {
    let out = Command::new(binary("orrery"))
        .args(args)
        .env("ORRERY_NATS_URL", nats_url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "orrery {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_publishes_and_the_satellite_binary_installs_and_rolls_on_a_lock_change() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    let url = server.url.clone();
    orrery(&["hub", "keygen", "--out", &p("pub.key")], &url);
    for version in ["1.0.0", "1.1.0"] {
        let bin = plugin_copy(dir.path(), "orrery-plugin-local", version);
        let out = orrery(
            &[
                "plugin",
                "package",
                "--binary",
                &bin.display().to_string(),
                "--key",
                &p("pub.key"),
                "--out",
                &p(version),
                "--version",
                version,
                "--summary",
                "files under a root",
            ],
            &url,
        );
        assert!(out.contains(&format!("packaged local@{version}")), "{out}");
        let out = orrery(&["hub", "publish", &p(version)], &url);
        assert!(out.contains(&format!("published local@{version}")), "{out}");
    }
    let out = orrery(&["hub", "versions", "local"], &url);
    assert!(out.contains("1.0.0") && out.contains("1.1.0"), "{out}");
    let out = orrery(&["hub", "search", "root"], &url);
    assert!(out.contains("local") && out.contains("1.1.0"), "{out}");
    let out = orrery(&["hub", "info", "local"], &url);
    assert!(out.contains("Local::Fs::File"), "{out}");
    orrery(
        &[
            "hub",
            "lock",
            "local@=1.0.0",
            "--lock-file",
            &p("fleet.lock"),
            "--trusted-key",
            &p("pub.key.pub"),
        ],
        &url,
    );

    let mut satellite = Command::new(binary("orrery-satellite"))
        .args([
            "--nats-url",
            &url,
            "--id",
            "cli-sat",
            "--install",
            "local@^1",
        ])
        .args([
            "--trusted-key",
            &format!("{}=local", p("pub.key.pub")),
            "--cache-dir",
            &p("cache"),
        ])
        .args(["--lock-file", &p("fleet.lock"), "--lock-poll-secs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = collect_lines(satellite.stderr.take().unwrap());
    wait_for_line(
        &lines,
        "serving hub-installed plugin plugin=local@1.0.0",
        Duration::from_secs(20),
    )
    .await;
    let bus = NatsBus::new(server.client().await);
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    assert!(succeeds(&bus, "local", &write_file(1, &root)).await);

    // The operator moves the fleet to 1.1.0 by rewriting the lock (the key
    // bound to `local` this time).
    let bound_key = format!("{}=local", p("pub.key.pub"));
    let lock_to = |req: &str, allow: bool| {
        let mut args = vec![
            "hub".to_owned(),
            "lock".to_owned(),
            req.to_owned(),
            "--lock-file".to_owned(),
            p("fleet.lock"),
            "--trusted-key".to_owned(),
            bound_key.clone(),
        ];
        if allow {
            args.push("--allow-downgrade".to_owned());
        }
        args
    };
    let run = |args: Vec<String>| {
        Command::new(binary("orrery"))
            .args(args)
            .env("ORRERY_NATS_URL", &url)
            .output()
            .unwrap()
    };
    let out = run(lock_to("local@=1.1.0", false));
    assert!(out.status.success(), "{out:?}");
    wait_for_line(&lines, "rolled", Duration::from_secs(20)).await;
    assert!(succeeds(&bus, "local", &write_file(2, &root)).await);

    // Back to 1.0.0: `orrery hub lock` refuses without --allow-downgrade
    // and leaves the lock as it was.
    let out = run(lock_to("local@=1.0.0", false));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("refused to move local from 1.1.0 to 1.0.0: it is a lower version"),
        "{stderr}"
    );
    let locked = || LockFile::load(&dir.path().join("fleet.lock")).unwrap();
    assert_eq!(locked().get("local").unwrap().version, "1.1.0");
    // With it, the lock moves (warned); this satellite, started without
    // --allow-downgrade, refuses to follow and 1.1.0 serves on.
    let out = run(lock_to("local@=1.0.0", true));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: local moves from 1.1.0 to 1.0.0"),
        "{stderr}"
    );
    assert_eq!(locked().get("local").unwrap().version, "1.0.0");
    wait_for_line(&lines, "downgrade refused", Duration::from_secs(20)).await;
    assert!(succeeds(&bus, "local", &write_file(3, &root)).await);

    // A signed yank, shown with its signer.
    orrery(
        &[
            "hub",
            "yank",
            "local@1.1.0",
            "--key",
            &p("pub.key"),
            "--reason",
            "corrupts symlinks",
        ],
        &url,
    );
    let out = orrery(&["hub", "versions", "local"], &url);
    assert!(
        out.contains("(yanked: corrupts symlinks (signed by"),
        "{out}"
    );

    sigterm(satellite.id());
    let status = satellite.wait().unwrap();
    assert!(status.success(), "satellite exit: {status}");
}

fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_edited_to_an_older_or_yanked_version_does_not_roll_a_serving_satellite_back() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let hub = Hub::nats(server.client().await).await.unwrap();
    for version in ["1.0.0", "1.1.0", "1.2.0"] {
        let bin = plugin_copy(dir.path(), "orrery-plugin-local", version);
        let p = build(&bin, version, Some(&key), &dir.path().join(version), None).await;
        hub.publish(&p).await.unwrap();
    }
    hub.yank("local", "1.2.0", true, "corrupts symlinks", &key)
        .await
        .unwrap();
    let pin = |version: &str| LockFile {
        plugins: vec![LockEntry {
            name: "local".into(),
            version: version.into(),
            ..LockEntry::default()
        }],
        ..LockFile::default()
    };
    let lock_path = dir.path().join("sat.lock");
    pin("1.1.0").save(&lock_path).unwrap();
    let installer = Installer::new(
        Hub::nats_existing(server.client().await).await.unwrap(),
        trusted,
        dir.path().join("cache"),
    );
    let mut sat = HubPlugins::start(
        server.client().await,
        installer.clone(),
        serve_config("sat", &["local@^1"], Some(lock_path.clone())),
    )
    .await
    .unwrap();
    let before = sat.running()[0].clone();
    assert_eq!(before.version, "1.1.0");
    // Someone edits the lock back to 1.0.0, or on to the yanked 1.2.0.
    for (version, why) in [("1.0.0", "lower version"), ("1.2.0", "yanked")] {
        let outcomes = sat.apply_lock(&pin(version)).await;
        match &outcomes[..] {
            [RollOutcome::Refused { kept, error, .. }] => {
                assert_eq!(kept, "1.1.0");
                assert_eq!(error.kind(), "downgrade", "{error}");
                assert!(error.to_string().contains(why), "{error}");
            }
            other => panic!("{version}: expected a refusal, got {other:?}"),
        }
        assert_eq!(sat.running()[0], before, "the same 1.1.0 process serves");
    }
    sat.shutdown().await;

    // Restarted with a requirement the pin no longer satisfies, it would
    // resolve below the pin: refused too.
    let sat = HubPlugins::start(
        server.client().await,
        installer.clone(),
        serve_config("sat-narrowed", &["local@<1.1"], Some(lock_path.clone())),
    )
    .await
    .unwrap();
    match sat.failures() {
        [(_, error)] => assert_eq!(error.kind(), "downgrade", "{error}"),
        other => panic!("expected the downgrade to be refused, got {other:?}"),
    }
    assert!(sat.running().is_empty());
    assert_eq!(
        LockFile::load(&lock_path)
            .unwrap()
            .get("local")
            .unwrap()
            .version,
        "1.1.0",
        "the lock is not rewritten"
    );
    sat.shutdown().await;

    // A satellite started with --allow-downgrade follows the lock down.
    let mut config = serve_config("sat-allow", &["local@^1"], Some(lock_path.clone()));
    config.allow_downgrade = true;
    let mut sat = HubPlugins::start(server.client().await, installer, config)
        .await
        .unwrap();
    assert_eq!(sat.running()[0].version, "1.1.0");
    let outcomes = sat.apply_lock(&pin("1.0.0")).await;
    assert!(
        matches!(&outcomes[..], [RollOutcome::Rolled { to, .. }] if to == "1.0.0"),
        "{outcomes:?}"
    );
    assert_eq!(sat.running()[0].version, "1.0.0");
    sat.shutdown().await;
}
