//! `orrery extract`: the applied quickstart written back as a document,
//! which plans no changes as the same stack.

mod common;

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
    ]);
    assert_eq!(plan.code, 0, "no changes: {plan:?}");
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
