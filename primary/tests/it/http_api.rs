//! The HTTP API end to end: the real `orrery primary` binary on a free port,
//! real plugin processes (`local`, `testbed`) started on demand, a real
//! state store; requests over a socket.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::server::{Server, ServerOptions};
use orrery_testing::wait_for;
use serde_json::{json, Value};

/// A quickstart-like stack (nine files and directories with references),
/// its files under `root`.
fn quickstart(root: &Path) -> String {
    QUICKSTART.replace("ROOT", root.to_str().unwrap())
}

const QUICKSTART: &str = r#"stack: quickstart
targets:
  - name: home
    plugin: local
    config:
      root: "ROOT"
      create_root: true
resources:
  - label: app
    type: Local::Fs::Directory
    target: home
    properties:
      path: app
      mode: 493
  - label: static
    type: Local::Fs::Directory
    target: home
    properties:
      path: "${app.path}/static"
  - label: css
    type: Local::Fs::Directory
    target: home
    properties:
      path: "${static.path}/css"
  - label: config-dir
    type: Local::Fs::Directory
    target: home
    properties:
      path: "${app.path}/config"
      mode: 448
  - label: index
    type: Local::Fs::File
    target: home
    properties:
      path: "${static.path}/index.html"
      content: "<h1>Hello from Orrery</h1>\n"
      mode: 420
  - label: style
    type: Local::Fs::File
    target: home
    properties:
      path: "${css.path}/site.css"
      content: "h1 { color: teal; }\n"
  - label: settings
    type: Local::Fs::File
    target: home
    properties:
      path: "${config-dir.path}/settings.toml"
      content: "listen = \"127.0.0.1:8080\"\n"
      mode: 384
      owner_note: "write-only: stored only as a keyed hash"
  - label: readme
    type: Local::Fs::File
    target: home
    properties:
      path: "${app.path}/README.md"
      content: "Managed by Orrery.\n"
  - label: logs
    type: Local::Fs::Directory
    target: home
    properties:
      path: "${app.path}/logs"
"#;

fn labels(resources: &Value) -> Vec<String> {
    let mut out: Vec<String> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

fn site_files(dir: &Path) -> usize {
    fn count(p: &Path) -> usize {
        std::fs::read_dir(p)
            .map(|d| {
                d.flatten()
                    .map(|e| {
                        let p = e.path();
                        1 + if p.is_dir() { count(&p) } else { 0 }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    count(&dir.join("site"))
}

#[test]
fn plan_apply_inventory_destroy_over_http() {
    let server = Server::start();
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");

    let (status, ready) = server.get("/readyz");
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "ready");

    // An invalid stack: 422 naming the file, the line and the resource; nothing touched.
    let invalid = quickstart(&site).replace(
        "      path: \"${app.path}/logs\"",
        "      path: \"${app.path}/logs\"\n      colour: blue",
    );
    let (status, reply) = server.post(
        "/v1/stacks/plan",
        &json!({"document": invalid, "source": "quickstart.yaml"}),
    );
    assert_eq!(status, 422, "{reply}");
    let errors = reply["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{reply}");
    assert_eq!(errors[0]["resource"], "logs");
    assert_eq!(errors[0]["file"], "quickstart.yaml");
    // The position of the offending key itself.
    let colour_line = invalid
        .lines()
        .position(|l| l.contains("colour: blue"))
        .unwrap()
        + 1;
    assert_eq!(errors[0]["line"], colour_line, "{reply}");
    assert_eq!(errors[0]["column"], 7, "{reply}");
    assert_eq!(
        errors[0]["message"],
        "unknown field `colour` for type `Local::Fs::Directory`"
    );
    let (status, _) = server.post("/v1/stacks/apply", &json!({ "document": invalid }));
    assert_eq!(status, 422);
    assert_eq!(
        site_files(work.path()),
        0,
        "an invalid stack touches nothing"
    );

    // Malformed requests.
    let (status, reply) =
        server.post_raw("/v1/stacks/apply", "application/json", "{\"document\": ");
    assert_eq!(status, 400, "{reply}");
    assert!(reply["error"].is_string());
    let (status, _) = server.post_raw("/v1/stacks/apply", "text/plain", "{}");
    assert_eq!(status, 415);
    let (status, _) = server.get("/v1/nowhere");
    assert_eq!(status, 404);

    // Plan: everything to create.
    let body = json!({ "document": quickstart(&site) });
    let (status, plan) = server.post("/v1/stacks/plan", &body);
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["stack"], "quickstart");
    assert_eq!(plan["has_changes"], true);
    assert_eq!(plan["summary"]["create"], 9, "{plan}");
    assert_eq!(plan["changes"].as_array().unwrap().len(), 9);

    // Apply in the background; poll the command.
    let (status, accepted) = server.post("/v1/stacks/apply", &body);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    assert_eq!(accepted["plan"]["summary"]["create"], 9);
    let command = server.wait_command(&id);
    assert_eq!(command["status"], "completed", "{command}");
    assert_eq!(command["kind"], "apply");
    let ops = command["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 9, "{command}");
    assert!(ops.iter().all(|o| o["status"] == "succeeded"), "{command}");
    assert_eq!(command["report"]["succeeded"], 9, "{command}");

    // Inventory and files.
    let (status, resources) = server.get("/v1/resources?stack=quickstart");
    assert_eq!(status, 200);
    assert_eq!(
        labels(&resources),
        [
            "app",
            "config-dir",
            "css",
            "index",
            "logs",
            "readme",
            "settings",
            "static",
            "style"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(site.join("app/static/index.html")).unwrap(),
        "<h1>Hello from Orrery</h1>\n"
    );
    assert!(site.join("app/config/settings.toml").is_file());
    assert!(site.join("app/logs").is_dir());
    assert_eq!(site_files(work.path()), 9);
    let settings = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == "settings")
        .unwrap();
    assert!(
        settings["properties"].get("owner_note").is_none(),
        "write-only values are never shown: {settings}"
    );
    // The server runs: recent writes may still be in the write-ahead log.
    let mut state = std::fs::read(server.data_dir().join("state.db")).unwrap();
    state.extend(std::fs::read(server.data_dir().join("state.db-wal")).unwrap_or_default());
    assert!(
        !String::from_utf8_lossy(&state).contains("write-only: stored only as a keyed hash"),
        "nor stored: a document giving write-only values is not recorded for resuming"
    );

    let (_, stacks) = server.get("/v1/stacks");
    let stack = &stacks["stacks"][0];
    assert_eq!(stack["name"], "quickstart", "{stacks}");
    assert_eq!(stack["resources"], 9);
    assert_eq!(stack["targets"], json!(["home"]));
    assert_eq!(stack["last_command"]["id"], id.as_str());

    let (_, targets) = server.get("/v1/targets?stack=quickstart");
    assert_eq!(targets["targets"][0]["name"], "home", "{targets}");
    assert_eq!(targets["targets"][0]["plugin"], "local");
    assert_eq!(
        targets["targets"][0]["config"]["root"],
        site.to_str().unwrap()
    );

    let (_, plugins) = server.get("/v1/plugins");
    let local = &plugins["plugins"][0];
    assert_eq!(local["name"], "local", "{plugins}");
    assert_eq!(local["status"]["state"], "running");
    assert!(local["resource_types"]
        .as_array()
        .unwrap()
        .contains(&json!("Local::Fs::File")));

    let (_, commands) = server.get("/v1/commands?stack=quickstart");
    assert_eq!(commands["commands"][0]["id"], id.as_str(), "{commands}");
    assert_eq!(commands["commands"][0]["operations"]["succeeded"], 9);

    // Planning again: nothing to do. The plugin is the same process.
    let (status, plan) = server.post("/v1/stacks/plan", &body);
    assert_eq!(status, 200);
    assert_eq!(plan["has_changes"], false, "{plan}");
    assert_eq!(plan["summary"]["no_op"], 9);
    let (_, again) = server.get("/v1/plugins");
    assert_eq!(again["plugins"][0]["status"]["pid"], local["status"]["pid"]);

    // Destroy: every resource and file gone.
    let (status, accepted) = server.post("/v1/stacks/quickstart/destroy", &json!({}));
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["plan"]["summary"]["delete"], 9);
    let destroy_id = accepted["command_id"].as_str().unwrap().to_owned();
    let command = server.wait_command(&destroy_id);
    assert_eq!(command["status"], "completed", "{command}");
    assert_eq!(command["kind"], "destroy");
    let (_, resources) = server.get("/v1/resources?stack=quickstart");
    assert_eq!(resources["resources"], json!([]));
    assert_eq!(site_files(work.path()), 0);

    // A finished command cannot be canceled; an unknown one is not found.
    let (status, _) = server.post(&format!("/v1/commands/{destroy_id}/cancel"), &json!({}));
    assert_eq!(status, 409);
    let (status, _) = server.get("/v1/commands/no-such-command");
    assert_eq!(status, 404);
}

#[test]
fn a_running_apply_holds_its_stack_and_can_be_canceled() {
    let server = Server::start();
    // A chain of slow resources: each waits for the one before.
    let doc = common::slow_chain("slow", 12, 400);
    let body = json!({ "document": doc });
    let (status, accepted) = server.post("/v1/stacks/apply", &body);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();

    // One command at a time per stack.
    let (status, busy) = server.post("/v1/stacks/apply", &body);
    assert_eq!(status, 409, "{busy}");
    assert_eq!(busy["command_id"], id.as_str());
    let (status, _) = server.post("/v1/stacks/slow/destroy", &json!({}));
    assert_eq!(status, 409);

    // Wait for the first operation to be recorded, then cancel.
    wait_for(
        &format!("an operation of {id} recorded"),
        Duration::from_secs(30),
        || {
            let (_, command) = server.get(&format!("/v1/commands/{id}"));
            if command["operations"].as_array().unwrap().is_empty() {
                Err(command)
            } else {
                Ok(())
            }
        },
    );
    let (status, reply) = server.post(&format!("/v1/commands/{id}/cancel"), &json!({}));
    assert_eq!(status, 202, "{reply}");
    let command = server.wait_command(&id);
    assert_eq!(command["status"], "canceled", "{command}");
    let canceled = command["report"]["canceled"].as_array().unwrap().len();
    let succeeded = command["report"]["succeeded"].as_u64().unwrap() as usize;
    assert!(canceled > 0, "{command}");
    assert_eq!(canceled + succeeded, 12, "{command}");

    // The stack is free again; what was created is in the inventory.
    let (_, resources) = server.get("/v1/resources?stack=slow");
    assert_eq!(
        resources["resources"].as_array().unwrap().len(),
        succeeded,
        "{resources}"
    );
    let (status, accepted) = server.post("/v1/stacks/slow/destroy", &json!({}));
    assert_eq!(status, 202, "{accepted}");
    let command = server.wait_command(accepted["command_id"].as_str().unwrap());
    assert_eq!(command["status"], "completed", "{command}");
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = Server::start();
    let pid = server.child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let exit = wait_for(
        "the server's exit after SIGTERM",
        Duration::from_secs(30),
        || server.child.try_wait().unwrap().ok_or("still running"),
    );
    assert!(exit.success(), "{exit}\n{}", server.log());
}

/// The listings the HTTP API reads (commands, operation counts, stacks)
/// come from the store, so they work on PostgreSQL as on SQLite. Skipped
/// without `ORRERY_TEST_DATABASE_URL` (run through scripts/with-postgres.sh).
#[test]
fn the_http_api_keeps_its_state_in_postgresql() {
    let Some(db) = common::postgres::fresh_database("http") else {
        eprintln!(
            "skipped: ORRERY_TEST_DATABASE_URL is not set (run through scripts/with-postgres.sh)"
        );
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data.path().join("state")),
        args: vec!["--database-url".into(), db.clone()],
        ..Default::default()
    });
    let work = tempfile::tempdir().unwrap();
    let site = work.path().join("site");
    let body = json!({ "document": quickstart(&site) });

    let (status, ready) = server.get("/readyz");
    assert_eq!(
        (status, &ready["status"]),
        (200, &json!("ready")),
        "{ready}"
    );
    let (status, accepted) = server.post("/v1/stacks/apply", &body);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    let command = server.wait_command(&id);
    assert_eq!(command["status"], "completed", "{command}");
    assert_eq!(command["operations"].as_array().unwrap().len(), 9);

    let (status, commands) = server.get("/v1/commands");
    assert_eq!(status, 200, "{commands}");
    assert_eq!(commands["commands"][0]["id"], id.as_str(), "{commands}");
    assert_eq!(
        commands["commands"][0]["operations"],
        json!({"succeeded": 9})
    );
    let (status, commands) = server.get("/v1/commands?stack=quickstart&limit=1");
    assert_eq!(status, 200);
    assert_eq!(commands["commands"].as_array().unwrap().len(), 1);
    let (status, stacks) = server.get("/v1/stacks");
    assert_eq!(status, 200, "{stacks}");
    assert_eq!(stacks["stacks"][0]["name"], "quickstart", "{stacks}");
    assert_eq!(stacks["stacks"][0]["resources"], 9);
    assert_eq!(stacks["stacks"][0]["last_command"]["status"], "completed");
    let (_, targets) = server.get("/v1/targets");
    assert_eq!(targets["targets"][0]["name"], "home", "{targets}");
    let (_, resources) = server.get("/v1/resources?stack=quickstart");
    assert_eq!(labels(&resources).len(), 9);

    let (status, accepted) = server.post("/v1/stacks/quickstart/destroy", &json!({}));
    assert_eq!(status, 202, "{accepted}");
    let destroy = server.wait_command(accepted["command_id"].as_str().unwrap());
    assert_eq!(destroy["status"], "completed", "{destroy}");
    let (_, commands) = server.get("/v1/commands");
    assert_eq!(commands["commands"].as_array().unwrap().len(), 2);
    assert_eq!(commands["commands"][0]["kind"], "destroy", "newest first");
    assert_eq!(site_files(work.path()), 0);

    // All of it is in the database, nothing in the data directory.
    assert!(!data.path().join("state/state.db").exists());
    let mut pg = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let recorded: i64 = pg
        .query_one(
            "SELECT count(*) FROM commands WHERE stack = 'quickstart'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(recorded, 2);
    let documents: i64 = pg
        .query_one("SELECT count(*) FROM command_documents", &[])
        .unwrap()
        .get(0);
    assert_eq!(documents, 0, "the quickstart gives a write-only value");
}
