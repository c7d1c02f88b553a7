//! Plans show values: an edited stack's plan names each changed field with
//! its old and new value, a secret only as `(sensitive)`, in text and in
//! `--output json` (before/after per field).

use crate::common;

use common::Scratch;

fn doc(mode: u32, content: &str, note: &str) -> String {
    format!(
        "stack: values\ntargets:\n  - name: home\n    plugin: local\n    config: {{ root: \"${{stack_dir}}/site\", create_root: true }}\nresources:\n  - label: config-dir\n    type: Local::Fs::Directory\n    target: home\n    properties: {{ path: config, mode: {mode} }}\n  - label: index\n    type: Local::Fs::File\n    target: home\n    properties: {{ path: index.html, content: \"{content}\", owner_note: \"{note}\" }}\n"
    )
}

#[test]
fn an_edited_stack_plans_each_field_old_and_new() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", &doc(448, "<h1>one</h1>", "hunter2"));
    let file = file.to_str().unwrap();
    let run = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");

    scratch.write("stack.yaml", &doc(488, "<h1>two</h1>", "correct-horse"));
    let run = scratch.orrery(&["plan", file]);
    assert_eq!(run.code, 2, "changes: {run:?}");
    let lines: Vec<&str> = run.stdout.lines().map(str::trim).collect();
    assert!(lines.contains(&"mode: 448 → 488"), "{run:?}");
    assert!(
        lines.contains(&r#"content: "<h1>one</h1>" → "<h1>two</h1>""#),
        "{run:?}"
    );
    assert!(lines.contains(&"owner_note: (sensitive)"), "{run:?}");
    for secret in ["hunter2", "correct-horse"] {
        assert!(!run.stdout.contains(secret), "{run:?}");
        assert!(!run.stderr.contains(secret), "{run:?}");
    }

    let run = scratch.orrery(&["plan", file, "--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(!run.stdout.contains("correct-horse"), "{run:?}");
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let change = |label: &str| {
        plan["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["label"] == label)
            .unwrap()
            .clone()
    };
    let dir = change("config-dir");
    assert_eq!(dir["action"], "update");
    assert_eq!(
        dir["diffs"],
        serde_json::json!([{"field": "mode", "before": 448, "after": 488}])
    );
    let index = change("index");
    let diffs = index["diffs"].as_array().unwrap();
    let content = diffs.iter().find(|d| d["field"] == "content").unwrap();
    assert_eq!(
        (&content["before"], &content["after"]),
        (
            &serde_json::json!("<h1>one</h1>"),
            &serde_json::json!("<h1>two</h1>")
        )
    );
    let note = diffs.iter().find(|d| d["field"] == "owner_note").unwrap();
    assert_eq!(note["sensitive"], true, "{note}");
    assert!(
        note.get("before").is_none() && note.get("after").is_none(),
        "{note}"
    );
}

/// `--refresh` reads what the stack manages before planning: a file edited
/// out of band shows as drift and as the update that restores it (exit 2),
/// where a plan without it trusts the records (no change); a read that
/// fails stops the plan, naming the resource.
#[test]
fn a_refreshed_plan_reports_drift_and_restores_it() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", &doc(448, "<h1>one</h1>", "n"));
    let file = file.to_str().unwrap();
    let run = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let index = scratch.path().join("site/index.html");
    std::fs::write(&index, "<h1>edited</h1>").unwrap();

    let run = scratch.orrery(&["plan", file]);
    assert_eq!(run.code, 0, "the records know of no change: {run:?}");
    assert!(run.stdout.contains("No changes"), "{run:?}");

    let run = scratch.orrery(&["plan", file, "--refresh"]);
    assert_eq!(run.code, 2, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().map(str::trim).collect();
    let drift = lines
        .iter()
        .position(|l| {
            l.starts_with("drift values/index [Local::Fs::File]")
                && l.ends_with("changed out of band (content); the next apply restores it")
        })
        .unwrap_or_else(|| panic!("no drift line: {run:?}"));
    let update = lines
        .iter()
        .position(|l| l.starts_with("~ update index"))
        .unwrap_or_else(|| panic!("no update: {run:?}"));
    assert!(drift < update, "the drift comes before the plan: {run:?}");
    assert!(
        lines.contains(&r#"content: "<h1>edited</h1>" → "<h1>one</h1>""#),
        "{run:?}"
    );
    assert!(
        lines.contains(&"Drift: 1 of 2 resources differ from their records."),
        "{run:?}"
    );

    let run = scratch.orrery(&["plan", file, "--refresh", "--output", "json"]);
    assert_eq!(run.code, 2, "{run:?}");
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let refresh = &plan["refresh"];
    assert_eq!(refresh["checked"], 2, "{plan}");
    assert_eq!(refresh["failures"], serde_json::json!([]), "{plan}");
    let drifted = refresh["drifted"].as_array().unwrap();
    assert_eq!(drifted.len(), 1, "{plan}");
    assert_eq!(
        (
            &drifted[0]["label"],
            &drifted[0]["drift"],
            &drifted[0]["fields"]
        ),
        (
            &serde_json::json!("index"),
            &serde_json::json!("changed"),
            &serde_json::json!(["content"])
        )
    );
    let plain = scratch.orrery(&["plan", file, "--output", "json"]);
    let plain: serde_json::Value = serde_json::from_str(&plain.stdout).unwrap();
    assert!(plain.get("refresh").is_none(), "{plain}");

    // apply --refresh restores it.
    let run = scratch.orrery(&["apply", file, "--yes", "--refresh"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(&index).unwrap(), "<h1>one</h1>");
    let run = scratch.orrery(&["plan", file, "--refresh"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("No drift: 2 resources as recorded."),
        "{run:?}"
    );

    // A file the plugin will not read (larger than it manages): the plan
    // fails, naming it, and nothing changes.
    let big = "x".repeat(300 * 1024);
    std::fs::write(&index, &big).unwrap();
    let run = scratch.orrery(&["apply", file, "--yes", "--refresh"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("refresh: cannot read 1 resource(s)"),
        "{run:?}"
    );
    assert!(run.stderr.contains("`index` [Local::Fs::File]"), "{run:?}");
    assert!(
        run.stderr.contains("nothing was planned or applied"),
        "{run:?}"
    );
    assert_eq!(std::fs::read_to_string(&index).unwrap(), big);
}

/// Issue 42, item 6: drift on a field the document does not set (a
/// directory's `mode`, which the plugin defaults) is reported as such and
/// not promised a repair; `orrery drift`, which has no document, promises
/// only what a document sets.
#[test]
fn drift_on_a_field_the_document_does_not_set_is_not_promised_a_repair() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    let file = scratch.write(
        "stack.yaml",
        "stack: unset\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n  - label: dir\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: config }\n",
    );
    let file = file.to_str().unwrap();
    let run = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let dir = scratch.path().join("site/config");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();

    let run = scratch.orrery(&["plan", file, "--refresh"]);
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains("drift unset/dir"))
        .unwrap_or_else(|| panic!("no drift line: {run:?}"));
    assert!(
        line.ends_with("changed out of band (mode); the document does not set it: not restored"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("~ update dir"), "{run:?}");

    let run = scratch.orrery(&["drift", "--stack", "unset"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout
            .contains("changed out of band (mode); an apply restores what its document sets"),
        "{run:?}"
    );
}
