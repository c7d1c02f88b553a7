//! `orrery extract`: the applied quickstart written back as a document,
//! which plans no changes as the same stack.

use crate::common;

use common::{root, Scratch};

#[test]
fn the_extracted_quickstart_plans_no_changes() {
    let scratch = Scratch::new();
    let text = std::fs::read_to_string(root().join("examples/quickstart/stack.yaml")).unwrap();
    let file = scratch.write("stack.yaml", &text);
    let apply = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let extract = scratch.orrery(&["extract", "--stack", "quickstart"]);
    assert_eq!(extract.code, 0, "{extract:?}");
    let doc = extract.stdout;
    // References are reconstructed; write-only values are parameters.
    assert!(doc.contains("path: ${app.path}/static"), "{doc}");
    assert!(doc.contains("path: ${static.path}/css"), "{doc}");
    assert!(
        doc.contains("owner_note: ${param.settings_owner_note}"),
        "{doc}"
    );
    assert!(!doc.contains("write-only: sent"), "{doc}");
    let extracted = scratch.write("x.yaml", &doc);
    let plan = scratch.orrery(&[
        "plan",
        extracted.to_str().unwrap(),
        "--var",
        "settings_owner_note=write-only: sent to the plugin, stored only as a keyed hash",
        "--output",
        "json",
    ]);
    // No resource changes; the stack's outputs are not extracted, so the
    // plan shows the recorded one the document would drop.
    let plan: serde_json::Value =
        serde_json::from_str(plan.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {plan:?}"));
    assert!(
        plan["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["action"] == "no-op"),
        "no changes: {plan}"
    );
    assert_eq!(plan["outputs"][0]["name"], "front_page", "{plan}");
    // It validates offline too, against the schemas the apply cached.
    let validate = scratch.orrery(&[
        "validate",
        extracted.to_str().unwrap(),
        "--var",
        "settings_owner_note=x",
    ]);
    assert_eq!(validate.code, 0, "{validate:?}");
    // Only some types.
    let dirs = scratch.orrery(&["extract", "--stack", "quickstart", "--type", "*::Directory"]);
    assert_eq!(dirs.code, 0, "{dirs:?}");
    assert!(
        dirs.stdout.contains("label: css") && !dirs.stdout.contains("label: readme"),
        "{dirs:?}"
    );
}

#[test]
fn discovered_resources_are_extracted_with_references_and_readable_labels() {
    let scratch = Scratch::new();
    let file = scratch.write(
        "s.yaml",
        "stack: disco\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n  - label: managed\n    type: Local::Fs::File\n    target: home\n    properties: { path: managed.txt, content: \"x\\n\" }\n",
    );
    let apply = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let site = scratch.path().join("site");
    std::fs::create_dir_all(site.join("extra")).unwrap();
    std::fs::write(site.join("extra/deep.txt"), "by hand\n").unwrap();
    let discover = scratch.orrery(&["discover", file.to_str().unwrap()]);
    assert_eq!(discover.code, 0, "{discover:?}");
    let out = scratch.path().join("found.yaml");
    let extract = scratch.orrery(&[
        "extract",
        "--unmanaged",
        "--name",
        "handmade",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(extract.code, 0, "{extract:?}");
    let doc = std::fs::read_to_string(&out).unwrap();
    assert!(doc.starts_with("stack: handmade\n"), "{doc}");
    assert!(doc.contains("- label: directory-extra\n"), "{doc}");
    assert!(doc.contains("- label: file-extra_deep_txt\n"), "{doc}");
    assert!(
        doc.contains("path: ${directory-extra.path}/deep.txt"),
        "{doc}"
    );
    assert!(!doc.contains("managed.txt"), "managed ones stay out: {doc}");
    let validate = scratch.orrery(&["validate", out.to_str().unwrap()]);
    assert_eq!(validate.code, 0, "{validate:?}");
}

#[test]
fn extracted_unmanaged_resources_are_adopted_by_apply_without_a_create() {
    let scratch = Scratch::new();
    let file = scratch.write(
        "s.yaml",
        "stack: disco\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n  - label: managed\n    type: Local::Fs::File\n    target: home\n    properties: { path: managed.txt, content: \"x\\n\" }\n",
    );
    let apply = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    // Made by hand, then discovered and extracted.
    let site = scratch.path().join("site");
    std::fs::create_dir_all(site.join("extra")).unwrap();
    std::fs::write(site.join("extra/deep.txt"), "by hand\n").unwrap();
    let discover = scratch.orrery(&["discover", file.to_str().unwrap()]);
    assert_eq!(discover.code, 0, "{discover:?}");
    let out = scratch.path().join("found.yaml");
    let extract = scratch.orrery(&[
        "extract",
        "--unmanaged",
        "--name",
        "handmade",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(extract.code, 0, "{extract:?}");
    let doc = std::fs::read_to_string(&out).unwrap();
    assert!(doc.contains("  import: extra\n"), "{doc}");
    assert!(doc.contains("  import: extra/deep.txt\n"), "{doc}");
    let out = out.to_str().unwrap();

    // The plan reads them and adopts them: nothing to create or change.
    let plan = scratch.orrery(&["plan", out, "--output", "json"]);
    assert_eq!(plan.code, 2, "adopting is a change: {plan:?}");
    let view: serde_json::Value = serde_json::from_str(plan.stdout.trim()).unwrap();
    assert_eq!(view["summary"]["create"], 0, "{view}");
    assert_eq!(view["summary"]["update"], 0, "{view}");
    assert_eq!(view["summary"]["no_op"], 2, "{view}");
    let mut ids: Vec<&str> = view["imported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["extra", "extra/deep.txt"], "{view}");
    // Planning wrote nothing: the same plan again.
    let again = scratch.orrery(&["plan", out, "--output", "json"]);
    assert_eq!(again.stdout, plan.stdout);

    let apply = scratch.orrery(&["apply", out, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert!(
        apply
            .stdout
            .contains("<= import file-extra_deep_txt [Local::Fs::File] (extra/deep.txt)"),
        "{apply:?}"
    );
    assert!(
        apply.stdout.contains("2 resource(s) to import")
            && apply.stdout.contains(
                "Plan: 0 to create, 0 to update, 0 to replace, 0 to delete, 2 unchanged."
            ),
        "{apply:?}"
    );
    assert_eq!(
        std::fs::read_to_string(site.join("extra/deep.txt")).unwrap(),
        "by hand\n"
    );
    // Recorded as managed by the new stack: no changes, and no longer
    // unmanaged.
    let plan = scratch.orrery(&["plan", out]);
    assert_eq!(plan.code, 0, "no changes: {plan:?}");
    assert!(
        plan.stdout.contains("No changes: 2 resources up to date."),
        "{plan:?}"
    );
    let unmanaged = scratch.orrery(&["extract", "--unmanaged"]);
    assert_eq!(unmanaged.code, 0, "{unmanaged:?}");
    assert!(!unmanaged.stdout.contains("extra"), "{unmanaged:?}");

    // An identifier that does not exist is an error naming the resource.
    let ghost = scratch.write(
        "ghost.yaml",
        &doc.replace(
            "resources:\n",
            "resources:\n- label: ghost\n  type: Local::Fs::File\n  target: home\n  import: nope.txt\n  properties: { path: nope.txt, content: \"\" }\n",
        ),
    );
    let refused = scratch.orrery(&["plan", ghost.to_str().unwrap()]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains(
            "resource `ghost`: cannot import `nope.txt`: Local::Fs::File `nope.txt` does not exist on target `home`"
        ),
        "{refused:?}"
    );
    assert!(!site.join("nope.txt").exists());
}

#[test]
fn extracted_instances_keep_their_records_through_moved() {
    let scratch = Scratch::new();
    let file = scratch.write(
        "s.yaml",
        "stack: many\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n  - label: web\n    for_each: [a, b]\n    type: Local::Fs::File\n    target: home\n    properties: { path: \"${each.key}.txt\", content: \"x\\n\" }\n",
    );
    let apply = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let extract = scratch.orrery(&["extract", "--stack", "many"]);
    assert_eq!(extract.code, 0, "{extract:?}");
    let doc = extract.stdout;
    assert!(doc.contains("- label: web__a\n"), "{doc}");
    assert!(doc.contains("- from: web[\"a\"]\n  to: web__a\n"), "{doc}");
    let extracted = scratch.write("x.yaml", &doc);
    let extracted = extracted.to_str().unwrap();
    // Re-addressed, not deleted and created.
    let plan = scratch.orrery(&["plan", extracted, "--output", "json"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    let view: serde_json::Value = serde_json::from_str(plan.stdout.trim()).unwrap();
    assert_eq!(view["moved"].as_array().map(Vec::len), Some(2), "{view}");
    assert_eq!(view["summary"]["no_op"], 2, "{view}");
    assert_eq!(view["summary"]["create"], 0, "{view}");
    assert_eq!(view["summary"]["delete"], 0, "{view}");
    let apply = scratch.orrery(&["apply", extracted, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let again = scratch.orrery(&["plan", extracted]);
    assert_eq!(again.code, 0, "no changes: {again:?}");
}
