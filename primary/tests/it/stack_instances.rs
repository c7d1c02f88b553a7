//! `for_each`, `count` and `enabled` through a real apply: instances are
//! created and recorded by their addresses, a re-plan changes nothing, and
//! dropping one key deletes that instance only.

use crate::common;

use common::Scratch;

const DOC: &str = r#"stack: many
parameters:
  pages: { type: list, default: [a, b, c] }
  extra: { type: bool, default: false }
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
resources:
  - label: dir
    count: 2
    type: Local::Fs::Directory
    target: home
    properties: { path: "d${count.index}" }
  - label: page
    for_each: "${param.pages}"
    type: Local::Fs::File
    target: home
    properties:
      path: "${dir[1].path}/${each.key}.html"
      content: "page ${each.value}\n"
  - label: extra
    enabled: "${param.extra}"
    type: Local::Fs::File
    target: home
    properties: { path: extra, content: x }
"#;

#[test]
fn instances_apply_replan_and_go_one_by_one() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", DOC);
    let file = file.to_str().unwrap();
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let site = scratch.path().join("site");
    for page in ["a", "b", "c"] {
        assert_eq!(
            std::fs::read_to_string(site.join(format!("d1/{page}.html"))).unwrap(),
            format!("page {page}\n")
        );
    }
    assert!(site.join("d0").is_dir());
    assert!(!site.join("extra").exists(), "enabled: false");

    let inventory = scratch.orrery(&["inventory", "--output", "json"]);
    assert_eq!(inventory.code, 0, "{inventory:?}");
    for label in [r#"page[\"b\"]"#, "dir[0]", "dir[1]"] {
        assert!(inventory.stdout.contains(label), "{label} in {inventory:?}");
    }

    let replan = scratch.orrery(&["plan", file]);
    assert_eq!(replan.code, 0, "no changes: {replan:?}");

    let fewer = scratch.orrery(&["plan", file, "--var", "pages=[a, c]", "--output", "json"]);
    assert_eq!(fewer.code, 2, "{fewer:?}");
    let view: serde_json::Value = serde_json::from_str(fewer.stdout.trim()).unwrap();
    let changed: Vec<(String, String)> = view["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "no-op")
        .map(|c| {
            (
                c["action"].as_str().unwrap().to_owned(),
                c["label"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(changed, [("delete".to_owned(), r#"page["b"]"#.to_owned())]);
}
