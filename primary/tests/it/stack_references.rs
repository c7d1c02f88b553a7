//! Cross-stack references through real applies: stack `app` reads stack
//! `base`'s recorded outputs (`${stacks.base.outputs.X}`); before `base`
//! is applied, and for an output it does not have, the error names both;
//! a secret output cannot be read and its value never appears.

use crate::common;

use common::Scratch;

const BASE: &str = r#"stack: base
parameters:
  token: { type: secret, default: "base-secret-token-0001" }
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
resources:
  - label: shared
    type: Local::Fs::Directory
    target: home
    properties: { path: shared }
outputs:
  dir: { value: "${shared.path}" }
  token: { value: "${param.token}" }
"#;

fn app(output: &str) -> String {
    format!(
        r#"stack: app
targets:
  - name: home
    plugin: local
    config: {{ root: "${{stack_dir}}/site", create_root: true }}
resources:
  - label: note
    type: Local::Fs::File
    target: home
    properties:
      path: "${{stacks.base.outputs.{output}}}/note.txt"
      content: "in ${{stacks.base.outputs.{output}}}\n"
"#
    )
}

#[test]
fn a_stack_reads_another_stacks_outputs() {
    let scratch = Scratch::new();
    let app_file = scratch.write("app.yaml", &app("dir"));
    let app_file = app_file.to_str().unwrap();

    let early = scratch.orrery(&["apply", app_file, "--yes"]);
    assert_eq!(early.code, 1, "{early:?}");
    assert!(
        early.stderr.contains("error: resource `note`: property `content`: `stacks.base.outputs.dir`: stack `base` has recorded no outputs (apply it first)")
            && early.stderr.contains("app.yaml:12:17"),
        "{early:?}"
    );

    let base = scratch.write("base.yaml", BASE);
    let run = scratch.orrery(&["apply", base.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = scratch.orrery(&["apply", app_file, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("site/shared/note.txt")).unwrap(),
        "in shared\n"
    );

    scratch.write("app.yaml", &app("nope"));
    let missing = scratch.orrery(&["plan", app_file]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing
            .stderr
            .contains("`stacks.base.outputs.nope`: stack `base` has no output `nope`"),
        "{missing:?}"
    );

    scratch.write("app.yaml", &app("token"));
    let secret = scratch.orrery(&["plan", app_file]);
    assert_eq!(secret.code, 1, "{secret:?}");
    assert!(
        secret.stderr.contains("`stacks.base.outputs.token`: the output is secret: its value is never stored, so another stack cannot read it"),
        "{secret:?}"
    );
    assert!(
        !format!("{secret:?}").contains("base-secret-token"),
        "{secret:?}"
    );
}
