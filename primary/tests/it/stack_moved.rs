//! `moved:` through real applies with the local plugin: renaming a label,
//! then moving the resource into a `for_each` module instance, re-plans
//! with no operation, applies with no plugin call (the command records
//! none, and a file edited behind Orrery's back is left as it is), and
//! the inventory shows the new address. A move onto a recorded address is
//! refused naming the line.

use crate::common;

use common::Scratch;

const HEAD: &str = r#"stack: mv
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
"#;

const WWW: &str = r#"  - label: www
    type: Local::Fs::Directory
    target: home
    properties: { path: www }
"#;

fn page(label: &str) -> String {
    format!(
        "  - label: {label}\n    type: Local::Fs::File\n    target: home\n    properties: {{ path: a.txt, content: \"hi\\n\" }}\n"
    )
}

const MODULE: &str = r#"resources:
  - label: index
    type: Local::Fs::File
    target: home
    properties: { path: a.txt, content: "hi\n" }
"#;

fn json(run: &common::Run) -> serde_json::Value {
    serde_json::from_str(run.stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

/// The labels the store holds for the stack.
fn inventory(scratch: &Scratch) -> Vec<String> {
    let run = scratch.orrery(&["inventory", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let v = json(&run);
    let mut labels: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|r| r["label"].as_str().unwrap().to_owned())
        .collect();
    labels.sort();
    labels
}

/// The operation counts of the latest command.
fn last_operations(scratch: &Scratch) -> serde_json::Value {
    let run = scratch.orrery(&["history", "--output", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    json(&run)["commands"][0]["operations"].clone()
}

/// Plans `file`: the moves shown, and the actions other than no-op.
fn plan(scratch: &Scratch, file: &str) -> (Vec<(String, String)>, Vec<String>) {
    let run = scratch.orrery(&["plan", file, "--output", "json"]);
    assert_eq!(run.code, 2, "changes to make: {run:?}");
    let v = json(&run);
    let moved = v["moved"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["from"].as_str().unwrap().to_owned(),
                m["to"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let actions = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "no-op")
        .map(|c| format!("{} {}", c["action"], c["label"]))
        .collect();
    (moved, actions)
}

#[test]
fn a_moved_resource_is_re_addressed_without_any_plugin_call() {
    let scratch = Scratch::new();
    let doc = |body: &str| format!("{HEAD}{body}");
    let file = scratch.write(
        "stack.yaml",
        &doc(&format!("resources:\n{WWW}{}", page("old"))),
    );
    let file = file.to_str().unwrap();
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert_eq!(inventory(&scratch), ["old", "www"]);
    // Edited behind Orrery's back: any create, update or delete the
    // plugin received would change or remove it.
    let a = scratch.path().join("site/a.txt");
    std::fs::write(&a, "edited\n").unwrap();

    // 1. A renamed label.
    let renamed = doc(&format!(
        "resources:\n{WWW}{}moved:\n  - {{ from: old, to: renamed }}\n",
        page("renamed")
    ));
    scratch.write("stack.yaml", &renamed);
    let (moved, actions) = plan(&scratch, file);
    assert_eq!(moved, [("old".to_owned(), "renamed".to_owned())]);
    assert!(actions.is_empty(), "no operation: {actions:?}");
    let text = scratch.orrery(&["plan", file]);
    assert!(text.stdout.contains("moved old -> renamed"), "{text:?}");
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert_eq!(
        last_operations(&scratch),
        serde_json::json!({}),
        "no plugin call"
    );
    assert_eq!(inventory(&scratch), ["renamed", "www"]);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "edited\n");
    let again = scratch.orrery(&["plan", file]);
    assert_eq!(again.code, 0, "a made move is not made again: {again:?}");

    // 2. Into a module's `for_each` instance, the earlier move kept: a chain.
    std::fs::create_dir(scratch.path().join("modules")).unwrap();
    scratch.write("modules/pages.yaml", MODULE);
    let into_module = doc(&format!(
        "modules:\n  - name: pages\n    source: ./modules/pages.yaml\n    for_each: [x]\nresources:\n{WWW}moved:\n  - {{ from: old, to: renamed }}\n  - {{ from: renamed, to: 'module.pages[\"x\"].index' }}\n"
    ));
    scratch.write("stack.yaml", &into_module);
    let (moved, actions) = plan(&scratch, file);
    assert_eq!(
        moved,
        [(
            "renamed".to_owned(),
            r#"module.pages["x"].index"#.to_owned()
        )]
    );
    assert!(actions.is_empty(), "no operation: {actions:?}");
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert_eq!(
        last_operations(&scratch),
        serde_json::json!({}),
        "no plugin call"
    );
    assert_eq!(inventory(&scratch), [r#"module.pages["x"].index"#, "www"]);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "edited\n");

    // 3. Onto an address that is recorded: refused, nothing changed.
    let taken = doc(&format!(
        "modules:\n  - name: pages\n    source: ./modules/pages.yaml\n    for_each: [x]\nresources:\n{WWW}moved:\n  - from: 'module.pages[\"x\"].index'\n    to: www\n"
    ));
    scratch.write("stack.yaml", &taken);
    let refused = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains(
            r#"stack.yaml:16: moved: `module.pages["x"].index` -> `www`: `www` is recorded already: a move cannot overwrite a resource"#
        ),
        "{refused:?}"
    );
    assert_eq!(inventory(&scratch), [r#"module.pages["x"].index"#, "www"]);
}
