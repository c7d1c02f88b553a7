//! Issue #43, attack 5, against a real `orrery primary`: team B's output
//! (a URL with a password) read by team A's principals through
//! `${stacks.team-b-db.outputs.dsn}`, in a plan and in a `lookup` error.
//! Reading another stack's outputs needs `viewer` of it, for the
//! principal who asked; no error message carries an output's value.

use std::path::Path;

use crate::common::server::{with_principals, Server, ServerOptions};
use serde_json::json;

const PLANNER: &str = "orr_test_team_a_planner_000000000000000000000000";
const VIEWER: &str = "orr_test_team_a_viewer_0000000000000000000000000";
const SCRAPER: &str = "orr_test_scraper_000000000000000000000000000000";
const TRUSTED: &str = "orr_test_team_a_trusted_000000000000000000000000";
const PASSWORD: &str = "PASSWORD-b-0001";

fn server(dir: &Path) -> Server {
    with_principals(
        dir,
        &[
            ("team-a-planner", PLANNER, r#"["planner:team-a-*"]"#),
            ("team-a-viewer", VIEWER, r#"["viewer:team-a-*"]"#),
            ("prometheus", SCRAPER, r#"["metrics"]"#),
            (
                "team-a-trusted",
                TRUSTED,
                r#"["planner:team-a-*", "viewer:team-b-*"]"#,
            ),
        ],
        ServerOptions::default(),
    )
}

/// Team B's stack: its output `dsn` carries a password.
fn team_b(root: &Path) -> serde_json::Value {
    json!({"document": format!(
        "stack: team-b-db\ntargets:\n  - name: home\n    plugin: local\n    config:\n      root: \"{}\"\n      create_root: true\nresources:\n  - label: data\n    type: Local::Fs::Directory\n    target: home\n    properties:\n      path: data\noutputs:\n  dsn:\n    value: \"postgres://svc:{PASSWORD}@db.internal/app\"\n",
        root.display()
    )})
}

/// Team A's stack writing `content` to a file.
fn team_a(root: &Path, content: &str) -> serde_json::Value {
    json!({"document": format!(
        "stack: team-a-web\nvariables:\n  empty: {{}}\ntargets:\n  - name: home\n    plugin: local\n    config:\n      root: \"{}\"\n      create_root: true\nresources:\n  - label: note\n    type: Local::Fs::File\n    target: home\n    properties:\n      path: note.txt\n      content: \"{content}\"\n",
        root.display()
    )})
}

#[test]
fn another_stacks_outputs_need_its_viewer_and_never_show_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let (status, answer) = s.post("/v1/stacks/apply", &team_b(&dir.path().join("b")));
    assert_eq!(status, 202, "{answer}");
    let id = answer["command_id"].as_str().unwrap().to_owned();
    assert_eq!(s.wait_command(&id)["status"], "completed");
    let root_a = dir.path().join("a");
    // In a plan's values, and in the `lookup` error of the issue.
    let in_plan = team_a(&root_a, "${stacks.team-b-db.outputs.dsn}");
    let in_error = team_a(
        &root_a,
        "${lookup(var.empty, stacks.team-b-db.outputs.dsn)}",
    );
    for (token, who) in [
        (PLANNER, "team-a-planner"),
        (VIEWER, "team-a-viewer"),
        (SCRAPER, "prometheus"),
    ] {
        for (what, body) in [("plan", &in_plan), ("lookup", &in_error)] {
            let (status, answer) = s.post_as(Some(token), "/v1/stacks/plan", body);
            assert!(
                !answer.to_string().contains(PASSWORD),
                "{who} read the output through its {what}: {answer}"
            );
            assert_eq!(status, 403, "{who} {what}: {answer}");
            assert!(answer["error"].as_str().unwrap().contains(who), "{answer}");
        }
    }
    // The planner is told which stack it may not read.
    let (_, answer) = s.post_as(Some(PLANNER), "/v1/stacks/plan", &in_plan);
    assert!(
        answer["error"].as_str().unwrap().contains("team-b-db"),
        "{answer}"
    );
    // A principal that may view team-b-db reads it in its plan...
    let (status, answer) = s.post_as(Some(TRUSTED), "/v1/stacks/plan", &in_plan);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.to_string().contains(PASSWORD), "{answer}");
    // ...but an error still does not carry the value.
    let (status, answer) = s.post_as(Some(TRUSTED), "/v1/stacks/plan", &in_error);
    assert_eq!(status, 422, "{answer}");
    assert!(!answer.to_string().contains(PASSWORD), "{answer}");
    assert!(answer.to_string().contains("no such key"), "{answer}");
    assert!(!s.log().contains(PASSWORD));
}
