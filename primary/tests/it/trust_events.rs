//! Issue #43, attack 8, against a real `orrery primary`: a principal
//! scoped to `team-a-*` reading the events of a `team-b-x` command, which
//! `GET /v1/commands/{id}` refuses it, through `/v1/commands/{id}/events`
//! and the dashboard's `/ui/commands/{id}/events`.

use std::path::Path;
use std::time::Duration;

use crate::common::server::{with_principals, Server, ServerOptions, ADMIN_TOKEN};
use serde_json::json;

const TEAM_A: &str = "orr_test_team_a_0000000000000000000000000000000";

fn server(dir: &Path) -> Server {
    with_principals(
        dir,
        &[("team-a-ci", TEAM_A, r#"["operator:team-a-*"]"#)],
        ServerOptions::default(),
    )
}

fn file_stack(name: &str, root: &Path) -> serde_json::Value {
    json!({"document": format!(
        "stack: {name}\ntargets:\n  - name: home\n    plugin: local\n    config:\n      root: \"{}\"\n      create_root: true\nresources:\n  - label: f\n    type: Local::Fs::File\n    target: home\n    properties:\n      path: \"secret-plan.txt\"\n      content: \"team b only\\n\"\n",
        root.display()
    )})
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// `GET path` with `headers`: the status and the body.
fn get(agent: &ureq::Agent, s: &Server, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut req = agent.get(s.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut resp = req.call().unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap_or_default())
}

#[test]
fn another_stacks_command_events_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path());
    let root = dir.path().join("b-files");
    let (status, answer) = s.post("/v1/stacks/apply", &file_stack("team-b-x", &root));
    assert_eq!(status, 202, "{answer}");
    let id = answer["command_id"].as_str().unwrap().to_owned();
    assert_eq!(s.wait_command(&id)["status"], "completed");
    let agent = agent();
    let bearer = format!("Bearer {TEAM_A}");
    let events = format!("/v1/commands/{id}/events");
    // The command is refused to team A...
    assert_eq!(s.get_as(Some(TEAM_A), &format!("/v1/commands/{id}")).0, 403);
    // ... and so are its events (kept in memory after it finished).
    let (status, body) = get(&agent, &s, &events, &[("authorization", &bearer)]);
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("secret-plan"), "{body}");
    // The admin reads them.
    let admin = format!("Bearer {ADMIN_TOKEN}");
    let (status, body) = get(&agent, &s, &events, &[("authorization", &admin)]);
    assert_eq!(status, 200);
    assert!(body.contains("data:"), "{body}");
    // The dashboard's stream, signed in as team A.
    let resp = agent
        .post(s.url("/ui/login"))
        .content_type("application/x-www-form-urlencoded")
        .send(format!("token={TEAM_A}"))
        .unwrap();
    assert_eq!(resp.status(), 303);
    let cookie = resp.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let (status, body) = get(
        &agent,
        &s,
        &format!("/ui/commands/{id}/events"),
        &[("cookie", &cookie)],
    );
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains("secret-plan"), "{body}");
    let (status, _) = get(
        &agent,
        &s,
        &format!("/ui/commands/{id}"),
        &[("cookie", &cookie)],
    );
    assert_eq!(status, 403);
}
