//! Discovery, import and drift sync through the real `orrery` binary and
//! real `local` plugin processes (embedded mode), plus discovery of many
//! testbed things across pages within a rate limit (library, real plugin
//! process).

use crate::common;

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Scratch;
use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, Transport};
use orrery_primary::discovery::{self, Options, TargetRef};
use orrery_primary::scheduler::{BucketLimit, RateRegistry};
use orrery_primary::stack::{Catalog, TargetDecl};
use orrery_primary::state;
use orrery_schema::{CreateRequest, PropertyMap, Request, Target, Value};

const STACK: &str = r#"
stack: disco
targets:
  - name: home
    plugin: local
    config:
      root: "${stack_dir}/site"
      create_root: true
resources:
  - label: managed
    type: Local::Fs::File
    target: home
    properties: { path: managed.txt, content: "original\n" }
  - label: gone
    type: Local::Fs::File
    target: home
    properties: { path: gone.txt, content: "keep me\n" }
"#;

const ADOPTED: &str = r#"
  - label: adopted
    type: Local::Fs::File
    target: home
    properties: { path: adopt.txt, content: "made by hand\n" }
"#;

fn json(run: &common::Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

/// (target, type, native id) of `inventory --unmanaged --output json`.
fn unmanaged(scratch: &Scratch) -> BTreeSet<(String, String)> {
    let run = scratch.orrery(&["inventory", "--unmanaged", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    json(&run)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["managed"], false);
            assert_eq!(r["target"], "home");
            (
                r["type"].as_str().unwrap().to_owned(),
                r["native_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn set(items: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

const FILE: &str = "Local::Fs::File";
const DIR: &str = "Local::Fs::Directory";

#[test]
fn discover_import_and_drift_through_the_local_plugin() {
    let scratch = Scratch::new();
    let stack = scratch.write("stack.yaml", STACK);
    let stack = stack.to_str().unwrap();
    let site = scratch.path().join("site");
    let run = scratch.orrery(&["apply", stack, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");

    // Out of band: files, a directory, and hidden entries the local
    // plugin's discovery filter excludes.
    std::fs::write(site.join("adopt.txt"), "made by hand\n").unwrap();
    std::fs::write(site.join("stray.txt"), "stray\n").unwrap();
    std::fs::create_dir(site.join("extra")).unwrap();
    std::fs::write(site.join("extra/deep.txt"), "deep\n").unwrap();
    std::fs::write(site.join(".hidden"), "hidden\n").unwrap();
    std::fs::create_dir(site.join(".cache")).unwrap();
    std::fs::write(site.join(".cache/blob.txt"), "cached\n").unwrap();

    let run = scratch.orrery(&["discover", stack, "--page-size", "2", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = &json(&run)["report"];
    assert_eq!(report["managed"], 2, "{run:?}");
    assert_eq!(report["unmanaged"], 4, "{run:?}");
    assert_eq!(report["excluded"], 3, "{run:?}");
    assert!(report["pages"].as_u64().unwrap() >= 5, "paged: {run:?}");
    let expected = set(&[
        (DIR, "extra"),
        (FILE, "adopt.txt"),
        (FILE, "extra/deep.txt"),
        (FILE, "stray.txt"),
    ]);
    assert_eq!(unmanaged(&scratch), expected);
    // The stack's own view is unchanged.
    let run = scratch.orrery(&["inventory", "--output", "json"]);
    assert_eq!(json(&run).as_array().unwrap().len(), 2, "{run:?}");
    // Discovering again changes nothing; by stack name works too.
    let run = scratch.orrery(&["discover", "--stack", "disco", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(json(&run)["report"]["written"], 0, "{run:?}");
    assert_eq!(unmanaged(&scratch), expected);

    // Import one into the stack: nothing is created or rewritten.
    let before = std::fs::metadata(site.join("adopt.txt")).unwrap();
    let run = scratch.orrery(&[
        "import",
        "--stack",
        "disco",
        "--label",
        "adopted",
        "--type",
        FILE,
        "--target",
        "home",
        "--native-id",
        "adopt.txt",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    // Importing it again under another label is refused.
    let again = scratch.orrery(&[
        "import",
        "--stack",
        "disco",
        "--label",
        "twice",
        "--type",
        FILE,
        "--target",
        "home",
        "--native-id",
        "adopt.txt",
    ]);
    assert_ne!(again.code, 0, "{again:?}");
    assert!(again.stderr.contains("already managed"), "{again:?}");
    let with_adopted = scratch.write("with-adopted.yaml", &format!("{STACK}{ADOPTED}"));
    let with_adopted = with_adopted.to_str().unwrap();
    let run = scratch.orrery(&["plan", with_adopted]);
    assert_eq!(run.code, 0, "the imported resource plans a no-op: {run:?}");
    let run = scratch.orrery(&["apply", with_adopted, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("No changes: 3 resources"), "{run:?}");
    let after = std::fs::metadata(site.join("adopt.txt")).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec(), before.mtime()),
        (after.ino(), after.mtime_nsec(), after.mtime()),
        "untouched"
    );
    // Discovery forgets it as unmanaged.
    let run = scratch.orrery(&["discover", with_adopted]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        unmanaged(&scratch),
        set(&[
            (DIR, "extra"),
            (FILE, "extra/deep.txt"),
            (FILE, "stray.txt")
        ])
    );

    // No drift yet.
    let run = scratch.orrery(&["drift", with_adopted]);
    assert_eq!(run.code, 0, "{run:?}");

    // Out of band: change one managed file, delete another.
    std::fs::write(site.join("managed.txt"), "tampered\n").unwrap();
    std::fs::remove_file(site.join("gone.txt")).unwrap();
    let run = scratch.orrery(&["drift", "--stack", "disco", "--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let drift = json(&run);
    let found: Vec<(String, String, bool)> = drift["drifted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["label"].as_str().unwrap().to_owned(),
                d["drift"].as_str().unwrap().to_owned(),
                d["new"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("gone".to_owned(), "deleted".to_owned(), true),
            ("managed".to_owned(), "changed".to_owned(), true)
        ]
    );
    let changed = &drift["drifted"][1];
    assert_eq!(changed["fields"], serde_json::json!(["content"]));
    // Reported, not recreated by drift sync.
    assert!(!site.join("gone.txt").exists());
    // Still drift on a second look (nothing corrected it), now as found earlier.
    let run = scratch.orrery(&["drift", with_adopted, "--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(json(&run)["drifted"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["new"] == false));
    // The inventory shows the markers.
    let run = scratch.orrery(&["inventory", "--stack", "disco"]);
    assert!(
        run.stdout.contains("DRIFT: changed (content)") && run.stdout.contains("DRIFT: deleted"),
        "{run:?}"
    );
    let run = scratch.orrery(&["plan", with_adopted, "--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let actions: BTreeSet<(String, String)> = json(&run)["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "no-op")
        .map(|c| {
            (
                c["label"].as_str().unwrap().to_owned(),
                c["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        set(&[("gone", "create"), ("managed", "update")]),
        "{run:?}"
    );

    // Apply corrects both.
    let run = scratch.orrery(&["apply", with_adopted, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(site.join("managed.txt")).unwrap(),
        "original\n"
    );
    assert_eq!(
        std::fs::read_to_string(site.join("gone.txt")).unwrap(),
        "keep me\n"
    );
    let run = scratch.orrery(&["drift", with_adopted]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = scratch.orrery(&["inventory", "--output", "json"]);
    let rows = json(&run);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{run:?}");
    assert!(
        rows.iter()
            .all(|r| r["drift"].is_null() && r["managed"] == true),
        "{run:?}"
    );
    assert_eq!(scratch.orrery(&["plan", with_adopted]).code, 0);
}

fn plugin(name: &str) -> PathBuf {
    orrery_testing::binary(&format!("orrery-plugin-{name}"))
}

/// 250 testbed things, pages of 20, 100 pages/s with a burst of 1: every
/// page is listed, nothing managed is recorded, and the rate holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_pages_through_everything_within_the_rate_limit() {
    let host = PluginHost::start(PluginSpec::new(plugin("testbed")))
        .await
        .unwrap();
    let mut catalog = Catalog::new();
    catalog.insert(host.announcement().clone());
    let bus = LocalBus::new([host]);
    let target = Target {
        name: "t".into(),
        config: PropertyMap::new(),
        ..Default::default()
    };
    for i in 0..250 {
        let mut properties = PropertyMap::new();
        properties.insert("name".into(), Value::from(format!("thing-{i:04}")));
        let request = Request::Create(CreateRequest {
            request_id: format!("create-{i}"),
            resource_type: "Testbed::Noop::Thing".into(),
            label: format!("r{i}"),
            target: target.clone(),
            properties,
        });
        bus.send("testbed", &request, Duration::from_secs(10))
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let store = state::open_dir(dir.path()).unwrap();
    // thing-0000 is managed by a stack declaring the same target.
    store
        .put_targets(
            "s",
            &[TargetDecl {
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
            native_id: "thing-0000".into(),
            managed: true,
            ..Default::default()
        })
        .unwrap();
    let targets: Vec<TargetRef> =
        discovery::targets_to_discover(store.as_ref(), None, None).unwrap();
    assert_eq!(targets.len(), 1);
    let options = Options {
        page_size: 20,
        rate_overrides: [(
            "Testbed/t".to_owned(),
            BucketLimit {
                rate_per_sec: 100.0,
                burst: 1,
            },
        )]
        .into(),
        ..Options::default()
    };
    let started = Instant::now();
    let report = discovery::discover(
        &bus,
        &catalog,
        &RateRegistry::local(),
        store.as_ref(),
        &targets,
        &options,
    )
    .await
    .unwrap();
    let elapsed = started.elapsed();
    assert!(report.failures.is_empty(), "{report:?}");
    // Three types; the async and cloud ones have no things (one empty
    // page each).
    assert_eq!(report.pages, 13 + 2, "{report:?}");
    assert_eq!(report.largest_page, 20);
    assert_eq!(
        (report.listed, report.managed, report.unmanaged),
        (250, 1, 249)
    );
    // 14 requests at 100/s with a burst of 1: at least 130 ms.
    assert!(elapsed >= Duration::from_millis(130), "{elapsed:?}");
    let recorded = store.resources(Some("")).unwrap();
    assert_eq!(recorded.len(), 249);
    assert!(recorded
        .iter()
        .all(|r| !r.managed && r.label == format!("t/Testbed::Noop::Thing/{}", r.native_id)));
    bus.stop(Duration::from_secs(5)).await;
}
