//! Outputs through a real apply: printed after it, recorded with the
//! stack, read back by `orrery output`; a secret output is masked and its
//! value is in neither the output nor the store.

use crate::common;

use common::Scratch;

const SECRET: &str = "output-secret-6b2f90";

const DOC: &str = r#"stack: outs
parameters:
  token: { type: secret, default: "output-secret-6b2f90" }
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
resources:
  - label: app
    type: Local::Fs::Directory
    target: home
    properties: { path: app }
  - label: index
    type: Local::Fs::File
    target: home
    properties: { path: "${app.path}/index.html", content: hi }
outputs:
  index: { value: "${index.path}", description: The front page. }
  paths: { value: ["${app.path}", "${upper(index.path)}"] }
  token: { value: "t=${param.token}" }
  hidden: { value: visible-but-declared-secret, secret: true }
"#;

#[test]
fn outputs_are_printed_recorded_and_read_back() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", DOC);
    let apply = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert!(apply.stdout.contains("Outputs:\n"), "{apply:?}");
    assert!(
        apply.stdout.contains("  index = app/index.html\n"),
        "{apply:?}"
    );
    assert!(
        apply.stdout.contains("  token = (sensitive)\n"),
        "{apply:?}"
    );
    assert!(!apply.stdout.contains(SECRET), "{apply:?}");

    let one = scratch.orrery(&["output", "index"]);
    assert_eq!(
        (one.code, one.stdout.as_str()),
        (0, "app/index.html\n"),
        "{one:?}"
    );
    let all = scratch.orrery(&["output", "--stack", "outs", "--output", "json"]);
    assert_eq!(all.code, 0, "{all:?}");
    let v: serde_json::Value = serde_json::from_str(all.stdout.trim()).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"stack": "outs", "outputs": {
            "index": "app/index.html",
            "paths": ["app", "APP/INDEX.HTML"],
            "token": {"secret": true},
            "hidden": {"secret": true},
        }})
    );
    let missing = scratch.orrery(&["output", "nope"]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing.stderr.contains("stack `outs` has no output `nope`"),
        "{missing:?}"
    );

    for f in std::fs::read_dir(scratch.state()).unwrap() {
        let bytes = std::fs::read(f.unwrap().path()).unwrap();
        for needle in [SECRET, "visible-but-declared-secret"] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{needle} in the store"
            );
        }
    }

    let destroy = scratch.orrery(&["destroy", "--stack", "outs", "--yes"]);
    assert_eq!(destroy.code, 0, "{destroy:?}");
    let after = scratch.orrery(&["output", "--stack", "outs", "--output", "json"]);
    assert_eq!(
        after.stdout.trim(),
        r#"{"outputs":{},"stack":"outs"}"#,
        "{after:?}"
    );
}
