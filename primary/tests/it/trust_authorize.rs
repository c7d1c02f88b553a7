//! Issue #43, attack 4, against a real `orrery primary`: a token scoped to
//! another stack (and a `metrics`-only token) posting a costly document
//! for `team-b-x`. The role check comes before the document is evaluated
//! or a plugin started: a document that would fail evaluation is `403`,
//! not `422`, and no plugin runs afterwards.

use std::path::Path;

use crate::common::server::{with_principals, Server, ServerOptions};
use serde_json::json;

const TEAM_A: &str = "orr_test_team_a_0000000000000000000000000000000";
const SCRAPER: &str = "orr_test_scraper_000000000000000000000000000000";

fn server(dir: &Path) -> Server {
    with_principals(
        dir,
        &[
            ("team-a-ci", TEAM_A, r#"["operator:team-a-*"]"#),
            ("prometheus", SCRAPER, r#"["metrics"]"#),
        ],
        ServerOptions::default(),
    )
}

/// A `local` stack `name` of `count` files, each with `content`.
fn costly(name: &str, root: &Path, content: &str) -> serde_json::Value {
    json!({"document": format!(
        "stack: {name}\ntargets:\n  - name: home\n    plugin: local\n    config:\n      root: \"{}\"\n      create_root: true\nresources:\n  - label: f\n    count: 100000\n    type: Local::Fs::File\n    target: home\n    properties:\n      path: \"f-${{count.index}}\"\n      content: \"{content}\"\n",
        root.display()
    )})
}

#[test]
fn a_document_for_another_stack_is_refused_before_it_is_evaluated() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let root = dir.path().join("b-files");
    // Would fail evaluation (an unknown function) at its first instance:
    // refused on its stack's name instead.
    let failing = costly("team-b-x", &root, "${nosuchfunction()}");
    for (token, who) in [(TEAM_A, "team-a-ci"), (SCRAPER, "prometheus")] {
        for path in ["/v1/stacks/plan", "/v1/stacks/apply"] {
            let (status, answer) = s.post_as(Some(token), path, &failing);
            assert_eq!(status, 403, "{who} {path}: {answer}");
            assert!(answer["error"].as_str().unwrap().contains(who), "{answer}");
        }
    }
    // A valid one, 100,000 instances of a `local` resource: refused, and
    // neither the `local` plugin started nor a command recorded.
    let valid = costly("team-b-x", &root, "x");
    for path in ["/v1/stacks/plan", "/v1/stacks/apply"] {
        let (status, answer) = s.post_as(Some(TEAM_A), path, &valid);
        assert_eq!(status, 403, "{path}: {answer}");
    }
    let (status, plugins) = s.get("/v1/plugins");
    assert_eq!(status, 200);
    assert_eq!(
        plugins["plugins"],
        json!([]),
        "a plugin was started: {plugins}"
    );
    let (_, commands) = s.get("/v1/commands");
    assert_eq!(commands["commands"], json!([]), "{commands}");
    assert!(!root.exists());
    // Its own stacks are still evaluated as before (a bad one is 422).
    let (status, answer) = s.post_as(
        Some(TEAM_A),
        "/v1/stacks/plan",
        &costly("team-a-x", &root, "${nosuchfunction()}"),
    );
    assert_eq!(status, 422, "{answer}");
    // A document without a readable stack name is 422 for anyone who may
    // plan somewhere, 403 for the metrics token.
    let nameless = json!({"document": "resources: []\n"});
    assert_eq!(s.post_as(Some(TEAM_A), "/v1/stacks/plan", &nameless).0, 422);
    assert_eq!(
        s.post_as(Some(SCRAPER), "/v1/stacks/plan", &nameless).0,
        403
    );
}
