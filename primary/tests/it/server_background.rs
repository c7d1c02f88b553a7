//! `orrery primary` discovers unmanaged resources and syncs drift on its
//! own, at the intervals its configuration file sets (`discover_every`,
//! `drift_every` in `./orrery.toml`), through the real `local` plugin.

use crate::common;

use common::server::{Server, ServerOptions};
use serde_json::{json, Value};

const STACK: &str = r#"stack: bg
targets:
  - name: home
    plugin: local
    config: { root: "ROOT", create_root: true }
resources:
  - label: managed
    type: Local::Fs::File
    target: home
    properties: { path: managed.txt, content: "original\n" }
  - label: doomed
    type: Local::Fs::File
    target: home
    properties: { path: doomed.txt, content: "delete me by hand\n" }
"#;

/// The resource of `answer` (`GET /v1/resources`) with `field` equal to `value`.
fn find<'a>(answer: &'a Value, field: &str, value: &str) -> Option<&'a Value> {
    answer["resources"]
        .as_array()?
        .iter()
        .find(|r| r[field] == value)
}

#[test]
fn the_server_discovers_and_syncs_drift_on_its_configured_intervals() {
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    std::fs::write(
        work.path().join("orrery.toml"),
        "discover_every = \"300ms\"\ndrift_every = \"300ms\"\n",
    )
    .unwrap();
    let server = Server::start_with(ServerOptions {
        cwd: Some(work.path().to_owned()),
        ..Default::default()
    });
    let body = json!({ "document": STACK.replace("ROOT", site.to_str().unwrap()) });
    let (status, accepted) = server.post("/v1/stacks/apply", &body);
    assert_eq!(status, 202, "{accepted}");
    let command = server.wait_command(accepted["command_id"].as_str().unwrap());
    assert_eq!(command["status"], "completed", "{command}");

    // Made by hand: discovered, recorded unmanaged.
    std::fs::write(site.join("extra.txt"), "made by hand\n").unwrap();
    let found = server.wait_for("/v1/resources?stack=", "extra.txt discovered", |v| {
        find(v, "native_id", "extra.txt").is_some()
    });
    let extra = find(&found, "native_id", "extra.txt").unwrap();
    assert_eq!(extra["managed"], false, "{extra}");
    assert_eq!(extra["type"], "Local::Fs::File");
    assert_eq!(extra["properties"]["content"], "made by hand\n");
    assert!(
        find(&found, "native_id", "managed.txt").is_none(),
        "managed files are not recorded as unmanaged: {found}"
    );

    // Changed and deleted by hand: drift recorded on the stack's records.
    std::fs::write(site.join("managed.txt"), "changed by hand\n").unwrap();
    std::fs::remove_file(site.join("doomed.txt")).unwrap();
    let drifted = server.wait_for("/v1/resources?stack=bg", "drift recorded", |v| {
        find(v, "label", "managed").is_some_and(|r| r["drift"] == "changed (content)")
            && find(v, "label", "doomed").is_some_and(|r| r["drift"] == "deleted")
    });
    let managed = find(&drifted, "label", "managed").unwrap();
    assert_eq!(managed["properties"]["content"], "changed by hand\n");
    assert_eq!(find(&drifted, "label", "doomed").unwrap()["managed"], false);
    // Counted on /metrics too: the hand-made file seen unmanaged, one
    // change and one deletion found.
    let metrics = server.text("/metrics");
    assert!(
        metrics.contains("orrery_discovery_resources_total{managed=\"false\",plugin=\"local\"}"),
        "{metrics}"
    );
    for kind in ["changed", "deleted"] {
        assert!(
            metrics.contains(&format!(
                "orrery_drift_detected_total{{kind=\"{kind}\",plugin=\"local\"}} 1\n"
            )),
            "{metrics}"
        );
    }

    // The next apply corrects both; drift sync then finds nothing.
    let (status, accepted) = server.post("/v1/stacks/apply", &body);
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["plan"]["summary"]["update"], 1, "{accepted}");
    assert_eq!(accepted["plan"]["summary"]["create"], 1, "{accepted}");
    let command = server.wait_command(accepted["command_id"].as_str().unwrap());
    assert_eq!(command["status"], "completed", "{command}");
    assert_eq!(
        std::fs::read_to_string(site.join("managed.txt")).unwrap(),
        "original\n"
    );
    assert!(site.join("doomed.txt").is_file());
    let (_, resources) = server.get("/v1/resources?stack=bg");
    for r in resources["resources"].as_array().unwrap() {
        assert!(r["drift"].is_null(), "{r}");
    }
}
