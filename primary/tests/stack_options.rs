//! Resource options through real applies: `protect: true` refuses a
//! destroy or replace naming the resource unless `--allow-protected`;
//! `ignore_changes` leaves a changed field unplanned; `depends_on` orders.

mod common;

use common::Scratch;

fn doc(content: &str, dir_path: &str) -> String {
    format!(
        r#"stack: opts
targets:
  - name: home
    plugin: local
    config: {{ root: "${{stack_dir}}/site", create_root: true }}
resources:
  - label: keep
    type: Local::Fs::Directory
    target: home
    protect: true
    properties: {{ path: "{dir_path}" }}
  - label: note
    type: Local::Fs::File
    target: home
    depends_on: [keep]
    ignore_changes: [content]
    properties: {{ path: note.txt, content: "{content}" }}
"#
    )
}

#[test]
fn protect_refuses_and_ignore_changes_ignores() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", &doc("first", "keep"));
    let file = file.to_str().unwrap();
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let site = scratch.path().join("site");

    // A changed ignored field plans nothing.
    scratch.write("stack.yaml", &doc("second", "keep"));
    let plan = scratch.orrery(&["plan", file]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert_eq!(
        std::fs::read_to_string(site.join("note.txt")).unwrap(),
        "first"
    );

    // Replacing the protected directory (its path is create-only) is refused.
    scratch.write("stack.yaml", &doc("second", "moved"));
    let refused = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("refusing to delete or replace protected resource(s) `keep`; nothing was changed (allow it with --allow-protected)"),
        "{refused:?}"
    );
    assert!(site.join("keep").is_dir() && !site.join("moved").exists());

    // A destroy by the document is refused too, then allowed.
    scratch.write("stack.yaml", &doc("first", "keep"));
    let destroy = scratch.orrery(&["destroy", file, "--yes"]);
    assert_eq!(destroy.code, 1, "{destroy:?}");
    assert!(
        destroy.stderr.contains("protected resource(s) `keep`"),
        "{destroy:?}"
    );
    assert!(site.join("keep").is_dir());
    let allowed = scratch.orrery(&["destroy", file, "--yes", "--allow-protected"]);
    assert_eq!(allowed.code, 0, "{allowed:?}");
    assert!(!site.join("keep").exists() && !site.join("note.txt").exists());
}
