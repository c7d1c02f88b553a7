//! Plans show values: an edited stack's plan names each changed field with
//! its old and new value, a secret only as `(sensitive)`, in text and in
//! `--output json` (before/after per field).

mod common;

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
