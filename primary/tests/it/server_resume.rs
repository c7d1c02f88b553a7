//! Interrupted commands are resumed as `orrery apply` resumes them: by
//! `orrery primary` when it starts again (from the document and lease the
//! store keeps), and by `orrery destroy`; and never by a second primary
//! while the one running the command is alive (its lease). The primary is
//! stopped at a point with the executor's test seam `ORRERY_TEST_HANG_AT`
//! and killed with SIGKILL there (`common::crash`).

use crate::common;

use std::path::Path;
use std::process::Stdio;

use common::crash::{kill_when, Killed};
use common::server::{Server, ServerOptions};
use common::Scratch;
use serde_json::{json, Value};

const FILES: usize = 5;

/// A stack of `FILES` files under `root`.
fn document(root: &Path) -> String {
    let mut doc = format!(
        "stack: resumable\ntargets:\n  - name: home\n    plugin: local\n    config: {{ root: \"{}\", create_root: true }}\nresources:\n",
        root.display()
    );
    for i in 0..FILES {
        doc.push_str(&format!(
            "  - label: f{i}\n    type: Local::Fs::File\n    target: home\n    properties: {{ path: f{i}.txt, content: \"file {i}\\n\" }}\n"
        ));
    }
    doc
}

fn files_present(root: &Path) -> usize {
    (0..FILES)
        .filter(|i| {
            std::fs::read_to_string(root.join(format!("f{i}.txt"))).ok()
                == Some(format!("file {i}\n"))
        })
        .count()
}

/// The environment that stops the executor at `point` for good.
fn hanging_at(point: Option<&str>) -> Vec<(String, String)> {
    point
        .map(|p| vec![("ORRERY_TEST_HANG_AT".to_owned(), p.to_owned())])
        .unwrap_or_default()
}

fn server_on(scratch: &Scratch, hang_at: Option<&str>) -> Server {
    Server::start_with(ServerOptions {
        data_dir: Some(scratch.state()),
        env: hanging_at(hang_at),
        ..Default::default()
    })
}

/// Runs `orrery ARGS`, which must resume command `id` and finish it;
/// returns `orrery status` of it.
fn resumes(scratch: &Scratch, args: &[&str], id: &str) -> Value {
    let run = scratch.orrery(args);
    assert_eq!(run.code, 0, "{args:?}: {run:?}");
    assert!(
        run.stdout
            .contains(&format!("Resuming interrupted command {id}")),
        "{args:?}: {run:?}"
    );
    let status = scratch.orrery(&["status", "--output", "json"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["id"], id, "the same command: {status}");
    assert_eq!(status["status"], "completed", "{status}");
    status
}

fn operations(command: &Value) -> Vec<(String, String)> {
    let mut ops: Vec<(String, String)> = command["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["label"].as_str().unwrap().to_owned(),
                o["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    ops.sort();
    ops
}

#[test]
fn a_restarted_server_resumes_the_apply_it_was_killed_in() {
    for point in ["before_first_operation", "before_finish"] {
        let scratch = Scratch::new();
        let root = scratch.path().join("site");
        let mut first = server_on(&scratch, Some(point));
        let (status, accepted) =
            first.post("/v1/stacks/apply", &json!({ "document": document(&root) }));
        assert_eq!(status, 202, "{point}: {accepted}");
        let id = accepted["command_id"].as_str().unwrap().to_owned();
        let seen = kill_when(&scratch.state(), &mut first.child, point, |s| {
            point != "before_finish" || s.count("create", "succeeded") == FILES
        });
        assert_eq!(seen.command.as_ref().unwrap().0, id, "{point}");
        let expected_before = if point == "before_finish" { FILES } else { 0 };
        assert_eq!(files_present(&root), expected_before, "{point}");

        // Nobody asks: the new server finishes the command on its own.
        let second = server_on(&scratch, None);
        let command = second.wait_command(&id);
        assert_eq!(command["status"], "completed", "{point}: {command}");
        let all_succeeded: Vec<(String, String)> = (0..FILES)
            .map(|i| (format!("f{i}"), "succeeded".to_owned()))
            .collect();
        assert_eq!(operations(&command), all_succeeded, "{point}: {command}");
        assert_eq!(files_present(&root), FILES, "{point}");
        let (_, commands) = second.get("/v1/commands");
        assert_eq!(
            commands["commands"].as_array().unwrap().len(),
            1,
            "{point}: the same command went on, no new one: {commands}"
        );
        assert!(
            second.log().contains("resuming an interrupted command"),
            "{point}: {}",
            second.log()
        );
        // Converged: planning again changes nothing.
        let (_, plan) = second.post("/v1/stacks/plan", &json!({ "document": document(&root) }));
        assert_eq!(plan["has_changes"], false, "{point}: {plan}");
    }
}

/// Issue 44, item 6: a resumed command's report (`GET /v1/commands/{id}`,
/// the `finished` event) counts the operations of every run, not only
/// those of the last: killed before finishing with every file made, the
/// resumed run itself does nothing, yet the command succeeded `FILES`.
#[test]
fn a_resumed_commands_report_counts_the_operations_of_every_run() {
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    let mut first = server_on(&scratch, Some("before_finish"));
    let (status, accepted) =
        first.post("/v1/stacks/apply", &json!({ "document": document(&root) }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    kill_when(&scratch.state(), &mut first.child, "before_finish", |s| {
        s.count("create", "succeeded") == FILES
    });

    let second = server_on(&scratch, None);
    let command = second.wait_for(&format!("/v1/commands/{id}"), "the resumed report", |c| {
        c["status"] != "running" && c["report"].is_object()
    });
    assert_eq!(command["status"], "completed", "{command}");
    let report = &command["report"];
    assert_eq!(
        report["succeeded"], FILES,
        "every run's successes: {report}"
    );
    assert_eq!(report["ok"], true, "{report}");

    // The `finished` event of the resumed run says the same.
    let events = second.text(&format!("/v1/commands/{id}/events"));
    let finished: Vec<Value> = events
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|e| e["type"] == "finished")
        .collect();
    assert_eq!(finished.len(), 1, "{events}");
    assert_eq!(finished[0]["succeeded"], FILES, "{events}");
    assert_eq!(finished[0]["status"], "completed", "{events}");

    // And `orrery status` of it reads every operation succeeded.
    let status = scratch.orrery(&["status", &id, "--output", "json"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let succeeded = status["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["status"] == "succeeded")
        .count();
    assert_eq!(succeeded, FILES, "{status}");
}

#[test]
fn a_resumed_targeted_apply_runs_the_same_subset() {
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    let point = "before_first_operation";
    let mut first = server_on(&scratch, Some(point));
    let (status, accepted) = first.post(
        "/v1/stacks/apply",
        &json!({ "document": document(&root), "target": ["f1", "f3"], "exclude": ["f3"] }),
    );
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    kill_when(&scratch.state(), &mut first.child, point, |_| true);
    assert_eq!(files_present(&root), 0);

    // Resumed from the record alone: the selection came with it.
    let second = server_on(&scratch, None);
    let command = second.wait_command(&id);
    assert_eq!(command["status"], "completed", "{command}");
    assert_eq!(
        operations(&command),
        [("f1".to_owned(), "succeeded".to_owned())],
        "{command}"
    );
    assert!(root.join("f1.txt").is_file());
    assert_eq!(files_present(&root), 1, "only the targeted file");
    // The rest of the stack is still to create.
    let (_, plan) = second.post("/v1/stacks/plan", &json!({ "document": document(&root) }));
    assert_eq!(plan["has_changes"], true, "{plan}");
}

#[test]
fn a_command_of_a_live_primary_is_left_to_it_and_resumed_once_it_is_gone() {
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    let file = scratch.write("stack.yaml", &document(&root));
    let file = file.to_str().unwrap();
    let mut server = server_on(&scratch, Some("before_first_operation"));
    let (status, accepted) =
        server.post("/v1/stacks/apply", &json!({ "document": document(&root) }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    server.wait_for(&format!("/v1/commands/{id}"), "the command recorded", |c| {
        c["status"] == "running" && c["stack"] == "resumable"
    });

    // The server is alive and holds the command's lease: hands off.
    for args in [
        vec!["apply", file, "--yes"],
        vec!["destroy", "--stack", "resumable", "--yes"],
    ] {
        let run = scratch.orrery(&args);
        assert_ne!(run.code, 0, "{args:?}: {run:?}");
        assert!(
            run.stderr.contains("is held by another command's process")
                && run.stderr.contains(&format!("running command {id}")),
            "{args:?}: {run:?}"
        );
    }
    assert_eq!(files_present(&root), 0);

    // Gone (killed on this machine): its lease is not waited out.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let status = resumes(&scratch, &["apply", file, "--yes"], &id);
    assert_eq!(status["kind"], "apply");
    assert_eq!(files_present(&root), FILES);
}

#[test]
fn destroy_resumes_the_destroy_it_was_killed_in() {
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    let file = scratch.write("stack.yaml", &document(&root));
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(files_present(&root), FILES);

    let args = ["destroy", "--stack", "resumable", "--yes"];
    let mut destroy = Killed(
        scratch
            .command(&args)
            .env("ORRERY_TEST_HANG_AT", "before_first_operation")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let seen = kill_when(&scratch.state(), &mut destroy.0, "destroy", |_| true);
    let (killed, _) = seen.command.unwrap();
    assert_eq!(files_present(&root), FILES, "nothing deleted yet");

    let status = resumes(&scratch, &args, &killed);
    assert_eq!(status["kind"], "destroy");
    assert_eq!(files_present(&root), 0);
    let inventory = scratch.orrery(&["inventory"]);
    assert!(inventory.stdout.contains("0 resources"), "{inventory:?}");
}

/// Two primaries starting together on one PostgreSQL store: the command a
/// killed primary left is resumed by exactly one of them (the lease).
/// Skipped without `ORRERY_TEST_DATABASE_URL` (scripts/with-postgres.sh).
#[test]
fn two_servers_sharing_postgresql_resume_an_interrupted_command_once() {
    let Some(db) = common::postgres::fresh_database("resume") else {
        eprintln!(
            "skipped: ORRERY_TEST_DATABASE_URL is not set (run through scripts/with-postgres.sh)"
        );
        return;
    };
    let on_db = |hang_at: Option<&str>| ServerOptions {
        args: vec!["--database-url".into(), db.clone()],
        env: hanging_at(hang_at),
        ..Default::default()
    };
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    let mut first = Server::start_with(on_db(Some("before_first_operation")));
    let (status, accepted) =
        first.post("/v1/stacks/apply", &json!({ "document": document(&root) }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    first.wait_for(&format!("/v1/commands/{id}"), "the command recorded", |c| {
        c["status"] == "running" && c["stack"] == "resumable"
    });
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let (b, c) = std::thread::scope(|s| {
        let b = s.spawn(|| Server::start_with(on_db(None)));
        let c = s.spawn(|| Server::start_with(on_db(None)));
        (b.join().unwrap(), c.join().unwrap())
    });
    let command = b.wait_command(&id);
    assert_eq!(command["status"], "completed", "{command}");
    assert_eq!(files_present(&root), FILES);
    let resumed_by: Vec<bool> = [&b, &c]
        .iter()
        .map(|s| s.log().contains("resuming an interrupted command"))
        .collect();
    assert_eq!(
        resumed_by.iter().filter(|r| **r).count(),
        1,
        "exactly one primary resumed it: {resumed_by:?}\n--- b\n{}\n--- c\n{}",
        b.log(),
        c.log()
    );
    for op in command["operations"].as_array().unwrap() {
        assert_eq!(
            (&op["status"], &op["attempts"]),
            (&json!("succeeded"), &json!(1)),
            "sent once: {command}"
        );
    }
}
