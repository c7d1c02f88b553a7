//! Resource options through real applies: `protect: true` refuses a
//! destroy or replace naming the resource unless `--allow-protected`;
//! `ignore_changes` leaves a changed field unplanned; `depends_on` orders.

use crate::common;

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

#[test]
fn protect_is_recorded_so_dropping_the_entry_does_not_delete() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", &doc("first", "keep"));
    let file = file.to_str().unwrap();
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let site = scratch.path().join("site");
    let refusal = "refusing to delete or replace protected resource(s) `keep`; nothing was changed (allow it with --allow-protected)";

    // The protected directory's entry is deleted from the document.
    let without = |protect: bool| {
        let text = doc("first", "keep");
        let (head, rest) = text.split_once("  - label: keep").unwrap();
        let (_, note) = rest.split_once("  - label: note").unwrap();
        let kept = if protect {
            ""
        } else {
            "  - label: keep\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: keep }\n"
        };
        format!(
            "{head}{kept}  - label: note{}",
            note.replace("depends_on: [keep]\n    ", "")
        )
    };
    scratch.write("stack.yaml", &without(true));
    let refused = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains(refusal), "{refused:?}");
    assert!(site.join("keep").is_dir());
    // A destroy without a document is refused too.
    let destroy = scratch.orrery(&["destroy", "--stack", "opts", "--yes"]);
    assert_eq!(destroy.code, 1, "{destroy:?}");
    assert!(destroy.stderr.contains(refusal), "{destroy:?}");
    assert!(site.join("keep").is_dir() && site.join("note.txt").exists());

    // Declared again without `protect`, it is unprotected once applied...
    scratch.write("stack.yaml", &without(false));
    let unprotect = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(unprotect.code, 0, "{unprotect:?}");
    assert!(site.join("keep").is_dir());
    // ...and then dropping it deletes it.
    scratch.write("stack.yaml", &without(true));
    let dropped = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(dropped.code, 0, "{dropped:?}");
    assert!(!site.join("keep").exists());

    // Protected again, dropped, and deleted only when the command says so.
    scratch.write("stack.yaml", &doc("first", "keep"));
    let again = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(again.code, 0, "{again:?}");
    scratch.write("stack.yaml", &without(true));
    let refused = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    let allowed = scratch.orrery(&["apply", file, "--yes", "--allow-protected"]);
    assert_eq!(allowed.code, 0, "{allowed:?}");
    assert!(!site.join("keep").exists() && site.join("note.txt").exists());
}
